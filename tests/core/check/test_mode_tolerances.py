"""Forward mode, batched gradients and the second order take their tolerances from the dtype's rounding
and the differences' truncation, as the first order does (core/check/fd/steps.py), and a
device that runs float32 in TF32 bounds it with TF32's precision (core/check/fd/steps.py)."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.environment import capture_environment
from jupyterlab_gradcheck.core.check.fd.steps import (
    TF32_EPS,
    difference_bound,
    mode_tolerances,
    precision_name,
    working_eps,
)
from support.functions import CubeWithJvp


class WrongJvpAt6(CubeWithJvp):
    """docs/api.md's CubeJvp (tests/support/functions.py) with its jvp 1.01 times right at element 6."""

    @staticmethod
    def jvp(ctx, tangent):
        found = (3 * ctx.x**2 * tangent).clone()
        found[6] = found[6] * 1.01
        return found


def forward_comparisons(function, x) -> dict:
    modes = check(lambda x: function.apply(x).sum(), x=x, ledger=False).record["function_modes"]
    return {c["name"]: c for c in modes["forward_ad"]["comparisons"]}


def test_float32_forward_mode_of_a_right_jvp_passes():
    """Given docs/api.md's CubeJvp in float32 at seven points in [-2, 2],
    when it is checked,
    then forward mode passes against finite differences along u (it failed at the old fixed 1e-6 with
    an error of ~5e-4), under float32's tolerance 100 eps^(2/3) and a rounding bound of its own."""
    x = torch.linspace(-2.0, 2.0, 7, dtype=torch.float32)
    rows = forward_comparisons(CubeWithJvp, x)
    along = rows["forward_ad_vs_finite_difference"]
    assert along["passed"] is True and along["max_abs_err"] > 1e-6
    assert along["rtol"] == pytest.approx(100 * torch.finfo(torch.float32).eps ** (2 / 3))
    assert along["error_bound"]["max"] > 0
    assert rows["forward_ad_vs_backward"]["passed"] is True and rows["forward_ad_vs_backward"]["rtol"] == 1e-4


def test_float32_forward_mode_still_catches_a_one_percent_wrong_jvp():
    """Given the same CubeJvp whose jvp is 1.01 times right at the element x = 2 (tangent ~ 12 |u|),
    when it is checked in float32,
    then forward mode against finite differences fails: the sum's tangent moves by 0.12 |u_6|, beyond
    the tolerance, while the backward, which is right, agrees with neither."""
    x = torch.linspace(-2.0, 2.0, 7, dtype=torch.float32)
    rows = forward_comparisons(WrongJvpAt6, x)
    along = rows["forward_ad_vs_finite_difference"]
    assert along["passed"] is False and along["max_abs_err"] > along["atol"] + along["rtol"] * abs(
        along["worst"]["right"]
    )
    assert rows["forward_ad_vs_backward"]["passed"] is False


def test_float64_modes_keep_their_tolerances():
    """Given float64 on the CPU, when the modes' tolerances are asked for, then they are the modes'
    long-standing 1e-9 (exact) and 1e-6 (differences), and the precision is float64."""
    found = mode_tolerances(torch.float64, "cpu")
    assert found["exact"] == {"rtol": 1e-9, "atol": 1e-9}
    assert found["differences"] == {"rtol": 1e-6, "atol": 1e-6}
    assert found["precision"] == "float64" and found["fd_dtype"] is torch.float64


def test_half_precisions_take_the_first_orders_rule():
    """Given float16 and bfloat16, when the modes' tolerances are asked for, then both comparisons take
    the half-precision result's first-order rtol (1e-2, 5e-2) and the differences go in float32."""
    half, brain = mode_tolerances(torch.float16, "cpu"), mode_tolerances(torch.bfloat16, "cpu")
    assert half["exact"]["rtol"] == half["differences"]["rtol"] == 1e-2
    assert brain["exact"]["rtol"] == brain["differences"]["rtol"] == 5e-2
    assert half["fd_dtype"] is brain["fd_dtype"] is torch.float32


def test_difference_bound_is_the_rounding_of_the_differenced_values():
    """Given f(x + h u) = 1000 and f(x - h u) = 998 in float32 over a width of 0.01,
    when the difference's bound is taken,
    then it is 4 eps (1000 + 998) / 0.01, the first order's bound of the same quotient."""
    plus, minus = torch.tensor([1000.0]), torch.tensor([998.0])
    bound = difference_bound(plus, minus, 0.01)
    assert float(bound[0]) == pytest.approx(4 * torch.finfo(torch.float32).eps * 1998 / 0.01)


def test_the_cpu_never_runs_float32_in_tf32():
    """Given float32 on the CPU, whatever the float32 matmul precision says,
    when its working precision is asked for,
    then it is float32's own eps (TF32 is a CUDA mode)."""
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert working_eps(torch.float32, "cpu") == torch.finfo(torch.float32).eps
        assert precision_name(torch.float32, "cpu") == "float32"
    finally:
        torch.set_float32_matmul_precision(before)


def test_the_environment_records_the_float32_matmul_precision():
    """Given a CPU check, when its environment is captured, then the float32 matmul precision is recorded."""
    env = capture_environment("cpu")
    assert env["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert "cudnn_allow_tf32" not in env


@pytest.mark.cuda
def test_tf32_on_cuda_bounds_float32_with_tf32s_precision():
    """Given a CUDA device with TF32 allowed for matrix products,
    when float32's working precision is asked for and the environment is captured,
    then the bound uses TF32's eps (2^-10) and the record says "tf32" with every math mode."""
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert working_eps(torch.float32, "cuda") == TF32_EPS
        assert working_eps(torch.float64, "cuda") == torch.finfo(torch.float64).eps
        assert mode_tolerances(torch.float32, "cuda")["precision"] == "tf32"
        env = capture_environment("cuda")
        assert env["float32_precision"] == "tf32" and env["cuda_matmul_allow_tf32"] is True
        assert {"cudnn_allow_tf32", "cudnn_deterministic", "cudnn_benchmark"} <= set(env)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


@pytest.mark.cuda
def test_a_tf32_matmul_passes_and_a_one_percent_error_is_still_caught():
    """Given (x @ x.T).tanh().sum() over a 16 x 64 float32 x on cuda with TF32 allowed for matrix
    products, checked once against autograd and once against autograd's gradient x1.01 at one element,
    then the right gradient passes (its TF32 rounding is within the TF32 bound) and the wrong one fails."""
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        x = torch.randn(16, 64, generator=torch.Generator().manual_seed(0)).cuda()

        def function(x):
            return (x @ x.T).tanh().sum()

        def wrong(x):
            found = torch.func.grad(function)(x).clone()
            found[3, 5] = found[3, 5] * 1.01 + 0.05  # 1 % and an offset above TF32's rounding of the element
            return found

        right = check(function, lambda x: torch.func.grad(function)(x), x=x, ledger=False).record
        assert right["passed"] is True, right["failure"]
        assert right["environment"]["float32_precision"] == "tf32"
        assert check(function, wrong, x=x, ledger=False).record["passed"] is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
