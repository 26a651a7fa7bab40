"""Run one gradient check: observe, compare, diagnose, and return the completed record.

`run_check` takes a record (or a parsed `CheckSpec`) and returns the record of
docs/contracts.md: every observation with its shape, dtype and device, every comparison with
its tolerance, the failures kept with their diagnosis, SymPy's opinion, the step sweep and
the environment. `check_callable` does the same for a Python callable, including the
`apply` of a custom `torch.autograd.Function`. Neither writes a ledger: `core.ledger.ledgered_run`
wraps them for that (`run_and_record`, `LedgeredRun`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import SpecError
from ..expr.evaluator import compile_expression
from ..expr.symbolic import symbolic_opinion
from ..i18n import Message
from .autograd import several_outputs
from .autograd.custom_functions import graph_functions, only_built_in_formulas
from .autograd.forward_and_batched import MODES, function_modes
from .autograd.grad_output_derivative import grad_output_derivative
from .autograd.observations import observe_autograd
from .autograd.second_order import second_order, second_order_of_outputs
from .autograd.signature import check_signature
from .autograd.torch_gradcheck import gradcheck_fast, torch_gradcheck
from .autograd.undefined_grad import UNDEFINED_REASON
from .compare.forward_pass import SeveralOutputs
from .compare.tensors import to_tensor
from .empty_inputs import empty_inputs, run_without_empty
from .environment import available_devices, capture_environment
from .failing_record import ensure_failure
from .first_order import FirstOrder, elements, failure, first_order
from .random_grad_output import by_output, random_grad_output
from .record.devices import resolve_device
from .record.spec import CheckSpec, parse_spec

#: Input elements above which a passing check's record has no step sweep by default. The sweep costs
#: 68 evaluations of the function (17 decades, two signs, float32 and float64) wherever it cannot ride
#: along with the finite differences (core/check/fd/sweep_riders.py): beside an elementwise check's
#: three evaluations at 10^4 elements it was half the check's time.
SWEEP_MAX_ELEMENTS = 1_000
#: Input elements above which a failing check's record has no step sweep by default: where a check
#: fails, the sweep at the worst element is part of its explanation, and worth its evaluations.
SWEEP_FAILED_MAX_ELEMENTS = 10_000


#: Why each comparison of core/check/autograd/forward_and_batched.py fails, in the failure it becomes.
_MODE_REASONS = {
    "forward_ad_vs_finite_difference": Message(
        "forward-mode AD (the Function's jvp) disagrees with finite differences along u: suspect the jvp"
    ),
    "forward_ad_vs_backward": Message(
        "forward-mode AD and the backward disagree along u: one of jvp and backward is wrong"
    ),
    "batched_grad_vs_one_at_a_time": Message(
        "the backward batched by vmap differs from one grad_output at a time: suspect "
        "its vmap rule, or a backward that depends on the batch"
    ),
    "undefined_grad_vs_zero": UNDEFINED_REASON,
}


def _add_function_modes(record: dict, modes: dict | None) -> None:
    """Forward mode, batched gradients and undefined gradients, where the function goes through a
    custom Function (`modes` is None where it goes through none)."""
    if modes is None:
        return
    record["function_modes"] = modes
    blocks = [modes.get(key) or {} for key in MODES]
    rows = [row for block in blocks for row in block.get("comparisons", [])]
    failed = [failure(row, "probable_bug", _MODE_REASONS[row["name"]]) for row in rows if not row["passed"]]
    failed += [found for block in blocks for found in block.get("failures", [])]
    _join(record, failed, passed=not failed)


def _add_grad_output_derivative(block: dict, found: dict) -> None:
    """The double backward's derivative in grad_output, into the second-order block: its failures first (they name
    an element, where a failing gradgradcheck names none)."""
    block["grad_output"] = found
    block["failures"] = found.get("failures", []) + block["failures"]
    block["passed"] = block["passed"] and not found.get("failures")


def _join_block(record: dict, key: str, block: dict) -> None:
    """A further block under `key`, its failures and verdict joined to the record's."""
    record[key] = block
    _join(record, block.get("failures", []), passed=block.get("passed", True))


def _join(record: dict, failures: list, *, passed: bool) -> None:
    """Add a further block's failures to the record's, and its verdict to the record's `passed`."""
    record["failures"] = record["failures"] + failures
    record["failure"] = record["failures"][0] if record["failures"] else None
    record["passed"] = record["passed"] and passed


def run_check(spec, *, sweep: bool | None = None, devices: list | None = None, symbolic: bool = True) -> dict:
    """Run the check described by `spec` and return the completed record.

    `sweep` (default: when the inputs hold at most SWEEP_MAX_ELEMENTS elements, or
    SWEEP_FAILED_MAX_ELEMENTS for a failing check) adds the step sweep; `symbolic=False` leaves out SymPy's opinion (recorded as skipped, with that reason).
    A Python function returning a tuple or list of tensors is checked output by output
    (core/check/autograd/several_outputs.py).
    """
    spec = parse_spec(spec)
    device = resolve_device(spec.device, available_devices() if devices is None else devices)
    if not spec.expression:
        check_signature(spec.function, list(spec.inputs))
        if empty_inputs(spec):  # nothing to compare for an input with no elements (core/check/empty_inputs.py)
            return run_without_empty(
                spec, device, lambda rest: run_check(rest, sweep=sweep, devices=devices, symbolic=symbolic)
            )
    function: Callable = compile_expression(spec.expression) if spec.expression else spec.function
    leaves = {n: to_tensor(v, spec.dtype, device, requires_grad=True) for n, v in spec.inputs.items()}
    if spec.outputs_analytical is not None:
        found = several_outputs.forward_outputs(function, leaves)
    else:
        try:
            observed = observe_autograd(function, leaves, spec.grad_output)
        except SeveralOutputs as several:
            found = several.outputs
        else:
            return ensure_failure(_one_output(spec, function, leaves, device, observed, sweep=sweep, symbolic=symbolic))
    return ensure_failure(_several_outputs(spec, function, leaves, device, found, sweep=sweep, symbolic=symbolic))


