"""Replay: re-run every recorded observation and confirm its values reproduce.

Hashing proves a ledger was not changed after it was written; it cannot prove that what was
written is what the code computes, because whoever edits a value can recompute the chain.
Replay closes that gap: each observation's check is run again, under today's numerical rules, in
its recorded dtype and on its recorded device (on the CPU, with a note, when that device is absent
here), and every recorded gradient, error and verdict is compared with the new run within the
tolerance the record itself used. A record made under earlier rules whose finite differences or
verdict come out otherwise because its recorded decisions are not today's gets a note instead
(core/ledger/replay.py).

A record of a Python callable (the API's `check(fn, ...)`) is listed as skipped, saying so
plainly: the callable existed only in the kernel that ran it, and replay runs only the
expression language, which is parsed and never eval'd, so recorded Python is never executed.
The record's `function_source` (its source text and SHA-256, kept since that field exists) is
shown with it, and a source whose text no longer hashes to its recorded SHA-256 is a difference.
"""

from __future__ import annotations

import math
import multiprocessing
import re
from collections.abc import Callable, Iterable

from ..check.record.source import FIELD as FUNCTION_SOURCE
from ..check.record.source import source_hash
from ..check.record.spec import INPUT_FIELDS, RULES, rules_of
from ..errors import DeviceUnavailable, SpecError
from ..i18n import Message
from ..values.form import is_stored_value, stored_sha
from .store import LineError, read_entry

# -------------------- replay rules
# What a replay makes of a record made under earlier numerical rules.
#
# The rules are one set (docs/tolerances.md), named in every new record by the version in which they last changed
# (`"rules"`, core/check/record/spec.py). A replay runs every record under today's rules: no code is kept alive to
# re-run an old one. What a record keeps instead are the decisions its verdict rests on: the path each input took and
# its evaluations, the steps, and each comparison's tolerance and rounding bound (`decisions`).
#
# - What no rule decides (the expectation, the four autograd passes, shapes and dtypes) reproduces whatever the rules
#   were; a difference there is a difference.
# - A record of today's rules reproduces number for number.
# - A record of earlier rules whose recorded decisions are not today's may see its finite differences, their
#   comparisons and its verdict come out otherwise. That is reported as a note, "the rules changed since this record",
#   with the recorded verdict and today's (`rules_changed`), and it does not fail the ledger: an edited record is what
#   the chain and the witness catch. Where its decisions are today's, its numbers must reproduce as well.

#: A comparison row whose name or sides mention this is made of finite differences, which the rules decide.
RULED_MARK = "finite_difference"
#: What a finite-difference observation records of each input's path: the decisions taken for it.
INPUT_DECISIONS = ("structure", "step", "forward_evaluations", "batched")
#: Relative agreement of two recorded decisions' numbers (steps, rounding bounds): far below any change of the rules
#: (a bound that a rule adds or drops moves by orders of magnitude), far above the last bits a bound's sum may round.
DECISION_RTOL = 1e-6


def default_tolerance_bounded(record: dict) -> bool:
    """Whether the record's finite differences took the dtype's default tolerance with each element's rounding bound
    (its rows carry `error_bound`): a completed record writes its tolerance out, so only this says that the author
    did not, and a replay that passed the written numbers on would run without the bound and the re-estimation."""
    return any(isinstance(row, dict) and "error_bound" in row for row in record.get("comparisons") or [])


def ruled_row(row: dict) -> bool:
    """Whether a comparison row is made of finite differences, whose steps, path and bound the rules decide."""
    return any(RULED_MARK in str(row.get(key, "")) for key in ("name", "left", "right"))


def decisions(record: dict) -> dict:
    """The decisions a record's verdict rests on: the finite differences' scheme and step, each input's path and
    evaluations, and each comparison's tolerance and rounding bound."""
    fd = (record.get("observations") or {}).get("finite_difference") or {}
    inputs = fd.get("inputs") if isinstance(fd.get("inputs"), dict) else {}
    return {
        "scheme": fd.get("scheme"),
        "step": fd.get("step"),
        "step_kind": fd.get("step_kind"),
        "inputs": {
            name: [info.get(key) for key in INPUT_DECISIONS] for name, info in inputs.items() if isinstance(info, dict)
        },
        "comparisons": {
            f"{row.get('name')}[{row.get('input')}]#{row.get('output')}": [
                row.get("rtol"),
                row.get("atol"),
                row.get("error_bound"),
            ]
            for row in record.get("comparisons") or []
            if isinstance(row, dict)
        },
    }


