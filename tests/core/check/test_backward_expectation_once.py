"""A custom Function's backward as the expectation of several inputs: one fresh forward and backward
gives every input its part, instead of one each; a new point, or the same tensors changed in place, runs again."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.autograd.observations import backward_expectation


class Product3(torch.autograd.Function):
    """a * b * c summed, with a hand-written backward, counting its forwards and backwards."""

    forwards = 0
    backwards = 0

    @staticmethod
    def forward(ctx, a, b, c):
        Product3.forwards += 1
        ctx.save_for_backward(a, b, c)
        return (a * b * c).sum()

    @staticmethod
    def backward(ctx, grad):
        Product3.backwards += 1
        a, b, c = ctx.saved_tensors
        return grad * b * c, grad * a * c, grad * a * b


def _point(seed: float) -> dict:
    return {name: torch.linspace(seed, seed + 1.0, 3, dtype=torch.float64) * (k + 1) for k, name in enumerate("abc")}


def test_three_inputs_take_their_expectations_from_one_backward():
    """Given the expectation of a three-input Function's backward, when each input's expectation is asked
    at one point, then the Function ran forward and backward once, and each part is that input's gradient."""
    expected = backward_expectation(Product3.apply, ["a", "b", "c"], [Product3])
    values = _point(0.5)
    Product3.forwards = Product3.backwards = 0
    parts = {name: expected[name](**values) for name in "abc"}
    assert (Product3.forwards, Product3.backwards) == (1, 1)
    a, b, c = values["a"], values["b"], values["c"]
    # exact: the same products in the same order as the backward computes them
    assert torch.equal(parts["a"], b * c) and torch.equal(parts["b"], a * c) and torch.equal(parts["c"], a * b)


def test_a_new_point_or_a_tensor_changed_in_place_is_computed_again():
    """Given the expectation asked at one point, when it is asked at a new point, and then after one of
    that point's tensors is changed in place, then each time it runs the backward again and the parts
    are the gradients at the point as it now is."""
    expected = backward_expectation(Product3.apply, ["a", "b", "c"], [Product3])
    first, second = _point(0.5), _point(2.0)
    expected["a"](**first)
    Product3.forwards = 0
    assert torch.equal(expected["a"](**second), second["b"] * second["c"])
    assert Product3.forwards == 1
    second["b"].mul_(3.0)
    assert torch.equal(expected["a"](**second), second["b"] * second["c"])
    assert Product3.forwards == 2


def test_a_check_of_three_inputs_still_passes_and_fails_where_it_should():
    """Given the three-input Function checked with no grad=, then it passes; and given a copy whose
    backward is wrong for c at one element, then the failure names input c at that element."""

    class Wrong(Product3):
        @staticmethod
        def backward(ctx, grad):
            ga, gb, gc = Product3.backward(ctx, grad)
            gc = gc.clone()
            gc[1] += 0.5
            return ga, gb, gc

    values = _point(0.5)
    assert check(Product3.apply, ledger=False, **values).record["passed"] is True
    failure = check(Wrong.apply, ledger=False, **values).record["failure"]
    assert failure["input"] == "c" and failure["index"] == [1]
