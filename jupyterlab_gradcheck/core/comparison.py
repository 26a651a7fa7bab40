"""Compare two gradients element by element, keeping the worst element (principle 6).

A comparison passes when every element satisfies |left - right| <= atol + rtol * |right|
(the reference is the right-hand side). It records the largest absolute and relative
errors, the tolerance used, and the element that violates the tolerance most (or, when all
pass, the one with the largest error), with its index and both values.
"""

from __future__ import annotations

from .tensors import to_value


def _unravel(flat_index: int, shape) -> list[int]:
    index = []
    for size in reversed(list(shape)):
        index.append(flat_index % size)
        flat_index //= size
    return list(reversed(index))


def compare(name: str, input_name: str, left, right, *, left_label: str, right_label: str,
            rtol: float, atol: float) -> dict:
    """One comparison record between two same-shaped tensors."""
    import torch

    left64 = left.detach().to("cpu", torch.float64).broadcast_to(right.shape)
    right64 = right.detach().to("cpu", torch.float64)
    error = (left64 - right64).abs()
    bound = atol + rtol * right64.abs()
    nan = torch.isnan(error)
    excess = torch.where(nan, torch.full_like(error, float("inf")), error - bound)
    passed = bool((excess <= 0).all())
    flat_excess = excess.reshape(-1)
    worst_flat = int(torch.argmax(flat_excess if not passed else error.reshape(-1).nan_to_num(nan=float("inf"))))
    # Relative to a reference of exactly 0 the error is infinite (reported as null), not 1e307.
    relative = torch.where(right64 == 0, torch.full_like(error, float("inf")), error / right64.abs())
    relative = torch.where(error == 0, torch.zeros_like(relative), relative)
    return {
        "name": name,
        "input": input_name,
        "left": left_label,
        "right": right_label,
        "max_abs_err": _finite_or_none(error.max()),
        "max_rel_err": _finite_or_none(relative.max()),
        "rtol": rtol,
        "atol": atol,
        "passed": passed,
        "worst": {
            "index": _unravel(worst_flat, right64.shape),
            "flat_index": worst_flat,
            "left": to_value(left64.reshape(-1)[worst_flat]),
            "right": to_value(right64.reshape(-1)[worst_flat]),
            "abs_err": _finite_or_none(error.reshape(-1)[worst_flat]),
            "rel_err": _finite_or_none(relative.reshape(-1)[worst_flat]),
        },
    }


def _finite_or_none(tensor):
    import math

    value = float(tensor)
    return value if math.isfinite(value) else None