def _same(left, right) -> bool:
    if isinstance(left, dict) and isinstance(right, dict):
        return set(left) == set(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    if _is_number(left) and _is_number(right):
        if math.isnan(left) or math.isnan(right):
            return math.isnan(left) and math.isnan(right)
        return math.isclose(left, right, rel_tol=DECISION_RTOL, abs_tol=0.0)
    return left == right


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_decisions(recorded: dict, replayed: dict) -> bool:
    """Whether the replay took the decisions the record says its verdict rests on."""
    return _same(decisions(recorded), decisions(replayed))


def rules_changed(recorded: dict, replayed: dict, ruled: list) -> dict | None:
    """What changed for a record made under earlier rules whose `ruled` differences (those of its finite differences,
    their comparisons and its verdict) come from decisions that are not today's; None where they are differences: a
    record of today's rules, or one whose decisions are today's, must reproduce."""
    made_under = rules_of(recorded)
    if not ruled or made_under == RULES or same_decisions(recorded, replayed):
        return None
    return {
        "made_under": made_under,
        "rules": RULES,
        "recorded_passed": recorded.get("passed"),
        "replayed_passed": replayed.get("passed"),
        "differences": ruled,
    }


def rules_note(change: dict) -> Message:
    """The note of a record whose rules changed: both verdicts, and the rules of each."""
    return Message(
        "the rules changed since this record (made under {made_under}, replayed under {rules}): recorded "
        "passed={recorded}, passed={replayed} under today's rules",
        made_under=change["made_under"],
        rules=change["rules"],
        recorded=change["recorded_passed"],
        replayed=change["replayed_passed"],
    )


# -------------------- replay pool
# The processes that replay a folder of submissions: started once, torch imported once.
#
# Workers are forked from a fork server that imported torch and the engine once
# (WORKER_PRELOAD), so N workers do not each spend seconds importing torch; where there is no fork
# server, they are spawned. Never forked from the verifying process itself: it may hold torch's
# threads. Each worker runs torch on one thread: the processes are the parallelism.

#: Called with (submissions done, submissions in all) each time one finishes.
Progress = Callable[[int, int], None]
#: What the fork server imports once for every replay worker it forks (a failed import is skipped).
WORKER_PRELOAD = (
    "torch",
    "torch.fx.experimental.symbolic_shapes",
    "jupyterlab_gradcheck.core.check.engine",
    "jupyterlab_gradcheck.core.ledger.replay",
)


def worker_context():
    """The multiprocessing context replay workers start in: a fork server that preloads
    WORKER_PRELOAD where the platform has one (Linux, macOS), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    return context


def replay_worker() -> None:
    """A pool worker's start: torch on one thread (the pool's processes are the parallelism)."""
    import torch

    torch.set_num_threads(1)


# -------------------- replay

AUTOGRAD_OBSERVATIONS = ("backward_pass_1", "backward_pass_2_accumulated", "after_clear_none", "autograd_grad")
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: What the engine records as SymPy's opinion of a Python callable (older records carry only this).
CALLABLE_SYMBOLIC_REASON = "a Python callable has no formula for SymPy"
#: A Python qualified name as a callable's record names it: `<lambda>`, `cube`, `Cube.apply`, `f.<locals>.g`.
_QUALNAME = re.compile(r"^(<lambda>|[A-Za-z_]\w*)(\.(<lambda>|<locals>|[A-Za-z_]\w*))*\Z")


def _flat(value) -> list:
    if isinstance(value, list):
        return [item for part in value for item in _flat(part)]
    return [value]


def _number(value):
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    return value


def values_agree(recorded, replayed, rtol: float, atol: float) -> bool:
    """Element-wise |recorded - replayed| <= atol + rtol * |replayed|, NaN matching NaN; a
    mapping (a gradient per input name) agrees when it has the same names and each value does.
    A stored value (core/values/form.py) is compared by its blob's values; one
    whose blob cannot be read agrees with nothing."""
    if is_stored_value(recorded) or is_stored_value(replayed):
        if not (is_stored_value(recorded) and is_stored_value(replayed)):
            return False
        if stored_sha(recorded) == stored_sha(replayed):
            return True  # the same bytes
        try:
            recorded, replayed = _stored_list(recorded), _stored_list(replayed)
        except SpecError:
            return False
    if isinstance(recorded, dict) or isinstance(replayed, dict):
        return (
            isinstance(recorded, dict)
            and isinstance(replayed, dict)
            and set(recorded) == set(replayed)
            and all(values_agree(recorded[name], replayed[name], rtol, atol) for name in recorded)
        )
    left, right = _flat(recorded), _flat(replayed)
    if len(left) != len(right):
        return False
    for a, b in zip(left, right):
        a, b = _number(a), _number(b)
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            if a != b:
                return False
            continue
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return False
        if math.isnan(a) or math.isnan(b):
            if not (math.isnan(a) and math.isnan(b)):
                return False
        elif math.isinf(a) or math.isinf(b):
            if a != b:
                return False
        elif abs(a - b) > atol + rtol * abs(b):
            return False
    return True


def _stored_list(value) -> list:
    """A stored value's elements as a flat list of floats (a complex one's as its real pairs), read
    from the pending cache or the store that `reading_store` names."""
    import torch

    from ..values.tensors import from_stored

    tensor = from_stored(value)
    tensor = torch.view_as_real(tensor) if tensor.is_complex() else tensor
    return tensor.to(torch.float64).reshape(-1).tolist()


def recorded_device(record: dict) -> str:
    """The device the observation actually ran on (not `auto`), as its values say."""
    gradients = ((record.get("observations") or {}).get("backward_pass_1") or {}).get("gradients") or {}
    for description in gradients.values():
        if isinstance(description, dict) and description.get("device"):
            return str(description["device"])
    return str(record.get("device", "cpu"))


def _rerun(record: dict, devices) -> tuple[dict, list[str]]:
    from ..check.engine import run_check

    spec = {key: record[key] for key in INPUT_FIELDS if key in record and key not in ("observed_gradient", "executed")}
    fd = spec.get("finite_difference")
    if isinstance(fd, dict) and default_tolerance_bounded(record):  # the default, as the record's decisions say
        spec["finite_difference"] = {key: value for key, value in fd.items() if key not in ("rtol", "atol")}
    spec["device"] = recorded_device(record)
    # Neither the step sweep nor SymPy's opinion is compared, so neither is recomputed.
    try:
        return run_check(spec, sweep=False, devices=devices, symbolic=False), []
    except DeviceUnavailable as exc:
        note = Message(
            "{device} is not available here ({reason}); replayed on cpu", device=spec["device"], reason=exc.message
        )
        spec["device"] = "cpu"
        return run_check(spec, sweep=False, devices=devices, symbolic=False), [note]


def compare_records(recorded: dict, replayed: dict, *, same_device: bool) -> list[tuple[Message, bool]]:
    """Every way the replayed record fails to reproduce the recorded one, each with whether the numerical rules decide
    it (finite differences, their comparisons, the verdict they move: core/ledger/replay.py)."""
    differences = []
    tol = recorded.get("tolerance") or {}
    fd = recorded.get("finite_difference") or {}
    rtol, atol = float(tol.get("rtol", 0.0)), float(tol.get("atol", 0.0))
    if not values_agree(recorded.get("observed_gradient"), replayed.get("observed_gradient"), rtol, atol):
        message = Message(
            "observed_gradient: recorded {recorded!r}, replayed {replayed!r} (rtol={rtol:g}, atol={atol:g})",
            recorded=recorded.get("observed_gradient"),
            replayed=replayed.get("observed_gradient"),
            rtol=rtol,
            atol=atol,
        )
        differences.append((message, False))
    old_obs, new_obs = recorded.get("observations") or {}, replayed.get("observations") or {}
    for name in (*AUTOGRAD_OBSERVATIONS, "finite_difference"):
        ruled = name == "finite_difference"
        o_rtol, o_atol = (float(fd.get("rtol", 0)), float(fd.get("atol", 0))) if ruled else (rtol, atol)
        old_grads = (old_obs.get(name) or {}).get("gradients") or {}
        new_grads = (new_obs.get(name) or {}).get("gradients") or {}
        for input_name in sorted(set(old_grads) | set(new_grads)):
            old, new = old_grads.get(input_name) or {}, new_grads.get(input_name) or {}
            where = f"{name}[{input_name}]"
            if not values_agree(old.get("value"), new.get("value"), o_rtol, o_atol):
                message = Message(
                    "{where}: recorded {recorded!r}, replayed {replayed!r} (rtol={rtol:g}, atol={atol:g})",
                    where=where,
                    recorded=old.get("value"),
                    replayed=new.get("value"),
                    rtol=o_rtol,
                    atol=o_atol,
                )
                differences.append((message, ruled))
            for key in ("shape", "dtype") + (("device",) if same_device else ()):
                if old.get(key) != new.get(key):
                    message = Message(
                        "{where}.{key}: recorded {recorded!r}, replayed {replayed!r}",
                        where=where,
                        key=key,
                        recorded=old.get(key),
                        replayed=new.get(key),
                    )
                    differences.append((message, False))
    differences += _compare_rows(recorded, replayed, rtol, atol)
    if bool(recorded.get("passed")) != bool(replayed.get("passed")):
        message = Message(
            "verdict: recorded passed={recorded}, replayed passed={replayed}",
            recorded=recorded.get("passed"),
            replayed=replayed.get("passed"),
        )
        # the verdict is the rules' where what moved it is theirs alone: a verdict edited by itself is no rule's
        differences.append((message, bool(differences) and all(ruled for _, ruled in differences)))
    return differences


def _compare_rows(recorded: dict, replayed: dict, rtol: float, atol: float) -> list[tuple[Message, bool]]:
    """The differences of the recorded comparison rows, each with whether the rules decide it."""
    differences = []
    new_rows = {(r.get("name"), r.get("input")): r for r in replayed.get("comparisons") or []}
    for row in recorded.get("comparisons") or []:
        key, ruled = (row.get("name"), row.get("input")), ruled_row(row)
        new = new_rows.get(key)
        if new is None:
            message = Message("comparison {name}[{input}] was not produced by the replay", name=key[0], input=key[1])
            differences.append((message, ruled))
            continue
        c_rtol, c_atol = float(row.get("rtol", rtol)), float(row.get("atol", atol))
        for field, shown, differ in (
            ("passed", "passed=", bool(row.get("passed")) != bool(new.get("passed"))),
            (
                "max_abs_err",
                "max_abs_err ",
                not values_agree(row.get("max_abs_err"), new.get("max_abs_err"), c_rtol, c_atol),
            ),
        ):
            if differ:
                message = Message(
                    "comparison {name}[{input}]: recorded {field}{recorded!r}, replayed {field}{replayed!r}",
                    name=key[0],
                    input=key[1],
                    field=shown,
                    recorded=row.get(field),
                    replayed=new.get(field),
                )
                differences.append((message, ruled))
    return differences


def is_callable_record(record: dict) -> bool:
    """Whether a record whose function is not an expression was a Python callable's: it holds
    `function_source`, or SymPy's skip for a callable, or its function is a Python qualified name."""
    symbolic = record.get("symbolic") if isinstance(record.get("symbolic"), dict) else {}
    return (
        isinstance(record.get(FUNCTION_SOURCE), dict)
        or symbolic.get("reason") == CALLABLE_SYMBOLIC_REASON
        or bool(_QUALNAME.match(str(record.get("function", ""))))
    )


