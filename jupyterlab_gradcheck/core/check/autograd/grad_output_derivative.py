"""The double backward with respect to grad_output: the half of the second order a Hessian does not see.

A backward is a function of the input x and of its grad_output v, and `gradgradcheck` differentiates it
with respect to both. The Hessian (core/check/autograd/second_order.py) is its derivative with respect to
x alone; a backward whose value is right but whose graph is wrong in v (g + (g*g - (g*g).detach()) / 2
for a linear op, whose Hessian is zero either way) passes the Hessian and fails gradgradcheck. So, where
a second order is asked of a function through a custom Function, the derivative of sum(w * backward(v))
with respect to v (w a seeded standard normal per input) is taken by autograd and by central
differences in v, element by element of v, and compared. The backward is linear in v, so the differences
are exact up to rounding; each element's tolerance adds BOUND_FACTOR times that rounding.
"""

from __future__ import annotations

import torch

from ...errors import exception_line
from ...i18n import Message
from ..compare.comparison import compare
from .failures import event_failure, failure

#: Seed of the weights w.
SEED = 31
#: Elements of grad_output up to which each is differenced (two backward passes each); beyond, skipped.
MAX_ELEMENTS = 1024
#: Multiple of the rounding of the two evaluations allowed on top of the tolerance.
BOUND_FACTOR = 8.0
#: The comparison's name in the record.
NAME = "double_backward_in_grad_output_vs_finite_difference"


def _weighted(output, inputs: dict, weights: dict, v, *, create_graph: bool):
    """sum_n sum(w_n * backward(v)_n): the backward's gradients under grad_output v, weighted."""
    grads = torch.autograd.grad(
        output,
        list(inputs.values()),
        v,
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
        materialize_grads=True,
    )
    return sum((weights[n] * g).sum() for n, g in zip(inputs, grads))


def _derivatives(function, leaves: dict, v, weights: dict):
    """(autograd's d/dv sum(w * backward(v)), sum(w * backward(v + h e_j)) and (v - h e_j) for each j, h), or None
    where the backward is not differentiable in v."""
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        output = function(**inputs)
        at = v.detach().clone().requires_grad_(True)
        total = _weighted(output, inputs, weights, at, create_graph=True)
        if not total.requires_grad:  # a once_differentiable backward: no graph in v to compare
            return None
        (autograd,) = torch.autograd.grad(total, at, allow_unused=True, materialize_grads=True)
        h = max(1.0, float(v.detach().abs().max()))
        plus, minus = torch.empty_like(autograd).reshape(-1), torch.empty_like(autograd).reshape(-1)
        for j in range(v.numel()):
            step = torch.zeros_like(v).reshape(-1)
            step[j] = h
            plus[j] = _weighted(output, inputs, weights, v.detach() + step.reshape(v.shape), create_graph=False)
            minus[j] = _weighted(output, inputs, weights, v.detach() - step.reshape(v.shape), create_graph=False)
    return autograd, plus, minus, h


def grad_output_derivative(function, leaves: dict, v, tolerance: dict) -> dict:
    """The `grad_output` observation of the second order: d/dv sum(w * backward(v)) by autograd against central
    differences in v, its comparison and failures; skipped, with the reason, where it does not apply."""
    if v is None or v.is_complex() or v.numel() > MAX_ELEMENTS:
        return {"status": "skipped", "reason": Message("a complex or a large output: not differenced in grad_output")}
    generator = torch.Generator().manual_seed(SEED)
    weights = {n: torch.randn(x.shape, dtype=x.dtype, generator=generator).to(x.device) for n, x in leaves.items()}
    try:
        found = _derivatives(function, leaves, v, weights)
    except Exception as exc:  # a backward that runs only under some grad_outputs, or whose graph raises
        reason = Message("the double backward in grad_output raised: {error}", error=exception_line(exc))
        return {"status": "failed", "failures": [event_failure(NAME, reason, input_name="grad_output")]}
    if found is None:  # a once_differentiable backward: no graph in v to compare
        return {"status": "skipped", "reason": Message("the backward is not differentiable in its grad_output")}
    autograd, plus, minus, h = found
    fd = ((plus - minus) / (2 * h)).reshape(v.shape)
    bound = BOUND_FACTOR * torch.finfo(fd.dtype).eps * (plus.abs() + minus.abs()).reshape(v.shape) / (2 * h)
    row = compare(
        NAME,
        "grad_output",
        fd.detach(),
        autograd.detach(),
        left_label="finite_difference_in_grad_output",
        right_label="double_backward",
        bound=bound,
        **tolerance,
    )
    reason = Message(
        "the derivative of the backward with respect to its grad_output is wrong at grad_output{index}: the double "
        "backward gives {right} but differences in grad_output give {left}: suspect the backward's graph (its value "
        "is right, the derivative gradgradcheck takes of it is not)",
        index=row["worst"]["index"],
        right=f"{row['worst']['right']:.9g}",
        left=f"{row['worst']['left']:.9g}",
    )
    return {
        "status": "observed",
        "description": Message(
            "d/dv sum(w * backward(v)) by the double backward against central differences in v, w standard "
            "normal (seed {seed})",
            seed=SEED,
        ),
        "comparisons": [row],
        "failures": [] if row["passed"] else [failure(row, "probable_bug", reason)],
    }
