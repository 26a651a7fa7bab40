"""A failed check re-run under a new id keeps its flag: the same computation is the same check.

A check's flags (`widened_after_failure`, `expectation_revised_after_observation`) follow its
id. Declaring the same computation (function, inputs, dtype, device, held arguments, grad_output)
again under another id after it failed, with a wider tolerance or another expectation, would
leave the failed check looking abandoned and the new one clean, and the grade would go back up.
So the later check carries the flag the change would have raised under the first id.
"""

from __future__ import annotations

import json

#: The fields of an expectation that say what is computed (not what is expected of it).
COMPUTATION_FIELDS = ("function", "inputs", "dtype", "device", "fixed", "grad_output")
WIDENED = "widened_after_failure"
REVISED = "expectation_revised_after_observation"


def computation_key(expectation: dict | None) -> str | None:
    """The canonical JSON of what an expectation computes, or None without one."""
    if not isinstance(expectation, dict) or expectation.get("function") is None:
        return None
    fields = {name: expectation.get(name) for name in COMPUTATION_FIELDS}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)


def _wider(new: dict | None, old: dict | None) -> bool:
    if not isinstance(new, dict) or not isinstance(old, dict):
        return False
    try:
        return any(float(new[k]) > float(old[k]) for k in ("rtol", "atol"))
    except (KeyError, TypeError, ValueError):
        return False


def renamed_rerun_flags(checks: dict[str, dict]) -> list[dict]:
    """`{"check_id", "flag", "seqs", "after"}` for each check that re-runs, under a new id, a
    computation an earlier check failed: `widened_after_failure` when either tolerance is wider
    than the failed check's, else `expectation_revised_after_observation` when it expects
    another gradient. `after` names the failed check; `seqs` the new check's expectation."""
    failed: dict[str, dict] = {}
    flags = []
    ordered = sorted(
        (h for h in checks.values() if h.get("expectation_seq") is not None), key=lambda h: h["expectation_seq"]
    )
    for history in ordered:
        key = computation_key(history.get("expectation"))
        if key is None:
            continue
        earlier = failed.get(key)
        if earlier is not None and earlier["check_id"] != history["check_id"]:
            expectation = history["expectation"]
            widened = _wider(history.get("tolerance"), earlier.get("tolerance")) or _wider(
                history.get("finite_difference_tolerance"), earlier.get("finite_difference_tolerance")
            )
            revised = expectation.get("analytical_gradient") != earlier.get("analytical_gradient")
            if widened or revised:
                flags.append(
                    {
                        "check_id": history["check_id"],
                        "flag": WIDENED if widened else REVISED,
                        "seqs": [history["expectation_seq"]],
                        "after": earlier["check_id"],
                    }
                )
        if history.get("failures_kept") and key not in failed:
            failed[key] = history
    return flags
