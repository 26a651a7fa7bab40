"""The kink test reads a kink only where one-sided differences disagree beyond rounding.

On a linear operator with a large value the one-sided differences agree to six digits; the
seventh is rounding of the differenced values (eps |phi| / h). Read against the comparison's
tolerance alone that looked like a kink, and the diagnosis called a correct op non-differentiable.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.diagnosis import kink_evidence
from support.diagnosis_context import float64_context


def test_a_linear_op_with_a_large_value_is_not_a_kink():
    """Given phi(x) = sum(w * kron(a, x)) + 1e6, linear in x, with |phi| ~ 1e6 (one-sided
    differences at a step of ~1e-5 then round by ~eps |phi| / h ~ 2e-5, far above the default
    tolerance of ~4e-9 at a slope of ~1),
    when the kink test runs at one element,
    then it finds no kink, and the two one-sided differences it reports agree to 1e-3 (rounding
    at that size is ~1e-5: the bound below is loose by design, a kink would differ by O(1))."""
    a = torch.linspace(0.5, 1.5, 10, dtype=torch.float64)
    weights = torch.linspace(1.0, 2.0, 200, dtype=torch.float64)

    def function(x):
        return (torch.kron(a, x) * weights).sum() + 1e6

    x = torch.linspace(-1.0, 1.0, 20, dtype=torch.float64)
    is_kink, forward, backward = kink_evidence(float64_context(function, x), "x", 7)
    assert is_kink is False
    assert abs(forward - backward) < 1e-3


def test_a_real_kink_is_still_found():
    """Given phi(x) = sum(|x|) + 1e6 at an element where x is exactly 0 (one-sided slopes +1 and -1),
    when the kink test runs at that element,
    then it finds the kink despite the same rounding allowance, with one-sided differences of
    +1 and -1 (within 1e-3, the rounding of a value of 1e6 at that step)."""
    x = torch.tensor([-0.5, 0.0, 0.5], dtype=torch.float64)

    def function(x):
        return x.abs().sum() + 1e6

    is_kink, forward, backward = kink_evidence(float64_context(function, x), "x", 1)
    assert is_kink is True
    assert abs(forward - 1.0) < 1e-3 and abs(backward + 1.0) < 1e-3
