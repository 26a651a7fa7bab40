"""The autograder's re-run held against the submitted ledger.

When nbgrader re-executes a submission, the notebook's checks run again into a ledger of their
own (the student's ledger is never written). What the re-run recorded is then compared, check by
check, with what the submitted ledger holds: a check the notebook runs that the ledger lacks, a
latest verdict that differs, or fewer failures kept than the notebook produces when run again
(a failure's entries removed and the chain recomputed) each become a finding. Extra runs in the
submitted ledger are not findings: a student runs cells more often than "run all" does.
"""

from __future__ import annotations

from ..i18n import Message


def _verdict(history: dict) -> bool | None:
    latest = history.get("latest_observation")
    return None if latest is None else bool((latest.get("data") or {}).get("passed"))


def _word(passed: bool | None) -> Message:
    if passed is None:
        return Message("never ran")
    return Message("passed") if passed else Message("failed")


def compare_rerun(submitted: dict[str, dict], rerun: dict[str, dict]) -> list[dict]:
    """`{"check_id", "problem"}` for each way the re-run's check histories (`rerun`) disagree
    with the submitted ledger's (`submitted`), both from `core.ledger.history.build_history`;
    `problem` is a Message."""
    findings = []
    for check_id, again in rerun.items():
        held = submitted.get(check_id)
        if held is None:
            findings.append(
                {
                    "check_id": check_id,
                    "problem": Message(
                        "the notebook runs check {check_id!r}, which the submitted ledger lacks", check_id=check_id
                    ),
                }
            )
            continue
        if _verdict(held) != _verdict(again):
            findings.append(
                {
                    "check_id": check_id,
                    "problem": Message(
                        "check {check_id!r}: the submitted ledger's latest run {held}, the re-run {again}",
                        check_id=check_id,
                        held=_word(_verdict(held)),
                        again=_word(_verdict(again)),
                    ),
                }
            )
        kept, produced = len(held.get("failures_kept") or []), len(again.get("failures_kept") or [])
        if kept < produced:
            findings.append(
                {
                    "check_id": check_id,
                    "problem": Message(
                        "check {check_id!r}: the re-run kept {produced} failures, the submitted ledger {kept}",
                        check_id=check_id,
                        produced=produced,
                        kept=kept,
                    ),
                }
            )
    return findings
