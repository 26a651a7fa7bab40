"""The record fields of a check of a function with several outputs, parsed without torch.

A Python function may return a tuple or list of tensors (core/check/autograd/several_outputs.py checks it output
by output). Its expectation is then written per output, `analytical_gradient = {"outputs": [e_0,
e_1, ...]}`, each e_k what a one-output check accepts (None for an output that is not
differentiated), and its grad_output may be a list with one entry per output. How many outputs
there are is known only once the function runs; here each entry is checked as written.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import SpecError
from ...expr.limits import Limits
from .record_values import shape_of


def is_per_output(raw, names: list) -> bool:
    """Whether an analytical_gradient is the per-output form `{"outputs": [...]}` (an input named
    `outputs` keeps the mapping's reading)."""
    return isinstance(raw, dict) and set(raw) == {"outputs"} and "outputs" not in names


def per_output(raw, names: list, is_callable: bool, limits: Limits, parse_one: Callable) -> list | None:
    """Each output's expectation parsed by `parse_one` (None stays None), or None when `raw` is not the
    per-output form; SpecError for the form where it cannot apply or an entry that cannot be read."""
    if not is_per_output(raw, names):
        return None
    if not is_callable:
        raise SpecError(
            "analytical_gradient.outputs is for a Python function that returns several outputs; an "
            "expression has one output",
            field="analytical_gradient.outputs",
        )
    entries = raw["outputs"]
    if not isinstance(entries, (list, tuple)) or not entries:
        raise SpecError(
            "analytical_gradient.outputs must be a list with one expectation per output",
            field="analytical_gradient.outputs",
        )
    if len(entries) > limits.max_inputs:
        raise SpecError(
            "analytical_gradient.outputs has more than {max_inputs} entries",
            max_inputs=limits.max_inputs,
            field="analytical_gradient.outputs",
        )
    return [None if entry is None else parse_one(entry) for entry in entries]


def grad_output_shape(grad_output, limits: Limits, is_callable: bool) -> list[int] | None:
    """The shape of a grad_output value; for a callable, a list that is no one value (a ragged list,
    or one holding None) is one grad_output per output, each checked here: its shape is then None."""
    try:
        return shape_of(grad_output, "grad_output", limits)
    except SpecError:
        if not is_callable or not isinstance(grad_output, list):
            raise
    for index, entry in enumerate(grad_output):
        if entry is not None:
            shape_of(entry, f"grad_output[{index}]", limits)
    return None
