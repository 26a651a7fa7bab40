"""Two equal evaluations of an output the element moves count in its rounding bound.

Equal values of f(x + h) and f(x - h) say only that the change of f over the step is below f's
rounding, not that the derivative is 0. With a bound of 0 for such an element, a correct function
whose output is large beside its slope would be failed and its backward blamed.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.record.spec import RULES
from support.checks import check_against_autograd, fd_comparison


def _offset_line(x):
    """A slope of 1e-7 beside 1e5: over the default step (6e-6) f moves by 1.2e-12, below 1e5's last
    bit (1.5e-11), so both shifted evaluations round to the same number."""
    return x * 1e-7 + 1e5


class _OffsetLineWrongBackward(torch.autograd.Function):
    """The same forward with a backward of 1e-3 instead of 1e-7."""

    @staticmethod
    def forward(ctx, x):
        return x * 1e-7 + 1e5

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 1e-3


def test_a_change_below_the_outputs_rounding_is_within_the_bound_not_blamed_on_the_backward():
    """Given x * 1e-7 + 1e5 at 0.3 in float64 with its correct gradient 1e-7 as the expectation,
    when it is checked at the default settings,
    then the finite difference is 0 (the two evaluations are equal) and the check passes: the
    element's rounding bound counts them, 4 eps (|f+| + |f-|) / width = 4 * 2.2e-16 * 2e5 / 1.2e-5,
    about 1.5e-5, which the error of 1e-7 is inside."""
    record = run_check({"function": _offset_line, "inputs": {"x": 0.3}, "analytical_gradient": 1e-7}, sweep=False)
    row = fd_comparison(record)
    assert record["observations"]["finite_difference"]["gradients"]["x"]["value"] == 0.0
    assert record["passed"] is True and row["passed"] is True
    # 1.47e-5 from the formula above; the bounds leave room for the exact width of the step taken
    assert 1.4e-5 < row["error_bound"]["at_worst"] < 1.6e-5


def test_an_elementwise_chain_counts_each_elements_own_equal_evaluations():
    """Given the same line summed over two elements (the diagonal path: every element shifted at once),
    when it is checked with the correct gradient [1e-7, 1e-7],
    then it passes on that path, each element's bound counting its own equal evaluations."""
    record = run_check(
        {"function": lambda x: _offset_line(x).sum(), "inputs": {"x": [0.3, 0.5]}, "analytical_gradient": [1e-7, 1e-7]},
        sweep=False,
    )
    assert record["observations"]["finite_difference"]["inputs"]["x"]["structure"] == "elementwise then sum"
    assert record["passed"] is True
    # the same 1.47e-5 per element as for one element: each body value is about 1e5
    assert 1.4e-5 < fd_comparison(record)["error_bound"]["max"] < 1.6e-5


def test_a_backward_wrong_by_more_than_the_bound_is_still_caught():
    """Given the same forward in a custom Function whose backward returns 1e-3 (the slope is 1e-7),
    when it is checked with its own backward as the expectation,
    then the check fails at the finite-difference comparison, diagnosed a probable bug: 1e-3 is far
    outside the bound of 1.5e-5 that the equal evaluations allow."""
    record = run_check(
        {"function": _OffsetLineWrongBackward.apply, "inputs": {"x": 0.3}, "analytical_gradient": 1e-3}, sweep=False
    )
    assert record["passed"] is False
    assert record["failure"]["comparison"] == "autograd_vs_finite_difference"
    assert record["failure"]["diagnosis"] == "probable_bug"


def test_an_output_rounded_to_a_narrower_dtype_counts_its_equal_evaluations_0():
    """Given a float64 input whose output is rounded to bfloat16 (a cast inside the function),
    when it is checked,
    then the finite-difference comparison has a bound of 0: bfloat16's rounding at a float64 step would
    allow about 10^4, more than any derivative it could check, so its equal evaluations count 0."""

    def cast(x):
        return (x.to(torch.bfloat16) * 3).sum()

    declared = {"function": cast, "inputs": {"x": [0.3, 0.7]}, "analytical_gradient": [3.0, 3.0]}
    current = run_check(declared, sweep=False)
    assert current["rules"] == RULES
    assert fd_comparison(current)["error_bound"]["max"] == 0.0


def test_several_outputs_count_a_row_that_came_out_all_equal():
    """Given a function of two elements with two outputs, x0 * 1e-7 + 1e5 and 2 x1 (the general path),
    when it is checked,
    then it passes: x0 moves no output by more than its rounding, so its row of evaluations is all
    equal and all of it counts (about 1.5e-5, from the first output's 1e5); x1's row, where the second
    output moved, counts the outputs that differ."""

    def two(x):
        return torch.stack([x[0] * 1e-7 + 1e5, x[1] * 2.0])

    declared = {"function": two, "inputs": {"x": [0.3, 0.5]}, "analytical_gradient": [1e-7, 2.0]}
    current = run_check(declared, sweep=False)
    assert current["observations"]["finite_difference"]["inputs"]["x"]["structure"] == "general"
    assert current["passed"] is True
    # 1.47e-5 from 4 eps (1e5 + 1e5 + 2 * 2 * 0.3) / 1.2e-5; the first output's 1e5 is all of it
    assert 1.4e-5 < fd_comparison(current)["error_bound"]["at_worst"] < 1.6e-5


def test_the_coloured_path_counts_the_rows_its_pattern_gives_an_element():
    """Given a banded loss over 300 elements, sum(x[1:] * x[:-1] * 1e-7 + 1e5), whose every body row is
    about 1e5 and moves by less than its last bit over the step (the coloured path),
    when it is checked with autograd's gradient as the expectation,
    then it passes, each element's bound counting the two rows its learned pattern gives it."""
    x = torch.linspace(-1.0, 1.0, 300, dtype=torch.float64)

    def banded(x):
        return (x[1:] * x[:-1] * 1e-7 + 1e5).sum()

    current = check_against_autograd(banded, {"x": x}, sweep=False)
    assert current["observations"]["finite_difference"]["inputs"]["x"]["structure"] == "coloured"
    assert current["passed"] is True
    # two rows of about 1e5 each: 2 x 1.47e-5 for an inner element
    assert 2.8e-5 < fd_comparison(current)["error_bound"]["max"] < 3.1e-5
