"""Torn writes as verify sees them: a torn tail, and the seal a restarted writer appends after one.

An append interrupted by a crash leaves a partial last line (a torn tail). The writer that
opens the ledger next keeps those bytes and seals them with a `torn_tail_sealed` note naming
each kept line's length and SHA-256 (core.ledger.tail). A seal is valid only right after the
bytes it names, only for bytes that are the start of an entry (what an interrupted append
leaves), and only as the first write of the writer that restarted (`restart: true` in the
seal): anything else is an error, since a seal would otherwise hide any entry cut short.
"""

from __future__ import annotations

from ..i18n import Message
from .chain_report import add_error
from .line_format import LineError, LineInfo, read_line
from .tail import line_sha

#: Every stored line starts so (canonical JSON, keys sorted): a torn write is a prefix of a line.
LINE_START = b'{"check_id":'
#: What the front of a failed observation's line holds (its data's keys come sorted).
FAILED = b'"passed":false'


def torn_tail(number: int, raw: bytes, last_seq: int, last_hash: str) -> dict:
    complete_entry = False
    try:
        info = read_line(raw)
        complete_entry = info.hash_ok and info.prev == last_hash and info.seq == last_seq + 1
    except LineError:
        pass
    what = Message("a complete entry missing its line end") if complete_entry else Message("a partly written entry")
    return {
        "line": number,
        "bytes": len(raw),
        "complete_entry": complete_entry,
        "reason": Message(
            "torn tail: line {number} ({count} bytes) is {what}, left by an interrupted write; "
            "the next append keeps it and seals it",
            number=number,
            count=len(raw),
            what=what,
        ),
    }


def settle_pending(report: dict, pending: list, info: LineInfo, number: int) -> None:
    """Invalid lines are sealed torn writes when the next entry is a seal note naming them."""
    seal = info.kind == "note" and isinstance(info.data, dict) and info.data.get("event") == "torn_tail_sealed"
    if not pending:
        if seal:
            add_error(report, number, Message("a torn-write seal with no torn write before it"))
        return
    named = info.data.get("lines") if seal else None
    expected = [{"line": n, "bytes": len(raw), "sha256": line_sha(raw)} for n, raw, _ in pending]
    torn_like = all(raw[: len(LINE_START)] == LINE_START[: len(raw)] for _n, raw, _reason in pending)
    if named == expected and not torn_like:
        for bad_number, _raw, _reason in pending:
            add_error(
                report,
                bad_number,
                Message(
                    "sealed as a torn write, but these bytes are not the start of an entry "
                    "(an interrupted append writes a prefix of one): an entry was replaced"
                ),
            )
        return
    if named == expected and not info.data.get("restart"):
        add_error(
            report,
            number,
            Message(
                "a torn-write seal not recorded by a restarted writer: a seal is valid only for the last write "
                "before a restart"
            ),
        )
        return
    if named == expected and any(FAILED in raw for _n, raw, _reason in pending):
        add_error(
            report,
            pending[0][0],
            Message("the bytes sealed as a torn write are a failed observation cut short: a failure was hidden"),
        )
        return
    if named == expected:
        report["sealed"].extend(
            {"line": item["line"], "bytes": item["bytes"], "sealed_by": number} for item in expected
        )
        report["warnings"].append(
            Message(
                "line {line}: an interrupted write ({count} bytes) kept in place and sealed by the "
                "note on line {number}",
                line=pending[0][0],
                count=sum(i["bytes"] for i in expected),
                number=number,
            )
        )
        return
    for bad_number, _raw, reason in pending:
        add_error(report, bad_number, reason)
