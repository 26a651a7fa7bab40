"""Forward mode and batched gradients of a check through custom autograd Functions: observed where
they apply, skipped with PyTorch's reason where they do not, a failure where they disagree."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from support.functions import Cube, CubeWithJvp

X = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64)


def test_a_function_with_a_jvp_is_observed_in_forward_mode_and_batched():
    """Given a Function with a right backward, jvp and vmap rule,
    when it is checked (its backward as the expectation),
    then forward-mode AD along u agrees with finite differences along u and with the backward's
    Jacobian, vmap over three grad_outputs equals them one at a time, and the check passes."""
    result = check(lambda x: CubeWithJvp.apply(x).sum(), x=X, ledger=False)
    modes = result.record["function_modes"]
    assert result.passed
    assert modes["functions"] == ["support.functions.CubeWithJvp"]
    assert modes["forward_ad"]["status"] == "observed" and modes["batched_grad"]["status"] == "observed"
    rows = {row["name"]: row for key in ("forward_ad", "batched_grad") for row in modes[key]["comparisons"]}
    assert set(rows) == {"forward_ad_vs_finite_difference", "forward_ad_vs_backward", "batched_grad_vs_one_at_a_time"}
    assert all(row["passed"] for row in rows.values())
    # forward AD and the backward along u: the same derivative summed two ways, equal to rounding
    assert rows["forward_ad_vs_backward"]["max_abs_err"] < 1e-12


def test_a_wrong_jvp_fails_as_forward_mode(monkeypatch):
    """Given the same Function whose jvp is 1.01 times too large,
    when it is checked, the backward still agrees with finite differences, and the check fails on
    forward mode, saying to suspect the jvp."""
    monkeypatch.setattr(CubeWithJvp, "jvp_scale", 1.01)
    result = check(lambda x: CubeWithJvp.apply(x).sum(), x=X, ledger=False)
    assert all(row["passed"] for row in result.record["comparisons"])
    assert not result.passed
    assert result.failure["comparison"] == "forward_ad_vs_finite_difference"
    assert result.failure["reason"].endswith("suspect the jvp")


def test_a_function_without_a_jvp_is_skipped_with_pytorchs_reason():
    """Given an old-style Function with no jvp,
    when it is checked, forward mode is skipped with PyTorch's own reason, and the check passes."""
    result = check(lambda x: Cube.apply(x).sum(), x=X, ledger=False)
    forward = result.record["function_modes"]["forward_ad"]
    assert result.passed and forward["status"] == "skipped"
    assert "You must implement the jvp function" in forward["reason"]


def test_a_function_without_custom_functions_has_no_function_modes():
    """Given a plain callable, when it is checked, there is no function_modes block (nothing of a
    custom Function to observe)."""
    result = check(lambda x: (x**3).sum(), grad=lambda x: 3 * x**2, x=X, ledger=False)
    assert result.passed and "function_modes" not in result.record


@pytest.mark.parametrize("language", ["es"])
def test_the_forward_mode_failure_reads_in_spanish(monkeypatch, language):
    """Given the wrong jvp, when the failure's reason is shown in Spanish, it still names the jvp."""
    monkeypatch.setattr(CubeWithJvp, "jvp_scale", 1.01)
    result = check(lambda x: CubeWithJvp.apply(x).sum(), x=X, ledger=False)
    assert "jvp" in result.failure["reason"].localized(language) and result.failure["reason"].localized(
        language
    ) != str(result.failure["reason"])
