"""The four autograd observations, each from a fresh forward pass (principle 4).

- `backward_pass_1`: `.grad` after one `backward()`.
- `backward_pass_2_accumulated`: a second forward and `backward()` with no clearing in
  between: `.grad` now holds the sum of both passes, twice pass 1 for a pure function.
- `after_clear_none`: after the deliberate `x.grad = None`, a fresh pass.
- `autograd_grad`: the return value of `torch.autograd.grad`, which leaves `.grad` untouched.
"""

from __future__ import annotations

import torch

from ..compare.described_once import Descriptions
from ..compare.forward_pass import forward, grad_output_for
from ..record.observation_names import DESCRIPTIONS
from .chain_paths import chain_possible
from .custom_functions import graph_functions, only_built_in_formulas


def _grads(leaves: dict) -> dict:
    return {
        name: (_copy(leaf.grad) if leaf.grad is not None else torch.zeros_like(leaf)) for name, leaf in leaves.items()
    }


def _copy(gradient):
    """A copy of a gradient that is cut from any graph (`.grad` normally has none to cut).

    autograd's immutable zero placeholder (a ZeroTensor, which cannot be read element by
    element) becomes ordinary zeros of the same shape, dtype and device.
    """
    if gradient._is_zerotensor():
        return torch.zeros(gradient.shape, dtype=gradient.dtype, device=gradient.device)
    return gradient.detach().clone() if gradient.requires_grad else gradient.clone()


def _observation(descriptions: Descriptions, name: str, grads: dict, note: str = "", **extra) -> dict:
    return {
        "name": name,
        "description": DESCRIPTIONS[name],
        "note": note,
        "gradients": {key: descriptions.describe(value) for key, value in grads.items()},
        **extra,
    }


def observe_autograd(function, leaves: dict, grad_output) -> tuple[dict, dict, object]:
    """Run the four passes; return (observations, raw gradient tensors by observation, v)."""
    for leaf in leaves.values():
        leaf.grad = None
    output = forward(function, leaves)
    v = grad_output_for(output, grad_output)
    functions = graph_functions(output)  # read before backward() frees the graph's buffers
    chains, built_in_only = chain_possible(output, leaves), only_built_in_formulas(output)
    # each pass gets a grad_output of its own: the backward of a view of the input hands the leaf a
    # gradient sharing v's storage, which autograd keeps as .grad, and pass 2 adds into it in place
    output.backward(v.clone())
    unused = [name for name, leaf in leaves.items() if leaf.grad is None]
    pass_1 = _grads(leaves)
    for leaf in leaves.values():
        if leaf.grad is not None and leaf.grad._is_zerotensor():
            # autograd's immutable zero placeholder (sgn of a real input): pass 2 must add into
            # .grad, so it is replaced by an ordinary tensor of the same zeros first
            leaf.grad = torch.zeros_like(leaf)

    forward(function, leaves).backward(v.clone())
    pass_2 = _grads(leaves)

    for leaf in leaves.values():
        leaf.grad = None  # the deliberate clearing the course asks for
    forward(function, leaves).backward(v.clone())
    after_clear = _grads(leaves)

    for leaf in leaves.values():
        leaf.grad = None
    names = list(leaves)
    returned = torch.autograd.grad(forward(function, leaves), [leaves[n] for n in names], v, allow_unused=True)
    untouched = all(leaves[n].grad is None for n in names)
    by_grad = {n: (_copy(g) if g is not None else torch.zeros_like(leaves[n])) for n, g in zip(names, returned)}
    unused_note = (
        f"input(s) {', '.join(unused)} do not reach the output: gradient None, shown as zeros. " if unused else ""
    )
    descriptions = Descriptions()  # equal gradients (pass 1, after clearing, autograd.grad) stored once
    raw = {
        "descriptions": descriptions,
        "custom_functions": functions,
        "chain_possible": chains,
        "built_in_only": built_in_only,
        "backward_pass_1": pass_1,
        "backward_pass_2_accumulated": pass_2,
        "after_clear_none": after_clear,
        "autograd_grad": by_grad,
    }
    observations = {
        "backward_pass_1": _observation(descriptions, "backward_pass_1", pass_1, unused_note),
        "backward_pass_2_accumulated": _observation(
            descriptions, "backward_pass_2_accumulated", pass_2, "no x.grad = None between the passes"
        ),
        "after_clear_none": _observation(descriptions, "after_clear_none", after_clear, "x.grad = None, then one pass"),
        "autograd_grad": _observation(
            descriptions,
            "autograd_grad",
            by_grad,
            ".grad stayed None: autograd.grad returns the gradient without touching .grad"
            if untouched
            else ".grad was written during torch.autograd.grad (unexpected)",
            grad_attribute_untouched=untouched,
        ),
    }
    return observations, raw, v
