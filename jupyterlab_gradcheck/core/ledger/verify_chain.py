"""The chain check of a ledger's lines: hashes, order, and the rules each entry records.

`verify_lines` answers "are these lines the ones that were written, whole and in order?". It
checks every line's hash over its stored bytes (core.ledger.chain_hashing), the `seq` and `prev`
chain, the rules each entry must satisfy given those before it and the flags they raise
(core.ledger.entry_rules), and torn writes and their seals (core.ledger.torn_writes). The
report's fields live in core.ledger.chain_report. core.ledger.verify adds the notebook binding,
files and folders, and replay.
"""

from __future__ import annotations

from ..i18n import Message
from .blob_checks import blob_errors
from .chain_hashing import Lines, hash_in_child, hashed_ahead
from .chain_report import add_error, drop_internals, new_report, settle_ok
from .entry_rules import collect_flags, deep_problems, semantic_problems
from .history import HistoryBuilder
from .line_format import GENESIS, LineError, LineInfo, is_genesis, read_line
from .reader import light_entry
from .tail import MAX_SEAL_RUN
from .torn_writes import settle_pending, torn_tail

__all__ = [
    "Lines",
    "add_error",
    "drop_internals",
    "hash_in_child",
    "new_report",
    "settle_ok",
    "verify_lines",
]
#: Events of notes that no client reports to the witness on their own (the next head covers them).
UNREPORTED_EVENTS = ("witness_pending", "torn_tail_sealed")


