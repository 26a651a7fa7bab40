"""Run one check in the user's kernel, the way the inline panel and `check()` both do.

The order is the core's (`LedgeredRun`: expectation, run, observation); what this adds is
the justified tolerance change in front of it, the attestation of the entry written (displayed
as the run's own output, so a saved notebook binds its ledger), and a run without a ledger for
callers that asked for none, which a configured witness still sees as a private run. Bad
input raises before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.check.record.spec import CheckSpec
from ..core.errors import JustificationRequired, SpecError
from ..core.i18n import Message, _
from ..core.ledger.binding import MIME_TYPE, attestation_for, forwarded_notebook
from ..core.ledger.store import HISTORY_KEY, TARGETS, Ledger
from ..core.run import EXPLICIT_ATTR, apply_ledger_tolerance, run_spec
from ..witness import client as witness_client

# -------------------- location
# Where the kernel's ledger lives.
#
# A check run from a notebook belongs in that notebook's ledger, beside it. Inside Jupyter
# Server the kernel learns its notebook from `JPY_SESSION_NAME` (the notebook's path); elsewhere
# (a script, a console, a kernel started by hand) the caller names the notebook or the ledger
# file. An explicit argument wins over the environment because it is what the user wrote.
#
# A kernel never writes a notebook file: the one it runs for is held by an editor or by
# nbconvert, which saves its own copy over whatever the kernel wrote. The binding travels instead
# in each check's output (an attestation, core.ledger.binding), which every saver keeps, and
# JupyterLab's front end copies it into `metadata.gradcheck` through the notebook model.

SESSION_VARIABLE = "JPY_SESSION_NAME"

HOW_TO_GIVE_ONE = Message(
    "pass notebook='lab1.ipynb' (its ledger is lab1.gradcheck.jsonl beside it) or ledger='lab1.gradcheck.jsonl'"
)


class LedgerLocationMissing(ValueError):
    """No ledger could be located; the one-line message says how to name one."""

    code = "ledger_location_missing"


def session_notebook() -> Path | None:
    """The notebook this kernel runs for in Jupyter Server, if any: where the server last said
    it was renamed to, else the one it was started for."""
    session = os.environ.get(SESSION_VARIABLE, "").strip()
    if not session.endswith(".ipynb"):
        return None
    return forwarded_notebook(connection_file()) or Path(session)


def connection_file() -> str | None:
    """This kernel's connection file, when running in an IPython kernel (ipykernel)."""
    try:
        from ipykernel.kernelapp import IPKernelApp
    except ImportError:
        return None
    if not IPKernelApp.initialized():
        return None
    return IPKernelApp.instance().abs_connection_file or None


def open_ledger(notebook: str | os.PathLike | None = None, ledger: str | os.PathLike | None = None) -> Ledger:
    """The ledger named by `ledger=`, else beside `notebook=`, else beside the session's notebook.

    Raises LedgerLocationMissing, saying how to give a location, when none is known.
    """
    open_notebook = session_notebook()
    if ledger is not None:
        return Ledger(Path(ledger).expanduser(), bind=False)
    if notebook is not None:
        path = Path(notebook).expanduser()
        if path.suffix != ".ipynb":
            raise LedgerLocationMissing(
                Message(
                    "notebook={notebook!r} is not a notebook (.ipynb); {how}",
                    notebook=str(notebook),
                    how=HOW_TO_GIVE_ONE,
                )
            )
        return Ledger.for_notebook(path, bind=False)
    if open_notebook is not None:
        return Ledger.for_notebook(open_notebook, bind=False)
    session = os.environ.get(SESSION_VARIABLE, "").strip()
    if session:
        reason = Message(
            "{variable}={session!r} is not a notebook (.ipynb)", variable=SESSION_VARIABLE, session=session
        )
    else:
        reason = Message(
            "{variable} is unset, so this kernel was not started for a notebook by Jupyter Server",
            variable=SESSION_VARIABLE,
        )
    raise LedgerLocationMissing(Message("no ledger location: {reason}; {how}", reason=reason, how=HOW_TO_GIVE_ONE))


# -------------------- tolerance gate
# The gate a re-run passes when its tolerance differs from the one its ledger holds.
#
# A ledger keeps one current tolerance per check. Widening it after a run is exactly how a
# failure gets erased (principle 6), so a re-run with another tolerance goes through only with
# a written justification, which lands in the ledger as a `tolerance_change` entry before the
# run. The decision whether the tolerance differs is the core's (`apply_ledger_tolerance`);
# this module only turns it into the in-kernel question "why?".


