"""Run one check in the user's kernel, the way the inline panel and `check()` both do.

The order is the core's (`LedgeredRun`: expectation, run, observation); what this adds is
the justified tolerance change in front of it, the attestation of the entry written (displayed
as the run's own output, so a saved notebook binds its ledger), and a run without a ledger for
callers that asked for none, which a configured witness still sees as a private run. Bad
input raises before anything is written.
"""

from __future__ import annotations

from ..core.check.engine import run_check
from ..core.check.environment import available_devices
from ..core.check.record.memory_admission import resolve_and_admit
from ..core.check.record.spec import parse_spec
from ..core.ledger import witness_client
from ..core.ledger.attestation import attestation_for
from ..core.ledger.ledgered_run import LedgeredRun, refuse_bad_callable
from ..core.ledger.store import Ledger
from .attest import publish
from .location import session_notebook
from .tolerance_gate import justify_tolerance_changes


def run_attested(
    record, ledger: Ledger | None, *, justification: str | None = None, notebook=None
) -> tuple[dict, dict | None]:
    """The completed record and the attestation of its observation entry (None without a ledger).

    `notebook` names the notebook a run without a ledger belongs to, for the witness (default:
    the session's notebook)."""
    spec = parse_spec(record)
    resolve_and_admit(spec, available_devices())
    if ledger is None:
        completed = run_check(spec)
        notebook = notebook or session_notebook()
        witness_client.report_private(str(notebook) if notebook else None, spec.id)
        return completed, None
    refuse_bad_callable(spec)  # bad input writes nothing, not even the tolerance change it came with
    justify_tolerance_changes(spec, ledger, justification)
    completed, entry = LedgeredRun.declare(ledger, spec, justification).run()
    attestation = attestation_for(ledger, entry)
    publish(attestation)
    return completed, attestation


def run_in_kernel(record, ledger: Ledger | None, *, justification: str | None = None) -> dict:
    """The completed record; written to `ledger` (after any justified tolerance change) unless None."""
    return run_attested(record, ledger, justification=justification)[0]
