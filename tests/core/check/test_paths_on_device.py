"""Every finite-difference path, and the second order, run with every tensor on the input's device.

Each test runs on the CPU and, CUDA-marked, on cuda (skipped with the reason where there is none):
a path that no test reached on cuda has crashed there (the coloured path indexed a CPU tensor by
CUDA indices). Each forces its path, asserts the path was taken and asserts a real verdict.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from support.functions import NewStyleCube

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


def autograd_of(function):
    """autograd's own gradient as the expectation: only the finite differences are under test."""
    return lambda x: torch.func.grad(function)(x)


def checked(function, x, **settings):
    """The record of `function` at `x`, checked against autograd's gradient without a ledger."""
    return check(function, autograd_of(function), x=x, ledger=False, **settings).record


def structure(record) -> str:
    return record["observations"]["finite_difference"]["inputs"]["x"]["structure"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "function",
    [lambda x: torch.logsumexp(x * 3, 0).sum(), lambda x: torch.softmax(x, 1).pow(2).sum()],
    ids=["logsumexp", "softmax"],
)
def test_coloured_path_runs_on_the_inputs_device(device, function):
    """Given a float32 function of 30 x 40 elements whose Jacobian is sparse (each column reaches
    only its own row or column's outputs),
    when it is checked on `device`,
    then its differences go one colour at a time, every tensor on that device, and it passes."""
    x = torch.randn(30, 40, generator=torch.Generator().manual_seed(0)).to(device)
    record = checked(function, x)
    note = record["observations"]["finite_difference"]["note"]
    assert "one colour at a time" in note
    assert record["passed"] is True and record["failure"] is None
    assert record["observed_gradient"] is not None


@pytest.mark.parametrize("device", DEVICES)
def test_general_path_runs_on_the_inputs_device(device):
    """Given (x @ x.T).tanh().sum() over a 6 x 5 float32 x, whose every output reaches a whole row,
    when it is checked on `device`,
    then the general path runs there and the correct gradient passes."""
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(0)).to(device)
    record = checked(lambda x: (x @ x.T).tanh().sum(), x)
    assert structure(record) == "general"
    assert record["passed"] is True and record["failure"] is None


@pytest.mark.parametrize("device", DEVICES)
def test_diagonal_path_runs_on_the_inputs_device(device):
    """Given sum(tanh(x)^2) over 1000 float32 elements,
    when it is checked on `device`,
    then every element is shifted at once (3 evaluations) and the correct gradient passes."""
    x = torch.linspace(-2.0, 2.0, 1000).to(device)
    record = checked(lambda x: torch.tanh(x).pow(2).sum(), x)
    assert structure(record) == "elementwise then sum"
    assert record["observations"]["finite_difference"]["inputs"]["x"]["forward_evaluations"] == 3
    assert record["passed"] is True


@pytest.mark.parametrize("device", DEVICES)
def test_projected_path_runs_on_the_inputs_device(device):
    """Given sum(x^3) over 50 float32 elements and finite_difference.mode "projected",
    when it is checked on `device`, once against autograd and once against 3x^2 scaled by 1.01,
    then one random direction is compared there, the right gradient passes and the wrong one fails."""
    x = torch.randn(50, generator=torch.Generator().manual_seed(1)).to(device)
    projected = {"mode": "projected"}
    record = checked(lambda x: (x**3).sum(), x, finite_difference=projected)
    assert structure(record) == "projected"
    assert record["passed"] is True
    wrong = check(
        lambda x: (x**3).sum(), lambda x: 3 * x**2 * 1.01, x=x, ledger=False, finite_difference=projected
    ).record
    assert wrong["passed"] is False


@pytest.mark.parametrize("device", DEVICES)
def test_refinement_runs_on_the_inputs_device(device):
    """Given sum(exp(100 x)) in float64, whose third derivative makes the default step's truncation
    (~6e-8 relative) exceed the default tolerance (3.7e-9),
    when it is checked on `device`,
    then every element is re-estimated there by Richardson extrapolation, all three are resolved,
    and the check passes."""
    x = torch.tensor([0.5, 0.45, 0.3], dtype=torch.float64, device=device)
    record = checked(lambda x: torch.exp(100 * x).sum(), x)
    refinement = record["observations"]["finite_difference"]["refinement"]["x"]
    assert refinement["elements"] == 3 and refinement["resolved"] == 3 and refinement["still_failing"] == 0
    assert record["passed"] is True


@pytest.mark.parametrize("device", DEVICES)
def test_step_sweep_runs_on_the_inputs_device(device):
    """Given sum(sin(x)) over 3 float64 elements (small enough for the step sweep to be recorded),
    when it is checked on `device`,
    then the sweep's float64 series reaches an error below 1e-9 at its best step (central
    differences of sin at x ~ 1 reach ~1e-11; 1e-9 allows a different libm on the device)."""
    x = torch.tensor([1.0, 0.5, -0.25], dtype=torch.float64, device=device)
    record = checked(lambda x: torch.sin(x).sum(), x)
    series = {s["dtype"]: s for s in record["step_sweep"]["series"]}
    assert series["float64"]["best_error"] < 1e-9
    assert record["passed"] is True


class Cube(NewStyleCube):
    """x^3 with a backward autograd can differentiate again: 3 x^2 grad_output."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad_output


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_second_order_runs_on_the_inputs_device(device, dtype):
    """Given sum(Cube(x)) over 5 elements, whose Hessian is diag(6 x),
    when its double backward is checked on `device` in `dtype`,
    then autograd's Hessian and the finite differences of the gradient agree there, the diagonal is
    6 x (to float32's rounding of a product of two factors, 1e-6 relative), and the check passes."""
    x = torch.tensor([0.5, -1.25, 2.0, 0.75, -0.3], dtype=dtype, device=device)
    result = check(lambda x: Cube.apply(x).sum(), x=x, hessian="double_backward", ledger=False)
    block = result.record["second_order"]
    assert [c["passed"] for c in block["comparisons"]] == [True]
    hessian = block["observations"]["autograd"]["hessian"]
    assert [hessian["value"][i][i] for i in range(5)] == pytest.approx([6 * v for v in x.tolist()], rel=1e-6)
    assert hessian["device"].startswith(device)
    assert result.passed is True
