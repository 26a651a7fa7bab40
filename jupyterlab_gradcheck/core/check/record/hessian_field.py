"""The record's `hessian` field: what a second-order expectation may be, checked before anything runs.

A matrix (n x n for the inputs' n elements together), a callable of the inputs giving one, or the
text "double_backward" for a custom Function's own double backward. The second-order observation
itself (core/check/autograd/second_order.py) needs torch; this field does not.
"""

from __future__ import annotations

import math

from ...errors import SpecError
from .record_values import shape_of

#: The expectation text of "the custom Function's own double backward".
DOUBLE_BACKWARD = "double_backward"


def parse_hessian(raw, names: list[str], numel: int):
    """The record's `hessian` expectation, validated before anything runs (None when the check has none);
    `numel` is the number of elements of the inputs together."""
    if raw is None:
        return None
    if isinstance(raw, list):  # rectangular and numeric, as any record value (SpecError naming the problem)
        count = math.prod(shape_of(raw, "hessian"))
        if count != numel * numel:
            refuse_wrong_size(names, count, numel)
    if raw == DOUBLE_BACKWARD or callable(raw) or isinstance(raw, list):
        return raw
    raise SpecError('hessian must be a matrix, a callable of the inputs or "double_backward"', field="hessian")


def refuse_wrong_size(names: list[str], count: int, n: int):
    """Refuse a Hessian of `count` elements for inputs of `n` elements together (it must have n x n)."""
    if len(names) == 1:
        raise SpecError(
            "hessian for {name!r} has {count} elements; an input of {n} elements has an {n} x {n} Hessian",
            name=names[0],
            count=count,
            n=n,
            field="hessian",
        )
    raise SpecError(
        "hessian for the inputs {names} has {count} elements; their {n} elements together have an {n} x {n} Hessian",
        names=", ".join(names),
        count=count,
        n=n,
        field="hessian",
    )
