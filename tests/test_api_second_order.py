"""Second order: `check(..., hessian=H)` holds the expected Hessian against autograd's double
backward, finite differences of the gradient and torch's gradgradcheck."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.errors import SpecError
from support.functions import Cube, CubeDetachedBackward

X = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)


def _comparison(record, name):
    return next(row for row in record["second_order"]["comparisons"] if row["name"] == name)


def test_a_right_hessian_passes_all_three_ways():
    """Given Cube (x^3) summed and the Hessian written as diag(6x),
    when it is checked with hessian=,
    then the expectation equals the double backward, the finite differences of the gradient agree
    with it, gradgradcheck passes, and the check passes."""
    result = check(lambda x: Cube.apply(x).sum(), x=X, hessian=torch.diag(6 * X), ledger=False)
    block = result.record["second_order"]
    assert result.passed and block["passed"]
    assert _comparison(result.record, "hessian_analytical_vs_autograd")["max_abs_err"] == 0.0
    # central differences of 3x^2 at step ~6e-6: truncation 0 (quadratic), rounding ~eps/h ~ 4e-11
    assert _comparison(result.record, "hessian_autograd_vs_finite_difference")["max_abs_err"] < 1e-9
    assert block["observations"]["torch_gradgradcheck"]["status"] == "passed"
    assert block["shape"] == [4, 4] and block["dtype"] == "float64"


def test_a_wrong_hessian_fails_naming_the_entry():
    """Given the Hessian written as diag(5x) (a slip: 5 for 6),
    when it is checked, it fails on the analytical comparison at the worst entry, H[0, 0],
    where autograd gives -6 and the expectation -5."""
    result = check(lambda x: Cube.apply(x).sum(), x=X, hessian=torch.diag(5 * X), ledger=False)
    assert not result.passed
    failure = result.failure
    assert (failure["comparison"], failure["index"], failure["left"], failure["right"]) == (
        "hessian_analytical_vs_autograd",
        [0, 0],
        -5.0,
        -6.0,
    )


def test_a_backward_that_is_not_differentiable_fails_saying_so():
    """Given a Function whose backward detaches x (its gradient is right, its double backward
    does not exist), checked against its own double backward,
    then the first-order comparisons pass, and the check fails because the gradient carries no
    graph, with that reason; gradgradcheck fails too."""
    result = check(lambda x: CubeDetachedBackward.apply(x).sum(), x=X, hessian="double_backward", ledger=False)
    assert all(row["passed"] for row in result.record["comparisons"])
    assert not result.passed
    assert result.failure["comparison"] == "hessian_autograd"
    assert result.failure["reason"].startswith("the backward is not differentiable")
    assert result.record["second_order"]["observations"]["torch_gradgradcheck"]["status"] == "failed"


def test_a_linear_function_has_a_zero_hessian_not_a_broken_backward():
    """Given 2x summed (its gradient is constant, so autograd has no graph to differentiate),
    when it is checked with a zero Hessian, it passes: the finite differences say the Hessian is 0."""
    result = check(lambda x: (2 * x).sum(), grad=2.0, x=X, hessian=torch.zeros(4, 4), ledger=False)
    assert result.passed
    assert "constant gradient" in str(result.record["second_order"]["observations"]["autograd"]["note"])


def test_a_hessian_of_the_wrong_size_is_refused():
    """Given a 1 x 1 matrix for two inputs of 4 elements, or a 3 x 3 matrix for 4 elements,
    when checked with hessian=, each is refused in one line naming the problem."""
    with pytest.raises(
        SpecError, match="^hessian for the inputs x, y has 1 elements; their 8 elements together have an 8 x 8 Hessian"
    ):
        check(lambda x, y: (x * y).sum(), grad={"x": X, "y": X}, x=X, y=X, hessian=[[0.0]], ledger=False)
    with pytest.raises(SpecError, match="has 9 elements; an input of 4 elements has an 4 x 4 Hessian"):
        check(lambda x: Cube.apply(x).sum(), x=X, hessian=torch.zeros(3, 3), ledger=False)


def test_a_wrong_sized_matrix_is_refused_before_anything_is_written(tmp_path):
    """Given a notebook's ledger and a 3 x 3 Hessian for a 4-element input,
    when the check is called, it is refused and the ledger is not created."""
    with pytest.raises(SpecError, match="has 9 elements"):
        check(lambda x: Cube.apply(x).sum(), x=X, hessian=[[0.0] * 3] * 3, notebook=tmp_path / "lab.ipynb")
    assert not (tmp_path / "lab.gradcheck.jsonl").exists()
