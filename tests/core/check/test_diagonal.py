"""Finite differences through an observed elementwise chain (core/check/fd/structure.py).

The shortcut shifts every element at once, so it is only honest where output element i depends
on input element i alone. These stories pin both halves: where the chain is diagonal the
estimates equal (or beat) the general path's, and wherever it is not, the general path runs.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from jupyterlab_gradcheck.core.check.engine import check_callable, run_check
from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients
from jupyterlab_gradcheck.core.check.first_order import numerical_verdict
from jupyterlab_gradcheck.core.check.record import spec as defaults
from support.functions import CubeWrongAt


def _both(function, x, scheme="central", v=None):
    """(diagonal estimate, general estimate, info of the diagonal run) for input x."""
    v = torch.ones_like(function(x)) if v is None else v
    fast, info, _ = fd_gradients(function, {"x": x}, v, FdOptions(dtype="float64", scheme=scheme, step=None))
    slow, _, _ = fd_gradients(
        function, {"x": x}, v, FdOptions(dtype="float64", scheme=scheme, step=None, structured=False)
    )
    return fast["x"], slow["x"], info["inputs"]["x"]


@pytest.mark.parametrize("scheme", defaults.SCHEMES)
def test_elementwise_chain_gives_the_general_estimate_bit_for_bit(scheme):
    """Given sin(x) * x + exp(x) / 3 on a 4 x 50 input and a random grad_output,
    when its finite differences are taken by each scheme,
    then the diagonal path is used, with a handful of evaluations instead of one or more per
    element, and every estimate equals the general path's exactly (same shifted points, same
    subtraction, output by output)."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 50, dtype=torch.float64, generator=generator)
    v = torch.randn(4, 50, dtype=torch.float64, generator=generator)
    fast, slow, info = _both(lambda x: torch.sin(x) * x + torch.exp(x) / 3, x, scheme, v)
    assert info["structure"] == "elementwise"
    assert info["forward_evaluations"] == 1 + len(
        {"central": (1, -1), "forward": (1,), "complex_step": (1,), "richardson": (1, -1, 0.5, -0.5)}[scheme]
    )
    assert torch.equal(fast, slow)


@pytest.mark.parametrize(
    ("function", "kind", "derivative"),
    [
        (
            lambda x: torch.sum(torch.tanh(x) ** 2),
            "elementwise then sum",
            lambda x: 2 * torch.tanh(x) * (1 - torch.tanh(x) ** 2),
        ),
        (lambda x: torch.mean(torch.exp(x)), "elementwise then mean", lambda x: torch.exp(x) / x.numel()),
        (lambda x: 0.5 * (x**2).sum(), "elementwise then sum", lambda x: x),
        (lambda x: -(x**3).sum() / 4 + 7.0, "elementwise then sum", lambda x: -3 * x**2 / 4),
    ],
)
def test_reduction_of_an_elementwise_body_is_estimated_per_element(function, kind, derivative):
    """Given a sum or mean of an elementwise body, possibly scaled and shifted by constants,
    when its central differences are taken over 1000 elements,
    then the diagonal path is named, takes 3 evaluations, and every element is within the
    central floor of the exact derivative."""
    x = torch.linspace(-2.0, 2.0, 1000, dtype=torch.float64)
    fast, slow, info = _both(function, x)
    assert info["structure"] == kind
    assert info["forward_evaluations"] == 3
    # One element's central difference errs by ~eps^(2/3) |g| ~ 1e-10 for bodies of size ~8;
    # 1e-9 leaves a factor of ten of margin and is far below the general path's 1e-7 here.
    assert float((fast - derivative(x)).abs().max()) < 1e-9


def test_reduction_passes_where_the_general_path_is_precision_limited():
    """Given sum(tanh(x)^2) at 10^4 elements in float64,
    when the numerical verdict runs on each path,
    then the general path fails (it differences two 10^4-term sums, which round by
    eps*|phi|/h ~ 2e-7, above the default tolerance) and the diagonal path passes."""
    x = torch.linspace(-2.0, 2.0, 10000, dtype=torch.float64)

    def function(x):
        return torch.sum(torch.tanh(x) ** 2)

    general = numerical_verdict(function, {"x": x}, structured=False)
    diagonal = numerical_verdict(function, {"x": x})
    assert general["passed"] is False
    assert diagonal["passed"] is True
    assert diagonal["finite_difference"]["inputs"]["x"]["structure"] == "elementwise then sum"


