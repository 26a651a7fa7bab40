"""Forward mode and batched gradients of a custom Function of several inputs, as gradcheck checks them
(`check_forward_ad`, `check_batched_grad`): one direction per input, one batched comparison per input."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from support.functions import save_inputs_for_both_modes

X = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)
Y = torch.linspace(0.5, 2.0, 4, dtype=torch.float64)


class Product(torch.autograd.Function):
    """x * y with a backward and a jvp; `jvp_y_scale` plants a mistake in the jvp's y part only."""

    generate_vmap_rule = True
    jvp_y_scale = 1.0

    @staticmethod
    def forward(x, y):
        return x * y

    setup_context = staticmethod(save_inputs_for_both_modes)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y, grad * x

    @staticmethod
    def jvp(ctx, tangent_x, tangent_y):
        x, y = ctx.saved_tensors
        return tangent_x * y + Product.jvp_y_scale * x * tangent_y


def _rows(record: dict) -> dict:
    modes = record["function_modes"]
    return {
        (row["name"], row["input"]): row for key in ("forward_ad", "batched_grad") for row in modes[key]["comparisons"]
    }


def test_a_function_of_two_inputs_is_observed_in_forward_mode_and_batched_for_each_input():
    """Given Product of x and y with a right backward and jvp, when it is checked (its backward as the
    expectation), then forward mode along (u_x, u_y) agrees with central differences along it and with
    grad_x . u_x + grad_y . u_y, vmap over three grad_outputs equals them one at a time for x and for y,
    and the check passes."""
    result = check(lambda x, y: Product.apply(x, y).sum(), x=X, y=Y, ledger=False)
    modes = result.record["function_modes"]
    assert result.passed
    assert modes["input"] == "x, y"
    assert modes["forward_ad"]["direction"] == "u: standard normal for each input, drawn in the order x, y, seed 17"
    rows = _rows(result.record)
    assert set(rows) == {
        ("forward_ad_vs_finite_difference", "x, y"),
        ("forward_ad_vs_backward", "x, y"),
        ("batched_grad_vs_one_at_a_time", "x"),
        ("batched_grad_vs_one_at_a_time", "y"),
    }
    assert all(row["passed"] for row in rows.values())
    # the directional derivative summed two ways (jvp, and the backward's gradients dotted with u): equal
    # to rounding; a bilinear function's central difference along u is exact up to rounding too
    assert rows[("forward_ad_vs_backward", "x, y")]["max_abs_err"] < 1e-12
    assert rows[("forward_ad_vs_finite_difference", "x, y")]["max_abs_err"] < 1e-9
    assert modes["batched_grad"]["gradients"]["shape"] == [3, 8]  # three grad_outputs, x's and y's 4 side by side


def test_a_jvp_wrong_for_the_second_input_fails_naming_forward_mode():
    """Given Product whose jvp takes twice y's tangent, when it is checked, then the backward is right (every
    first-order comparison passes) but forward mode disagrees with it and with finite differences along u,
    and the failure says to suspect the jvp."""
    Product.jvp_y_scale = 2.0
    try:
        result = check(lambda x, y: Product.apply(x, y).sum(), x=X, y=Y, ledger=False)
    finally:
        Product.jvp_y_scale = 1.0
    assert not result.passed
    assert all(row["passed"] for row in result.record["comparisons"])
    failed = {f["comparison"] for f in result.record["failures"]}
    assert failed == {"forward_ad_vs_finite_difference", "forward_ad_vs_backward"}
    jvp_failure = next(f for f in result.record["failures"] if f["comparison"] == "forward_ad_vs_finite_difference")
    assert jvp_failure["input"] == "y" and "suspect the jvp" in jvp_failure["reason"]  # y's tangent, alone, disagrees


def test_an_input_the_output_does_not_reach_is_batched_as_zeros():
    """Given a function of x and y through a Function of x alone, when it is checked, then the batched
    gradients of y are zeros one at a time and batched, and forward mode is observed."""
    result = check(
        lambda x, y: Product.apply(x, x).sum() + 0 * y.detach().sum(),
        x=X,
        y=Y,
        grad={"x": 2 * X, "y": torch.zeros_like(Y)},
        ledger=False,
    )
    rows = _rows(result.record)
    assert rows[("batched_grad_vs_one_at_a_time", "y")]["passed"]
    assert rows[("batched_grad_vs_one_at_a_time", "y")]["max_abs_err"] == 0.0
    assert result.record["function_modes"]["forward_ad"]["status"] == "observed"
