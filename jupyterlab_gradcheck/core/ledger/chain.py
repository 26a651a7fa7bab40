"""The verify report of one ledger: its fields, how an error is added, and how `ok` is settled.

Every part of verify (the chain, the binding, the attestations, the witness) adds its findings
to the same report through `add_error`, each with its scope, and `settle_ok` derives `chain_ok`,
`binding_ok` and `ok` from them.
"""

from __future__ import annotations

from ..i18n import Message
from ..values.blobs import blob_errors
from .store import (
    GENESIS,
    GENESIS_EVENT,
    HISTORY_KEY,
    KINDS,
    MAX_SEAL_RUN,
    TARGETS,
    HistoryBuilder,
    LineError,
    LineInfo,
    Lines,
    direction,
    hash_in_child,
    hashed_ahead,
    is_canonical,
    is_genesis,
    light_entry,
    line_sha,
    read_entry,
    read_line,
)

# -------------------- chain report


def new_report() -> dict:
    return {
        "ok": True,
        "entries": 0,
        "checks": [],
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
    for key in ("_hashes", "_times", "_unreported", "_last_complete_line"):
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


# -------------------- entry rules
# The rules each ledger entry must satisfy given the entries before it, and the flags they raise.
#
# Verify re-derives what a writer recorded (`after_failure`, `widened`, `after_observation`) so
# that a hand-edited flag is caught even when the hashes were recomputed, and it raises the flags
# a grader should see but that break no rule: a widening after a failure, an expectation revised
# after its check ran, and the same computation re-run under a new check id after it failed with
# a wider tolerance or another expectation (`core.report.submissions`): a failure stays in the
# grade whatever later checks are added.


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


def deep_problems(raw: bytes, info: LineInfo) -> list[str]:
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


def collect_flags(report: dict, builder: HistoryBuilder, line_of_seq: dict[int, int]) -> None:
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


# -------------------- torn writes
# Torn writes as verify sees them: a torn tail, and the seal a restarted writer appends after one.
#
# An append interrupted by a crash leaves a partial last line (a torn tail). The writer that
# opens the ledger next keeps those bytes and seals them with a `torn_tail_sealed` note naming
# each kept line's length and SHA-256 (core.ledger.store). A seal is valid only right after the
# bytes it names, only for bytes that are the start of an entry (what an interrupted append
# leaves), and only as the first write of the writer that restarted (`restart: true` in the
# seal): anything else is an error, since a seal would otherwise hide any entry cut short.

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


# -------------------- verify chain
# The chain check of a ledger's lines: hashes, order, and the rules each entry records.
#
# `verify_lines` answers "are these lines the ones that were written, whole and in order?". It
# checks every line's hash over its stored bytes (core.ledger.store), the `seq` and `prev`
# chain, the rules each entry must satisfy given those before it and the flags they raise
# (core.ledger.chain), and torn writes and their seals (core.ledger.chain). The
# report's fields live in core.ledger.chain. core.ledger.verify adds the notebook binding,
# files and folders, and replay.

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
    or changed one is an error of that entry (core.values.blobs), listed in `blob_errors`.

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
