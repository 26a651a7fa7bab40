"""The record's `inputs` field: names a function can use, and values whose shapes fit the limits."""

from __future__ import annotations

import re

from ...errors import SpecError
from ...expr.functions import RESERVED_NAMES
from ...expr.limits import Limits
from .record_values import numel, shape_of

#: An input's name: a letter, then letters, digits or _ (at most 32 characters).
INPUT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")


def check_inputs(inputs: dict, limits: Limits) -> dict[str, list[int]]:
    """Each input's shape; SpecError for no inputs, too many, a name that is not allowed, or too many elements."""
    if not inputs:
        raise SpecError('no inputs: declare at least one, e.g. "x": 3', field="inputs")
    if len(inputs) > limits.max_inputs:
        raise SpecError("more than {max_inputs} inputs", max_inputs=limits.max_inputs, field="inputs")
    shapes = {}
    for name, value in inputs.items():
        if not isinstance(name, str) or not INPUT_NAME.match(name) or name in RESERVED_NAMES:
            raise SpecError(
                "input name {name!r} is not allowed (a letter, then letters, digits or _, not a function name)",
                name=name,
                field="inputs",
            )
        shapes[name] = shape_of(value, f"inputs.{name}", limits)
    total = sum(numel(s) for s in shapes.values())
    if limits.max_input_elements is not None and total > limits.max_input_elements:
        raise SpecError(
            "inputs have {total} elements; the limit is {max_input_elements}",
            total=total,
            max_input_elements=limits.max_input_elements,
            field="inputs",
        )
    return shapes
