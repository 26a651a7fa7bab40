"""Replay: re-run every recorded observation and confirm its values reproduce.

Hashing proves a ledger was not changed after it was written; it cannot prove that what was
written is what the code computes, because whoever edits a value can recompute the chain.
Replay closes that gap: each observation's check is run again in its recorded dtype and on
its recorded device (on the CPU, with a note, when that device is absent here), and every
recorded gradient, error and verdict is compared with the new run within the tolerance the
record itself used. A record of a Python callable cannot be re-run outside its kernel and is
listed as skipped.
"""

from __future__ import annotations

import math
from typing import Iterable

from ..check.policy import policy_version
from ..check.spec import INPUT_FIELDS
from ..errors import DeviceUnavailable, SpecError
from ..i18n import Message
from .line_format import LineError, read_entry

AUTOGRAD_OBSERVATIONS = ("backward_pass_1", "backward_pass_2_accumulated", "after_clear_none", "autograd_grad")
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


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
    mapping (a gradient per input name) agrees when it has the same names and each value does."""
    if isinstance(recorded, dict) or isinstance(replayed, dict):
        return (isinstance(recorded, dict) and isinstance(replayed, dict) and set(recorded) == set(replayed)
                and all(values_agree(recorded[name], replayed[name], rtol, atol) for name in recorded))
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
    spec["policy"] = policy_version(record)  # the finite-difference policy that made the recorded verdict
    spec["device"] = recorded_device(record)
    try:
        return run_check(spec, sweep=False, devices=devices), []
    except DeviceUnavailable as exc:
        note = Message("{device} is not available here ({reason}); replayed on cpu",
                       device=spec["device"], reason=exc.message)
        spec["device"] = "cpu"
        return run_check(spec, sweep=False, devices=devices), [note]


def compare_records(recorded: dict, replayed: dict, *, same_device: bool) -> list[str]:
    """Every way the replayed record fails to reproduce the recorded one."""
    differences = []
    tol = recorded.get("tolerance") or {}
    fd = recorded.get("finite_difference") or {}
    rtol, atol = float(tol.get("rtol", 0.0)), float(tol.get("atol", 0.0))
    if not values_agree(recorded.get("observed_gradient"), replayed.get("observed_gradient"), rtol, atol):
        differences.append(Message("observed_gradient: recorded {recorded!r}, replayed {replayed!r} (rtol={rtol:g}, "
                                   "atol={atol:g})", recorded=recorded.get("observed_gradient"),
                                   replayed=replayed.get("observed_gradient"), rtol=rtol, atol=atol))
    old_obs, new_obs = recorded.get("observations") or {}, replayed.get("observations") or {}
    for name in (*AUTOGRAD_OBSERVATIONS, "finite_difference"):
        o_rtol, o_atol = (float(fd.get("rtol", 0)), float(fd.get("atol", 0))) if name == "finite_difference" \
            else (rtol, atol)
        old_grads = (old_obs.get(name) or {}).get("gradients") or {}
        new_grads = (new_obs.get(name) or {}).get("gradients") or {}
        for input_name in sorted(set(old_grads) | set(new_grads)):
            old, new = old_grads.get(input_name) or {}, new_grads.get(input_name) or {}
            where = f"{name}[{input_name}]"
            if not values_agree(old.get("value"), new.get("value"), o_rtol, o_atol):
                differences.append(Message("{where}: recorded {recorded!r}, replayed {replayed!r} (rtol={rtol:g}, atol={atol:g})",
                                           where=where, recorded=old.get("value"), replayed=new.get("value"),
                                           rtol=o_rtol, atol=o_atol))
            for key in ("shape", "dtype") + (("device",) if same_device else ()):
                if old.get(key) != new.get(key):
                    differences.append(Message("{where}.{key}: recorded {recorded!r}, replayed {replayed!r}",
                                               where=where, key=key,
                                               recorded=old.get(key), replayed=new.get(key)))
    new_rows = {(r.get("name"), r.get("input")): r for r in replayed.get("comparisons") or []}
    for row in recorded.get("comparisons") or []:
        key = (row.get("name"), row.get("input"))
        new = new_rows.get(key)
        if new is None:
            differences.append(Message("comparison {name}[{input}] was not produced by the replay",
                                       name=key[0], input=key[1]))
            continue
        if bool(row.get("passed")) != bool(new.get("passed")):
            differences.append(Message("comparison {name}[{input}]: recorded passed={recorded}, replayed passed={replayed}",
                                       name=key[0], input=key[1], recorded=row.get("passed"), replayed=new.get("passed")))
        c_rtol, c_atol = float(row.get("rtol", rtol)), float(row.get("atol", atol))
        if not values_agree(row.get("max_abs_err"), new.get("max_abs_err"), c_rtol, c_atol):
            differences.append(Message("comparison {name}[{input}]: recorded max_abs_err {recorded!r}, replayed {replayed!r}",
                                       name=key[0], input=key[1], recorded=row.get("max_abs_err"),
                                       replayed=new.get("max_abs_err")))
    if bool(recorded.get("passed")) != bool(replayed.get("passed")):
        differences.append(Message("verdict: recorded passed={recorded}, replayed passed={replayed}",
                                   recorded=recorded.get("passed"), replayed=replayed.get("passed")))
    return differences


def replay_record(record: dict, *, devices=None) -> dict:
    """`{"status": reproduced|differs|skipped, "differences", "notes", "device"}` for one record."""
    try:
        replayed, notes = _rerun(record, devices)
    except SpecError as exc:
        return {"status": "skipped", "differences": [], "notes": [f"cannot be re-run here: {exc.message}"],
                "device": None}
    same_device = not notes
    differences = compare_records(record, replayed, same_device=same_device)
    device = "cpu" if notes else recorded_device(record)
    return {"status": "differs" if differences else "reproduced", "differences": differences,
            "notes": notes, "device": device}


def replay_lines(lines: Iterable[tuple[int, bytes, bool]], *, devices=None) -> dict:
    """Replay every observation in a ledger's lines; `ok` when all that ran reproduce."""
    report = {"ok": True, "observations": 0, "reproduced": 0, "differs": [], "skipped": [], "notes": []}
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
            report["skipped"].append({"line": number, "check_id": check_id,
                                      "reason": Message("the recorded run did not complete (failed to run)")})
            continue
        result = replay_record(record, devices=devices)
        for note in result["notes"]:
            report["notes"].append({"line": number, "check_id": check_id, "note": note})
        if result["status"] == "reproduced":
            report["reproduced"] += 1
        elif result["status"] == "skipped":
            report["skipped"].append({"line": number, "check_id": check_id, "reason": result["notes"][0]})
        else:
            report["differs"].append({"line": number, "check_id": check_id, "differences": result["differences"]})
    report["ok"] = not report["differs"]
    return report
