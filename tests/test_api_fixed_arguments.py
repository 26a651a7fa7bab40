"""Arguments a function is given but not differentiated (ints, bools, tuples, None, tensors that
do not require grad) are held fixed with `fixed=`, passed as the objects themselves, and recorded."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check, check_record
from jupyterlab_gradcheck.core.errors import SpecError

X = torch.linspace(0.5, 1.5, 6, dtype=torch.float64)
W = torch.linspace(1.0, 2.0, 6, dtype=torch.float64)


class Power(torch.autograd.Function):
    """sum((x viewed as `shape`)^k), doubled when `double`; the backward returns None for the held arguments."""

    @staticmethod
    def forward(ctx, x, k, double, shape):
        assert isinstance(k, int) and isinstance(double, bool) and isinstance(shape, tuple)
        ctx.save_for_backward(x)
        ctx.k, ctx.scale = k, 2.0 if double else 1.0
        return (x.reshape(shape) ** k).sum() * ctx.scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.scale * ctx.k * x ** (ctx.k - 1), None, None, None


def test_a_function_with_held_arguments_is_checked_on_its_tensor_input_alone():
    """Given Power.forward(ctx, x, k, double, shape) with k=3, double=True and shape=(2, 3),
    when it is checked with no grad= (its backward is the expectation) and those held fixed,
    then forward received an int, a bool and a tuple (not tensors), only x's gradient was
    compared, it passes, and the record keeps the held values as JSON."""
    result = check(Power, x=X, fixed={"k": 3, "double": True, "shape": (2, 3)}, ledger=False)
    assert result.passed
    assert result.record["fixed"] == {"k": 3, "double": True, "shape": [2, 3]}
    assert {row["input"] for row in result.record["comparisons"]} == {"x"}
    fd = result.record["observations"]["finite_difference"]["gradients"]["x"]["value"]
    # 6 x^2 at X: central differences of x^3 err by ~h^2 ~ 4e-11
    assert fd == pytest.approx((6 * X**2).tolist(), abs=1e-8)


def test_a_tensor_that_does_not_require_grad_is_held_and_the_id_follows_the_held_values():
    """Given (x * w)^2 summed, with w a tensor held fixed and a hand derivation for x,
    when it is checked with w and then with 2w,
    then both pass, the record keeps w as a list, and the two checks have different ids (a
    check evaluated with other held values is another check)."""
    first = check(lambda x, w: ((x * w) ** 2).sum(), grad=lambda x: 2 * x * W**2, x=X, fixed={"w": W}, ledger=False)
    second = check(
        lambda x, w: ((x * w) ** 2).sum(), grad=lambda x: 8 * x * W**2, x=X, fixed={"w": 2 * W}, ledger=False
    )
    assert first.passed and second.passed
    assert first.record["fixed"] == {"w": W.tolist()}
    assert first.record["id"] != second.record["id"]


def test_held_arguments_that_cannot_be_held_are_refused_in_one_line():
    """Given a held name that is also an input, a held object with no JSON form, and a held
    argument for an expression,
    when each is checked, each is refused naming the problem, before anything runs."""
    calls = []

    def counted(x, k):
        calls.append(k)
        return (x * k).sum()

    with pytest.raises(SpecError, match="^'x' is both an input and a fixed argument"):
        check(counted, grad=1, x=X, fixed={"x": 1}, ledger=False)
    with pytest.raises(SpecError, match="^fixed.k must be a number, true/false, null, a string or a nested list"):
        check(counted, grad=1, x=X, fixed={"k": object()}, ledger=False)
    with pytest.raises(SpecError, match="^fixed holds the held arguments of a Python callable"):
        check_record({"function": "x*x", "x": 3, "analytical_gradient": 6, "fixed": {"k": 2}}, ledger=False)
    assert calls == []


def test_a_record_without_held_arguments_keeps_its_id_and_form():
    """Given the seed record, when it is checked, its record has no `fixed` field and the id it
    always had (held arguments enter the id only when there are some)."""
    result = check_record({"function": "x*x", "x": 3, "analytical_gradient": 6}, ledger=False)
    assert "fixed" not in result.record
    assert result.record["id"] == "x*x@47438dd7"  # sha256 of {function, inputs, dtype, device}, as before `fixed`
