"""Honest modes of a check through custom Functions: a custom op without forward mode is skipped and checked like
torch.library.opcheck, a jvp that changes a view's tangent in place is still caught, a needs_input_grad slip is a
finding, and a seeded random grad_output catches what all ones hides, naming the element."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from support.functions import NewStyleCube, NewStyleDouble

X = torch.linspace(0.5, 1.5, 5, dtype=torch.float64)


@torch.library.custom_op("gradcheck_tests::sine", mutates_args=())
def sine(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


def _save_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _sine_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.cos()


sine.register_autograd(_sine_backward, setup_context=_save_input)


class Third(torch.autograd.Function):
    """x[2], a view of the input, with a jvp that returns the view of the tangent scaled in place (a wrong jvp that
    also changes the tangent it was handed)."""

    @staticmethod
    def forward(x):
        return x[2]

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, grad):
        found = grad.new_zeros(ctx.shape)
        found[2] = grad
        return found

    @staticmethod
    def jvp(ctx, tangent):
        return tangent[2].mul_(1.01)


class Scaled(torch.autograd.Function):
    """x * w; the backward returns x's gradient only when `needs_input_grad[1]` (an index slip for [0])."""

    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return (grad * w if ctx.needs_input_grad[1] else None), (grad * x if ctx.needs_input_grad[1] else None)


class Rolled(NewStyleDouble):
    """2x, elementwise, whose backward rolls the gradient by one element: under all ones it is right."""

    @staticmethod
    def backward(ctx, grad):
        return torch.roll(2 * grad, 1)


class Forgetful(NewStyleCube):
    """x^3 whose backward returns 3x^2 without multiplying by its grad_output."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x**2 + 0 * grad


class Twice(Rolled):
    """2x, whose backward has the right value and a wrong derivative in its grad_output: g + (g*g - (g*g).detach())/2
    (zero Hessian either way: only the double backward in grad_output shows it)."""

    @staticmethod
    def backward(ctx, grad):
        g = 2 * grad
        return g + (g * g - (g * g).detach()) / 2


def test_a_custom_op_without_forward_mode_is_skipped_and_passes_opcheck():
    """Given a torch.library.custom_op with a right register_autograd and no forward-mode formula,
    when it is checked,
    then forward mode is skipped (no tangent: no forward-mode formula), not failed as "suspect the jvp"; opcheck's
    test_schema and test_autograd_registration are recorded as SUCCESS; and the check passes."""
    result = check(lambda x: sine(x).sum(), x=X, ledger=False)
    modes = result.record["function_modes"]
    assert modes["forward_ad"]["status"] == "skipped"
    assert "no forward-mode formula" in modes["forward_ad"]["reason"]
    assert modes["custom_op"]["ops"]["gradcheck_tests.sine.default"] == {
        "test_schema": "SUCCESS",
        "test_autograd_registration": "SUCCESS",
    }
    assert result.passed and result.record["failure"] is None


def test_a_wrong_jvp_that_scales_a_views_tangent_in_place_is_caught():
    """Given a Function returning x[2] whose jvp scales the view of the input's tangent by 1.01 in place,
    when it is checked,
    then the finite differences along u read u as drawn (not as the jvp left it), and forward mode fails at the
    1 % error: 0.01 * u[2], far above the differences' error."""
    result = check(lambda x: Third.apply(x), x=X, ledger=False)
    rows = {r["name"]: r for r in result.record["function_modes"]["forward_ad"]["comparisons"]}
    assert not rows["forward_ad_vs_finite_difference"]["passed"]
    worst = rows["forward_ad_vs_finite_difference"]["worst"]
    assert abs(worst["right"] / worst["left"] - 1.01) < 1e-6  # the jvp's 1.01 against the differences' exact slope
    assert not result.passed


