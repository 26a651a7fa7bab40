"""Finite differences that are right on operators the OpInfo sweep (benchmarks/bench_opinfo.py)
found them wrong on: functions that read storage directly, and large |x|.

Each story runs a correct operator with autograd's own gradient as the expectation, so a
failure can only come from our finite differences.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.check.fd.finite_difference import Probe, step_vector
from jupyterlab_gradcheck.core.check.fd.steps import STEP_SCALE_CAP
from jupyterlab_gradcheck.core.check.record import spec as defaults
from jupyterlab_gradcheck.core.values.tensors import to_tensor
from support.checks import check_against_autograd, fd_comparison


def _as_strided_sum(x):
    """A correct operator that reads x's storage at an absolute offset (storage_offset=0)."""
    weights = torch.linspace(0.5, 1.5, 6, dtype=x.dtype)
    return (torch.as_strided(x, (2, 3), (1, 2), 0).reshape(-1) * weights).sum()


@pytest.mark.parametrize("size", [7, 16], ids=["loop path", "batched path"])
def test_as_strided_finite_differences_are_not_zero(size):
    """Given as_strided with an explicit storage_offset of 0 on a 7-element input (few copies:
    evaluated one by one, each a row of one stacked buffer) and a 16-element input (enough
    copies to batch with vmap),
    when the full check runs with autograd's gradient as the expectation,
    then it passes: every copy is evaluated on storage of its own, so the finite differences
    equal the (non-zero) gradient instead of the 0 of a copy that read the first, unshifted row;
    and for the batched size the observation says the batched path was refused because the
    function's value depends on where its input sits in storage."""
    x = torch.linspace(-1.0, 1.0, size, dtype=torch.float64)
    record = check_against_autograd(_as_strided_sum, {"x": x})
    fd = to_tensor(record["observations"]["finite_difference"]["gradients"]["x"]["value"], "float64", "cpu")
    expected = to_tensor(record["observations"]["autograd_grad"]["gradients"]["x"]["value"], "float64", "cpu")
    assert record["failures"] == []
    assert float(expected.abs().max()) > 0.4  # the weights are 0.5..1.5: a zero estimate would be far off
    # 1e-8: a central difference of a linear function at the default step rounds to ~1e-10
    assert torch.allclose(fd, expected, rtol=0, atol=1e-8)
    info = record["observations"]["finite_difference"]["inputs"]["x"]
    if size == 16:
        assert "reads its input's storage" in info["batched_refused"]
        assert info["batched"] is False


def test_large_x_step_is_bounded_and_the_check_passes():
    """Given logcumsumexp over inputs near 1e4 (its derivative, a softmax-like weight, changes on
    a scale of 1 whatever |x| is),
    when the full check runs at the default settings,
    then the step is eps^(1/3) * 16, not eps^(1/3) * 1e4 = 0.06, the observation says the step
    was capped, and the check passes (a step of 0.06 puts a truncation error of ~1e-4 on it)."""
    x = 1e4 + torch.linspace(0.0, 3.0, 8, dtype=torch.float64)

    def function(x):
        return (torch.logcumsumexp(x, 0) * torch.linspace(1.0, 2.0, 8, dtype=x.dtype)).sum()

    record = check_against_autograd(function, {"x": x})
    assert record["failures"] == []
    assert record["passed"] is True
    assert "16" in record["observations"]["finite_difference"]["inputs"]["x"]["step_kind"]
    probe = Probe(function, {"x": x}, torch.ones(()), "x")
    h = step_vector(probe, None, "float64", "central")
    assert float(h.max()) == pytest.approx(defaults.fd_step("float64", "central") * STEP_SCALE_CAP, rel=1e-12)


def test_rounding_of_a_large_sum_is_within_each_elements_bound():
    """Given a correct matrix product reduced to a scalar whose terms are large (|phi| ~ 1e5),
    so that the rounding of the differenced sums, ~eps |phi| / h ~ 4e-6, is far above the
    default tolerance of 3.7e-9,
    when the full check runs at the default settings,
    then it passes, and the comparison records each element's error bound (the allowance the
    rounding earns), which stays far below 1e-4 of the gradient's scale."""
    generator = torch.Generator().manual_seed(0)
    a = 300.0 * torch.randn(40, 30, generator=generator, dtype=torch.float64)
    x = torch.randn(30, 20, generator=generator, dtype=torch.float64)
    weights = torch.linspace(0.5, 1.5, 800, dtype=torch.float64).reshape(40, 20)

    def function(x):
        return ((a @ x) * weights).sum() + 1e5

    record = check_against_autograd(function, {"x": x}, sweep=False)  # the sweep has its own stories
    row = fd_comparison(record)
    assert row["passed"] is True
    scale = float(
        to_tensor(record["observations"]["autograd_grad"]["gradients"]["x"]["value"], "float64", "cpu").abs().max()
    )
    assert 0 < row["error_bound"]["max"] < 1e-4 * scale
