"""Nondeterminism at second order: a double backward whose identical calls disagree is named as such.

One row of the autograd Hessian is taken again from a fresh graph and held to the first order's repeat
rule (`repeat_tolerance`: zero in float64). A backward that is deterministic, written with a second
Function whose own backward draws noise, passes the first order's repeats and fails the second order's,
diagnosed nondeterministic, with the largest difference between the repeats in
`second_order.nondeterminism`.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.autograd.second_order import autograd_hessian, double_backward_repeat
from support.functions import Cube

#: The noise of the double backward below, relative: far above float64's rounding, far below its values.
NOISE = 1e-3


class NoisyCubeGradient(torch.autograd.Function):
    """g * 3x^2 as a Function of (g, x): its value is exact, its own backward (the double backward of
    NoisyCube) multiplies the x part by 1 + NOISE * u, u drawn by torch.rand on every call."""

    @staticmethod
    def forward(ctx, g, x):
        ctx.save_for_backward(g, x)
        return g * 3 * x**2

    @staticmethod
    def backward(ctx, gg):
        g, x = ctx.saved_tensors
        return gg * 3 * x**2, gg * g * 6 * x * (1 + NOISE * torch.rand(()))


class NoisyCube(torch.autograd.Function):
    """x^3 whose backward is deterministic (NoisyCubeGradient's forward) and whose double backward is not."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return NoisyCubeGradient.apply(g, x)


#: Hessian diag(6x) = diag(3, -6, 12): its largest entry, the row repeated, is H[2, 2].
X = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_a_double_backward_that_draws_noise_fails_as_nondeterministic_at_second_order(device):
    """Given x^3 whose backward is exact and deterministic but whose double backward multiplies by
    1 + 1e-3 u (u = torch.rand() on each call),
    when it is checked against its own double backward,
    then the first order passes with no nondeterminism block (its repeats gave the same bits), and the
    record's first failure is the second order's repeats, diagnosed nondeterministic: its reason says
    "at second order the double backward is nondeterministic" and names H[2, 2] (x[2], x[2]) and both
    values; `second_order.nondeterminism` gives that entry and the largest difference between them."""
    record = check(lambda x: NoisyCube.apply(x).sum(), x=X.to(device), hessian="double_backward", ledger=False)
    record = record.record

    assert all(row["passed"] for row in record["comparisons"])
    assert "nondeterminism" not in record
    assert record["passed"] is False
    failure = record["failure"]
    assert (failure["comparison"], failure["diagnosis"], failure["input"]) == (
        "second_order_repeats",
        "nondeterministic",
        "x",
    )
    block = record["second_order"]["nondeterminism"]
    first, second = block["values"]
    assert block["passes"] == ["hessian_autograd", "hessian_autograd_repeat"] and block["repeats"] == 2
    assert (block["input"], block["index"], block["elements"]) == ("x", [2, 2], ["x[2]", "x[2]"])
    assert record["second_order"]["observations"]["autograd"]["repeated_row"] == 2
    assert block["tolerance"] == {"rtol": 0.0, "atol": 0.0} and block["beyond_tolerance"] is True
    # 12 (1 + 1e-3 u) for u in [0, 1): each value in [12, 12.012), the two differ by less than 0.012
    assert 12.0 <= first < 12.012 and 12.0 <= second < 12.012
    assert 0 < block["largest_difference"] < 0.012
    assert block["largest_difference"] == abs(first - second)  # the same two floats, subtracted
    reason = str(failure["reason"])
    assert reason.startswith("at second order the double backward is nondeterministic")
    assert f"H[2, 2] (x[2], x[2]) = {first:.9g} and {second:.9g}" in reason
    assert "torch.use_deterministic_algorithms(True)" in reason
    # the Hessian then disagrees with the finite differences of the exact gradient (12): the repeats say why
    later = [f["comparison"] for f in record["failures"][1:]]
    assert "hessian_autograd_vs_finite_difference" in later


def test_the_second_order_repeats_failure_reads_in_spanish():
    """Given the same check with language="es",
    when it is summarised,
    then the summary names the failure in Spanish, with the same entry, and the record keeps its codes."""
    result = check(lambda x: NoisyCube.apply(x).sum(), x=X, hessian="double_backward", ledger=False, language="es")
    summary = result.summary()
    assert "falló second_order_repeats; diagnóstico nondeterministic" in summary
    assert "en segundo orden el doble backward no es determinista" in summary and "H[2, 2] (x[2], x[2])" in summary
    assert result.record["failure"]["diagnosis"] == "nondeterministic"


class NoisyBothWaysGradient(NoisyCubeGradient):
    """NoisyCubeGradient whose own backward draws noise in its g part too: d/dg (g 3x^2) = 3x^2 (1 + NOISE u)."""

    @staticmethod
    def backward(ctx, gg):
        g, x = ctx.saved_tensors
        return gg * 3 * x**2 * (1 + NOISE * torch.rand(())), gg * g * 6 * x * (1 + NOISE * torch.rand(()))


class NoisyBothWays(NoisyCube):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return NoisyBothWaysGradient.apply(g, x)


def test_the_repeats_come_before_the_double_backward_in_grad_output_they_explain():
    """Given x^3 whose double backward draws noise in x and in grad_output,
    when it is checked against its own double backward,
    then the derivative in grad_output fails against its finite differences too (by about 1e-3 relative),
    but the record's first failure is the second order's repeats: the nondeterminism is why it fails."""
    record = check(lambda x: NoisyBothWays.apply(x).sum(), x=X, hessian="double_backward", ledger=False).record
    comparisons = [f["comparison"] for f in record["failures"]]
    assert comparisons[0] == "second_order_repeats" and record["failure"]["diagnosis"] == "nondeterministic"
    assert "double_backward_in_grad_output_vs_finite_difference" in comparisons[1:]


class NoisyProductGradient(torch.autograd.Function):
    """2 g x as a Function of (g, x): y's gradient of 2xy; its own backward multiplies its x part,
    d(2 g x)/dx = 2 g, by 1 + NOISE * u (u = torch.rand() on every call)."""

    @staticmethod
    def forward(ctx, g, x):
        ctx.save_for_backward(g, x)
        return 2 * g * x

    @staticmethod
    def backward(ctx, gg):
        g, x = ctx.saved_tensors
        return gg * 2 * x, gg * g * 2 * (1 + NOISE * torch.rand(()))


class NoisyProduct(torch.autograd.Function):
    """2xy: y's gradient through NoisyProductGradient, x's exact."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return 2 * x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return 2 * g * y, NoisyProductGradient.apply(g, x)


def test_a_mixed_second_derivative_that_draws_noise_names_both_inputs():
    """Given 2xy of two scalars whose y gradient's derivative in x is 2 (1 + 1e-3 u), u random per call,
    when it is checked against its own double backward,
    then the second order's repeats fail at the mixed entry H[1, 0] (y[0], x[0]): the row of y's gradient,
    the largest entry (2 (1 + 1e-3 u) against H[0, 1] = 2), differentiated in x."""
    one = torch.tensor([1.5], dtype=torch.float64)
    record = check(lambda x, y: NoisyProduct.apply(x, y).sum(), x=one, y=-one, hessian="double_backward", ledger=False)
    record = record.record
    assert "nondeterminism" not in record and all(row["passed"] for row in record["comparisons"])
    block = record["second_order"]["nondeterminism"]
    assert (block["input"], block["index"], block["elements"]) == ("x, y", [1, 0], ["y[0]", "x[0]"])
    first, second = block["values"]
    # 2 (1 + 1e-3 u): each in [2, 2.002), apart by less than 0.002
    assert 2.0 <= first < 2.002 and 2.0 <= second < 2.002 and 0 < block["largest_difference"] < 0.002
    assert record["failure"]["comparison"] == "second_order_repeats"
    assert "H[1, 0] (y[0], x[0])" in str(record["failure"]["reason"])


def test_a_deterministic_double_backward_passes_with_no_nondeterminism():
    """Given Cube (x^3, its double backward autograd's, through 3x^2 written in torch ops) and diag(6x),
    when it is checked,
    then it passes: the repeated row H[0, 0] (the largest entry, |-6|, first of two) gave the same bits,
    so the second order has no nondeterminism block and no failure names the repeats."""
    x = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)
    record = check(lambda x: Cube.apply(x).sum(), x=x, hessian=torch.diag(6 * x), ledger=False).record
    assert record["passed"] is True
    assert record["second_order"]["observations"]["autograd"]["repeated_row"] == 0
    assert "nondeterminism" not in record["second_order"] and "nondeterminism" not in record
    assert not [f for f in record["failures"] if f["diagnosis"] == "nondeterministic"]


class DriftingCubeGradient(torch.autograd.Function):
    """g * 3x^2 whose own backward drifts by `step` relative on each call: call n gives 6 g x (1 + n step)."""

    calls = 0
    step = 0.0

    @staticmethod
    def forward(ctx, g, x):
        ctx.save_for_backward(g, x)
        return g * 3 * x**2

    @staticmethod
    def backward(ctx, gg):
        DriftingCubeGradient.calls += 1
        g, x = ctx.saved_tensors
        return gg * 3 * x**2, gg * g * 6 * x * (1 + DriftingCubeGradient.calls * DriftingCubeGradient.step)


class DriftingCube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return DriftingCubeGradient.apply(g, x)


@pytest.mark.parametrize(
    ("step", "beyond"),
    # float32's repeat tolerance is rtol 1e-4: two calls apart drift by 2e-5 relative (within), or 2e-3 (beyond)
    [(1e-5, False), (1e-3, True)],
)
def test_float32_holds_the_double_backward_repeats_to_its_repeat_tolerance(step, beyond):
    """Given, in float32, x^3 whose double backward drifts by `step` relative per call,
    when the Hessian is taken (calls 1 to 3, one per row) and row 2 (H[2, 2] = 12, the largest) again (call 4),
    then the block gives 12 (1 + 3 step) against 12 (1 + 4 step) and is beyond float32's repeat tolerance
    (rtol 1e-4) only for a drift of 1e-3: a difference within it is recorded and fails nothing."""
    values = {"x": X.to(torch.float32)}
    DriftingCubeGradient.calls, DriftingCubeGradient.step = 0, step
    function = lambda x: DriftingCube.apply(x).sum()  # noqa: E731
    hessian, _, differentiated = autograd_hessian(function, values, None)
    row, block = double_backward_repeat(function, values, None, hessian, differentiated)
    assert DriftingCubeGradient.calls == 4  # one double-backward pass beside the Hessian's three
    assert row == 2 and block["index"] == [2, 2] and block["beyond_tolerance"] is beyond
    expected = torch.tensor([12 * (1 + 3 * step), 12 * (1 + 4 * step)], dtype=torch.float32)
    # the same float32 operations as the backward's, in its order: 12 is 2 * 6 * 1 * x, then the factor
    assert block["values"] == pytest.approx(expected.tolist(), rel=1e-6)  # a few float32 roundings apart
    assert block["tolerance"]["rtol"] == 1e-4


def test_the_repeat_costs_one_double_backward_pass():
    """Given a deterministic double backward (DriftingCubeGradient with no drift) counting its calls,
    when the autograd Hessian of three elements is taken and then repeated,
    then the Hessian calls it three times (one row each) and the repeat once, and finds the same bits."""
    values = {"x": X}
    DriftingCubeGradient.calls, DriftingCubeGradient.step = 0, 0.0
    function = lambda x: DriftingCube.apply(x).sum()  # noqa: E731
    hessian, _, differentiated = autograd_hessian(function, values, None)
    assert DriftingCubeGradient.calls == 3
    assert double_backward_repeat(function, values, None, hessian, differentiated) == (2, None)
    assert DriftingCubeGradient.calls == 4
