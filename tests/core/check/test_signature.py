"""A Python callable that cannot take the check's inputs is bad input: one line naming the
parameters and the inputs, nothing executed, nothing appended to the ledger."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.autograd.observations import check_signature
from jupyterlab_gradcheck.core.check.engine import check_callable
from jupyterlab_gradcheck.core.errors import SpecError


class Weighted(torch.autograd.Function):
    """x^3 * w summed, with a hand-written backward for x (w held)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (x**3 * w).sum()

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * 3 * x**2 * w, None


def test_a_parameter_named_otherwise_is_refused_naming_both_before_any_call():
    """Given a lambda of `a` and an input named x,
    when the check runs,
    then a one-line SpecError on the function field names the parameter and the input,
    and the lambda was never called."""
    calls = []

    def cube(a):
        calls.append(a)
        return (a**3).sum()

    with pytest.raises(SpecError) as caught:
        check_callable(cube, {"x": [1.0]}, grad=[3.0])
    assert str(caught.value) == (
        "function test_a_parameter_named_otherwise_is_refused_naming_both_before_any_call."
        "<locals>.cube takes (a) but the inputs are named x: name each input as the "
        "parameter it is passed to"
    )
    assert caught.value.field == "function" and "\n" not in str(caught.value)
    assert calls == []


def test_a_missing_parameter_through_the_api_appends_nothing_to_the_ledger(tmp_path):
    """Given a notebook's ledger holding one passing check,
    when check() is called with a function of (x, y) but only x as input,
    then it raises SpecError naming (x, y) and x, and the ledger's bytes are unchanged
    (no expectation, no failed run)."""
    notebook = tmp_path / "lab.ipynb"
    assert check(lambda x: (x**3).sum(), grad=[3.0], x=[1.0], notebook=notebook).passed
    ledger = tmp_path / "lab.gradcheck.jsonl"
    before = ledger.read_bytes()
    with pytest.raises(SpecError, match=r"takes \(x, y\) but the inputs are named x"):
        check(lambda x, y: (x * y).sum(), grad=[3.0], x=[1.0], notebook=notebook)
    assert ledger.read_bytes() == before


def test_a_function_forward_with_more_inputs_than_given_is_refused_by_count():
    """Given a custom Function whose forward takes (x, w) after ctx,
    when it is checked with x alone, it is refused naming the count and both lists;
    when it is checked with x and w, the same Function passes."""
    with pytest.raises(SpecError) as caught:
        check(Weighted, grad=[3.0], x=[1.0], ledger=False)
    assert str(caught.value) == "Weighted.forward takes 2 input(s) after ctx (x, w) but 1 were given (x)"
    result = check(Weighted, grad={"x": [6.0], "w": [1.0]}, x=[1.0], w=[2.0], ledger=False)
    # x: 3 x^2 w = 6 at x=1, w=2; w's gradient is x^3 = 1 but the backward returns None for w
    assert result.record["comparisons"] and result.failure["input"] == "w"


def test_keywords_collected_by_kwargs_and_unreadable_signatures_are_let_through():
    """Given a function taking **others and a builtin whose signature Python cannot read,
    when their signatures are checked against the inputs, neither is refused."""
    check_signature(lambda x, **others: x.sum(), ["x", "w"])
    check_signature(torch.sum, ["input"])


def test_the_refusal_reads_in_spanish():
    """Given the Spanish catalog,
    when the refusal is shown in Spanish, it names the same parameter and input."""
    with pytest.raises(SpecError) as caught:
        check_signature(lambda a: a, ["x"])
    assert caught.value.localized("es") == (
        "la función test_the_refusal_reads_in_spanish.<locals>.<lambda> recibe (a) pero las entradas se llaman x: nombre "
        "cada entrada como el parámetro al que se pasa"
    )


def test_a_new_style_functions_apply_is_taken_as_is_and_its_forward_counted_without_ctx():
    """Given a new-style Function (forward(x) with a setup_context, no ctx in forward),
    when its `apply` is checked directly with one input x,
    then it is accepted and passes against its own backward (3 x^2 at x = [1, 2] is [3, 12]),
    and with two inputs it is refused in one line that counts forward's one input, not zero."""
    from tests.support.functions import CubeWithJvp

    result = check(lambda x: CubeWithJvp.apply(x).sum(), x=[1.0, 2.0], ledger=False)
    direct = check(CubeWithJvp.apply, grad=[3.0, 12.0], x=[1.0, 2.0], ledger=False)
    assert result.passed and direct.passed
    assert direct.record["observations"]["autograd_grad"]["gradients"]["x"]["value"] == [3.0, 12.0]
    with pytest.raises(SpecError) as caught:
        check_signature(CubeWithJvp.apply, ["x", "y"])
    assert str(caught.value) == "CubeWithJvp.forward takes 1 input(s) (x) but 2 were given (x, y)"
