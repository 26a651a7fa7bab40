"""The chain check of a ledger's lines: hashes, order, and the rules each entry records.

`verify_lines` answers "are these lines the ones that were written, whole and in order?". It
checks every line's hash over its stored bytes, the `seq` and `prev` chain, that each
observation refers to an earlier expectation of its check, and it re-derives the flags a
writer recorded (`after_failure`, `widened`, `after_observation`) so that a hand-edited flag
is caught even when the hashes were recomputed. Findings a grader should see but that break
no rule (a widening after a failure, an expectation revised after its check ran) are flags,
not errors. core.ledger.verify adds the notebook binding, files and folders, and replay.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from ..i18n import Message
from .history import HISTORY_KEY, TARGETS, HistoryBuilder, direction
from .line_format import (
    GENESIS,
    GENESIS_EVENT,
    KINDS,
    LineError,
    LineInfo,
    is_canonical,
    is_genesis,
    read_entry,
    read_line,
    stored_hash_ok,
)
from .reader import light_entry
from .tail import MAX_SEAL_RUN, line_sha

Lines = Iterable[tuple[int, bytes, bool]]
#: Lines hashed per batch, and how many batches the hashing thread may run ahead.
_BATCH, _AHEAD = 256, 4


def new_report() -> dict:
    return {
        "ok": True,
        "entries": 0,
        "head": GENESIS,
        "errors": [],
        "warnings": [],
        "torn_tail": None,
        "sealed": [],
        "flags": [],
        "binding": None,
        "ledger_id": None,
    }


def drop_internals(report: dict) -> dict:
    """The report without what only the verifier uses (hashes and times by seq, the last line read)."""
    for key in ("_hashes", "_times", "_last_complete_line"):
        report.pop(key, None)
    return report


def add_error(report: dict, line: int | None, reason: str, scope: str = "chain") -> None:
    report["errors"].append({"line": line, "reason": reason, "scope": scope})


def settle_ok(report: dict) -> None:
    """`chain_ok`, `binding_ok` (None when there is no binding to compare) and `ok`."""
    report["chain_ok"] = not any(e["scope"] == "chain" for e in report["errors"])
    binding = report.get("binding")
    if binding is not None:
        report["binding_ok"] = binding["ok"]
    else:
        report["binding_ok"] = False if report.get("notebook") else None
    report["ok"] = not report["errors"]


def verify_lines(lines: Lines, *, deep: bool = False, hashes_checked_elsewhere: bool = False) -> dict:
    """The chain report of a sequence of `(line number, bytes, complete)` lines.

    `deep` also decodes every record and checks that each line is byte for byte the
    canonical form of its entry (slower: it decodes every observation record).
    `hashes_checked_elsewhere` takes every stored hash as correct: only for a caller that
    has them checked by another process and verifies again without it if one is wrong.
    """
    report = new_report()
    builder = HistoryBuilder()
    hashes: dict[int, str] = {}
    times: dict[int, str] = {}
    awaiting: dict[int, tuple[str | None, int]] = {}  # expectations with no outcome yet: seq -> (check, line)
    line_of_seq: dict[int, int] = {}
    last_seq, last_hash, last_time = 0, GENESIS, ""
    pending: list[tuple[int, bytes, str]] = []
    read, add, rules = read_line, builder.add, semantic_problems  # locals: this loop runs 10^5 times
    if hashes_checked_elsewhere:
        checked = ((item, item[2]) for item in lines)
    else:
        checked = (pair for batch, flags in _hashed_ahead(lines) for pair in zip(batch, flags))
    last_complete = 0
    for (number, raw, complete), hash_ok in checked:
        last_complete = number if complete else last_complete
        if not complete:
            report["torn_tail"] = _torn_tail(number, raw, last_seq, last_hash)
            continue
        try:
            info = read(raw, check_hash=False, decode=deep)
        except LineError as exc:
            pending.append((number, raw, exc.args[0]))  # a Message: shown translated
            continue
        info.hash_ok = hash_ok
        if pending or info.kind == "note":
            _settle_pending(report, pending, info, number)
            pending = []
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
            problems += _deep_problems(raw, info)
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
    torn = report["torn_tail"]
    if pending and torn is not None and len(pending) <= MAX_SEAL_RUN:
        torn["interrupted_lines"] = [{"line": n, "bytes": len(raw)} for n, raw, _ in pending]
    else:
        for number, _raw, reason in pending:
            add_error(report, number, reason)
    if torn is not None:
        add_error(report, torn["line"], torn["reason"])
    _collect_flags(report, builder, line_of_seq)
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
    report["_last_complete_line"] = last_complete
    settle_ok(report)
    return report


def _hash_batch(batch: list) -> list[bool]:
    return [complete and stored_hash_ok(raw) for _number, raw, complete in batch]


def _hashed_ahead(lines: Lines) -> Iterator[tuple[list, list[bool]]]:
    """Batches of lines with their `hash_ok` flags, hashed a few batches ahead in a thread.

    Hashing is most of the cost of verifying a ledger of full records; hashlib releases the
    GIL on large buffers, so a second core hashes while this one decodes.
    """
    queue: collections.deque = collections.deque()
    with ThreadPoolExecutor(max_workers=1) as pool:
        batch: list = []
        for item in lines:
            batch.append(item)
            if len(batch) == _BATCH:
                queue.append((batch, pool.submit(_hash_batch, batch)))
                batch = []
                if len(queue) > _AHEAD:
                    done, future = queue.popleft()
                    yield done, future.result()
        if batch:
            queue.append((batch, pool.submit(_hash_batch, batch)))
        while queue:
            done, future = queue.popleft()
            yield done, future.result()


def hash_in_child(lines_of_file: Callable[[], Lines]) -> Callable[[], tuple[int, list[int]] | None]:
    """Fork a child that checks the stored hash of every complete line of a ledger file.

    On a large ledger a hashing thread still competes with the decoding loop for the
    interpreter lock (everything around each hashlib call holds it); a second process does
    not. Returns a function that waits for the child and gives `(last complete line, line
    numbers whose hash is wrong)`, or None when no child could run (the caller then verifies
    with hashing in a thread).
    """
    import json
    import os

    if not hasattr(os, "fork"):
        return lambda: None
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return lambda: None
    if pid == 0:  # the child: hash, report, and leave without running any cleanup
        status = 1
        try:
            os.close(read_end)
            upto, bad = 0, []
            for number, raw, complete in lines_of_file():
                if not complete:
                    break
                upto = number
                if not stored_hash_ok(raw):
                    bad.append(number)
            with os.fdopen(write_end, "w") as out:
                json.dump([upto, bad], out)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)

    def collect() -> tuple[int, list[int]] | None:
        with os.fdopen(read_end) as answer:
            text = answer.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not text:
            return None
        upto, bad = json.loads(text)
        return upto, bad

    return collect


def _torn_tail(number: int, raw: bytes, last_seq: int, last_hash: str) -> dict:
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


def _settle_pending(report: dict, pending: list, info: LineInfo, number: int) -> None:
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


#: How far an entry's time may lie before the one above it (a clock stepped back) before it is
#: an error. Appends take their time under the ledger's lock, so honest times never go back.
CLOCK_STEP_SECONDS = 5.0
#: Every stored line starts so (canonical JSON, keys sorted): a torn write is a prefix of a line.
LINE_START = b'{"check_id":'


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


def semantic_problems(info: LineInfo, builder: HistoryBuilder) -> list[str]:
    """Rules the entry must satisfy given the entries before it (the builder's state)."""
    kind, check_id, data = info.kind, info.check_id, info.data
    if kind not in KINDS:
        return [Message("unknown entry kind {kind!r}", kind=kind)]
    if kind != "note" and not (isinstance(check_id, str) and check_id):
        return [Message("a {kind} entry without a check id", kind=kind)]
    if kind == "note" and isinstance(data, dict) and data.get("event") == GENESIS_EVENT:
        return [Message("a genesis entry after the first line: only the entry that opens a ledger names it")]
    if kind == "observation":
        if builder.kinds_by_seq.get(info.expectation_seq) != ("expectation", check_id):
            return [
                Message(
                    "observation of {check_id!r} refers to seq {expectation_seq}, which is not an "
                    "earlier expectation of that check: the expectation was not written first",
                    check_id=check_id,
                    expectation_seq=info.expectation_seq,
                )
            ]
        return []
    if kind == "tolerance_change":
        return _tolerance_change_problems(check_id, data, builder)
    if kind == "expectation_change":
        problems = []
        if data.get("via") != "rerun" and not _justified(data):
            problems.append(Message("expectation change without a justification"))
        expected = builder.has_observation(check_id)
        if bool(data.get("after_observation")) != expected:
            recorded = bool(data.get("after_observation"))
            problems.append(
                Message(
                    "after_observation is recorded as {recorded} but the check had run before it", recorded=recorded
                )
                if expected
                else Message(
                    "after_observation is recorded as {recorded} but the check had not run before it", recorded=recorded
                )
            )
        return problems
    return []


def _justified(data: dict) -> bool:
    text = data.get("justification")
    return isinstance(text, str) and bool(text.strip())


def _tolerance_change_problems(check_id: str, data: dict, builder: HistoryBuilder) -> list[str]:
    problems = []
    if not _justified(data):
        problems.append(Message("tolerance change without a justification"))
    target = data.get("target")
    old, new = data.get("old"), data.get("new")
    if target not in TARGETS or not isinstance(old, dict) or not isinstance(new, dict):
        return problems + ["tolerance change without target, old and new"]
    history = builder.checks.get(check_id)
    current = None if history is None else history[HISTORY_KEY[target]]
    if current != old:
        problems.append(
            Message(
                "tolerance change says the old {target} tolerance was {old} but it was {current}",
                target=target,
                old=old,
                current=current,
            )
        )
    try:
        derived = direction(old, new)
    except (KeyError, TypeError):
        return problems + ["tolerance change with malformed old/new values"]
    for flag in ("widened", "tightened"):
        if bool(data.get(flag)) != derived[flag]:
            problems.append(
                Message(
                    "{flag} is recorded as {recorded} but old {old} -> new {new} says {derived}",
                    flag=flag,
                    recorded=bool(data.get(flag)),
                    old=old,
                    new=new,
                    derived=derived[flag],
                )
            )
    failed = builder.latest_failed(check_id)
    if bool(data.get("after_failure")) != failed:
        recorded = bool(data.get("after_failure"))
        problems.append(
            Message(
                "after_failure is recorded as {recorded} but the check's latest observation had failed",
                recorded=recorded,
            )
            if failed
            else Message(
                "after_failure is recorded as {recorded} but the check's latest observation had not failed",
                recorded=recorded,
            )
        )
    return problems


def _deep_problems(raw: bytes, info: LineInfo) -> list[str]:
    try:
        entry = read_entry(raw)
    except LineError as exc:
        return [exc.args[0]]
    problems = []
    if not is_canonical(raw, entry):
        problems.append(Message("the line is not the canonical form of its entry: it was rewritten by hand"))
    if info.kind == "observation":
        record = entry["data"].get("record")
        if not isinstance(record, dict):
            problems.append(Message("observation without a record"))
        elif not info.failed_to_run and bool(record.get("passed")) != info.passed:
            problems.append(
                Message(
                    "the observation says passed={passed} but its record says passed={record_passed}",
                    passed=info.passed,
                    record_passed=record.get("passed"),
                )
            )
        elif record.get("id") != info.check_id:
            problems.append(
                Message(
                    "the observation's record is for {record_id!r}, not {check_id!r}",
                    record_id=record.get("id"),
                    check_id=info.check_id,
                )
            )
    return problems


def _collect_flags(report: dict, builder: HistoryBuilder, line_of_seq: dict[int, int]) -> None:
    for check_id, history in builder.checks.items():
        widened = [t["seq"] for t in history["tolerance_history"] if t["widened"] and t["after_failure"]]
        if widened:
            report["flags"].append({"check_id": check_id, "flag": "widened_after_failure", "seqs": widened})
        revised = [e["seq"] for e in history["expectation_changes"] if e["after_observation"]]
        if revised:
            report["flags"].append(
                {"check_id": check_id, "flag": "expectation_revised_after_observation", "seqs": revised}
            )
        for change in history["unjustified_tolerance_changes"]:
            label = "tolerance" if change["target"] == "tolerance" else "finite_difference tolerance"
            add_error(
                report,
                line_of_seq.get(change["seq"]),
                Message(
                    "the {label} of {check_id!r} changed from {old} to {new} without a justified "
                    "tolerance_change entry",
                    label=label,
                    check_id=check_id,
                    old=change["old"],
                    new=change["new"],
                ),
            )
