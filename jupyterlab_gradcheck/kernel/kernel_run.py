"""Run one check in the user's kernel, the way the inline panel and `check()` both do.

The order is the core's (`run_and_record`: expectation, run, observation); what this adds is
the justified tolerance change in front of it, and a run without a ledger for callers that
asked for none. Bad input raises before anything is written.
"""

from __future__ import annotations

from ..core.check.devices import resolve_device
from ..core.check.engine import run_check
from ..core.check.spec import parse_spec
from ..core.ledger.ledgered_run import run_and_record
from ..core.ledger.store import Ledger
from .tolerance_gate import justify_tolerance_changes


def run_in_kernel(record, ledger: Ledger | None, *, justification: str | None = None) -> dict:
    """The completed record; written to `ledger` (after any justified tolerance change) unless None."""
    spec = parse_spec(record)
    resolve_device(spec.device)
    if ledger is None:
        return run_check(spec)
    justify_tolerance_changes(spec, ledger, justification)
    return run_and_record(spec, ledger)
