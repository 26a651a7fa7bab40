"""The gate a re-run passes when its tolerance differs from the one its ledger holds.

A ledger keeps one current tolerance per check. Widening it after a run is exactly how a
failure gets erased (principle 6), so a re-run with another tolerance goes through only with
a written justification, which lands in the ledger as a `tolerance_change` entry before the
run. The decision whether the tolerance differs is the core's (`apply_ledger_tolerance`);
this module only turns it into the in-kernel question "why?".
"""

from __future__ import annotations

from ..core.check.record.spec import CheckSpec
from ..core.errors import JustificationRequired, SpecError
from ..core.ledger.history import HISTORY_KEY, TARGETS
from ..core.ledger.ledgered_run import EXPLICIT_ATTR, apply_ledger_tolerance
from ..core.ledger.store import Ledger


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