def verify_lines(lines: Lines, *, deep: bool = False, hashes_checked_elsewhere: bool = False, store_dir=None) -> dict:
    """The chain report of a sequence of `(line number, bytes, complete)` lines.

    With `store_dir` (the ledger's blob folder) every blob an entry names is checked too: a missing
    or changed one is an error of that entry (core.ledger.blob_checks), listed in `blob_errors`.

    `deep` also decodes every record and checks that each line is byte for byte the
    canonical form of its entry (slower: it decodes every observation record).
    `hashes_checked_elsewhere` takes every stored hash as correct: only for a caller that
    has them checked by another process and verifies again without it if one is wrong.
    """
    report = new_report()
    report["blob_errors"] = []
    digests: dict = {}  # each distinct blob hashed once per run
    builder = HistoryBuilder()
    hashes: dict[int, str] = {}
    times: dict[int, str] = {}
    awaiting: dict[int, tuple[str | None, int]] = {}  # expectations with no outcome yet: seq -> (check, line)
    line_of_seq: dict[int, int] = {}
    unreported: list[int] = []
    last_seq, last_hash, last_time = 0, GENESIS, ""
    pending: list[tuple[int, bytes, str]] = []
    read, add, rules = read_line, builder.add, semantic_problems  # locals: this loop runs 10^5 times
    if hashes_checked_elsewhere:
        checked = ((item, item[2]) for item in lines)
    else:
        checked = (pair for batch, flags in hashed_ahead(lines) for pair in zip(batch, flags))
    last_complete = 0
    checks: dict[str, None] = {}
    for (number, raw, complete), hash_ok in checked:
        last_complete = number if complete else last_complete
        if not complete:
            report["torn_tail"] = torn_tail(number, raw, last_seq, last_hash)
            continue
        try:
            info = read(raw, check_hash=False, decode=deep)
        except LineError as exc:
            pending.append((number, raw, exc.args[0]))  # a Message: shown translated
            continue
        info.hash_ok = hash_ok
        if pending or info.kind == "note":
            settle_pending(report, pending, info, number)
            pending = []
            if isinstance(info.data, dict) and info.data.get("event") in UNREPORTED_EVENTS:
                unreported.append(info.seq)
        seq = info.seq
        if seq == 0 and last_hash == GENESIS and not hashes and hash_ok and info.prev == GENESIS and is_genesis(info):
            report["ledger_id"] = info.data["ledger_id"]  # the genesis entry opens the ledger
            last_hash = hashes[0] = info.hash
            last_time = times[0] = info.time
            add(light_entry(info))
            continue
        if not (hash_ok and seq == last_seq + 1 and info.prev == last_hash):
            for problem in _chain_problems(info, last_seq, last_hash):
                add_error(report, number, problem)
        problems = rules(info, builder)
        if deep:
            problems += deep_problems(raw, info)
        if store_dir is not None:
            for detail, problem in blob_errors(raw, seq, info.check_id, store_dir, digests):
                report["blob_errors"].append({"line": number, **detail})
                problems.append(problem)
        for problem in problems:
            add_error(report, number, problem)
        if info.time < last_time and _earlier_beyond_skew(info.time, last_time):
            add_error(
                report,
                number,
                Message(
                    "entry seq {seq} has the time {time}, before the entry above it ({last_time}): times "
                    "were edited or entries reordered",
                    seq=seq,
                    time=info.time,
                    last_time=last_time,
                ),
            )
        add(light_entry(info))
        if info.kind == "expectation":
            checks.setdefault(info.check_id)
            # A check declared again supersedes its earlier expectation: an expectation
            # written first and run later (declare, then check) is not an interruption.
            for earlier in [s for s, (check, _) in awaiting.items() if check == info.check_id]:
                del awaiting[earlier]
            awaiting[seq] = (info.check_id, number)
        elif info.kind == "observation":
            awaiting.pop(info.expectation_seq, None)
        last_seq, last_hash, last_time = seq, info.hash, max(last_time, info.time)
        hashes[seq], line_of_seq[seq], times[seq] = last_hash, number, info.time
    report["entries"] = len(line_of_seq)
    report["checks"] = list(checks)  # every check declared, in the order of its first expectation
    torn = report["torn_tail"]
    if pending and torn is not None and len(pending) <= MAX_SEAL_RUN:
        torn["interrupted_lines"] = [{"line": n, "bytes": len(raw)} for n, raw, _ in pending]
    else:
        for number, _raw, reason in pending:
            add_error(report, number, reason)
    if torn is not None:
        add_error(report, torn["line"], torn["reason"])
    collect_flags(report, builder, line_of_seq)
    report["interrupted"] = [
        {"seq": seq, "line": number, "check_id": check_id} for seq, (check_id, number) in sorted(awaiting.items())
    ]
    for item in report["interrupted"]:
        report["warnings"].append(
            Message(
                "line {line}: the expectation of {check_id!r} (seq {seq}) has no outcome: its run "
                "was interrupted (or is still running)",
                line=item["line"],
                check_id=item["check_id"],
                seq=item["seq"],
            )
        )
    report["head"], report["last_seq"] = last_hash, last_seq
    report["_hashes"] = hashes
    report["_times"] = times
    report["_unreported"] = unreported
    report["_last_complete_line"] = last_complete
    settle_ok(report)
    return report


#: How far an entry's time may lie before the one above it (a clock stepped back) before it is
#: an error. Appends take their time under the ledger's lock, so honest times never go back.
CLOCK_STEP_SECONDS = 5.0


def _earlier_beyond_skew(time: str, previous: str) -> bool:
    from datetime import datetime

    try:
        return (datetime.fromisoformat(previous) - datetime.fromisoformat(time)).total_seconds() > CLOCK_STEP_SECONDS
    except (TypeError, ValueError):
        return True


def _chain_problems(info: LineInfo, last_seq: int, last_hash: str) -> list[str]:
    problems = []
    if not info.hash_ok:
        problems.append(Message("hash mismatch: entry seq {seq} was changed after it was written", seq=info.seq))
    if info.seq != last_seq + 1:
        problems.append(
            Message(
                "seq {seq} where {expected} was expected: an entry is missing, repeated or out of order",
                seq=info.seq,
                expected=last_seq + 1,
            )
        )
    if info.prev != last_hash:
        problems.append(
            Message("prev does not match the hash of the entry before it: lines were removed, inserted or reordered")
        )
    return problems
