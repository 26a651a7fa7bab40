"""The second order of a function of several inputs: one Hessian over the inputs flattened and
concatenated in their order, mixed second derivatives included, as gradgradcheck checks them."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.errors import SpecError

X = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
W = torch.tensor([1.5, 0.25, -0.75], dtype=torch.float64)


def _weighted_square(x, w):
    return (x**2 * w).sum()


def _exact_hessian(x, w):
    """d^2 sum(x^2 w) over z = (x, w): [[diag(2w), diag(2x)], [diag(2x), 0]]."""
    top = torch.cat([torch.diag(2 * w), torch.diag(2 * x)], dim=1)
    bottom = torch.cat([torch.diag(2 * x), torch.zeros(3, 3, dtype=torch.float64)], dim=1)
    return torch.cat([top, bottom])


class MulDetachedY(torch.autograd.Function):
    """x * y whose backward detaches y in x's gradient: its double backward loses d(grad_x)/dy."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y.detach(), grad * x


def test_a_right_hessian_of_two_inputs_passes_three_ways_with_its_layout():
    """Given sum(x^2 w) and its 6 x 6 Hessian over (x, w), when it is checked with hessian=, then the
    expectation, autograd's double backward and the finite differences of the gradient agree, gradgradcheck
    passes, and the record says where x and w lie in z."""
    result = check(
        _weighted_square, grad={"x": 2 * X * W, "w": X**2}, x=X, w=W, hessian=_exact_hessian(X, W), ledger=False
    )
    block = result.record["second_order"]
    assert result.passed and block["passed"]
    assert block["input"] == "x, w" and block["shape"] == [6, 6]
    assert block["layout"] == [{"input": "x", "offset": 0, "numel": 3}, {"input": "w", "offset": 3, "numel": 3}]
    assert "concatenated in the order x, w" in block["convention"]
    assert block["observations"]["torch_gradgradcheck"]["status"] == "passed"
    assert [row["passed"] for row in block["comparisons"]] == [True, True]
    autograd = torch.tensor(block["observations"]["autograd"]["hessian"]["value"], dtype=torch.float64)
    # the double backward of x^2 w is exact arithmetic on these values: equal to the hand-written matrix
    assert torch.equal(autograd, _exact_hessian(X, W))


def test_a_wrong_mixed_entry_fails_naming_it_and_its_inputs():
    """Given the same check with d^2/dx_1 dw_1 written as 0 instead of 2 x_1, when it runs, then the second
    order fails at H[1, 4], which the reason names as x[1] and w[1]."""
    wrong = _exact_hessian(X, W)
    wrong[1, 4] = 0.0
    result = check(_weighted_square, grad={"x": 2 * X * W, "w": X**2}, x=X, w=W, hessian=wrong, ledger=False)
    [failure] = result.record["second_order"]["failures"]
    assert not result.passed
    assert (failure["comparison"], failure["index"]) == ("hessian_analytical_vs_autograd", [1, 4])
    assert failure["reason"] == "at H[1, 4] (x[1], w[1]) analytical gives 0 but hessian_autograd gives -2"


def test_a_backward_that_detaches_one_input_fails_its_double_backward_against_finite_differences():
    """Given a Function whose backward detaches y inside x's gradient, checked with its own double backward as
    the expectation, when it runs, then its first order passes but the double backward misses d(grad_x)/dy:
    the finite differences of the gradient disagree at a mixed entry, and gradgradcheck fails too."""
    result = check(MulDetachedY.apply, x=X, y=W, hessian="double_backward", ledger=False)
    block = result.record["second_order"]
    assert all(row["passed"] for row in result.record["comparisons"])
    assert not result.passed
    [failure] = block["failures"]
    assert failure["comparison"] == "hessian_autograd_vs_finite_difference"
    i, j = failure["index"]
    assert i < 3 <= j and j - 3 == i  # row x[i], column y[i]: the entry the detach removed
    assert block["observations"]["torch_gradgradcheck"]["status"] == "failed"


def test_an_input_whose_gradient_is_constant_is_taken_as_zero_rows_and_the_check_passes():
    """Given sum(x) + sum(w^2) (x's gradient is constant, so it carries no graph), when it is checked with its
    Hessian, then x's rows are taken as 0, the note says why, and the finite differences agree."""
    hessian = torch.block_diag(torch.zeros(3, 3, dtype=torch.float64), 2 * torch.eye(3, dtype=torch.float64))
    result = check(
        lambda x, w: x.sum() + (w**2).sum(),
        grad={"x": torch.ones(3, dtype=torch.float64), "w": 2 * W},
        x=X,
        w=W,
        hessian=hessian,
        ledger=False,
    )
    assert result.passed
    assert "the gradient of x carries no graph" in str(
        result.record["second_order"]["observations"]["autograd"]["note"]
    )


def test_a_one_input_record_keeps_its_fields():
    """Given a one-input check with hessian=, when it runs, then its block has no layout and keeps the
    one-input convention and shape."""
    block = check(lambda x: (x**3).sum(), grad=3 * X**2, x=X, hessian=torch.diag(6 * X), ledger=False).record[
        "second_order"
    ]
    assert "layout" not in block and block["input"] == "x" and block["shape"] == [3, 3]
    assert block["convention"] == "H[i, j] = d^2 sum(grad_output * f) / dx_i dx_j over the flattened input"


def test_a_wrong_sized_hessian_of_two_inputs_is_refused_before_anything_is_written(tmp_path):
    """Given a notebook's ledger and a 3 x 3 Hessian for two inputs of 3 elements, when the check is called,
    then it is refused in one line and the ledger is not created."""
    with pytest.raises(SpecError, match="^hessian for the inputs x, w has 9 elements; their 6 elements together"):
        check(
            _weighted_square,
            grad={"x": 2 * X * W, "w": X**2},
            x=X,
            w=W,
            hessian=torch.zeros(3, 3),
            notebook=tmp_path / "lab.ipynb",
        )
    assert not (tmp_path / "lab.gradcheck.jsonl").exists()
