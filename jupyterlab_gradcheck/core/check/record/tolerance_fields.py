"""The tolerance fields of a check declaration: `tolerance` and `finite_difference`.

Split from core/check/record/spec.py, which parses the rest of the record: each field is checked
and given its dtype's default (docs/tolerances.md gives the reasoning), and a relative
tolerance too wide to mean anything is refused in one line wherever a tolerance is written.
"""

from __future__ import annotations

import json
import math

from ...errors import SpecError
from ...expr.limits import Limits
from . import defaults


def number_field(value, field_name: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(
            "{field_name} must be a number, got {value}",
            field_name=field_name,
            value=json.dumps(value)[:40],
            field=field_name,
        )
    if isinstance(value, int) and abs(value) > 2**63:  # beyond float's exact range; float() may overflow
        raise SpecError(
            "{field_name} must be a finite number of at most 2**63, got an integer of about {digits} digits",
            field_name=field_name,
            digits=int(value.bit_length() * math.log10(2)) + 1,
            field=field_name,
        )
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        if positive:
            raise SpecError(
                "{field_name} must be a positive finite number, got {value}",
                field_name=field_name,
                value=value,
                field=field_name,
            )
        raise SpecError(
            "{field_name} must be a non-negative finite number, got {value}",
            field_name=field_name,
            value=value,
            field=field_name,
        )
    return float(value)


def tolerance_field(raw, default: dict, field_name: str, max_rtol: float) -> tuple[dict, bool]:
    if raw is None:
        return dict(default), False
    if not isinstance(raw, dict):
        raise SpecError("{field_name} must be an object with rtol and atol", field_name=field_name, field=field_name)
    allowed = {"rtol", "atol"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SpecError(
            "{field_name}: unknown field {unknown!r} (allowed: {choices})",
            field_name=field_name,
            unknown=unknown[0],
            choices=", ".join(sorted(allowed)),
            field=f"{field_name}.{unknown[0]}",
        )
    result = dict(default)
    explicit = False
    for key in ("rtol", "atol"):
        if key in raw and raw[key] is not None:
            result[key] = number_field(raw[key], f"{field_name}.{key}")
            explicit = True
    refuse_meaningless_rtol(result["rtol"], f"{field_name}.rtol", max_rtol)
    return result, explicit


def refuse_meaningless_rtol(rtol: float, field_name: str, max_rtol: float) -> None:
    """SpecError for a relative tolerance of `max_rtol` or more (see Limits.max_rtol)."""
    if rtol >= max_rtol:
        raise SpecError(
            "{field_name} {rtol} is {limit} or more: a relative tolerance that large accepts any "
            "gradient of the right sign, so the check would check nothing (the limit is an "
            "instructor's setting)",
            field_name=field_name,
            rtol=rtol,
            limit=max_rtol,
            field=field_name,
        )


def finite_difference_field(raw, dtype: str, limits: Limits) -> tuple[dict, bool]:
    if raw is not None and not isinstance(raw, dict):
        raise SpecError("finite_difference must be an object", field="finite_difference")
    raw = raw or {}
    scheme = raw.get("scheme", "central")
    if scheme not in defaults.SCHEMES:
        raise SpecError(
            "finite_difference.scheme {scheme!r} is not one of {choices}",
            scheme=scheme,
            choices=", ".join(defaults.SCHEMES),
            field="finite_difference.scheme",
        )
    step = raw.get("step")
    if step is not None and step != "adaptive":
        step = number_field(step, "finite_difference.step", positive=True)
    tolerance, explicit = tolerance_field(
        {k: v for k, v in raw.items() if k in ("rtol", "atol")} if raw else None,
        defaults.fd_tolerance(dtype, scheme),
        "finite_difference",
        limits.max_rtol,
    )
    unknown = sorted(set(raw) - {"scheme", "step", "rtol", "atol", "mode"})
    if unknown:
        raise SpecError(
            "finite_difference: unknown field {unknown!r} (allowed: atol, mode, rtol, scheme, step)",
            unknown=unknown[0],
            field=f"finite_difference.{unknown[0]}",
        )
    mode = _fd_mode(raw, scheme, step)
    return {"scheme": scheme, "step": step, **tolerance, **({"mode": mode} if mode else {})}, explicit


def _fd_mode(raw: dict, scheme: str, step) -> str | None:
    """finite_difference.mode as written (None when absent: auto), refused unless it names a mode that can run."""
    if "mode" not in raw:
        return None
    mode = raw["mode"]
    if mode not in defaults.FD_MODES:
        raise SpecError(
            "finite_difference.mode {mode!r} is not one of {choices}",
            mode=mode,
            choices=", ".join(defaults.FD_MODES),
            field="finite_difference.mode",
        )
    if mode == "projected" and (scheme != "central" or step is not None):
        raise SpecError(
            "finite_difference.mode projected takes central differences at the default step, "
            "not scheme {scheme!r} with step {step!r}",
            scheme=scheme,
            step=step,
            field="finite_difference.mode",
        )
    return mode
