"""The core's several-output check read from a record: the per-output expectation and grad_output
as a record holds them, and the refusals that come before anything runs."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError


def sin_and_square(x):
    return torch.sin(x), x**2


def test_a_record_with_values_per_output_is_checked_output_by_output():
    """Given a record of a callable returning (sin x, x^2) with each output's expectation written as
    values and grad_output [null, 3] (ones for output 0, 3 for output 1),
    when it runs, then each output is compared with its own values and passes, output 1's
    grad_output_used is 3 everywhere, and each row names its output."""
    x = [0.0, 1.0]
    record = run_check(
        {
            "function": sin_and_square,
            "inputs": {"x": x},
            "analytical_gradient": {"outputs": [[1.0, 0.5403023058681398], [0.0, 6.0]]},
            "grad_output": [None, 3.0],
        },
        sweep=False,
    )
    assert record["passed"], record["failure"]
    assert record["outputs"][1]["grad_output_used"]["value"] == [3.0, 3.0]
    assert [row["output"] for row in record["comparisons"]] == [0] * 5 + [1] * 5
    # cos(1) written to 16 digits: the analytical comparison's error is rounding alone
    assert record["comparisons"][0]["max_abs_err"] < 1e-15


def test_the_per_output_form_is_refused_for_an_expression():
    """Given an expression with analytical_gradient {"outputs": [...]}, it is refused: an expression
    has one output."""
    with pytest.raises(SpecError, match="an expression has one output") as refused:
        parse_spec({"function": "x*x", "x": 1.0, "analytical_gradient": {"outputs": ["2*x"]}})
    assert refused.value.field == "analytical_gradient.outputs"


def test_an_input_named_outputs_keeps_the_mapping_reading():
    """Given an input named `outputs`, {"outputs": ...} is its expectation, not the per-output form."""
    spec = parse_spec({"function": "outputs*outputs", "outputs": 2.0, "analytical_gradient": {"outputs": "2*outputs"}})
    assert spec.outputs_analytical is None and list(spec.analytical) == ["outputs"]


def test_the_per_output_form_for_a_one_output_function_is_refused_before_it_runs():
    """Given a callable returning one tensor with an expectation per output, the check is refused
    saying to write it as for one output."""
    with pytest.raises(SpecError, match="the function returns one tensor: write its expectation as for one output"):
        run_check({"function": lambda x: x**2, "inputs": {"x": [1.0]}, "analytical_gradient": {"outputs": [2.0]}})


def test_a_tuple_function_with_one_plain_expectation_is_refused():
    """Given the two-output callable with a plain expectation, the check is refused saying how to
    write one expectation per output."""
    with pytest.raises(SpecError, match=r'function returns 2 outputs: write analytical_gradient as \{"outputs"'):
        run_check({"function": sin_and_square, "inputs": {"x": [1.0]}, "analytical_gradient": 1.0})


def test_a_ragged_grad_output_is_a_list_per_output_for_a_callable_only():
    """Given a grad_output of entries of different shapes, a callable's record accepts it (one entry
    per output), an expression's refuses it as a value of no shape."""
    spec = parse_spec(
        {
            "function": sin_and_square,
            "inputs": {"x": [1.0, 2.0]},
            "analytical_gradient": {"outputs": [None, None]},
            "grad_output": [[1.0, 2.0], 3.0],
        }
    )
    assert spec.grad_output == [[1.0, 2.0], 3.0]
    with pytest.raises(SpecError):
        parse_spec({"function": "x*x", "x": [1.0, 2.0], "analytical_gradient": "2*x", "grad_output": [[1.0, 2.0], 3.0]})