def _sweep_wanted(sweep: bool | None, leaves: dict, *, passed: bool = True) -> bool:
    """Whether the record gets a step sweep: as asked, else by the inputs' size (a larger one for a failing check)."""
    if sweep is not None:
        return sweep
    limit = SWEEP_MAX_ELEMENTS if passed else SWEEP_FAILED_MAX_ELEMENTS
    return elements(leaves.values()) <= limit


def _one_output(spec: CheckSpec, function, leaves: dict, device: str, observed: tuple, *, sweep, symbolic) -> dict:
    """The record of a function with one output, as it has always been."""
    part = first_order(spec, function, leaves, device, observed, whole=True, sweep=_sweep_wanted(sweep, leaves))
    record = spec.to_dict()
    record.update(
        {
            "executed": True,
            **part.fields,
            "symbolic": _symbolic(spec, leaves, part, symbolic),
            "environment": capture_environment(device),
        }
    )
    if not spec.expression and part.raw["custom_functions"]:
        # a custom Function's backward under a grad_output that sees more than all ones
        _join_block(record, "random_grad_output", random_grad_output(spec, function, leaves, part.v, part.raw))
    if spec.hessian is not None:
        block = second_order(function, leaves, part.v, spec.hessian, spec.tolerance)
        if not spec.expression and part.raw["custom_functions"]:
            _add_grad_output_derivative(block, grad_output_derivative(function, leaves, part.v, spec.tolerance))
        record["second_order"] = block
        _join(record, block["failures"], passed=block["passed"])
    if not spec.expression:
        _add_function_modes(
            record, function_modes(function, leaves, part.v, part.raw["autograd_grad"], part.raw["custom_functions"])
        )
    if _sweep_wanted(sweep, leaves, passed=record["passed"]):
        record["step_sweep"] = part.sweeper()
    return record


def _several_outputs(spec: CheckSpec, function, leaves: dict, device: str, found, *, sweep, symbolic) -> dict:
    """The record of a function returning several outputs: each differentiable output checked as a
    one-output function of its own, then merged (core/check/autograd/several_outputs.py)."""
    plan = several_outputs.plan(spec, function, found)
    parts = {}
    for k, (part_spec, part_function) in plan.parts.items():
        observed = observe_autograd(part_function, leaves, part_spec.grad_output)
        parts[k] = first_order(part_spec, part_function, leaves, device, observed, whole=False)
    first = parts[min(parts)]
    record = spec.to_dict()
    verdict = torch_gradcheck(
        function,
        leaves,
        spec.dtype,
        device,
        fast=gradcheck_fast(elements(leaves.values()), elements(found)),
        undefined_grad=not only_built_in_formulas(found),
    )
    record.update(
        {
            "executed": True,
            **several_outputs.merge(plan, {k: p.fields for k, p in parts.items()}, verdict),
            "symbolic": _symbolic(plan.parts[min(parts)][0], leaves, first, symbolic),
            "environment": capture_environment(device),
        }
    )
    # each differentiable output's grad_output, for the blocks observed over several outputs
    weights = {k: p.v.detach() for k, p in parts.items()}
    custom = not spec.expression and bool(graph_functions(found))
    if custom:
        randomised = {k: random_grad_output(*plan.parts[k], leaves, p.v, p.raw) for k, p in parts.items()}
        _join_block(record, "random_grad_output", by_output(randomised))
    if spec.hessian is not None:
        block = second_order_of_outputs(function, leaves, weights, spec.hessian, spec.tolerance)
        if custom:
            derivatives = {
                k: grad_output_derivative(plan.parts[k][1], leaves, p.v, spec.tolerance) for k, p in parts.items()
            }
            _add_grad_output_derivative(block, by_output(derivatives))
        record["second_order"] = block
        _join(record, block["failures"], passed=block["passed"])
    _add_function_modes(
        record,
        function_modes(function, leaves, None, None, graph_functions(found), outputs=len(found), weights=weights),
    )
    if _sweep_wanted(sweep, leaves, passed=record["passed"]):
        k = several_outputs.sweep_output(record, parts)
        record["step_sweep"] = {**parts[k].sweeper(), "output": k}
    return record


def _symbolic(spec: CheckSpec, leaves: dict, part: FirstOrder, requested: bool) -> dict:
    if not requested:
        return {"status": "skipped", "reason": Message("SymPy opinion not requested for this run")}
    return symbolic_opinion(spec, leaves, part.analytical, part.raw["autograd_grad"])


def check_callable(function: Callable, inputs: dict, grad: Any = None, **options) -> dict:
    """Run a check on a Python callable taking the inputs as keyword arguments."""
    if not callable(function):
        raise SpecError("function must be callable", field="function")
    record = {"function": function, "inputs": inputs, "analytical_gradient": grad, **options}
    return run_check(record)