def pending_changes(spec: CheckSpec, ledger: Ledger) -> dict[str, tuple[dict, dict]]:
    """Per target, (ledger's current, written) tolerance where the spec contradicts the ledger."""
    history = ledger.checks(records=False).get(spec.id)
    changes: dict[str, tuple[dict, dict]] = {}
    for target in TARGETS:
        try:
            apply_ledger_tolerance(_only(spec, target), history)
        except SpecError:
            block = getattr(spec, target)
            changes[target] = (history[HISTORY_KEY[target]], {"rtol": block["rtol"], "atol": block["atol"]})
    return changes


def _only(spec: CheckSpec, target: str) -> CheckSpec:
    """The spec with only `target`'s tolerance counted as written, to ask about one at a time."""
    import dataclasses

    return dataclasses.replace(
        spec,
        **{attr: getattr(spec, attr) and other == target for other, attr in EXPLICIT_ATTR.items()},
    )


def describe_change(target: str, old: dict, new: dict) -> str:
    """`tolerance rtol 1e-07 -> 1e-05` naming only what moved."""
    moved = [f"{key} {old[key]:g} -> {new[key]:g}" for key in ("rtol", "atol") if old[key] != new[key]]
    return f"{target} " + ", ".join(moved)


def justify_tolerance_changes(spec: CheckSpec, ledger: Ledger, justification: str | None) -> list[dict]:
    """Append a `tolerance_change` for each differing target, or refuse when no justification.

    Returns the entries written (empty when the tolerance matches the ledger). Refusal raises
    JustificationRequired before anything is written.
    """
    changes = pending_changes(spec, ledger)
    if not changes:
        return []
    if not (justification or "").strip():
        what = "; ".join(describe_change(t, old, new) for t, (old, new) in changes.items())
        raise JustificationRequired(
            "the run is refused: {what} differs from the tolerance the ledger holds for check "
            "{id!r}; write why (the panel's justification box, or justification= in check()); it "
            "is kept in the ledger. Nothing was run or written",
            what=what,
            id=spec.id,
            field="justification",
        )
    entries = []
    for target, (old, new) in changes.items():
        entries.append(
            ledger.change_tolerance(
                spec.id,
                rtol=new["rtol"] if new["rtol"] != old["rtol"] else None,
                atol=new["atol"] if new["atol"] != old["atol"] else None,
                target=target,
                justification=justification,
            )
        )
    return entries


# -------------------- attest
# Display a check's attestation from the kernel, so the saved notebook binds its ledger.
#
# The attestation (core.ledger.binding) goes out as a display of its own MIME type with a
# one-line text fallback. Whoever saves the notebook keeps it in the cell's outputs; JupyterLab's
# extension renders it as a small line and copies the ledger's new head into the open notebook's
# `metadata.gradcheck`, also for runs started from the inline panel, whose displays belong to no
# cell. Outside a kernel (a script, a test) there is nothing to display to.


def text_of(attestation: dict) -> str:
    """The one-line fallback a front end without the extension shows, in the active language."""
    return _("gradcheck: {check_id} recorded at seq {seq} (hash {hash}) in {ledger}").format(
        check_id=attestation.get("check_id"),
        seq=attestation["seq"],
        hash=attestation["hash"][:12],
        ledger=attestation.get("ledger"),
    )


def publish(attestation: dict | None) -> bool:
    """Display the attestation when running in an IPython kernel; whether it was displayed."""
    if attestation is None:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    publisher = getattr(shell, "display_pub", None)
    if publisher is None or type(shell).__name__ == "TerminalInteractiveShell":  # a console has no outputs to save
        return False
    publisher.publish(data={MIME_TYPE: attestation, "text/plain": text_of(attestation)}, metadata={})
    return True


# -------------------- kernel run


def run_attested(
    record, ledger: Ledger | None, *, justification: str | None = None, notebook=None
) -> tuple[dict, dict | None]:
    """The completed record and the attestation of its observation entry (None without a ledger).

    `notebook` names the notebook a run without a ledger belongs to, for the witness (default:
    the session's notebook)."""
    if ledger is None:
        completed = run_spec(record).record
        notebook = notebook or session_notebook()
        witness_client.report_private(str(notebook) if notebook else None, completed["id"])
        return completed, None
    outcome = run_spec(
        record,
        ledger,
        justification=justification,
        before_declare=lambda spec: justify_tolerance_changes(spec, ledger, justification),
    )
    attestation = attestation_for(ledger, outcome.entry)
    publish(attestation)
    return outcome.record, attestation


def run_in_kernel(record, ledger: Ledger | None, *, justification: str | None = None) -> dict:
    """The completed record; written to `ledger` (after any justified tolerance change) unless None."""
    return run_attested(record, ledger, justification=justification)[0]
