"""The witness's receipts as a grader reads them: one per entry, grouped by ledger and student.

The kernel and the server extension may both report the same entry (the same ledger id, seq and
head): the witness keeps both, and readers keep one, the first received, so that a delay is
measured from the first delivery. A receipt's `kind` and `passed` (reported with the head)
let the grader count the failures of a ledger it was never handed.
"""

from __future__ import annotations

from datetime import datetime

from .witness_log import parse_time

#: The notebook a run made without a ledger is reported under when no notebook was named
#: (`ledger=False` under nbconvert, a script).
NO_NOTEBOOK = "(no notebook)"


def deduplicated(receipts: list[dict]) -> list[dict]:
    """The receipts with each entry once (by user, ledger id, seq and head: the first received);
    a private run has no head and each is kept."""
    seen: set[tuple] = set()
    kept = []
    for receipt in receipts:
        if not receipt.get("private"):
            key = (receipt.get("user"), receipt.get("ledger_id"), receipt.get("seq"), receipt.get("head"))
            if key in seen:
                continue
            seen.add(key)
        kept.append(receipt)
    return kept


def is_failure(receipt: dict) -> bool:
    """Whether the receipt is of a failed observation (its `kind` and `passed` as reported)."""
    return receipt.get("kind") == "observation" and receipt.get("passed") is False


def ledger_summaries(receipts: list[dict]) -> list[dict]:
    """`{"ledger_id", "entries", "failures", "first", "last"}` for each ledger id among
    `receipts`, in the order the witness first saw them: distinct seqs, failed observations,
    and the times the first and last of them were received."""
    by_id: dict[str, dict] = {}
    for receipt in receipts:
        ledger_id = str(receipt.get("ledger_id"))
        item = by_id.setdefault(
            ledger_id, {"ledger_id": ledger_id, "seqs": set(), "failures": set(), "first": receipt.get("time")}
        )
        item["seqs"].add(receipt.get("seq"))
        if is_failure(receipt):
            item["failures"].add(receipt.get("seq"))
        item["last"] = receipt.get("time")
    return [
        {
            "ledger_id": item["ledger_id"],
            "entries": len(item["seqs"]),
            "failures": len(item["failures"]),
            "first": item["first"],
            "last": item["last"],
        }
        for item in by_id.values()
    ]


def delay_seconds(entry_time: str | None, received: str | None) -> float | None:
    """Seconds from an entry's own time to the witness receiving its head (None if unreadable)."""
    entry, at = parse_time(entry_time), parse_time(received)
    if not isinstance(entry, datetime) or not isinstance(at, datetime):
        return None
    return (at - entry).total_seconds()
