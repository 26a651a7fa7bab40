"""One forward pass of the function under check, and the vector v of the v^T J it is compared by.

Every comparison starts here: the autograd observations, the numerical verdict and the projected
path each run the function once through `forward`, which refuses what cannot be differentiated,
and take v from the record's grad_output (`grad_output_for`).
"""

from __future__ import annotations

import torch

from ...errors import SpecError
from ...values.tensors import grad_output_tensor


class SeveralOutputs(SpecError):
    """A function returned a tuple or list: `run_check` then checks it output by output
    (core/check/autograd/several_outputs.py); anywhere else one tensor was expected, and this is the refusal."""

    def __init__(self, message: str, *, outputs, **params):
        super().__init__(message, field="function", **params)
        #: The outputs of the forward pass that found them (inputs requiring grad).
        self.outputs = outputs


def forward(function, leaves: dict):
    """One forward pass, refusing outputs that cannot be differentiated (a tuple or list of
    outputs raises `SeveralOutputs`, which carries them)."""
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
    if grad_output is None:
        return torch.ones_like(output)
    tensor = grad_output_tensor(grad_output, output)  # a complex value's form: core/values/form.py
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
