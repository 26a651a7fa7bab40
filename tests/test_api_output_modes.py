"""Forward mode and batched gradients of a custom Function with several outputs, as gradcheck
checks a tuple of outputs (`check_forward_ad`, `check_batched_grad`): one forward-mode comparison per
differentiable output, one batched comparison per input."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.record.spec import RULES
from support.functions import save_inputs_for_both_modes

X = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)
Y = torch.linspace(0.5, 2.0, 4, dtype=torch.float64)


class ScaledSine(torch.autograd.Function):
    """(sin(x) * y, x * x) with a backward and a jvp; `jvp_second_scale` plants a mistake in the jvp of the
    second output alone."""

    generate_vmap_rule = True
    jvp_second_scale = 1.0

    @staticmethod
    def forward(x, y):
        return torch.sin(x) * y, x * x

    setup_context = staticmethod(save_inputs_for_both_modes)

    @staticmethod
    def backward(ctx, grad_first, grad_second):
        x, y = ctx.saved_tensors
        return grad_first * torch.cos(x) * y + grad_second * 2 * x, grad_first * torch.sin(x)

    @staticmethod
    def jvp(ctx, tangent_x, tangent_y):
        x, y = ctx.saved_tensors
        first = tangent_x * torch.cos(x) * y + torch.sin(x) * tangent_y
        return first, ScaledSine.jvp_second_scale * 2 * x * tangent_x


class NoJvp(torch.autograd.Function):
    """(2 x, x * y) with a backward and no jvp."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return 2 * x, x * y

    @staticmethod
    def backward(ctx, grad_first, grad_second):
        x, y = ctx.saved_tensors
        return 2 * grad_first + grad_second * y, grad_second * x


def _both(x, y):
    return ScaledSine.apply(x, y)


def _rows(record: dict, key: str) -> list:
    return record["function_modes"][key]["comparisons"]


def test_each_output_is_observed_in_forward_mode_and_each_input_batched():
    """Given a Function of x and y returning two outputs, with a right backward and jvp, when it is checked
    (its backward as the expectation), then forward mode along (u_x, u_y) agrees with central differences
    along it for output 0 and for output 1, and with grad . u summed over both outputs; vmap over three
    grad_output pairs equals them one at a time for x and for y; and the check passes."""
    result = check(_both, x=X, y=Y, ledger=False)
    modes = result.record["function_modes"]
    assert result.passed and result.record["rules"] == RULES
    forward = _rows(result.record, "forward_ad")
    assert [(row["name"], row["left"]) for row in forward] == [
        ("forward_ad_vs_finite_difference", "finite_difference_along_u (output 0)"),
        ("forward_ad_vs_finite_difference", "finite_difference_along_u (output 1)"),
        ("forward_ad_vs_backward", "grad . u (backward)"),
    ]
    assert all(row["passed"] and row["input"] == "x, y" for row in forward)
    assert [row.get("output") for row in forward] == [0, 1, None]  # the backward's row sums over both outputs
    # central differences of sin along u err by h^2/6 |u|^3 ~ 1e-11 at h ~ 6e-6; x * x's exactly up to rounding
    assert forward[0]["max_abs_err"] < 1e-9 and forward[1]["max_abs_err"] < 1e-9
    # the directional derivative summed two ways (jvp, and the backward's gradients dotted with u): rounding alone
    assert forward[2]["max_abs_err"] < 1e-12
    assert modes["forward_ad"]["tangent"]["shape"] == [8]  # both outputs' 4 tangents side by side
    assert modes["forward_ad"]["direction"] == "u: standard normal for each input, drawn in the order x, y, seed 17"
    batched = _rows(result.record, "batched_grad")
    assert [(row["input"], row["passed"]) for row in batched] == [("x", True), ("y", True)]
    assert modes["batched_grad"]["gradients"]["shape"] == [3, 8]


def test_a_jvp_wrong_in_one_output_fails_naming_that_output():
    """Given the same Function whose jvp doubles its second output's tangent, when it is checked, then every
    first-order comparison passes (the backward is right), forward mode fails against finite differences
    for output 1 and not for output 0, and against the backward, and the failure says to suspect the jvp."""
    ScaledSine.jvp_second_scale = 2.0
    try:
        result = check(_both, x=X, y=Y, ledger=False)
    finally:
        ScaledSine.jvp_second_scale = 1.0
    assert not result.passed
    assert all(row["passed"] for row in result.record["comparisons"])
    failed = [(f["comparison"], f["left_label"]) for f in result.record["failures"]]
    assert failed == [
        ("forward_ad_vs_finite_difference", "finite_difference_along_u (output 1)"),
        ("forward_ad_vs_backward", "grad . u (backward)"),
    ]
    assert result.record["failures"][0]["output"] == 1 and "output" not in result.record["failures"][1]
    assert "suspect the jvp" in result.record["failures"][0]["reason"]
    # output 1's tangent is 2 x u_x where 2 x u_x was right: the difference is the whole tangent, ~1
    assert result.record["failures"][0]["abs_err"] > 0.1


def test_an_output_that_is_not_differentiable_is_left_out():
    """Given a function returning a Function's output and an integer index, when it is checked, then forward
    mode compares output 0 alone, and the batched gradients take grad_outputs for output 0 alone."""

    def with_index(x, y):
        first, _ = ScaledSine.apply(x, y)
        return first, torch.argmax(x)

    result = check(with_index, grad=({"x": torch.cos(X) * Y, "y": torch.sin(X)}, None), x=X, y=Y, ledger=False)
    assert result.passed
    forward = _rows(result.record, "forward_ad")
    assert [row["left"] for row in forward] == ["finite_difference_along_u (output 0)", "grad . u (backward)"]
    assert result.record["function_modes"]["batched_grad"]["note"].startswith(
        "three grad_outputs for each of outputs 0;"
    )


def test_a_function_without_a_jvp_is_skipped_in_forward_mode_and_still_batched():
    """Given a Function of two outputs with no jvp, when it is checked, then forward mode is skipped with
    PyTorch's reason, a note and not a failure, while the batched gradients are observed and agree."""
    result = check(lambda x, y: NoJvp.apply(x, y), x=X, y=Y, ledger=False)
    modes = result.record["function_modes"]
    assert result.passed
    assert modes["forward_ad"]["status"] == "skipped"
    assert modes["forward_ad"]["reason"].startswith("forward-mode AD does not apply:")
    assert modes["batched_grad"]["status"] == "observed"


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_forward_mode_batched_gradients_and_second_order_of_two_outputs_on_a_device(device):
    """Given the two-output Function on `device` and its own double backward as the expected Hessian, when it is
    checked, then forward mode, batched gradients and the second order are observed on that device and pass."""
    x, y = X.to(device), Y.to(device)
    result = check(_both, x=x, y=y, hessian="double_backward", ledger=False)
    modes, block = result.record["function_modes"], result.record["second_order"]
    assert result.passed
    assert modes["forward_ad"]["tangent"]["device"].startswith(device)
    assert [row["passed"] for row in _rows(result.record, "forward_ad")] == [True, True, True]
    assert [row["input"] for row in _rows(result.record, "batched_grad")] == ["x", "y"]
    assert block["outputs"] == [0, 1] and block["device"].startswith(device)
    # central differences of the gradient at eps^(1/3): ~4e-11 times the third derivatives' scale (~2)
    assert block["comparisons"][0]["max_abs_err"] < 1e-9
