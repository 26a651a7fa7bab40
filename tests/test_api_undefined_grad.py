"""Undefined output gradients, as torch.autograd.gradcheck(check_undefined_grad=True) checks them:
a custom Function's backward called with its output gradients undefined must not crash and must
give None or zeros, and a check says plainly when it does not."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.report.html_export import record_html
from support.functions import Cube

X = torch.tensor([0.1, 0.5, 1.0], dtype=torch.float64)


class TwiceAndSame(torch.autograd.Function):
    """(2x, x) with materialize_grads off and a backward that adds the two grads as if both were tensors."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 1.0

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        return grad_a * 2 + grad_b  # crashes when either is None


class TwiceAndSameGuarded(TwiceAndSame):
    """The same with a backward that treats an undefined gradient as no contribution."""

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        parts = [g for g in (None if grad_a is None else grad_a * 2, grad_b) if g is not None]
        return sum(parts) if parts else None


class OnesWhenUndefined(torch.autograd.Function):
    """2x whose backward, given no gradient (materialize_grads off), invents ones instead of None."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.ones_like(x) if grad is None else grad * 2


def test_a_backward_that_crashes_on_an_undefined_gradient_fails_saying_so():
    """Given a two-output Function whose backward does grad_a * 2 + grad_b with materialize_grads off,
    when it is checked with no grad=,
    then each output's own gradient is right (the others get zeros), but the undefined-gradient
    cases crash, and the check fails with a reason that says the backward crashed on an undefined
    gradient, naming PyTorch's error."""
    result = check(TwiceAndSame, x=X, ledger=False)
    undefined = result.record["function_modes"]["undefined_grad"]
    assert all(row["passed"] for row in result.record["comparisons"])
    assert not result.passed
    assert [(case["undefined"], case["status"]) for case in undefined["cases"]] == [
        ("all", "crashed"),
        (0, "crashed"),
        (1, "crashed"),
    ]
    failure = result.failure
    assert failure["comparison"] == "undefined_grad" and failure["diagnosis"] == "probable_bug"
    assert failure["reason"].startswith("the backward crashed with every output's gradient undefined (None): TypeError")
    assert (
        "output 1 was undefined (None) and the others zero: TypeError: unsupported operand type(s) for +"
        in result.record["failures"][2]["reason"]
    )
    assert result.summary().endswith(str(failure["reason"]))
    assert "Undefined gradients" in record_html(result.record)


def test_a_backward_that_handles_undefined_gradients_passes():
    """Given the same Function with a backward that skips an undefined gradient,
    when it is checked, every undefined-gradient case returns (None or exact zeros, compared with
    zero at tolerance 0) and the check passes."""
    result = check(TwiceAndSameGuarded, x=X, ledger=False)
    undefined = result.record["function_modes"]["undefined_grad"]
    assert result.passed, result.summary()
    assert [case["status"] for case in undefined["cases"]] == ["returned"] * 3
    assert undefined["failures"] == []
    assert all(row["passed"] and row["max_abs_err"] == 0.0 for row in undefined["comparisons"])


def test_a_backward_that_invents_a_gradient_for_an_undefined_one_fails():
    """Given a one-output Function whose backward returns ones when its gradient is undefined,
    when it is checked, the first order passes (its gradient is always defined there), and the
    undefined-gradient case fails: the gradient returned is 1, not zero."""
    result = check(OnesWhenUndefined, x=X, ledger=False)
    assert all(row["passed"] for row in result.record["comparisons"])
    assert not result.passed
    failure = result.failure
    assert failure["comparison"] == "undefined_grad_vs_zero" and failure["right"] == 1.0
    assert "must return None or zeros when its grad_output is undefined" in failure["reason"]


def test_a_one_output_function_with_the_default_materialized_grads_passes():
    """Given Cube (materialize_grads on: an undefined gradient reaches backward as zeros),
    when it is checked, the one undefined-gradient case returns zeros and the check passes."""
    result = check(lambda x: Cube.apply(x).sum(), x=X, ledger=False)
    [case] = result.record["function_modes"]["undefined_grad"]["cases"]
    assert result.passed and case["status"] == "returned"
    assert case["gradients"]["x"]["value"] == [0.0, 0.0, 0.0]


def test_a_function_of_two_inputs_is_observed_in_every_mode_that_applies():
    """Given a Function of two inputs with no jvp, when it is checked, undefined gradients and batched
    gradients (one comparison per input) are observed, and forward mode is recorded as skipped with
    PyTorch's reason."""
    result = check(lambda x, y: Cube.apply(x * y).sum(), x=X, y=X, ledger=False)
    modes = result.record["function_modes"]
    assert result.passed
    assert modes["undefined_grad"]["status"] == "observed"
    assert [(row["input"], row["passed"]) for row in modes["batched_grad"]["comparisons"]] == [("x", True), ("y", True)]
    assert modes["forward_ad"]["status"] == "skipped"
    assert modes["forward_ad"]["reason"].startswith(
        "forward-mode AD does not apply: NotImplementedError: You must implement the jvp function"
    )
