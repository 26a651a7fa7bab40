"""Inputs with no elements: nothing to compare for them, said so in the record, never refused.

An input of shape (0, 5) (`mm` of an empty batch, say) has an empty gradient: there is no element
whose derivative could be wrong. A Python callable is checked on its other inputs, with the empty
ones passed to every call as they are (zeros of their shape); the record keeps every input, and
`empty_inputs` names each empty one with its shape and the reason. When every input is empty the
check has nothing to compare: it passes with no comparison, and `empty_inputs` says why.
"""

from __future__ import annotations

from ..i18n import Message
from .compare.tensors import to_tensor
from .environment import capture_environment
from .record.empty_values import is_empty_value
from .record.spec import CheckSpec


def empty_inputs(spec: CheckSpec) -> dict:
    """Input name -> shape, for each input of `spec` written as an empty array (core/check/record/empty_values.py)."""
    return {name: value["shape"] for name, value in spec.inputs.items() if is_empty_value(value)}


def run_without_empty(spec: CheckSpec, device: str, run) -> dict:
    """The completed record of `spec` (a Python callable with at least one empty input), `run` checking the rest."""
    empty = empty_inputs(spec)
    held = {name: to_tensor(spec.inputs[name], spec.dtype, device) for name in empty}
    note = {
        "inputs": {name: {"shape": shape} for name, shape in empty.items()},
        "reason": Message(
            "{names} has no elements: its gradient is empty, so there is nothing to compare for it",
            names=", ".join(empty),
        ),
    }
    rest = [name for name in spec.inputs if name not in empty]
    if not rest:
        record = spec.to_dict()
        record.update(
            {
                "executed": True,
                "passed": True,
                "comparisons": [],
                "failures": [],
                "failure": None,
                "observations": {},
                "environment": capture_environment(device),
                "empty_inputs": note,
            }
        )
        return record
    function = spec.function

    def with_empty(**inputs):
        return function(**inputs, **held)

    with_empty.__qualname__ = with_empty.__name__ = getattr(function, "__qualname__", type(function).__name__)
    with_empty.__wrapped__ = function  # its recorded source is the function's (inspect unwraps to it)
    record = run(_narrowed(spec, with_empty, rest))
    record["inputs"] = dict(spec.inputs)
    record["empty_inputs"] = note
    return record


def _narrowed(spec: CheckSpec, function, rest: list) -> dict:
    """The record of `spec` on the inputs `rest` alone, with its id, settings and expectation as written."""
    fd = spec.finite_difference
    written = {key: fd[key] for key in ("scheme", "step", "mode") if key in fd and fd[key] not in (None, "central")}
    if spec.fd_tolerance_explicit:
        written.update(rtol=fd["rtol"], atol=fd["atol"])
    record = {
        "id": spec.id,
        "function": function,
        "inputs": {name: spec.inputs[name] for name in rest},
        "analytical_gradient": _kept(spec.analytical_gradient, rest),
        "dtype": spec.dtype,
        "device": spec.device,
        "origin": spec.origin,
        "destination": spec.destination,
        **({"tolerance": dict(spec.tolerance)} if spec.tolerance_explicit else {}),
        **({"finite_difference": written} if written else {}),
        **({"grad_output": spec.grad_output} if spec.grad_output is not None else {}),
        **({"fixed": spec.fixed} if spec.fixed else {}),
        **({"hessian": spec.hessian} if spec.hessian is not None else {}),
    }
    return record


def _kept(expectation, rest: list):
    """The expectation of the inputs `rest`: a mapping (or each output's) narrowed to them."""
    if isinstance(expectation, dict) and "outputs" in expectation and len(expectation) == 1:
        return {"outputs": [_kept(entry, rest) for entry in expectation["outputs"]]}
    if isinstance(expectation, dict) and set(expectation) >= set(rest) and not is_empty_value(expectation):
        return {name: expectation[name] for name in rest}
    return expectation
