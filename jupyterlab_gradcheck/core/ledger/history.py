"""Per-check history read from a ledger: what each check expects now, and how it got there.

The same builder serves the reading API (`Ledger.checks()`), the exports and `verify`, which
uses it to re-derive the flags a writer recorded (`after_failure`, `widened`,
`after_observation`) and to notice a tolerance that changed without a justified entry.
"""

from __future__ import annotations

from typing import Any

#: Each tolerance target of a check, and the key its history keeps the current value under.
HISTORY_KEY = {"tolerance": "tolerance", "finite_difference": "finite_difference_tolerance"}
TARGETS = tuple(HISTORY_KEY)


def tolerance_of(spec: dict, target: str) -> dict | None:
    """`{rtol, atol}` of one tolerance target of a normalised spec, or None when absent."""
    block = spec.get(target) if isinstance(spec, dict) else None
    if not isinstance(block, dict) or "rtol" not in block or "atol" not in block:
        return None
    return {"rtol": block["rtol"], "atol": block["atol"]}


def direction(old: dict, new: dict) -> dict:
    """Whether going from `old` to `new` widened and/or tightened the tolerance."""
    widened = any(_num(new[k]) > _num(old[k]) for k in ("rtol", "atol"))
    tightened = any(_num(new[k]) < _num(old[k]) for k in ("rtol", "atol"))
    return {"widened": widened, "tightened": tightened}


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else float("nan")


def new_check(check_id: str) -> dict:
    """An empty history for a check that has not been seen yet."""
    return {
        "check_id": check_id,
        "expectation": None,
        "expectation_seq": None,
        "analytical_gradient": None,
        "tolerance": None,
        "finite_difference_tolerance": None,
        "runs": 0,
        "observation_seqs": [],
        "failures_kept": [],
        "latest_observation": None,
        "tolerance_history": [],
        "expectation_changes": [],
        "unjustified_tolerance_changes": [],
        "widened_after_failure": False,
        "expectation_revised_after_observation": False,
    }


class HistoryBuilder:
    """Consumes entries in ledger order and keeps every check's history current.

    Entries are dicts with `seq`, `time`, `kind`, `check_id` and `data`. An observation's
    data may be the light form `{"expectation_seq", "passed", "failed_to_run"}` without its
    record; the history then keeps everything except the record itself.
    """

    def __init__(self) -> None:
        self.checks: dict[str, dict] = {}
        self.kinds_by_seq: dict[int, tuple[str, str | None]] = {}
        self.notes: list[dict] = []

    def check(self, check_id: str) -> dict:
        """The history of `check_id`, created empty on first use."""
        if check_id not in self.checks:
            self.checks[check_id] = new_check(check_id)
        return self.checks[check_id]

    def latest_failed(self, check_id: str) -> bool:
        """Whether the check's latest observation ran and failed a comparison."""
        latest = self.checks.get(check_id, {}).get("latest_observation")
        if not latest:
            return False
        data = latest["data"]
        return data.get("passed") is False and not data.get("failed_to_run", False)

    def has_observation(self, check_id: str) -> bool:
        return bool(self.checks.get(check_id, {}).get("runs"))

    def add(self, entry: dict) -> None:
        """Fold one entry into the history."""
        kind, check_id, data = entry["kind"], entry.get("check_id"), entry.get("data") or {}
        self.kinds_by_seq[entry["seq"]] = (kind, check_id)
        if kind == "note" or check_id is None:
            self.notes.append(entry)
            return
        history = self.check(check_id)
        if kind == "expectation":
            self._expectation(history, entry, data)
        elif kind == "observation":
            self._observation(history, entry, data)
        elif kind == "tolerance_change":
            self._tolerance_change(history, entry, data)
        elif kind == "expectation_change":
            self._expectation_change(history, entry, data)

    def _expectation(self, history: dict, entry: dict, data: dict) -> None:
        for target, key in HISTORY_KEY.items():
            new = tolerance_of(data, target)
            old = history[key]
            if old is not None and new is not None and new != old:
                history["unjustified_tolerance_changes"].append(
                    {"seq": entry["seq"], "target": target, "old": old, "new": new}
                )
            if new is not None:
                history[key] = new
        history["expectation"] = dict(data)  # a later expectation_change edits this copy only
        history["expectation_seq"] = entry["seq"]
        history["analytical_gradient"] = data.get("analytical_gradient")

    def _observation(self, history: dict, entry: dict, data: dict) -> None:
        history["runs"] += 1
        history["observation_seqs"].append(entry["seq"])
        history["latest_observation"] = entry
        if data.get("passed") is False:
            record = data.get("record") if isinstance(data.get("record"), dict) else {}
            history["failures_kept"].append(
                {
                    "seq": entry["seq"],
                    "time": entry.get("time"),
                    "expectation_seq": data.get("expectation_seq"),
                    "failed_to_run": bool(data.get("failed_to_run", False)),
                    "reason": data.get("reason"),
                    "failures": record.get("failures") or [],
                    "entry": entry,
                }
            )

    def _tolerance_change(self, history: dict, entry: dict, data: dict) -> None:
        target = data.get("target", "tolerance")
        key = HISTORY_KEY[target]
        item = {
            "seq": entry["seq"],
            "time": entry.get("time"),
            "target": target,
            "old": data.get("old"),
            "new": data.get("new"),
            "justification": data.get("justification"),
            "widened": bool(data.get("widened")),
            "tightened": bool(data.get("tightened")),
            "after_failure": bool(data.get("after_failure")),
        }
        history["tolerance_history"].append(item)
        if item["widened"] and item["after_failure"]:
            history["widened_after_failure"] = True
        if isinstance(data.get("new"), dict):
            history[key] = dict(data["new"])

    def _expectation_change(self, history: dict, entry: dict, data: dict) -> None:
        item = {
            "seq": entry["seq"],
            "time": entry.get("time"),
            "old": data.get("old"),
            "new": data.get("new"),
            "justification": data.get("justification"),
            "after_observation": bool(data.get("after_observation")),
            "via": data.get("via", "change"),
        }
        history["expectation_changes"].append(item)
        if item["after_observation"]:
            history["expectation_revised_after_observation"] = True
        history["analytical_gradient"] = data.get("new")
        if isinstance(history["expectation"], dict):
            history["expectation"]["analytical_gradient"] = data.get("new")


def build_history(entries) -> dict[str, dict]:
    """Every check's history from an iterable of entries in ledger order."""
    builder = HistoryBuilder()
    for entry in entries:
        builder.add(entry)
    return builder.checks


def public_history(history: dict) -> dict:
    """A history for export: observations named by seq instead of repeated in full."""
    result = {key: value for key, value in history.items() if key not in ("latest_observation", "failures_kept")}
    latest = history.get("latest_observation")
    result["latest_observation_seq"] = latest["seq"] if latest else None
    result["failures_kept"] = [{k: v for k, v in item.items() if k != "entry"} for item in history["failures_kept"]]
    return result
