"""Undefined output gradients, as `torch.autograd.gradcheck(check_undefined_grad=True)` checks them.

Autograd does not always hand a backward a tensor for each output: when an output's gradient is
undefined (the output was not used, or a backward upstream returned None for it), a custom
Function receives zeros, or None when it called `ctx.set_materialize_grads(False)`. A backward
that does arithmetic on that None crashes, in some later training run rather than in its own
check. So, for a function whose graph passes through a custom Function, the check calls the
backward with every output's gradient undefined, then (several outputs) each output's gradient
undefined in turn, the others zeros, exactly as gradcheck's `_test_undefined_backward_mode`
does. Each case must not crash, and every input's gradient must come back None or zeros: all the
grad_outputs are undefined or zero, so any other gradient is wrong.
"""

from __future__ import annotations

import torch

from ...errors import exception_line
from ...i18n import Message
from ..compare.comparison import compare
from ..compare.tensors import describe
from .failures import event_failure
from .several_outputs import differentiable

#: Why a nonzero gradient in a case fails.
UNDEFINED_REASON = Message(
    "with every grad_output undefined or zero the backward returned a nonzero gradient: it "
    "must return None or zeros when its grad_output is undefined"
)


def _outputs(found) -> list:
    return list(found) if isinstance(found, (tuple, list)) else [found]


def _case(function, leaves: dict, undefined: list[int] | None):
    """One backward with the gradients of the outputs `undefined` (None: all) undefined and every
    other grad_output zeros: (input gradients or None for each input, the exception or None)."""
    fresh = {n: t.detach().clone().requires_grad_(True) for n, t in leaves.items()}
    with torch.enable_grad():
        wrapped = [
            torch._C._functions.UndefinedGrad()(o) if undefined is None or k in undefined else o
            for k, o in enumerate(_outputs(function(**fresh)))
            if differentiable(o)
        ]
        try:
            grads = torch.autograd.grad(
                wrapped, list(fresh.values()), [torch.zeros_like(o) for o in wrapped], allow_unused=True
            )
        except Exception as exc:  # the backward could not take an undefined gradient: the finding
            return None, exc
    return dict(zip(fresh, grads)), None


def _crash_reason(undefined: list[int] | None, several: bool, exc: Exception) -> str:
    if undefined is not None:
        return Message(
            "the backward crashed when the gradient of output {k} was undefined (None) and the others zero: {error}",
            k=undefined[0],
            error=exception_line(exc),
        )
    if several:
        return Message(
            "the backward crashed with every output's gradient undefined (None): {error}", error=exception_line(exc)
        )
    return Message("the backward crashed when its gradient was undefined (None): {error}", error=exception_line(exc))


def undefined_grad(function, leaves: dict) -> dict:
    """The `undefined_grad` observation: each case with its gradients (or its crash), comparisons of
    each returned gradient with zero, and the failures of the cases that crashed."""
    with torch.enable_grad():
        found = function(**{n: t.detach().clone().requires_grad_(True) for n, t in leaves.items()})
    several = isinstance(found, (tuple, list))
    indices = [k for k, o in enumerate(_outputs(found)) if differentiable(o)]
    cases = [None] + ([[k] for k in indices] if len(indices) > 1 else [])
    observed, comparisons, failures = [], [], []
    for undefined in cases:
        label = "all" if undefined is None else undefined[0]
        grads, exc = _case(function, leaves, undefined)
        if exc is not None:
            reason = _crash_reason(undefined, several, exc)
            observed.append({"undefined": label, "status": "crashed", "reason": reason})
            failures.append(event_failure("undefined_grad", reason, undefined=label))
            continue
        returned = {name: None if g is None else describe(g.detach()) for name, g in grads.items()}
        observed.append({"undefined": label, "status": "returned", "gradients": returned})
        for name, gradient in grads.items():
            if gradient is not None:
                row = compare(
                    "undefined_grad_vs_zero",
                    name,
                    torch.zeros_like(gradient),
                    gradient.detach(),
                    left_label="zero",
                    right_label="gradient",
                    rtol=0.0,
                    atol=0.0,
                )
                comparisons.append({**row, "undefined": label})
    return {
        "status": "observed",
        "description": Message(
            "backward with every output's gradient undefined, then each output's in turn "
            "(others zero), as gradcheck's check_undefined_grad: no crash, and None or zeros"
        ),
        "cases": observed,
        "comparisons": comparisons,
        "failures": failures,
    }
