"""The record's `analytical_gradient` field: each input's expectation, and whether its shape can fit.

The expectation is written first (principle 1). Per input it is an expression of the language, a
Python callable (through the API) or a value; with several inputs it maps each input to its own.
An expression's shape is inferred without torch (core/expr/shapes.py) and must broadcast to its
input's shape.
"""

from __future__ import annotations

from ...errors import SpecError
from ...expr.limits import Limits
from ...expr.parser import Expression, parse_expression
from ...expr.shapes import broadcast, infer_shapes
from .complex_values import single_value
from .record_values import numel, shape_of


def analytical_field(raw, inputs: dict, shapes: dict, limits: Limits) -> dict:
    """Each input's expectation: an expression parsed against the inputs, a callable, or a value whose shape
    fits the input; SpecError naming the field otherwise."""
    if raw is None:
        raise SpecError(
            "analytical_gradient is missing: write the expectation before running the check",
            field="analytical_gradient",
        )
    names = list(inputs)
    mapping = isinstance(raw, dict) and not single_value(raw, names)
    if mapping:
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise SpecError(
                "analytical_gradient names {unknown!r}, which is not an input",
                unknown=unknown[0],
                field=f"analytical_gradient.{unknown[0]}",
            )
        missing = [n for n in names if n not in raw]
        if missing:
            raise SpecError(
                "analytical_gradient gives no value for input {missing!r}",
                missing=missing[0],
                field="analytical_gradient",
            )
        per_input = raw
    elif len(names) == 1:
        per_input = {names[0]: raw}
    else:
        raise SpecError(
            "analytical_gradient must map each input to its gradient when there are several inputs",
            field="analytical_gradient",
        )
    result = {}
    for name, value in per_input.items():
        field_name = "analytical_gradient" if not mapping else f"analytical_gradient.{name}"
        if isinstance(value, str):
            result[name] = parse_expression(value, inputs, limits=limits, field_name=field_name)
        elif callable(value):
            result[name] = value  # a Python callable from the API, called with the inputs
        else:
            shape = shape_of(value, field_name, limits)
            if shape and shape != shapes[name] and numel(shape) != 1:
                raise SpecError(
                    "{field_name} has shape {shape} but input {name!r} has shape {input_shape}",
                    field_name=field_name,
                    shape=shape,
                    name=name,
                    input_shape=shapes[name],
                    field=field_name,
                )
            result[name] = value
    return result


def check_shapes(expression: Expression, analytical: dict, shapes: dict, limits: Limits):
    """The function's ShapeReport; SpecError when a shape cannot work (core.expr.shapes)."""
    report = infer_shapes(expression, shapes, limit=limits.max_intermediate_elements)
    for name, written in analytical.items():
        if isinstance(written, Expression):
            field_name = "analytical_gradient" if len(analytical) == 1 else f"analytical_gradient.{name}"
            produced = infer_shapes(written, shapes, field_name, limits.max_intermediate_elements).shape
            target = tuple(shapes[name])
            try:
                fits = broadcast(produced, target) == target
            except ValueError:
                fits = False
            if not fits:
                raise SpecError(
                    "{field_name} gives shape {produced}, which does not fit input {name!r} of shape {target}",
                    field_name=field_name,
                    produced=list(produced),
                    name=name,
                    target=list(target),
                    field=field_name,
                )
    return report