@pytest.mark.parametrize(
    "function",
    [
        lambda x: x * x.sum(),  # every output depends on every input
        lambda x: torch.cumsum(x, 0),
        lambda x: x.flip(0) * x,  # a permutation keeps the shape but not the element
        lambda x: torch.roll(x, 1) + x,
        lambda x: (x[:, None] + x[None, :]).sum(),  # broadcasting enlarges the body
        lambda x: x.sum() + (x**2).sum(),  # two reductions
        lambda x: x.sum() * x.sum(),  # the reduced value is not scaled by a constant
        lambda x: torch.tanh(x).clone().add_(1.0).sum(),  # in-place update
        lambda x: (x @ x) * x,
        lambda x: torch.sort(x).values,
    ],
)
def test_anything_but_an_elementwise_chain_takes_the_general_path(function):
    """Given a function whose Jacobian is not diagonal (or not provably so),
    when its finite differences are taken,
    then the diagonal path is not taken: the general path runs and the estimate is the general
    path's, or a learned sparse pattern is coloured (core/check/fd/structure.py) in fewer evaluations
    and the estimate equals the general path's up to rounding."""
    x = torch.linspace(-1.0, 1.0, 40, dtype=torch.float64)
    fast, slow, info = _both(function, x)
    assert info["structure"] in ("general", "coloured")
    if info["structure"] == "general":
        assert info["forward_evaluations"] == 2 * x.numel()
        assert torch.equal(fast, slow)
    else:
        assert info["forward_evaluations"] < x.numel()
        # the same central differences at the same steps, summed in another order: rounding only
        # (eps * |f| / h ~ 1e-10 here), 1e-9 leaves a margin of ten
        assert float((fast - slow).abs().max()) <= 1e-9


def test_a_chain_that_changes_between_evaluations_is_abandoned():
    """Given a function that is sin on its first call and cos afterwards (an elementwise chain
    each time, but not the same one),
    when its finite differences are taken,
    then the shifted evaluation's different chain abandons the diagonal path."""
    calls = []

    def function(x):
        calls.append(1)
        return torch.sin(x) if len(calls) == 1 else torch.cos(x)

    x = torch.linspace(-1.0, 1.0, 30, dtype=torch.float64)
    _, info, _ = fd_gradients(
        function, {"x": x}, torch.ones_like(x), FdOptions(dtype="float64", scheme="central", step=None)
    )
    assert info["inputs"]["x"]["structure"] not in ("elementwise", "elementwise then sum")


def test_wrong_backward_of_a_custom_function_is_found_through_the_diagonal_path():
    """Given a custom autograd.Function for x**3 whose backward is wrong at element 123 of 300,
    summed,
    when the numerical verdict runs,
    then the forward is observed to be an elementwise chain and the failure names index [123]."""
    x = torch.linspace(0.5, 3.5, 300, dtype=torch.float64)
    verdict = numerical_verdict(lambda x: CubeWrongAt.apply(x).sum(), {"x": x})
    assert verdict["finite_difference"]["inputs"]["x"]["structure"] == "elementwise then sum"
    assert verdict["passed"] is False
    assert verdict["worst"]["index"] == [123]
    # finite differences of x^3 err by h^2 ~ 1e-10 at x ~ 1.7; the backward is 1 too high.
    assert verdict["worst"]["left"] == pytest.approx(3 * float(x[123]) ** 2, abs=1e-8)


