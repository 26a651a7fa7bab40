"""Validation of numeric values written in a record: numbers and rectangular nested lists, a
complex value's two parts `{"real": ..., "imag": ...}` of one shape (core/check/record/complex_values.py),
or an empty array by its shape `{"shape": [0, 5]}` (core/check/record/empty_values.py).

Torch-free, so the server can refuse a ragged list or a huge shape before anything runs.
"""

from __future__ import annotations

import math

from ...errors import SpecError
from ...expr.limits import DEFAULT_LIMITS, Limits
from .complex_values import is_complex_value
from .empty_values import empty_shape, is_empty_value
from .stored_values import is_stored_value, stored_shape


def shape_of(value, field: str, limits: Limits = DEFAULT_LIMITS) -> list[int]:
    """Shape of a number or rectangular nested list, of a complex value's parts, of an empty array
    (core/check/record/empty_values.py) or of a stored value (stored_values.py); SpecError naming the first problem, or a value over an
    instructor's element cap (`Limits.max_input_elements`, when one is set)."""
    shape = _shape_of(value, field, limits)
    if limits.max_input_elements is not None and math.prod(shape) > limits.max_input_elements:
        raise SpecError(
            "{where}: more than {max_input_elements} elements",
            where=field,
            max_input_elements=limits.max_input_elements,
            field=field,
        )
    return shape


def _shape_of(value, field: str, limits: Limits) -> list[int]:
    if is_stored_value(value):  # by its hash, shape and dtype (core/check/record/stored_values.py)
        return stored_shape(value, field, limits)
    if is_empty_value(value):
        return empty_shape(value, field, limits.max_input_rank)
    if not is_complex_value(value):
        return _real_shape(value, field, limits)
    real = _real_shape(value["real"], f"{field}.real", limits)
    imag = _real_shape(value["imag"], f"{field}.imag", limits)
    if real != imag:
        raise SpecError(
            "{where}: the real part has shape {real} but the imaginary part has shape {imag}",
            where=field,
            real=real,
            imag=imag,
            field=field,
        )
    return real


def _real_shape(value, field: str, limits: Limits) -> list[int]:
    shape: list[int] = []
    level = [value]
    while True:
        if set(map(type, level)) == {float} and all(map(math.isfinite, level)):
            return shape  # the common innermost level, checked at C speed; any other goes through the checks below
        for item in level:
            if not isinstance(item, list) and not _is_number(item):
                raise SpecError(
                    "{where}: expected a number or a list of numbers, found {found}",
                    where=field,
                    found=_describe(item),
                    field=field,
                )
        if all(_is_number(item) for item in level):
            for item in level:
                _check_finite(item, field)
            return shape
        if not all(isinstance(item, list) for item in level):
            raise SpecError(
                "{where}: ragged list (numbers and lists mixed at depth {count})",
                where=field,
                count=len(shape),
                field=field,
            )
        lengths = {len(item) for item in level}
        if len(lengths) != 1:
            raise SpecError(
                "{where}: ragged list (lengths {lengths} at depth {count})",
                where=field,
                lengths=sorted(lengths),
                count=len(shape),
                field=field,
            )
        length = lengths.pop()
        if length == 0:
            raise SpecError("{where}: empty list at depth {count}", where=field, count=len(shape), field=field)
        shape.append(length)
        if len(shape) > limits.max_input_rank:
            raise SpecError(
                "{where}: more than {max_input_rank} dimensions",
                where=field,
                max_input_rank=limits.max_input_rank,
                field=field,
            )
        if math.prod(shape) > limits.max_list_elements:
            raise SpecError(
                "{where}: more than {max_list_elements} elements written as a list (a larger tensor comes from "
                "Python, as a stored value)",
                where=field,
                max_list_elements=limits.max_list_elements,
                field=field,
            )
        level = [inner for item in level for inner in item]


def numel(shape: list[int]) -> int:
    """Number of elements of a shape (1 for a scalar)."""
    return math.prod(shape)


def _is_number(item) -> bool:
    return isinstance(item, (int, float)) and not isinstance(item, bool)


def _check_finite(item, field: str) -> None:
    if isinstance(item, float) and not math.isfinite(item):
        raise SpecError("{where}: {item} is not a finite number", where=field, item=item, field=field)
    if isinstance(item, int) and abs(item) > 2**63:
        # described by its size: a float conversion of a 310-digit integer would overflow
        digits = int(item.bit_length() * math.log10(2)) + 1
        raise SpecError(
            "{where}: an integer of about {digits} digits is out of range (at most 2**63)",
            where=field,
            digits=digits,
            field=field,
        )


def _describe(item) -> str:
    if item is None:
        return "null"
    if isinstance(item, bool):
        return f"boolean {str(item).lower()}"
    if isinstance(item, str):
        return f"string {item[:30]!r}"
    return type(item).__name__
