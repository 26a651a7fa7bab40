"""float32's finite-difference atol is the floor eps^(2/3), not 100 x it: a 1 % error on a small
gradient element is caught (core/check/record/spec.py, docs/tolerances.md)."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.record import spec as defaults

DEG = torch.pi / 180


def deg2rad_sum(x):
    return torch.deg2rad(x).sum()


def test_float32_central_atol_is_the_floor():
    """Given float32's central scheme, when its default tolerance is asked for, then rtol is 100 eps^(2/3)
    (2.4e-3) and atol eps^(2/3) (2.4e-5); float64 keeps 100 eps^(2/3) for both."""
    floor = torch.finfo(torch.float32).eps ** (2 / 3)
    assert defaults.fd_tolerance("float32", "central") == {"rtol": 100 * floor, "atol": floor}
    wide = 100 * torch.finfo(torch.float64).eps ** (2 / 3)
    assert defaults.fd_tolerance("float64", "central") == {"rtol": wide, "atol": wide}


def test_a_one_percent_wrong_float32_backward_is_caught_on_a_small_gradient():
    """Given a custom Function computing deg2rad whose backward is 1.01 times right at element 7,
    when it is checked in float32 against its own backward,
    then the finite differences find element 7 alone (1.7e-4 off, beyond 2.4e-5 + 2.4e-3 x 0.0175 plus
    its rounding bound, ~1e-6; the former atol of 2.4e-3 let it pass), and the right backward passes."""

    class Deg(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return torch.deg2rad(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, grad_output):
            found = grad_output * DEG
            found = found.clone()
            found[7] = found[7] * 1.01
            return found

    record = check(lambda x: Deg.apply(x).sum(), x=torch.linspace(-3.0, 3.0, 20), ledger=False).record
    assert record["passed"] is False
    failing = [f for f in record["failures"] if f["comparison"] == "autograd_vs_finite_difference"]
    assert [f["index"] for f in failing] == [[7]]


def test_deg2rad_in_float32_passes_against_its_own_gradient():
    """Given deg2rad summed over 20 float32 elements from -3 to 3, checked against pi/180 everywhere,
    when it is checked, then it passes: the smaller atol does not fail a right small gradient."""
    x = torch.linspace(-3.0, 3.0, 20)
    record = check(deg2rad_sum, lambda x: torch.full_like(x, DEG), x=x, ledger=False).record
    assert record["passed"] is True
