"""The record of one comparison: its errors, tolerance, verdict and worst element, as every path writes it.

The plain-Python path (plain_floats.py), the torch path (comparison.py `compare_tensors`) and the
stacked rows (stacked_rows.py) compute the same numbers; each hands them here, so that the record's
fields, their order and the null written for an infinite error are the same whichever ran.
"""

from __future__ import annotations

import math

INF = float("inf")


def unravel(flat_index: int, shape) -> list[int]:
    """The index of a flat position in a tensor of `shape`, row-major."""
    index = []
    for size in reversed(list(shape)):
        index.append(flat_index % size)
        flat_index //= size
    return list(reversed(index))


def comparison_record(
    name,
    input_name,
    left_label,
    right_label,
    rtol,
    atol,
    passed,
    max_abs,
    max_rel,
    shape,
    worst_flat,
    left,
    right,
    abs_err,
    rel_err,
) -> dict:
    """One comparison record: the labels, tolerance and verdict, the largest errors and the worst element."""
    return {
        "name": name,
        "input": input_name,
        "left": left_label,
        "right": right_label,
        "max_abs_err": finite_or_none(max_abs),
        "max_rel_err": finite_or_none(max_rel),
        "rtol": rtol,
        "atol": atol,
        "passed": passed,
        "worst": {
            "index": unravel(worst_flat, shape),
            "flat_index": worst_flat,
            "left": left,
            "right": right,
            "abs_err": finite_or_none(abs_err),
            "rel_err": finite_or_none(rel_err),
        },
    }


def finite_or_none(value):
    """A float of the value, or None where it is not finite (JSON has no inf or NaN)."""
    value = float(value)
    return value if math.isfinite(value) else None
