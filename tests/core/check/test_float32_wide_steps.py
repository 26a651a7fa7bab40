"""float32: an element that passes only inside its rounding bound is judged again at wider steps, and a
finite difference whose evaluations cancel is told apart from a wrong backward by differencing in float64.

phi = sum(sin(x)) + 80 in float32: its rounding bound at the default step h ~ 4.9e-3 is about
4 eps 2 |phi| / 2h ~ 7.8e-3, wider than 1 % of a gradient of ~0.6, so without the wider steps a backward
wrong by x1.01 at one element passes inside it (docs/tolerances.md).
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from support.checks import fd_comparison

POINTS = [0.2, 0.35, 0.5, 0.65, 0.8, 0.95, 1.1, 1.25]
WRONG_AT = 3


class _Sin(torch.autograd.Function):
    """sin, whose backward is x `scale` at element WRONG_AT."""

    scale = 1.0

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        ctx.scale = cls.scale
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        grad = (g * x.cos()).clone()
        grad[WRONG_AT] = grad[WRONG_AT] * ctx.scale
        return grad


class _WrongSin(_Sin):
    scale = 1.01


def _offset_sum(kind):
    return lambda x: kind.apply(x).cumsum(0)[-1] + 80.0  # a cumulative sum: the general path, not a diagonal chain


def _cancelling(scale: float):
    """(x + 1e4) - 1e4, weighted: its float32 evaluations round by eps 1e4 ~ 1e-3, far above eps |f| ~ 1e-7."""

    class Shifted(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x + 1e4) - 1e4

        @staticmethod
        def backward(ctx, g):
            grad = g.clone()
            grad[WRONG_AT] = grad[WRONG_AT] * scale
            return grad

    return lambda x: (Shifted.apply(x) * torch.linspace(0.5, 1.5, len(POINTS), dtype=x.dtype)).sum()


def _checked(function, gradient) -> dict:
    record = {"function": function, "inputs": {"x": POINTS}, "dtype": "float32", "analytical_gradient": gradient}
    return run_check(record, sweep=False)


def _expected(function) -> list:
    x = torch.tensor(POINTS, dtype=torch.float32, requires_grad=True)
    (grad,) = torch.autograd.grad(function(x), x)
    return grad.tolist()


def test_a_backward_wrong_by_one_percent_at_one_element_is_caught_at_wider_steps():
    """Given sum(sin(x)) + 80 in float32 whose backward is x1.01 at one element (an error of ~6e-3, inside the
    default rounding bound ~7.8e-3), when it is checked with autograd's own gradient as the expectation, then the
    finite differences fail at that element: at the wider steps the bound falls below the error."""
    function = _offset_sum(_WrongSin)
    record = _checked(function, _expected(function))
    assert record["passed"] is False
    fd = fd_comparison(record)
    assert fd["passed"] is False
    assert fd["worst"]["flat_index"] == WRONG_AT
    wide = record["observations"]["finite_difference"]["refinement"]["x"]
    wide = wide.get("wide_steps", wide)
    assert wide["still_failing"] == 1 and wide["flat_indices"] == [WRONG_AT]
    assert record["failure"]["diagnosis"] == "probable_bug"


def test_the_correct_function_still_passes():
    """Given the same function with a correct backward, when it is checked, then it passes: the wider steps'
    estimates agree with autograd within their own error estimates."""
    function = _offset_sum(_Sin)
    record = _checked(function, _expected(function))
    assert record["passed"] is True, record["failure"]


def test_a_correct_function_whose_float32_evaluations_cancel_is_precision_limited():
    """Given sum(w ((x + 1e4) - 1e4)) in float32 with a correct backward (gradient w), whose float32 differences
    are off by ~0.1 while their bound from |f| allows ~1e-4, when it is checked, then it fails as
    precision_limited, not probable_bug: the same differences in float64 give w."""
    function = _cancelling(1.0)
    record = _checked(function, _expected(function))
    assert record["passed"] is False
    assert record["failure"]["diagnosis"] == "precision_limited", record["failure"]["reason"]
    assert "float64" in str(record["failure"]["reason"])


def test_a_wrong_backward_among_cancelling_evaluations_is_still_a_probable_bug():
    """Given the same cancelling function whose backward is x1.01 at one element (an error of ~0.009 against a
    float32 tolerance of ~2.6e-3), when it is checked, then it is a probable_bug: in float64 that element's
    derivative disagrees with autograd, whichever element the float32 differences got worst."""
    function = _cancelling(1.01)
    record = _checked(function, _expected(function))
    assert record["passed"] is False
    assert record["failure"]["diagnosis"] == "probable_bug", record["failure"]["reason"]
