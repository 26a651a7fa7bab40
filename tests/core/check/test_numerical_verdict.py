"""The numerical verdict and the batched finite differences under it."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.check.fd import finite_difference as evaluations
from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients
from jupyterlab_gradcheck.core.check.first_order import numerical_verdict
from jupyterlab_gradcheck.core.check.record import spec as defaults
from jupyterlab_gradcheck.core.errors import SpecError
from support.functions import CubeWrongAt


def test_elementwise_estimate_does_not_degrade_with_many_elements():
    """Given sin(x)*x at 2000 points in float64,
    when the numerical verdict runs with the default central step,
    then it passes and its worst error stays near the per-element floor."""
    x = torch.linspace(-2.0, 2.0, 2000, dtype=torch.float64)
    verdict = numerical_verdict(lambda x: torch.sin(x) * x, {"x": x})
    assert verdict["passed"] is True
    # One element's central difference errs by ~eps^(2/3) |f| ~ 1e-10 here. Differencing the
    # two 2000-term sums instead would leave eps * |phi| / h ~ 2e-16 * 1e3 / 6e-6 ~ 4e-8.
    assert verdict["comparisons"][0]["max_abs_err"] < 1e-9


def test_wrong_backward_is_named_by_its_index_through_the_loop_fallback():
    """Given a custom autograd.Function for x**3 whose backward adds 1 at element 123 of 300,
    when the numerical verdict runs on the general path (vmap cannot trace this Function, so
    the loop is used),
    then it fails pointing at index [123], finite differences at 3x^2 and autograd at 3x^2 + 1."""
    x = torch.linspace(0.5, 3.5, 300, dtype=torch.float64)
    verdict = numerical_verdict(lambda x: CubeWrongAt.apply(x), {"x": x}, structured=False)
    assert verdict["passed"] is False
    worst = verdict["worst"]
    assert worst["index"] == [123]
    expected = 3 * float(x[123]) ** 2
    # The central difference of x^3 errs by exactly h^2 (h = 6e-6 * 1.73 here): ~1e-10.
    assert worst["left"] == pytest.approx(expected, abs=1e-8)
    assert worst["right"] == pytest.approx(expected + 1.0, abs=1e-12)
    assert verdict["finite_difference"]["inputs"]["x"]["batched"] is False
    assert verdict["finite_difference"]["inputs"]["x"]["structure"] == "general"


@pytest.mark.parametrize("scheme", defaults.SCHEMES)
def test_chunk_size_does_not_change_an_estimate(monkeypatch, scheme):
    """Given sin(x) * w with x of shape [7, 3], w of shape [3] broadcast over its rows, and a
    random grad_output, on the general path and always evaluated with vmap,
    when the finite differences are taken in one chunk and in chunks of one element,
    then every estimate is bit for bit the same (a chunk assembled at a wrong offset would
    put another element's estimate there)."""
    generator = torch.Generator().manual_seed(0)
    values = {
        "x": torch.randn(7, 3, dtype=torch.float64, generator=generator),
        "w": torch.randn(3, dtype=torch.float64, generator=generator),
    }
    v = torch.randn(7, 3, dtype=torch.float64, generator=generator)

    def function(x, w):
        return torch.sin(x) * w

    # Elementwise operations round the same whatever the batch; a batched matmul does not on
    # every CPU (its kernel is chosen by batch size), so it would test BLAS, not the chunking.
    monkeypatch.setattr(evaluations, "LOOP_BELOW", 1)
    whole, _, _ = fd_gradients(
        function, values, v, FdOptions(dtype="float64", scheme=scheme, step=None, structured=False)
    )
    monkeypatch.setattr(evaluations, "CHUNK_ELEMENTS", 1)
    chunked, info, _ = fd_gradients(
        function, values, v, FdOptions(dtype="float64", scheme=scheme, step=None, structured=False)
    )
    assert info["inputs"]["x"]["forward_evaluations"] == 21 * len(defaults.SHIFTS[scheme])
    for name in values:
        assert torch.equal(whole[name], chunked[name])
    # Both are estimates of sum_rows(v * cos(x)) * w and v * sin(x) summed over rows: one
    # element's error is ~1e-10 for central differences (the worst scheme, forward, ~1e-7).
    assert torch.allclose(whole["x"], v * torch.cos(values["x"]) * values["w"], atol=1e-6, rtol=0)
    assert torch.allclose(whole["w"], (v * torch.sin(values["x"])).sum(0), atol=1e-6, rtol=0)


def test_adaptive_step_counts_rounding_where_phi_is_zero():
    """Given log at x = 1, where phi = log(1) = 0,
    when the adaptive central step is chosen,
    then the estimate of 1/x = 1 is accurate, because the rounding of x + h is counted."""
    grads, info, _ = fd_gradients(
        lambda x: torch.log(x),
        {"x": torch.tensor(1.0, dtype=torch.float64)},
        torch.ones((), dtype=torch.float64),
        FdOptions(dtype="float64", scheme="central", step="adaptive"),
    )
    # The central floor is eps^(2/3) ~ 4e-11; counting only eps*|phi|/h (zero here) chose a
    # step of 1e-9 whose error was 8e-8.
    assert abs(float(grads["x"]) - 1.0) < 1e-9
    assert info["inputs"]["x"]["telemetry"]["chosen_step"] >= 1e-7


def test_mixed_dtypes_are_refused():
    """Given one float64 and one float32 input, when the verdict is asked, then it refuses with
    a message naming the dtypes, before anything runs."""
    with pytest.raises(SpecError, match="mix dtypes") as caught:
        numerical_verdict(
            lambda x, w: x * w, {"x": torch.ones(2, dtype=torch.float64), "w": torch.ones(2, dtype=torch.float32)}
        )
    assert caught.value.field == "inputs"


def test_float32_verdict_uses_the_float32_tolerance():
    """Given exp at three points in float32, when the verdict runs, then it passes at the
    float32 central tolerance and records that tolerance."""
    verdict = numerical_verdict(torch.exp, {"input": torch.tensor([0.5, 1.0, 2.0])})
    assert verdict["passed"] is True
    assert verdict["dtype"] == "float32"
    assert verdict["rtol"] == defaults.fd_tolerance("float32", "central")["rtol"]
