"""The plain-Python path of a comparison: small real CPU tensors compared in Python floats.

For the scalars and short vectors of the course a dozen torch operations on one element cost far
more than the arithmetic. This path evaluates the torch path's IEEE double operations in the same
order (subtract, abs, multiply, add, divide, each rounded once) and picks the worst element by the
same rule as `torch.argmax` (the first NaN, else the first maximum), so its records are
bit-identical to the torch path's.
"""

from __future__ import annotations

import torch

from .comparison_record import INF, comparison_record, finite_or_none

#: torch's real floating dtypes: their elements fit a double exactly.
REAL_DTYPES = frozenset((torch.float64, torch.float32, torch.float16, torch.bfloat16))
#: What nan_to_num turns +inf into.
MAX_FINITE = 1.7976931348623157e308
#: Largest element count compared in plain Python floats instead of torch operations.
SMALL_ELEMENTS = 64


def compare_floats(
    name, input_name, left: list, right: list, shape, *, left_label, right_label, rtol, atol, extra=None
) -> dict:
    """The plain-Python path: the torch path's operations, element by element, in doubles."""
    if len(left) == 1 and extra is None:  # one element is its own worst and its own maximum
        a, b = left[0], right[0]
        e = abs(a - b)
        r = 0.0 if e == 0 else (INF if b == 0 else e / abs(b))
        passed = (INF if e != e else e - (atol + rtol * abs(b))) <= 0
        return comparison_record(
            name, input_name, left_label, right_label, rtol, atol, passed, e, r, shape, 0, a, b, e, r
        )
    errors = [abs(a - b) for a, b in zip(left, right)]
    if extra is None:
        excess = [INF if e != e else e - (atol + rtol * abs(b)) for e, b in zip(errors, right)]
    else:
        excess = [INF if e != e else e - (atol + rtol * abs(b) + x) for e, b, x in zip(errors, right, extra)]
    passed = all(x <= 0 for x in excess)
    if passed:
        worst_flat = _argmax([INF if e != e else (MAX_FINITE if e == INF else e) for e in errors])
    else:
        worst_flat = _argmax(excess)
    # Relative to a reference of exactly 0 the error is infinite (reported as null), not 1e307.
    relative = [0.0 if e == 0 else (INF if b == 0 else e / abs(b)) for e, b in zip(errors, right)]
    result = comparison_record(
        name,
        input_name,
        left_label,
        right_label,
        rtol,
        atol,
        passed,
        _max(errors),
        _max(relative),
        shape,
        worst_flat,
        left[worst_flat],
        right[worst_flat],
        errors[worst_flat],
        relative[worst_flat],
    )
    if extra is not None:
        result["error_bound"] = {"max": finite_or_none(_max(extra)), "at_worst": finite_or_none(extra[worst_flat])}
    return result


def _argmax(values: list) -> int:
    """`torch.argmax` of a flat list: the first NaN if there is one, else the first maximum."""
    best = 0
    for index, value in enumerate(values):
        if value != value:
            return index
        if value > values[best]:
            best = index
    return best


def _max(values: list) -> float:
    """`Tensor.max()` of a flat list: NaN when any element is NaN."""
    return values[_argmax(values)]


def plain_number(value) -> bool:
    """A float, or an int that a double holds exactly (torch and Python then agree on it)."""
    return type(value) is float or (type(value) is int and abs(value) <= 2**53)


def plain_values(tensor) -> list[float] | None:
    """The elements of a small real CPU tensor as Python floats, else None."""
    if not (
        tensor.is_cpu
        and 0 < tensor.numel() <= SMALL_ELEMENTS
        and tensor.dtype in REAL_DTYPES
        and tensor.layout is torch.strided
    ):
        return None
    if tensor.dim() == 0:
        return [tensor.item()]
    values = tensor.tolist()
    while values and isinstance(values[0], list):  # flatten a nested list, row-major as reshape(-1)
        values = [item for row in values for item in row]
    return values
