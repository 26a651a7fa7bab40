"""The second order of a function of several outputs, as gradgradcheck checks a tuple of outputs:
the Hessian of sum_k sum(v_k * f_k) over the inputs, three ways, with gradgradcheck on the whole function."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check

X = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)
Y = torch.linspace(0.5, 2.0, 4, dtype=torch.float64)
GRAD = ({"x": torch.cos(X) * Y, "y": torch.sin(X)}, {"x": 2 * X, "y": torch.zeros(4, dtype=torch.float64)})


def sine_and_square(x, y):
    return torch.sin(x) * y, x * x


def hessian(x, y, *, square_term: float = 2.0):
    """d^2 (sum(sin(x) y) + sum(x^2)) over z = (x, y): -sin(x) y + 2 on x's diagonal, cos(x) between x_i and y_i."""
    h = torch.zeros(8, 8, dtype=torch.float64)
    h[:4, :4] = torch.diag(-torch.sin(x) * y + square_term)
    h[:4, 4:] = h[4:, :4] = torch.diag(torch.cos(x))
    return h


def test_the_hessian_of_the_weighted_outputs_is_observed_three_ways():
    """Given sin(x) y and x^2 as two outputs and their Hessian written first (grad_outputs of ones), when the check
    runs, then the written Hessian equals autograd's double backward, the finite differences of the gradient agree,
    gradgradcheck on the tuple passes, and the block says which outputs it weighs."""
    result = check(sine_and_square, grad=GRAD, hessian=hessian, x=X, y=Y, ledger=False)
    block = result.record["second_order"]
    assert result.passed and block["passed"]
    assert block["outputs"] == [0, 1] and block["shape"] == [8, 8]
    assert block["convention"].startswith("H[i, j] = d^2 sum_k sum(grad_output_k * f_k) / dz_i dz_j")
    rows = {row["name"]: row for row in block["comparisons"]}
    # the same formulas evaluated two ways (by hand, and by autograd): equal to rounding
    assert rows["hessian_analytical_vs_autograd"]["max_abs_err"] < 1e-14
    # central differences of the gradient at eps^(1/3): truncation and rounding ~4e-11 times the scales here (~2)
    assert rows["hessian_autograd_vs_finite_difference"]["max_abs_err"] < 1e-9
    assert block["observations"]["torch_gradgradcheck"]["status"] == "passed"


def test_a_hessian_that_forgets_one_outputs_part_fails_at_that_entry():
    """Given the same function with a Hessian written without x^2's second derivative, when the check runs, then
    the first order passes and the second order fails on x's diagonal (each of its entries is off by the same 2),
    naming the element of x twice."""

    def without_square(x, y):
        return hessian(x, y, square_term=0.0)

    result = check(sine_and_square, grad=GRAD, hessian=without_square, x=X, y=Y, ledger=False)
    assert not result.passed
    assert all(row["passed"] for row in result.record["comparisons"])
    failure = result.record["second_order"]["failures"][0]
    i, j = failure["index"]
    assert failure["comparison"] == "hessian_analytical_vs_autograd" and i == j < 4
    assert f"(x[{i}], x[{i}])" in failure["reason"]
    assert abs(failure["abs_err"] - 2.0) < 1e-12  # the forgotten term, exactly


def test_a_complex_output_leaves_the_second_order_skipped_saying_why():
    """Given a real input with a complex output beside a real one, when a Hessian is asked for, then the second
    order is skipped, saying it is for real outputs, and the first order still passes."""

    def rotated_and_square(x):
        return x.to(torch.complex128) * (1 + 2j), x * x

    result = check(
        rotated_and_square,
        grad=({"x": torch.ones(4, dtype=torch.float64)}, {"x": 2 * X}),
        hessian=2 * torch.eye(4, dtype=torch.float64),
        x=X,
        ledger=False,
    )
    assert result.passed
    assert result.record["second_order"] == {
        "status": "skipped",
        "passed": True,
        "failures": [],
        "reason": "the second order of several outputs is checked for real outputs",
    }