def callable_skip(record: dict) -> dict:
    """The skipped result of a Python callable's record: why it is not re-run, its recorded
    source and hash when it has them, and a difference when that source no longer hashes to
    the recorded SHA-256."""
    name = str(record.get("function", ""))
    source = record.get(FUNCTION_SOURCE)
    differences = []
    if not isinstance(source, dict):
        reason = Message(
            "cannot be re-run here: the function was a Python callable, {name}, which exists only in the "
            "kernel that ran it; this record names it but holds no source (it predates "
            "function_source), and replay runs only the expression language, which is parsed, never "
            "eval'd: recorded Python is never executed",
            name=name,
        )
        source = None
    elif not isinstance(source.get("text"), str) or not isinstance(source.get("sha256"), str):
        reason = Message(
            "cannot be re-run here: the function was a Python callable, {name}, which exists only in the "
            "kernel that ran it; its source could not be read when it ran ({why}), and replay runs only the "
            "expression language, which is parsed, never eval'd: recorded Python is never executed",
            name=name,
            why=str(source.get("reason", "")),
        )
        source = None
    else:
        reason = Message(
            "cannot be re-run here: the function was a Python callable, {name}, which exists only in the "
            "kernel that ran it, and replay runs only the expression language, which is parsed, never "
            "eval'd: recorded Python is never executed; its recorded source and SHA-256 are kept to be "
            "read",
            name=name,
        )
        source = {key: source[key] for key in ("text", "sha256", "truncated_from") if key in source}
        if "truncated_from" not in source and source_hash(source["text"]) != source["sha256"]:
            differences.append(
                Message(
                    "function_source: the recorded text hashes to {actual}, not to its recorded "
                    "sha256 {recorded}: the source was edited after it was recorded",
                    actual=source_hash(source["text"]),
                    recorded=source["sha256"],
                )
            )
    return {
        "status": "differs" if differences else "skipped",
        "differences": differences,
        "notes": [],
        "reason": reason,
        "source": source,
        "device": None,
    }


