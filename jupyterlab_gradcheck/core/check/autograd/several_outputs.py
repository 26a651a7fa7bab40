"""A Python function returning a tuple or list of tensors, checked output by output.

As `torch.autograd.gradcheck` does for a tuple output, each output's gradient is checked: output
k's check is the check of the scalar sum(v_k * f_k), run as a one-output check of its own on
`f_k = lambda **x: function(**x)[k]` with output k's expectation and grad_output v_k, and the
results are merged into one record (docs/contracts.md, "Several outputs"). Outputs that are not
float or complex tensors, or that do not require grad, are listed as not differentiable and not
checked. `torch.autograd.gradcheck` itself runs once, on the whole function.

The expectation is written per output, `analytical_gradient = {"outputs": [e_0, e_1, ...]}`
(None for an output that is not differentiable), and grad_output, when given, is a list with one
entry per output (None: ones). Their counts are checked against the outputs before anything runs
(`check_outputs_fit`, called before the ledger is written).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch

from ...errors import GradcheckError, SpecError
from ...values.form import per_output_values
from ..compare.comparison import call_unmodified
from ..record.spec import CheckSpec


@dataclasses.dataclass
class Plan:
    """Each output's description, and for each differentiable output k its (spec, function)."""

    entries: list[dict]
    parts: dict[int, tuple[CheckSpec, Callable]]


def differentiable(output) -> bool:
    """Whether an output is one whose gradient is checked: a float or complex tensor requiring grad."""
    return (
        isinstance(output, torch.Tensor)
        and (output.is_floating_point() or output.is_complex())
        and output.requires_grad
    )


def forward_outputs(function, leaves: dict):
    """The outputs of one forward pass of a function whose expectation is written per output."""
    found = call_unmodified(function, leaves, values=True)
    if isinstance(found, torch.Tensor):
        raise SpecError(
            "analytical_gradient gives one expectation per output, but the function returns one tensor: "
            "write its expectation as for one output",
            field="analytical_gradient.outputs",
        )
    if not isinstance(found, (tuple, list)):
        raise SpecError("function returned {type}, not a tensor", type=type(found).__name__, field="function")
    return found


def differentiable_outputs(function, inputs: dict, dtype: str = "float64", device: str = "cpu") -> list[bool] | None:
    """For a function returning a tuple or list at `inputs` (numbers, lists or tensors, in `dtype` on
    `device`): whether each output is differentiable; None for a function returning one tensor."""
    from ...values.tensors import to_tensor

    leaves = {n: to_tensor(v, dtype, device, requires_grad=True) for n, v in inputs.items()}
    with torch.enable_grad():
        found = function(**leaves)
    return [differentiable(output) for output in found] if isinstance(found, (tuple, list)) else None


def _entry(index: int, output) -> dict:
    if not isinstance(output, torch.Tensor):
        return {"index": index, "shape": None, "dtype": type(output).__name__, "device": None, "differentiable": False}
    return {
        "index": index,
        "shape": list(output.shape),
        "dtype": str(output.dtype).replace("torch.", ""),
        "device": str(output.device),
        "differentiable": differentiable(output),
    }


def output_function(function: Callable, index: int) -> Callable:
    """`lambda **x: function(**x)[index]`, named after the function and the output, whose backward gives
    the function's other differentiable outputs zero gradients, not undefined ones: output k's check is
    sum(v_k * f_k) with zeros at the other outputs, as its expectation through a Function's backward is
    (core/check/autograd/observations.py); how a backward takes undefined gradients is observed on its
    own (core/check/autograd/forward_and_batched.py)."""

    def output_k(**values):
        found = function(**values)
        others = [o for i, o in enumerate(found) if i != index and differentiable(o)]
        chosen = found[index]
        if not others or not differentiable(chosen):
            return chosen
        return _zeros_to_others().apply(chosen, *others)

    output_k.__qualname__ = output_k.__name__ = f"{getattr(function, '__qualname__', 'function')}[{index}]"
    return output_k


@functools.lru_cache(maxsize=1)
def _zeros_to_others():
    """The autograd Function that returns its first argument and sends zeros back to the others."""

    class ZerosToOthers(torch.autograd.Function):
        @staticmethod
        def forward(ctx, chosen, *others):
            ctx.others = [(o.shape, o.dtype, o.device) for o in others]
            return chosen.clone()

        @staticmethod
        def backward(ctx, gradient):
            return (gradient, *(torch.zeros(shape, dtype=dtype, device=device) for shape, dtype, device in ctx.others))

    return ZerosToOthers


def _per_output(value, count: int, field: str, what: str) -> list:
    """A per-output list given for `count` outputs, or the SpecError saying the counts differ."""
    if not isinstance(value, (list, tuple)) or len(value) != count:
        given = len(value) if isinstance(value, (list, tuple)) else 1
        raise SpecError(
            "{what} gives {given} entries but the function returns {count} outputs: give one per output",
            what=what,
            given=given,
            count=count,
            field=field,
        )
    return list(value)


