"""Evaluate a check once, without recording anything, so that bad input fails as bad input.

The expectation is written to the ledger before a check runs, and a ledger line cannot be
taken back. Some bad input only shows when torch sees the values: `x @ y` with shapes that
do not multiply, `x[5]` on three elements, an analytical gradient or `grad_output` whose
shape does not match. `preflight` finds those with one forward pass and turns them into a
one-line `SpecError` before any line is written. A Python callable is not evaluated here:
an exception in user code is a failure to run, kept in the ledger like any other.
"""

from __future__ import annotations

from .devices import resolve_device
from .errors import SpecError
from .spec import CheckSpec, parse_spec

#: What torch raises for values an expression cannot be evaluated on.
_EVALUATION_ERRORS = (RuntimeError, IndexError, TypeError, ValueError, ZeroDivisionError, OverflowError)


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split())
    return text[:200] or type(exc).__name__


def preflight(spec, *, devices: list | None = None) -> CheckSpec:
    """Validate, resolve the device and evaluate the expressions once; return the spec."""
    import torch

    from .engine import analytical_tensors
    from .expr_eval import compile_expression
    from .observe import forward, grad_output_for
    from .tensors import to_tensor

    spec = parse_spec(spec)
    device = resolve_device(spec.device, devices)
    if spec.expression is None:
        return spec
    function = compile_expression(spec.expression)
    try:
        leaves = {n: to_tensor(v, spec.dtype, device, requires_grad=True) for n, v in spec.inputs.items()}
        output = forward(function, leaves)
        grad_output_for(output, spec.grad_output)
    except SpecError:
        raise
    except _EVALUATION_ERRORS as exc:
        raise SpecError(f"function cannot be evaluated on these inputs: {_first_line(exc)}",
                        field="function") from None
    try:
        with torch.no_grad():
            analytical_tensors(spec, leaves)
    except SpecError:
        raise
    except _EVALUATION_ERRORS as exc:
        raise SpecError(f"analytical_gradient cannot be evaluated on these inputs: {_first_line(exc)}",
                        field="analytical_gradient") from None
    return spec
