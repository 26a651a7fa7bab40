"""The four autograd observations, each from a fresh forward pass (principle 4).

- `backward_pass_1`: `.grad` after one `backward()`.
- `backward_pass_2_accumulated`: a second forward and `backward()` with no clearing in
  between: `.grad` now holds the sum of both passes, twice pass 1 for a pure function.
- `after_clear_none`: after the deliberate `x.grad = None`, a fresh pass.
- `autograd_grad`: the return value of `torch.autograd.grad`, which leaves `.grad` untouched.
"""

from __future__ import annotations

from ..errors import SpecError
from ..i18n import N_
from .chain_paths import chain_possible
from .complex_values import grad_output_tensor
from .custom_functions import graph_functions, only_built_in_formulas
from .tensors import describe

DESCRIPTIONS = {
    "backward_pass_1": N_("x.grad after one forward pass and one backward()"),
    "backward_pass_2_accumulated": N_(
        "x.grad after a second forward pass and backward() with no clearing in between: "
        "backward() adds into .grad, so a pure function gives twice pass 1"
    ),
    "after_clear_none": N_("x.grad after the deliberate clearing x.grad = None and a fresh pass"),
    "autograd_grad": N_("return value of torch.autograd.grad(y, x, grad_output); it does not write .grad"),
}


class SeveralOutputs(SpecError):
    """A function returned a tuple or list: `run_check` then checks it output by output
    (core/check/outputs.py); anywhere else one tensor was expected, and this is the refusal."""

    def __init__(self, message: str, *, outputs, **params):
        super().__init__(message, field="function", **params)
        #: The outputs of the forward pass that found them (inputs requiring grad).
        self.outputs = outputs


def forward(function, leaves: dict):
    """One forward pass, refusing outputs that cannot be differentiated (a tuple or list of
    outputs raises `SeveralOutputs`, which carries them)."""
    import torch

    output = function(**leaves)
    if isinstance(output, (tuple, list)):
        raise SeveralOutputs(
            "function returned a {type} of {count} outputs where one tensor was expected",
            outputs=output,
            type=type(output).__name__,
            count=len(output),
        )
    if not isinstance(output, torch.Tensor):
        raise SpecError("function returned {type}, not a tensor", type=type(output).__name__, field="function")
    if not (output.is_floating_point() or output.is_complex()) or not output.requires_grad:
        raise SpecError(
            "function output (dtype {dtype}) does not depend differentiably on the inputs",
            dtype=str(output.dtype).replace("torch.", ""),
            field="function",
        )
    return output


def grad_output_for(output, grad_output):
    """The vector v in v^T J: the record's grad_output, or ones shaped like the output."""
    import torch

    if grad_output is None:
        return torch.ones_like(output)
    tensor = grad_output_tensor(grad_output, output)  # a complex value's form: core/check/complex_values.py
    if tensor.shape != output.shape:
        if tensor.numel() == 1:
            return tensor.reshape(()).expand_as(output).clone()
        raise SpecError(
            "grad_output has shape {shape} but the output has shape {output_shape}",
            shape=list(tensor.shape),
            output_shape=list(output.shape),
            field="grad_output",
        )
    return tensor


def _grads(leaves: dict) -> dict:
    import torch

    return {
        name: (_copy(leaf.grad) if leaf.grad is not None else torch.zeros_like(leaf)) for name, leaf in leaves.items()
    }


def _copy(gradient):
    """A copy of a gradient that is cut from any graph (`.grad` normally has none to cut).

    autograd's immutable zero placeholder (a ZeroTensor, which cannot be read element by
    element) becomes ordinary zeros of the same shape, dtype and device.
    """
    import torch

    if gradient._is_zerotensor():
        return torch.zeros(gradient.shape, dtype=gradient.dtype, device=gradient.device)
    return gradient.detach().clone() if gradient.requires_grad else gradient.clone()


def _observation(name: str, grads: dict, note: str = "", **extra) -> dict:
    return {
        "name": name,
        "description": DESCRIPTIONS[name],
        "note": note,
        "gradients": {key: describe(value) for key, value in grads.items()},
        **extra,
    }


def observe_autograd(function, leaves: dict, grad_output) -> tuple[dict, dict, object]:
    """Run the four passes; return (observations, raw gradient tensors by observation, v)."""
    import torch

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
    raw = {
        "custom_functions": functions,
        "chain_possible": chains,
        "built_in_only": built_in_only,
        "backward_pass_1": pass_1,
        "backward_pass_2_accumulated": pass_2,
        "after_clear_none": after_clear,
        "autograd_grad": by_grad,
    }
    observations = {
        "backward_pass_1": _observation("backward_pass_1", pass_1, unused_note),
        "backward_pass_2_accumulated": _observation(
            "backward_pass_2_accumulated", pass_2, "no x.grad = None between the passes"
        ),
        "after_clear_none": _observation("after_clear_none", after_clear, "x.grad = None, then one pass"),
        "autograd_grad": _observation(
            "autograd_grad",
            by_grad,
            ".grad stayed None: autograd.grad returns the gradient without touching .grad"
            if untouched
            else ".grad was written during torch.autograd.grad (unexpected)",
            grad_attribute_untouched=untouched,
        ),
    }
    return observations, raw, v
