"""What `check()` takes as an input, and what it refuses before anything runs or is written.

`check(fn, grad, **inputs)` takes every keyword it does not name as an input to differentiate. Two
slips then read as something else:

- a setting written as a keyword (`rtol=1e-3`, `eps=1e-6`, `dtpye="float32"`) would become a
  second input, and the check would fail on a missing expectation. A name that is a setting of
  torch's gradcheck or of a check record, or a near miss of one of `check()`'s own keywords, is
  refused in one line that points at `tolerance=`, `finite_difference=` or the keyword meant,
  unless the function itself takes an argument of that name;
- an integer argument (`k=3`) would become a differentiable float input. When the function's
  backward gives no gradient for it, it is refused in one line that says to hold it with `fixed=`.
"""

from __future__ import annotations

import difflib
import inspect
import re

from .core.errors import SpecError

#: Settings of a check, or of torch's gradcheck, that a caller may write as a keyword: where each is written.
SETTINGS = {
    "rtol": "tolerance={'rtol': ...}",
    "atol": "tolerance={'atol': ...}",
    "tol": "tolerance={'rtol': ..., 'atol': ...}",
    "tolerances": "tolerance={'rtol': ..., 'atol': ...}",
    "eps": "finite_difference={'step': ...}",
    "step": "finite_difference={'step': ...}",
    "h": "finite_difference={'step': ...}",
    "scheme": "finite_difference={'scheme': ...}",
    "mode": "finite_difference={'mode': ...}",
    "fast_mode": "finite_difference={'mode': 'projected'}",
    "fd": "finite_difference={...}",
}
#: Near misses of check()'s own keywords closer than this ratio (difflib) are refused as misspellings.
NEAR_MISS = 0.8


def refuse_settings(function, inputs: dict, keywords: list[str]) -> None:
    """SpecError for an input whose name is a setting or a misspelt keyword of check(), unless `function` takes it."""
    for name in inputs:
        if _takes(function, name):
            continue
        if name in SETTINGS:
            raise SpecError(
                "{name!r} is a setting, not an input: write it as {written}",
                name=name,
                written=SETTINGS[name],
                field=name,
            )
        meant = difflib.get_close_matches(name, [k for k in keywords if len(k) > 3], n=1, cutoff=NEAR_MISS)
        if meant and len(name) > 3:
            raise SpecError(
                "{name!r} is not a keyword of check(): did you mean {meant}=? (an input's name must differ from it)",
                name=name,
                meant=meant[0],
                field=name,
            )


def _takes(function, name: str) -> bool:
    """Whether `function` (an expression, a callable, an autograd Function) names an argument `name`."""
    if isinstance(function, str):
        return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", function) is not None
    target = getattr(function, "forward", function) if inspect.isclass(function) else function
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters and parameters[name].kind not in (inspect.Parameter.VAR_KEYWORD,)


def refuse_ungradiented_integers(function, inputs: dict, dtype: str, device: str) -> None:
    """SpecError for an integer input the function's backward gives no gradient for: it should be held fixed.

    Only a Python callable with an integer input (a Python int, or a tensor of an integer dtype) is
    probed: one forward and one backward pass with every input as a float leaf, as the check itself
    would take it. An integer input that does get a gradient (an exponent, say) stays an input."""
    import torch

    integers = [name for name, value in inputs.items() if _integral(value)]
    if isinstance(function, str) or not integers:
        return
    dtype_of = getattr(torch, dtype)
    leaves = {
        name: torch.as_tensor(value, dtype=dtype_of, device=device).requires_grad_(True)
        for name, value in inputs.items()
    }
    try:
        output = function(**leaves)
        parts = [o for o in (output if isinstance(output, (list, tuple)) else [output]) if _tracked(o, torch)]
        if not parts:
            return
        total = sum(part.real.sum() if part.is_complex() else part.sum() for part in parts)
        grads = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
    except Exception:  # the check itself runs the function and reports what goes wrong
        return
    for (name, value), grad in zip(leaves.items(), grads):
        if name in integers and grad is None:
            raise SpecError(
                "{name} is an integer and the backward gives no gradient for it: hold it with fixed={{{name!r}: {value}}}",
                name=name,
                value=_written(inputs[name]),
                field=name,
            )


def _tracked(value, torch) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _integral(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    dtype = getattr(value, "dtype", None)
    return (
        dtype is not None
        and hasattr(value, "is_floating_point")
        and not (value.is_floating_point() or value.is_complex())
    )


def _written(value):
    """The value as the caller would write it in fixed=: a number, or a tensor's nested list."""
    if hasattr(value, "tolist"):
        listed = value.tolist()
        return listed if len(str(listed)) <= 40 else "..."
    return value