def replay_record(record: dict, *, devices=None) -> dict:
    """`{"status": reproduced|rules_changed|differs|skipped, "differences", "notes", "device"}` for one record; a
    skipped one adds its `reason` (and, for a Python callable, its recorded `source`), one whose rules changed its
    `rules_changed` (core/ledger/replay.py), the note of which is among its notes."""
    try:
        replayed, notes = _rerun(record, devices)
    except SpecError as exc:
        if exc.field == "function" and is_callable_record(record):
            return callable_skip(record)
        return {
            "status": "skipped",
            "differences": [],
            "notes": [],
            "device": None,
            "reason": Message("cannot be re-run here: {reason}", reason=exc.message),
        }
    same_device = not notes
    found = compare_records(record, replayed, same_device=same_device)
    change = rules_changed(record, replayed, [message for message, ruled in found if ruled])
    differences = [message for message, ruled in found if not (ruled and change)]
    device = "cpu" if notes else recorded_device(record)
    result = {"status": "reproduced", "differences": differences, "notes": notes, "device": device}
    if change:
        result.update(status="rules_changed", rules_changed=change, notes=[*notes, rules_note(change)])
    if differences:
        result["status"] = "differs"
    return result


def replay_lines(lines: Iterable[tuple[int, bytes, bool]], *, devices=None, store_dir=None) -> dict:
    """Replay every observation in a ledger's lines; `ok` when all that ran reproduce. Stored values
    (inputs, expectations, recorded observations) are read from `store_dir`, the ledger's blob folder."""
    from ..values.tensors import reading_store

    with reading_store(store_dir):
        return _replay_lines(lines, devices)