class _TanhSquaredSlightlyWrong(torch.autograd.Function):
    """tanh(x)^2 whose backward is 3e-8 too high at element 500 only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x) ** 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        t = torch.tanh(x)
        slope = 2 * t * (1 - t**2)
        slope[500] += 3e-8
        return grad * slope


def test_small_bug_in_a_large_sum_is_a_probable_bug_not_rounding():
    """Given the sum over 1000 elements of a custom tanh(x)^2 whose backward is 3e-8 too high
    at one element,
    when the full check runs,
    then finite differences (diagonal) resolve the error and the diagnosis is probable_bug: the
    floor is that of one element (~1e-10), not that of the 1000-term sum (~4e-8), which would
    have excused the bug as precision_limited."""
    x = torch.linspace(-2.0, 2.0, 1000, dtype=torch.float64)
    t = torch.tanh(x)
    record = check_callable(
        lambda x: _TanhSquaredSlightlyWrong.apply(x).sum(),
        {"x": x.tolist()},
        (2 * t * (1 - t**2)).tolist(),
        dtype="float64",
    )
    assert record["observations"]["finite_difference"]["inputs"]["x"]["structure"] == "elementwise then sum"
    failure = next(f for f in record["failures"] if f["comparison"] == "autograd_vs_finite_difference")
    assert failure["diagnosis"] == "probable_bug"
    assert failure["index"] == [500]


def test_expression_checks_take_the_diagonal_path():
    """Given the record sum(tanh(x)**2) over 500 elements,
    when the engine runs it,
    then the finite-difference observation names the chain and needed 3 evaluations, and the
    check passes."""
    record = run_check(
        {
            "function": "sum(tanh(x)**2)",
            "x": torch.linspace(-2, 2, 500).tolist(),
            "analytical_gradient": "2*tanh(x)*(1-tanh(x)**2)",
        }
    )
    observation = record["observations"]["finite_difference"]
    assert observation["inputs"]["x"]["structure"] == "elementwise then sum"
    assert observation["inputs"]["x"]["forward_evaluations"] == 3
    assert observation["note"].endswith("Every element shifted at once for x (elementwise then sum, 3 evaluations).")
    assert record["passed"] is True
    seed = run_check({"function": "x*x", "x": 3, "analytical_gradient": 6})
    assert "shifted at once" not in seed["observations"]["finite_difference"]["note"]  # one element: general


def test_recording_does_not_load_the_compiler():
    """Given a fresh interpreter,
    when a diagonal estimate is taken,
    then torch._dynamo (over a second to import) was not loaded by the recording mode."""
    code = (
        "import sys, torch\n"
        "from jupyterlab_gradcheck.core.check.first_order import numerical_verdict\n"
        "x = torch.linspace(-1, 1, 50, dtype=torch.float64)\n"
        "r = numerical_verdict(lambda x: torch.sin(x).sum(), {'x': x})\n"
        "print(r['finite_difference']['inputs']['x']['structure'], 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["elementwise", "then", "sum", "False"]


@pytest.mark.parametrize(
    "function",
    [
        lambda x: (x > 0).sum(),  # an integer count: no derivative to estimate elementwise
        lambda x: x.sum().mul(x.sum()),  # the reduced value times a non-constant
        lambda x: torch.sin(x).sum().clamp(min=0.0),  # a nonlinear step after the reduction
    ],
)
def test_non_chains_after_or_around_a_reduction_fall_back_without_error(function):
    """Given functions that end in a reduction but are not a constant scale or shift of it,
    when their finite differences are taken,
    then nothing raises and the general path runs."""
    x = torch.linspace(-1.0, 1.0, 20, dtype=torch.float64)
    out = function(x)
    v = torch.ones_like(out, dtype=torch.float64)
    _, info, _ = fd_gradients(
        lambda x: function(x).to(torch.float64), {"x": x}, v, FdOptions(dtype="float64", scheme="central", step=None)
    )
    assert info["inputs"]["x"]["structure"] == "general"


@pytest.mark.cuda
def test_diagonal_path_on_cuda_matches_the_cpu():
    """Given sum(tanh(x)^2) over 1000 float64 elements on the CPU and on CUDA,
    when its central differences are taken on each device,
    then CUDA takes the diagonal path too and its estimates match the CPU's."""
    x = torch.linspace(-2.0, 2.0, 1000, dtype=torch.float64)

    def function(x):
        return torch.sum(torch.tanh(x) ** 2)

    one = torch.ones((), dtype=torch.float64)
    cpu, _, _ = fd_gradients(function, {"x": x}, one, FdOptions(dtype="float64", scheme="central", step=None))
    gpu, info, _ = fd_gradients(
        function, {"x": x.cuda()}, one.cuda(), FdOptions(dtype="float64", scheme="central", step=None)
    )
    assert info["inputs"]["x"]["structure"] == "elementwise then sum"
    # CUDA's tanh may differ from the CPU's by a few ulps (~1e-15 for values below 1); over
    # 2h ~ 1.2e-5 that moves a quotient by ~1e-10, so 1e-9 separates libm noise from a bug.
    assert float((gpu["x"].cpu() - cpu["x"]).abs().max()) < 1e-9
