"""The expectation of a check as tensors: what the author wrote, evaluated at the inputs.

A value is converted to the check's dtype and device, an expression of the expression language
is evaluated, a Python callable is called with the (detached) inputs; each result is broadcast
to its input's shape, and one that cannot be is refused naming both shapes.
"""

from __future__ import annotations

import torch

from ...errors import SpecError
from ...expr.evaluator import compile_expression
from ...expr.parser import Expression
from ..compare.tensors import to_tensor
from ..record.spec import CheckSpec


def analytical_tensors(spec: CheckSpec, leaves: dict) -> dict:
    """The expectation as a tensor per input, broadcast to that input's shape."""
    result = {}
    detached = None
    for name, written in spec.analytical.items():
        if detached is None and (isinstance(written, Expression) or callable(written)):
            detached = {n: t.detach() for n, t in leaves.items()}
        if isinstance(written, Expression):
            with torch.no_grad():
                value = compile_expression(written)(**detached)
            value = torch.as_tensor(value, dtype=leaves[name].dtype, device=leaves[name].device)
        elif callable(written):
            with torch.no_grad():
                value = torch.as_tensor(written(**detached), dtype=leaves[name].dtype, device=leaves[name].device)
        else:
            value = to_tensor(written, spec.dtype, str(leaves[name].device))
        shape = leaves[name].shape
        try:
            result[name] = value if value.shape == shape else value.broadcast_to(shape)
        except RuntimeError:
            raise SpecError(
                "analytical_gradient for {name!r} has shape {shape}, which does not match the "
                "input's shape {input_shape}",
                name=name,
                shape=list(value.shape),
                input_shape=list(leaves[name].shape),
                field="analytical_gradient",
            ) from None
    return result
