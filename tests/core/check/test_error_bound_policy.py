"""Tolerances from the error bound: a correct op is not failed as precision_limited at the default
settings, a small wrong backward is still caught, and a record names the rules it was made under.
"""

from __future__ import annotations

import math

import pytest
import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients
from jupyterlab_gradcheck.core.check.record.spec import RULES
from jupyterlab_gradcheck.core.values.tensors import to_tensor
from support.checks import WrongAtOneElement, check_against_autograd, fd_comparison

#: tan near pi/2: f''' ~ 6 / cos^4 is ~1e7 at x = 1.52, so a central difference at the default
#: step (6e-6) carries a truncation error h^2 f''' / 6 ~ 6e-5, far above the tolerance 3.7e-9.
NEAR_POLE = [1.52, 0.3, -1.5]


def _tan_sum(x):
    return (torch.tan(x) * torch.tensor([1.0, 2.0, 3.0], dtype=x.dtype)).sum()


def test_truncation_near_a_pole_is_resolved_before_failing_and_the_record_says_how():
    """Given tan at 1.52 and -1.5 (close to its poles) in float64 at the default settings,
    when the full check runs with autograd's gradient as the expectation,
    then it passes: the elements the default step could not resolve were re-estimated with
    Richardson extrapolation over smaller steps, and the observation says which and how."""
    record = check_against_autograd(_tan_sum, {"x": NEAR_POLE}, sweep=False)
    assert record["passed"] is True
    refinement = record["observations"]["finite_difference"]["refinement"]["x"]
    assert refinement["elements"] >= 1 and refinement["still_failing"] == 0
    assert 0 in refinement["flat_indices"]  # x = 1.52 is the element a default step cannot resolve
    assert "Richardson" in refinement["tried"]


def test_a_declaration_naming_a_policy_runs_under_todays_rules():
    """Given the seed record declared with a policy of 0.1.0 (1, the first) and with one that never existed (8),
    when each is run, then neither is refused: the field is accepted and not acted on, and both records name
    today's rules instead and pass, as the seed record does."""
    for policy in (1, 8):
        record = run_check({"function": "x*x", "x": 3, "analytical_gradient": 6, "policy": policy}, sweep=False)
        assert (record["rules"], "policy" in record, record["passed"]) == (RULES, False, True)


@pytest.mark.parametrize("kind", ["+1e-4 of scale", "x1.01"])
def test_a_backward_wrong_at_one_element_is_still_caught(kind):
    """Given a matrix-vector product reduced to a scalar, wrapped in a Function whose backward is
    autograd's gradient wrong at one element (moved by 1e-4 of the gradient's largest magnitude,
    or scaled by 1.01), with that wrong gradient as the expectation,
    when the full check runs,
    then the finite-difference comparison fails at that element, diagnosed probable_bug: the
    error bound and the re-estimation do not excuse it."""
    generator = torch.Generator().manual_seed(3)
    a = torch.randn(12, 30, generator=generator, dtype=torch.float64)
    weights = torch.linspace(0.5, 1.5, 12, dtype=torch.float64)
    x = torch.randn(30, generator=generator, dtype=torch.float64)

    def correct(x):
        return ((a @ x) * weights).sum()

    gradient = (weights @ a).clone()
    wrong = gradient.clone()
    if kind == "x1.01":
        wrong[17] = wrong[17] * 1.01
    else:
        wrong[17] = wrong[17] + 1e-4 * float(gradient.abs().max())
    WrongAtOneElement.function, WrongAtOneElement.gradient = staticmethod(correct), wrong
    record = check_against_autograd(lambda x: WrongAtOneElement.apply(x), {"x": x}, {"x": wrong}, sweep=False)
    row = fd_comparison(record)
    assert row["passed"] is False
    assert row["worst"]["flat_index"] == 17
    failure = next(f for f in record["failures"] if f["comparison"] == "autograd_vs_finite_difference")
    assert failure["diagnosis"] == "probable_bug"
    assert math.isclose(failure["right"], float(wrong[17]), rel_tol=0, abs_tol=0)


def test_a_step_that_vanishes_in_rounding_gives_zero_not_nan():
    """Given x*x at 3 in float32 with a chosen step of 1e-7, below half an ulp of 3 (x + h == x),
    when the check runs,
    then the finite difference is exactly 0 (the shifted copies equal x), not the 0/0 of dividing
    by the step taken, and the failure is diagnosed precision_limited, as a step the dtype cannot
    resolve should be."""
    record = run_check(
        {
            "function": "x*x",
            "x": 3.0,
            "dtype": "float32",
            "analytical_gradient": "2*x",
            "finite_difference": {"step": 1e-7},
        },
        sweep=False,
    )
    assert record["observations"]["finite_difference"]["gradients"]["x"]["value"] == 0.0
    assert record["failure"]["diagnosis"] == "precision_limited"


def test_a_large_banded_loss_takes_the_coloured_path_and_agrees_with_the_general_one():
    """Given a banded loss over 300 elements (its general path costs 90,000 element evaluations, above
    COLOURED_FROM_WORK), when it is checked, and its finite differences are also taken on the general path of 600
    shifted copies, then the check takes the coloured path in a handful of evaluations and passes, with estimates
    that agree with the general path's within that path's rounding."""
    x = torch.linspace(-1.0, 1.0, 300, dtype=torch.float64)

    def banded(x):
        return torch.tanh(x[1:] * x[:-1]).sum()

    new = check_against_autograd(banded, {"x": x})
    new_fd = new["observations"]["finite_difference"]
    assert (new["rules"], new_fd["inputs"]["x"]["structure"]) == (RULES, "coloured")
    assert new_fd["inputs"]["x"]["forward_evaluations"] < 20
    assert new["passed"]
    general, info, _ = fd_gradients(
        banded,
        {"x": x},
        torch.ones((), dtype=torch.float64),
        FdOptions(dtype="float64", scheme="central", step=None, structured=False),
    )
    assert (info["inputs"]["x"]["structure"], info["inputs"]["x"]["forward_evaluations"]) == ("general", 600)
    # 2e-8: the general path differences the whole sum, |phi| ~ 88 here, so its rounding is
    # ~eps * |phi| / h ~ 2.2e-16 * 88 / 6e-6 ~ 3e-9 per element (measured 1.2e-9); the coloured path
    # differences each body element alone and rounds 100x less. 2e-8 is still 500x below the 1e-5
    # a real error would have to beat.
    assert torch.allclose(
        general["x"], to_tensor(new_fd["gradients"]["x"]["value"], "float64", "cpu"), atol=2e-8, rtol=0
    )


def test_a_small_input_stays_on_the_general_path_without_learning_a_pattern():
    """Given the same banded loss over 100 elements (10,000 element evaluations on the general path,
    below COLOURED_FROM_WORK),
    when it is checked,
    then no pattern is traced (learning it would cost more than the 200 batched copies it saves)
    and the general path runs."""
    x = torch.linspace(-1.0, 1.0, 100, dtype=torch.float64)
    record = check_against_autograd(lambda x: torch.tanh(x[1:] * x[:-1]).sum(), {"x": x}, sweep=False)
    info = record["observations"]["finite_difference"]["inputs"]["x"]
    assert (record["rules"], info["structure"], info["forward_evaluations"]) == (RULES, "general", 200)
    assert "pattern_evaluations" not in info and record["passed"]
