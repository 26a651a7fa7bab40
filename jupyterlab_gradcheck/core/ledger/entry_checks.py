"""What an append refuses before anything is written: an unknown kind, a missing check id or
justification, a change to a check the ledger does not hold. Each is bad input (SpecError, or
JustificationRequired), and the ledger is left as it was."""

from __future__ import annotations

from pathlib import Path

from ..errors import JustificationRequired, SpecError
from .history import HistoryBuilder
from .line_format import KINDS


def check_kind(kind: str, check_id: str | None, data: dict) -> None:
    if kind not in KINDS:
        raise SpecError(
            "unknown ledger entry kind {kind!r}: one of {choices}",
            kind=kind,
            choices=", ".join(KINDS),
            field="kind",
        )
    if kind != "note" and not (isinstance(check_id, str) and check_id):
        raise SpecError("a {kind} entry needs a check id", kind=kind, field="check_id")
    if not isinstance(data, dict):
        raise SpecError("ledger entry data must be a JSON object", field="data")


def check_id_of(record: dict) -> str:
    check_id = record.get("id") if isinstance(record, dict) else None
    if not isinstance(check_id, str) or not check_id:
        raise SpecError("the record has no check id; parse it with core.check.record.spec first", field="id")
    return check_id


def require_justification(justification) -> str:
    if not isinstance(justification, str) or not justification.strip():
        raise JustificationRequired(
            "a written justification is required (--justification TEXT): the change is refused and nothing was written",
            field="justification",
        )
    return justification.strip()


def existing_check(builder: HistoryBuilder, check_id: str, path: Path) -> dict:
    if check_id not in builder.checks:
        known = ", ".join(sorted(builder.checks)) or "none"
        raise SpecError(
            "no check {check_id!r} in {name} (checks: {known})",
            check_id=check_id,
            name=path.name,
            known=known,
            field="check_id",
        )
    return builder.checks[check_id]