def _replay_lines(lines: Iterable[tuple[int, bytes, bool]], devices) -> dict:
    report = {
        "ok": True,
        "observations": 0,
        "reproduced": 0,
        "differs": [],
        "skipped": [],
        "notes": [],
        "rules_changed": [],
    }
    for number, raw, complete in lines:
        if not complete:
            continue
        try:
            entry = read_entry(raw)
        except LineError:
            continue
        if entry["kind"] != "observation":
            continue
        report["observations"] += 1
        data, check_id = entry["data"], entry["check_id"]
        record = data.get("record") if isinstance(data, dict) else None
        if not isinstance(record, dict) or data.get("failed_to_run"):
            report["skipped"].append(
                {
                    "line": number,
                    "check_id": check_id,
                    "reason": Message("the recorded run did not complete (failed to run)"),
                }
            )
            continue
        result = replay_record(record, devices=devices)
        for note in result["notes"]:
            report["notes"].append({"line": number, "check_id": check_id, "note": note})
        if result.get("rules_changed"):
            change = {key: value for key, value in result["rules_changed"].items() if key != "differences"}
            report["rules_changed"].append({"line": number, "check_id": check_id, **change})
        if result["status"] == "reproduced":
            report["reproduced"] += 1
        elif result["status"] == "skipped":
            skipped = {"line": number, "check_id": check_id, "reason": result["reason"]}
            report["skipped"].append({**skipped, "source": result["source"]} if result.get("source") else skipped)
        elif result["status"] == "differs":
            report["differs"].append({"line": number, "check_id": check_id, "differences": result["differences"]})
    report["ok"] = not report["differs"]
    return report