def plan(spec: CheckSpec, function: Callable, found) -> Plan:
    """What to check of each output; SpecError (nothing run yet) when the expectation or grad_output
    does not give one entry per output, or no output can be differentiated."""
    count = len(found)
    if not count:
        raise SpecError(
            "function returned an empty {type}: there is no output to check",
            type=type(found).__name__,
            field="function",
        )
    if spec.outputs_analytical is None:
        raise SpecError(
            'function returns {count} outputs: write analytical_gradient as {{"outputs": [...]}} with one '
            "expectation per output (in Python, grad= a tuple)",
            count=count,
            field="analytical_gradient",
        )
    expectations = _per_output(
        spec.outputs_analytical, count, "analytical_gradient.outputs", "analytical_gradient.outputs"
    )
    written = spec.analytical_gradient["outputs"]
    grad_outputs = (
        [None] * count
        if spec.grad_output is None
        else _per_output(per_output_values(spec.grad_output, count), count, "grad_output", "grad_output")
    )
    entries = [_entry(k, output) for k, output in enumerate(found)]
    parts = {}
    for k, entry in enumerate(entries):
        if not entry["differentiable"]:
            if expectations[k] is not None:
                raise SpecError(
                    "analytical_gradient.outputs[{k}] is given, but output {k} ({dtype}) is not "
                    "differentiated: write None for it",
                    k=k,
                    dtype=entry["dtype"],
                    field=f"analytical_gradient.outputs[{k}]",
                )
            continue
        if expectations[k] is None:
            raise SpecError(
                "analytical_gradient.outputs[{k}] is missing: write the expectation of output {k}",
                k=k,
                field=f"analytical_gradient.outputs[{k}]",
            )
        part_spec = dataclasses.replace(
            spec,
            analytical=expectations[k],
            analytical_gradient=written[k],
            outputs_analytical=None,
            grad_output=grad_outputs[k],
            hessian=None,
        )
        parts[k] = (part_spec, output_function(function, k))
    if not parts:
        raise SpecError(
            "none of the function's {count} outputs depends differentiably on the inputs", count=count, field="function"
        )
    return Plan(entries, parts)


def check_outputs_fit(spec: CheckSpec, device: str) -> None:
    """For a Python function, one forward pass: SpecError when its outputs do not fit the expectation
    or grad_output as written (run before a ledger entry is written, so nothing is)."""
    from ...values.form import refuse_complex_grad_output
    from ...values.tensors import to_tensor

    if spec.expression is not None:
        return
    leaves = {n: to_tensor(v, spec.dtype, device, requires_grad=True) for n, v in spec.inputs.items()}
    try:
        with torch.enable_grad():
            found = (
                forward_outputs(spec.function, leaves)
                if spec.outputs_analytical is not None
                else spec.function(**leaves)
            )
    except GradcheckError:
        raise
    except Exception:  # a forward that raises on the declared inputs is the check's finding (core/check/engine.py)
        return
    if isinstance(found, (tuple, list)):
        plan(spec, spec.function, found)
    elif isinstance(found, torch.Tensor):
        refuse_complex_grad_output(spec.grad_output, found)


def merge(found_plan: Plan, parts: dict[int, dict], verdict: dict) -> dict:
    """The record fields of a several-output check from each output's one-output fields: every
    comparison row and failure marked with its `output`, output 0's (the first differentiable one's)
    observations at the top level beside gradcheck's verdict on the whole function, and `outputs`."""
    entries = [dict(entry) for entry in found_plan.entries]
    rows, failures = [], []
    for k, fields in parts.items():
        own_rows = [{**row, "output": k} for row in fields["comparisons"]]
        own_failures = [{**failure, "output": k} for failure in fields["failures"]]
        entries[k].update(
            {
                "grad_output_used": fields["grad_output_used"],
                "analytical": fields["analytical"],
                "observations": fields["observations"],
                "comparisons": own_rows,
                "passed": not own_failures,
            }
        )
        rows += own_rows
        failures += own_failures
    first = parts[min(parts)]
    return {
        "observed_gradient": first["observed_gradient"],
        "passed": not failures and verdict["status"] != "failed",
        "grad_output_used": first["grad_output_used"],
        "analytical": first["analytical"],
        "observations": {**first["observations"], "torch_gradcheck": verdict},
        "comparisons": rows,
        "failure": failures[0] if failures else None,
        "failures": failures,
        "outputs": entries,
    }


def sweep_output(record: dict, parts: dict) -> int:
    """The output whose step sweep the record shows: the first failing one, else the first checked."""
    failing = [failure["output"] for failure in record["failures"] if failure.get("output") in parts]
    return failing[0] if failing else min(parts)
