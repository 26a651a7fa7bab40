"""The inline panel's HTML (and the HTML export's) shows a custom Function's second order,
forward mode and batched gradients with shape, dtype and device, and a skip with its reason."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.report.html_export import record_html
from support.functions import Cube, CubeWithJvp


def _code(name: str) -> str:
    """How the record's HTML shows a name: in a code element (styled), its text escaped."""
    return f'monospace)">{name}</code>'


X = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)


def test_second_order_and_function_modes_appear_with_shape_dtype_and_device():
    """Given a Function with a jvp checked with hessian=,
    when its record is rendered,
    then the second-order block names the Hessian observations with shape [4, 4], float64 and cpu,
    gradgradcheck's verdict and both Hessian comparisons; the function-modes block shows the
    tangent and the batched gradients with their shapes, and all three of its comparisons."""
    record = check(lambda x: CubeWithJvp.apply(x).sum(), x=X, hessian=torch.diag(6 * X), ledger=False).record
    html = record_html(record)
    assert "Second order: the Hessian of x" in html
    assert html.count("shape [4, 4] · dtype float64 · device cpu") == 2  # autograd and finite differences
    for name in (
        "hessian_autograd",
        "hessian_finite_difference",
        "torch_gradgradcheck",
        "hessian_analytical_vs_autograd",
        "hessian_autograd_vs_finite_difference",
    ):
        assert _code(name) in html
    assert "Forward mode and batched gradients" in html
    assert "shape [] · dtype float64 · device cpu" in html  # the tangent of the summed output
    assert "shape [3, 4] · dtype float64 · device cpu" in html  # three grad_outputs, batched
    for name in ("forward_ad_vs_finite_difference", "forward_ad_vs_backward", "batched_grad_vs_one_at_a_time"):
        assert _code(name) in html


def test_a_skipped_forward_mode_shows_pytorchs_reason():
    """Given an old-style Function with no jvp, when its record is rendered, forward_ad shows as
    skipped with PyTorch's own reason."""
    html = record_html(check(lambda x: Cube.apply(x).sum(), x=X, ledger=False).record)
    assert _code("forward_ad") in html and "You must implement the jvp function" in html


def test_the_step_sweep_of_a_function_with_several_outputs_names_its_output():
    """Given a function returning (sin x, x^2) whose expectation for output 1 is wrong at x[2],
    when its record is rendered in English and in Spanish,
    then the step sweep's heading and its SVG title name output 1, the output whose element it differenced,
    and a one-output record's heading names no output."""
    from jupyterlab_gradcheck.core.i18n import language

    x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    wrong = 2 * x.clone()
    wrong[2] += 1.0
    record = check(lambda x: (torch.sin(x), x * x), x=x, grad=(torch.cos(x), wrong), ledger=False).record
    assert record["step_sweep"]["output"] == 1
    html = record_html(record)
    assert "<b>Step sweep, output 1</b>" in html
    assert "difference error against step for x at 0.3 (output 1)</title>" in html
    with language("es"):
        assert "<b>Barrido de pasos, salida 1</b>" in record_html(record)
    single = check(lambda x: torch.sin(x).sum(), x=x, grad=torch.cos(x), ledger=False).record
    assert "<b>Step sweep</b>" in record_html(single)
