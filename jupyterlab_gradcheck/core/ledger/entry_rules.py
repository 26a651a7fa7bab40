"""The rules each ledger entry must satisfy given the entries before it, and the flags they raise.

Verify re-derives what a writer recorded (`after_failure`, `widened`, `after_observation`) so
that a hand-edited flag is caught even when the hashes were recomputed, and it raises the flags
a grader should see but that break no rule: a widening after a failure, an expectation revised
after its check ran, and the same computation re-run under a new check id after it failed with
a wider tolerance or another expectation (`core.report.renamed_reruns`): a failure stays in the
grade whatever later checks are added.
"""

from __future__ import annotations

from ..i18n import Message
from .chain_report import add_error
from .history import HISTORY_KEY, TARGETS, HistoryBuilder, direction
from .line_format import GENESIS_EVENT, KINDS, LineError, LineInfo, is_canonical, read_entry


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