def test_a_needs_input_grad_slip_with_an_input_held_fixed_is_a_finding_naming_the_element():
    """Given x * w whose backward tests needs_input_grad[1] for x's gradient, with w held in fixed=,
    when it is checked,
    then the check does not crash: it fails on autograd against finite differences at x's first element,
    where autograd gives 0 and the differences give w."""
    w = torch.full((5,), 3.0, dtype=torch.float64)
    result = check(lambda x, w: Scaled.apply(x, w).sum(), x=X, fixed={"w": w}, ledger=False)
    failure = result.record["failure"]
    assert not result.passed
    assert failure["comparison"] == "autograd_vs_finite_difference" and failure["input"] == "x"
    assert failure["index"] is not None and failure["right"] == 0.0
    assert abs(failure["left"] - 3.0) < 1e-6  # a central difference of a linear function: exact to rounding


def test_a_rolled_backward_is_caught_under_the_random_grad_output_with_its_element():
    """Given 2x whose backward rolls its gradient by one element (right under an all-ones grad_output),
    when it is checked,
    then the first-order comparisons pass, and the random grad_output's comparison (seed recorded) fails at an
    element, naming it, diagnosed probable_bug."""
    result = check(lambda x: Rolled.apply(x), x=X, ledger=False)
    block = result.record["random_grad_output"]
    assert all(r["passed"] for r in result.record["comparisons"])
    assert block["seed"] == 29 and len(block["grad_output"]["sha256"]) == 64
    failure = result.record["failure"]
    assert failure["comparison"] == "random_grad_output_vs_finite_difference"
    assert failure["input"] == "x" and failure["index"] is not None
    assert failure["diagnosis"] == "probable_bug"


def test_a_forgotten_grad_output_is_reported_against_finite_differences_first():
    """Given x^3 whose backward ignores its grad_output,
    when it is checked,
    then the record's first failure compares autograd with finite differences (under the random grad_output),
    naming an element, not undefined_grad_vs_zero."""
    result = check(lambda x: Forgetful.apply(x), x=X, ledger=False)
    failure = result.record["failure"]
    assert failure["comparison"] == "random_grad_output_vs_finite_difference"
    assert failure["index"] is not None
    assert "undefined_grad_vs_zero" in {f["comparison"] for f in result.record["failures"][1:]}


def test_a_double_backward_wrong_in_grad_output_is_caught_with_its_element():
    """Given 2x whose backward's value is right but whose derivative in grad_output is wrong (its Hessian is zero
    either way), checked with the second order,
    when it runs,
    then the second order fails on the double backward in grad_output, naming an element of grad_output."""
    result = check(lambda x: Twice.apply(x), x=X, hessian="double_backward", ledger=False)
    failure = result.record["failure"]
    assert all(r["passed"] for r in result.record["comparisons"])
    assert failure["comparison"] == "double_backward_in_grad_output_vs_finite_difference"
    assert failure["input"] == "grad_output" and failure["index"] is not None
    assert result.record["second_order"]["grad_output"]["status"] == "observed"


class OnlyUnderOnes(NewStyleDouble):
    """2x whose backward refuses any grad_output that is not all ones (it was only ever run under them)."""

    @staticmethod
    def backward(ctx, grad):
        if not bool((grad == 1).all()):
            raise ValueError("expected a grad_output of ones")
        return 2 * grad


def test_a_backward_that_raises_under_the_random_grad_output_is_a_failure_not_a_crash():
    """Given 2x whose backward raises unless its grad_output is all ones,
    when it is checked,
    then the check does not crash: the first order passes, and the record fails on the random grad_output with the
    backward's own error in the reason."""
    result = check(lambda x: OnlyUnderOnes.apply(x), x=X, ledger=False)
    assert all(r["passed"] for r in result.record["comparisons"])
    assert result.record["random_grad_output"]["status"] == "failed"
    failure = result.record["failure"]
    assert failure["comparison"] == "random_grad_output_vs_finite_difference"
    assert "ValueError: expected a grad_output of ones" in failure["reason"]
