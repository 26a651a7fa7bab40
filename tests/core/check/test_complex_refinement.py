"""Complex inputs near a branch point: failing elements are re-estimated part by part.

The OpInfo sweep's complex128 family (benchmarks/bench_opinfo.py) failed asin, atanh, tan,
tanh and sinc, correct operators that gradcheck's slow mode accepts: at an element near a
branch point or a pole the default step's truncation error (~2e-7 for asin at 0.99-0.003i) is
far above a rounding-only tolerance. A real input's failing elements are re-estimated by
Richardson extrapolation over smaller steps before anything fails; a complex input's were not.
Each part (real, imaginary) is now re-estimated as a real element is, and a one-element error
of 1e-4 in a backward is still found.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check

Z = torch.tensor([0.99 - 0.0032j, 0.3 + 0.2j, -0.5 + 0.7j], dtype=torch.complex128)


def _fd_row(record: dict) -> dict:
    return next(c for c in record["comparisons"] if c["name"] == "autograd_vs_finite_difference")


def _expected():
    leaf = Z.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(torch.asin(leaf), leaf, torch.ones(3, dtype=torch.complex128))
    return gradient


def test_asin_near_its_branch_point_passes_after_re_estimation():
    """Given asin at 0.99-0.0032i (near the branch point 1) and two ordinary points,
    when the full check runs with autograd's gradient as the expectation,
    then it passes, and the record says the default step failed at the first element and
    the re-estimation resolved it (the default estimate alone was off by ~2e-7)."""
    gradient = _expected()
    record = run_check(
        {
            "function": lambda x: torch.asin(x),
            "inputs": {"x": Z},
            "dtype": "complex128",
            "analytical_gradient": {"x": lambda **_: gradient},
        }
    )
    assert record["failures"] == []
    assert _fd_row(record)["passed"] is True
    refinement = record["observations"]["finite_difference"]["refinement"]["x"]
    assert 0 in refinement["flat_indices"]
    assert refinement["elements"] >= 1 and refinement["still_failing"] == 0


class _WrongAsin(torch.autograd.Function):
    """asin whose backward is 1e-4 (relative) off at the element far from the branch point."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.asin(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        derivative = 1 / torch.sqrt(1 - x * x)
        wrong = derivative.clone()
        wrong[2] = wrong[2] * (1 + 1e-4)
        return grad * wrong.conj()


def test_a_one_element_error_of_1e_4_in_a_complex_backward_is_still_found():
    """Given the same points and a backward off by 1e-4 (relative) at -0.5+0.7i,
    when the full check runs with that backward's own output as the expectation,
    then the finite-difference comparison fails at that element: re-estimation does not
    explain away a real error."""
    leaf = Z.clone().requires_grad_(True)
    (wrong,) = torch.autograd.grad(_WrongAsin.apply(leaf), leaf, torch.ones(3, dtype=torch.complex128))
    record = run_check(
        {
            "function": lambda x: _WrongAsin.apply(x),
            "inputs": {"x": Z},
            "dtype": "complex128",
            "analytical_gradient": {"x": lambda **_: wrong},
        }
    )
    row = _fd_row(record)
    assert row["passed"] is False
    assert row["worst"]["flat_index"] == 2
    # the error put in: 1e-4 of |asin'(-0.5+0.7i)| ~ 0.76, far above any rounding or truncation allowance
    assert row["worst"]["abs_err"] > 5e-5
