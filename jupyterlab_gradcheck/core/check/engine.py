"""Run one gradient check: observe, compare, diagnose, and return the completed record.

`run_check` takes a record (or a parsed `CheckSpec`) and returns the record of
docs/contracts.md: every observation with its shape, dtype and device, every comparison with
its tolerance, the failures kept with their diagnosis, SymPy's opinion, the step sweep and
the environment. `check_callable` does the same for a Python callable, including the
`apply` of a custom `torch.autograd.Function`. Neither writes a ledger: `core.run`
wraps them for that (`run_and_record`, `LedgeredRun`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import re
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any

import torch

from ..errors import GradcheckError, SpecError, UserCodeFault, exception_line
from ..expr.evaluator import compile_expression
from ..expr.parser import DEFAULT_LIMITS, Expression
from ..expr.symbolic import symbolic_opinion
from ..i18n import Message
from ..values.form import is_empty_value
from ..values.tensors import describe, to_tensor, torch_dtype
from .autograd import several_outputs
from .autograd.forward_and_batched import (
    JVP_ONLY,
    JVP_ONLY_MAX_ELEMENTS,
    MODES,
    NO_FORMULA,
    UNDEFINED_REASON,
    function_modes,
    opcheck_registration,
    through_jvp,
)
from .autograd.observations import (
    DETERMINISTIC_SETTINGS,
    check_signature,
    event_failure,
    gradcheck_fast,
    graph_functions,
    nondeterminism_failure,
    observe_autograd,
    only_built_in_formulas,
    repeat_differences,
    torch_gradcheck,
)
from .autograd.second_order import grad_output_derivative, second_order, second_order_of_outputs
from .compare.comparison import NotDifferentiable, SeveralOutputs, compare
from .environment import available_devices, capture_environment
from .first_order import FirstOrder, as_dtype, diagnosed_failures, elements, failure, finite_differences, first_order
from .record.spec import (
    CheckSpec,
    comparison_tolerance,
    fd_tolerance,
    finite_difference_field,
    parse_spec,
    resolve_device,
)

# -------------------- failing record
# Every failing record says why: `passed: false` implies a `failure` with its comparison, diagnosis and reason.
#
# A record can fail in ways no comparison row of ours describes: the embedded `torch.autograd.gradcheck`
# or `gradgradcheck` failing alone, a mode that raised (a jvp that crashes), a case of the undefined-gradient
# test that crashed. Each of those becomes a failure of its own (`event_failure`), shaped like a failed
# comparison's, with no element where none is known. `ensure_failure` is the one place the invariant is
# enforced: the engine passes every record through it before returning it.
#
# A backward that is not reentrant (gradcheck: "Backward is not reentrant": cuDNN's or atomics'
# nondeterministic kernels) is diagnosed `nondeterministic`, never `probable_bug`, and the reason names the
# settings that remove it.

#: How gradcheck and gradgradcheck begin the message of a backward that gives different values on repeated runs.
NOT_REENTRANT = "Backward is not reentrant"


def tool_failure(observation: dict, names: list) -> dict:
    """The failure of a failed `torch_gradcheck` or `torch_gradgradcheck` observation: `nondeterministic` for a
    backward that is not reentrant, else `probable_bug`, naming the input its message names."""
    tool = observation["name"]
    detail = str(observation.get("reason", ""))
    found = re.search(r"with respect to input (\d+)", detail)
    input_name = names[int(found.group(1))] if found and int(found.group(1)) < len(names) else None
    if NOT_REENTRANT in detail:
        reason = Message(
            "{tool}: the backward is not reentrant (the same input and grad_output give different gradients on "
            "repeated runs): nondeterministic kernels (cuDNN, atomic adds), not a wrong derivative; "
            "{settings} remove it",
            tool=tool,
            settings=DETERMINISTIC_SETTINGS,
        )
        return event_failure(tool, reason, diagnosis="nondeterministic", input_name=input_name)
    reason = Message("{tool} rejects the function where our comparisons pass: {detail}", tool=tool, detail=detail[:300])
    return event_failure(tool, reason, input_name=input_name)


def _tool_observations(record: dict) -> list:
    """The embedded tools' observations, first order first."""
    found = [(record.get("observations") or {}).get("torch_gradcheck")]
    found.append(((record.get("second_order") or {}).get("observations") or {}).get("torch_gradgradcheck"))
    return [o for o in found if o and o.get("status") == "failed"]


def ensure_failure(record: dict) -> dict:
    """The record with the invariant made true: a failed record's `failures` hold at least one failure, and
    `failure` is the first. A failing embedded tool whose verdict no failure of ours explains adds its own."""
    if record.get("passed", True):
        return record
    failures = list(record.get("failures") or [])
    if not failures:
        names = list(record.get("inputs") or {})
        failures = [tool_failure(o, names) for o in _tool_observations(record)]
    if not failures:
        failures = [
            event_failure(
                "record", Message("the check failed, but no comparison and no tool said why: report this record")
            )
        ]
    record["failures"] = failures
    record["failure"] = failures[0]
    return record


# -------------------- empty inputs
# Inputs with no elements: nothing to compare for them, said so in the record, never refused.
#
# An input of shape (0, 5) (`mm` of an empty batch, say) has an empty gradient: there is no element
# whose derivative could be wrong. A Python callable is checked on its other inputs, with the empty
# ones passed to every call as they are (zeros of their shape); the record keeps every input, and
# `empty_inputs` names each empty one with its shape and the reason. When every input is empty the
# check has nothing to compare: it passes with no comparison, and `empty_inputs` says why.


def empty_inputs(spec: CheckSpec) -> dict:
    """Input name -> shape, for each input of `spec` written as an empty array (core/values/form.py)."""
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


# -------------------- random grad output
# A grad_output that sees more: the backward of a custom Function compared again under a seeded random grad_output.
#
# A check's default grad_output is all ones, and under it two common backward bugs vanish: a gradient
# permuted between elements that happen to share a value, and a backward that never multiplies by its
# grad_output (ones times anything is that thing). `torch.autograd.gradcheck` finds them because it
# builds the whole Jacobian; a check of v^T J with v = 1 cannot. So, for a function whose graph goes
# through a custom Function, the gradient of sum(r * f) for a standard normal r (seed SEED) is taken
# by autograd and by finite differences (the same path, error bounds and refinement as the first
# order, core/check/first_order.py), compared element by element, and each failure diagnosed. The
# record keeps the seed and r itself (its values when small, and always a hash of its bytes).

#: Seed of the random grad_output: a record is reproducible.
SEED = 29
#: Elements of r up to which the record keeps its values (beyond: the shape and the hash only).
SHOWN_ELEMENTS = 1000
#: The comparison's name in the record.
NAME = "random_grad_output_vs_finite_difference"


def draw(output) -> torch.Tensor:
    """The random grad_output r for `output`: standard normal in its dtype, drawn on the CPU from SEED."""
    generator = torch.Generator().manual_seed(SEED)
    return torch.randn(output.shape, dtype=output.dtype, generator=generator).to(output.device)


def digest(tensor) -> str:
    """sha256 of the tensor's bytes (contiguous, on the CPU), so that a record names r exactly at any size."""
    return hashlib.sha256(tensor.detach().cpu().contiguous().numpy().tobytes()).hexdigest()


def _gradients(function, leaves: dict, r) -> dict:
    """The backward's gradient of sum(r * f) per input (zeros where the backward leaves one out)."""
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        grads = torch.autograd.grad(
            function(**inputs), list(inputs.values()), r, allow_unused=True, materialize_grads=True
        )
    return {n: g.detach() for n, g in zip(inputs, grads)}


def random_grad_output(spec: CheckSpec, function, leaves: dict, v, raw: dict) -> dict:
    """The `random_grad_output` block: seed, r, one comparison per input against finite differences, the failures
    and the verdict; skipped, with the reason, for a complex output or when the finite differences were projected."""
    if v.is_complex():
        return {"status": "skipped", "reason": Message("a complex output: the random grad_output is drawn real only")}
    r = draw(v)
    try:
        autograd = _gradients(function, leaves, r)
    except Exception as exc:  # a backward that only runs under all ones: the finding
        reason = Message(
            "the backward raised under a random grad_output (seed {seed}): {error}",
            seed=SEED,
            error=exception_line(exc),
        )
        return {"status": "failed", "seed": SEED, "failures": [event_failure(NAME, reason)], "passed": False}
    diffs = finite_differences(spec, function, leaves, {**raw, "autograd_grad": autograd}, r, sweep=False)
    if diffs.projected_rows:
        return {
            "status": "skipped",
            "reason": Message("the finite differences were projected (over their time budget): no element to compare"),
        }
    fd = {n: as_dtype(g, leaves[n].dtype) for n, g in diffs.estimates.items()}
    rows = [
        compare(
            NAME,
            name,
            fd[name],
            autograd[name],
            left_label="finite_difference",
            right_label="autograd_grad",
            rtol=spec.finite_difference["rtol"],
            atol=spec.finite_difference["atol"],
            bound=diffs.bounds[name] if diffs.bounds else None,
        )
        for name in leaves
    ]
    failures = diagnosed_failures(
        spec, function, leaves, diffs, {"autograd_grad": autograd, "finite_difference": fd}, rows
    )
    shown = describe(r) if r.numel() <= SHOWN_ELEMENTS else {"shape": list(r.shape), "dtype": describe(r[:0])["dtype"]}
    return {
        "status": "observed",
        "description": Message(
            "the backward's gradient of sum(r * f) for a standard normal r (seed {seed}) against finite "
            "differences: an all-ones grad_output hides a permuted gradient and a forgotten grad_output",
            seed=SEED,
        ),
        "seed": SEED,
        "grad_output": {**shown, "sha256": digest(r)},
        "comparisons": rows,
        "failures": failures,
        "passed": not failures,
    }


def by_output(blocks: dict) -> dict:
    """One block per differentiable output k of a function of several (`blocks`: k -> block), as one block: each
    output's under `outputs`, and their failures, each naming its output."""
    failures = [{**found, "output": k} for k, block in blocks.items() for found in block.get("failures", [])]
    return {
        "status": "observed",
        "outputs": {str(k): block for k, block in blocks.items()},
        "failures": failures,
        "passed": not failures,
    }


# -------------------- engine

#: Input elements above which a passing check's record has no step sweep by default. The sweep costs
#: 68 evaluations of the function (17 decades, two signs, float32 and float64) wherever it cannot ride
#: along with the finite differences (core/check/fd/finite_difference.py): beside an elementwise check's
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
    "batched_forward_grad_vs_one_at_a_time": Message(
        "the jvp batched by vmap differs from one tangent at a time: suspect its vmap rule, or a jvp that "
        "depends on the batch"
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
    an element, where a failing gradgradcheck names none), after a double backward found nondeterministic."""
    block["grad_output"] = found
    repeats = [f for f in block["failures"] if f["diagnosis"] == "nondeterministic"]
    others = [f for f in block["failures"] if f["diagnosis"] != "nondeterministic"]
    block["failures"] = repeats + found.get("failures", []) + others
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
    (core/check/autograd/several_outputs.py). A fault of the user's code while it runs is a failed
    record that says so (`fault_in_user_code`).
    """
    spec = parse_spec(spec)
    device = resolve_device(spec.device, available_devices() if devices is None else devices)
    if not spec.expression:
        check_signature(spec.function, list(spec.inputs))
        if empty_inputs(spec):  # nothing to compare for an input with no elements (core/check/engine.py)
            return run_without_empty(
                spec, device, lambda rest: run_check(rest, sweep=sweep, devices=devices, symbolic=symbolic)
            )
    try:
        record = _run_on(spec, device, sweep=sweep, symbolic=symbolic)
    except NotDifferentiable as exc:
        if spec.expression:
            raise
        return fault_record(spec, device, _not_differentiable(exc))
    except GradcheckError:
        raise
    except Exception as exc:
        if JVP_ONLY in str(exc) and spec.expression is None and "forward_mode_only" not in spec.extra:
            return _forward_mode_only(spec, device, sweep=sweep, devices=devices, symbolic=symbolic)
        reason = fault_in_user_code(exc, spec)
        if reason is None:
            raise
        record = fault_record(spec, device, reason, input_name=getattr(exc, "input_name", None))
        return _custom_op_fault(spec, device, record, exc)
    return with_shadow(spec, device, record)


def _forward_mode_only(spec: CheckSpec, device: str, **options) -> dict:
    """The check of a function through a Function with a jvp and no backward, in forward mode
    (core/check/autograd/forward_and_batched.py, "forward mode only"); the record says so."""
    count = sum(math.prod(shape) for shape in spec.shapes.values())
    if count > JVP_ONLY_MAX_ELEMENTS:
        return fault_record(
            spec,
            device,
            Message(
                "the function goes through a Function with a jvp and no backward, checked in forward mode one "
                "input element at a time, up to {limit} elements; these inputs hold {count}",
                limit=JVP_ONLY_MAX_ELEMENTS,
                count=count,
            ),
        )
    through = through_jvp(spec.function, list(spec.inputs))
    record = run_check(
        dataclasses.replace(spec, function=through, extra={**spec.extra, "forward_mode_only": True}), **options
    )
    record.pop("forward_mode_only", None)
    record["forward_mode_only"] = Message(
        "the function has no backward: its gradient is assembled from its jvp, one input element at a time, "
        "and every comparison holds that forward-mode gradient"
    )
    return record


def _leaves(spec: CheckSpec, device: str, *, requires_grad: bool) -> dict:
    """The inputs as tensors of the check's dtype; for a float64 shadow, as its low precision holds them, cast."""
    held = spec.extra.get(SHADOW_OF, spec.dtype)
    leaves = {n: to_tensor(v, held, device) for n, v in spec.inputs.items()}
    if held != spec.dtype:
        leaves = {n: x.to(torch_dtype(spec.dtype)) for n, x in leaves.items()}
    return {n: x.requires_grad_(requires_grad) for n, x in leaves.items()}


def _run_on(spec: CheckSpec, device: str, *, sweep, symbolic) -> dict:
    function: Callable = compile_expression(spec.expression) if spec.expression else spec.function
    leaves = _leaves(spec, device, requires_grad=True)
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


# -------------------- float64 shadow
# A check in a low precision is blind below its detection floor (core/check/first_order.py): in float32 a
# one-element error of a custom backward under about 1e-3 of its value hides in the finite differences' rounding.
# Where the same code also runs in float64, the check runs again there, by default: the same function, the same
# point (the inputs as the low precision holds them, cast), float64's own tolerances (the author's where they set
# others than the dtype's defaults), no step sweep and no SymPy. Where the record passed, the shadow's failures
# are the record's, each saying that float64 saw it; where it failed, the block says whether float64 sees a
# failure too (rounding, or a bug). A derivative written as numbers, or by code that returns the low
# precision's numbers whatever it is given, is compared in the declared dtype only: float32's numbers are not a
# float64 bug. Where the code does not run in float64 (it raises
# there, or its output stays in the low precision: code fixed to its dtype, a kernel for that dtype only, a
# device without float64), the `float64_shadow` block says why, and the detection floor is what the record could
# see. `"shadow": false` in the record (`check(..., shadow=False)`) leaves it out.

#: The precision each low one is shadowed in.
SHADOW_DTYPE = {"float32": "float64", "float16": "float64", "bfloat16": "float64", "complex64": "complex128"}
#: The record field of the shadow, and the spec's note that a run is one (naming the precision it shadows).
SHADOW = "float64_shadow"
SHADOW_OF = "shadow_of"


def _authors(explicit: bool, tolerance: dict, default: dict) -> bool:
    """Whether a tolerance is the author's own: set, and not the dtype's default (a completed record, replayed, writes
    its default out)."""
    return explicit and (tolerance["rtol"], tolerance["atol"]) != (default["rtol"], default["atol"])


def shadow_spec(spec: CheckSpec) -> CheckSpec:
    """The check of `spec` in float64 (complex128): tolerances and steps of the wider dtype unless the author set them."""
    wide = SHADOW_DTYPE[spec.dtype]
    written = spec.finite_difference
    own_fd = _authors(spec.fd_tolerance_explicit, written, fd_tolerance(spec.dtype, written["scheme"]))
    raw = {
        "scheme": written["scheme"],
        **({"step": written["step"]} if written.get("step") is not None else {}),
        **({"mode": written["mode"]} if "mode" in written else {}),
        **({"rtol": written["rtol"], "atol": written["atol"]} if own_fd else {}),
    }
    own = _authors(spec.tolerance_explicit, spec.tolerance, comparison_tolerance(spec.dtype))
    return dataclasses.replace(
        spec,
        dtype=wide,
        tolerance=dict(spec.tolerance) if own else comparison_tolerance(wide),
        finite_difference=finite_difference_field(raw, wide, DEFAULT_LIMITS)[0],
        extra={**spec.extra, SHADOW_OF: spec.dtype},
    )


def _shadow_refusal(spec: CheckSpec, device: str) -> Message | None:
    """Why the function's code cannot be shadowed in float64 (one forward pass there), or None where it can."""
    wide = SHADOW_DTYPE[spec.dtype]
    if device.startswith("mps"):
        return Message("the device {device} has no {wide}", device=device, wide=wide)
    function: Callable = compile_expression(spec.expression) if spec.expression else spec.function
    try:
        with torch.no_grad():
            found = function(**_leaves(shadow_spec(spec), device, requires_grad=False))
    except Exception as exc:  # the user's code that runs in its own precision only: the record says so
        return Message("the code does not run in {wide}: {error}", wide=wide, error=exception_line(exc))
    outputs = found if isinstance(found, (tuple, list)) else (found,)
    kept = sorted(
        {str(t.dtype).removeprefix("torch.") for t in outputs if isinstance(t, torch.Tensor) and t.is_floating_point()}
        | {str(t.dtype).removeprefix("torch.") for t in outputs if isinstance(t, torch.Tensor) and t.is_complex()}
    )
    if any(dtype != wide for dtype in kept):
        return Message(
            "with {wide} inputs the code's output is {kept}: it fixes its own precision, so it cannot be checked in "
            "{wide}",
            wide=wide,
            kept=", ".join(kept),
        )
    return None


def _fixed_expectations(spec: CheckSpec, device: str) -> set:
    """The inputs whose written derivative holds the low precision's numbers: numbers, or a callable whose result
    stays in a lower dtype than float64 when it is handed float64 inputs (a tensor captured in float32, say)."""
    fixed = set()
    leaves = None
    for name, written in spec.analytical.items():
        if isinstance(written, Expression):
            continue
        if not callable(written):
            fixed.add(name)
            continue
        if leaves is None:
            leaves = _leaves(shadow_spec(spec), device, requires_grad=False)
        try:
            with torch.no_grad():
                value = written(**leaves)
        except Exception:  # noqa: BLE001 (the shadow's own evaluation of it says what is wrong)
            continue
        if isinstance(value, torch.Tensor) and value.dtype != torch_dtype(SHADOW_DTYPE[spec.dtype]):
            fixed.add(name)
    return fixed


def _counted_in_shadow(found: dict, fixed: set) -> bool:
    """Whether a failure of the shadow counts: not a comparison of a derivative written in the low precision."""
    return not (found.get("input") in fixed and found.get("left_label") == "analytical")


def with_shadow(spec: CheckSpec, device: str, record: dict) -> dict:
    """The record with its float64 shadow (the block, and its failures joined), for a low precision; else as it is."""
    if spec.dtype not in SHADOW_DTYPE or not spec.shadow or SHADOW_OF in spec.extra:
        return record
    if any(found.get("comparison") == "user_code" for found in record.get("failures") or []):
        return record  # the user's code stopped the check: nothing to see again in float64
    wide = SHADOW_DTYPE[spec.dtype]
    refusal = _shadow_refusal(spec, device)
    shadowed = None
    if refusal is None:
        try:
            shadowed = _run_on(shadow_spec(spec), device, sweep=False, symbolic=False)
        except Exception as exc:  # a fault of the user's code in float64 only: not run, and why
            reason = fault_in_user_code(exc, spec) if not isinstance(exc, NotDifferentiable) else exc.message
            if reason is None:
                raise
            refusal = Message("the code does not run in {wide}: {error}", wide=wide, error=reason)
    if shadowed is None:
        record[SHADOW] = {"status": "not_run", "dtype": wide, "reason": refusal}
        return record
    written = any(found.get("left_label") == "analytical" for found in shadowed["failures"])
    fixed = _fixed_expectations(spec, device) if written else set()  # probed only where it decides something
    counted = [f for f in shadowed["failures"] if _counted_in_shadow(f, fixed)]
    failures = [
        {
            **found,
            "comparison": SHADOW,
            "shadowed": found["comparison"],
            "reason": Message(
                "in {wide}, the same code at the same point fails: {reason}", wide=wide, reason=found["reason"]
            ),
        }
        for found in counted
    ]
    block = {
        "status": "observed",
        "dtype": wide,
        "passed": not counted,
        "comparisons": len(shadowed["comparisons"]),
        "failure": failures[0] if failures else None,
        "reason": Message(
            "the same check in {wide}, at the inputs as {dtype} holds them, with {wide}'s tolerances, passed",
            wide=wide,
            dtype=spec.dtype,
        )
        if not counted
        else Message(
            "the same check in {wide}, at the inputs as {dtype} holds them, with {wide}'s tolerances, failed",
            wide=wide,
            dtype=spec.dtype,
        ),
    }
    if fixed:
        block["note"] = Message(
            "the derivative of {names}, written in {dtype}'s numbers, is compared in {dtype} only",
            names=", ".join(sorted(fixed)),
            dtype=spec.dtype,
        )
    record[SHADOW] = block
    if record["passed"]:  # a failing record keeps its own failures; the block says what float64 saw
        _join(record, failures, passed=not failures)
    return ensure_failure(record)


# -------------------- faults in the user's code
# A function, or its backward, jvp or setup_context, that raises while the check runs is a finding
# about the user's code, never a crash: the record fails with one sentence naming the fault and the
# code that raised it, and it lands in the ledger as every outcome does (replay raises the same again).
# The fault is the user's when a frame of the traceback is neither torch's, nor this package's, nor the
# standard library's (the innermost such frame names it), when torch refuses what a custom Function
# returned (its words in TORCH_REFUSALS), or when the check itself finds it (`UserCodeFault`). Anything
# else raised by this package's own code is not the user's: it propagates, and the ledger keeps the
# attempt as failed to run, with its type and text. Bad input (SpecError) and a device out of memory
# (OUT_OF_MEMORY) are never findings.

#: Folders whose frames are not the user's code.
_NOT_USER = tuple(
    os.path.realpath(folder) + os.sep
    for folder in (
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.dirname(os.path.dirname(__file__))),  # this package
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["platstdlib"],
    )
)
#: torch's words when an allocation fails (a worker's memory cap, say): the machine's limit, not a fault.
OUT_OF_MEMORY = ("can't allocate memory", "out of memory")
#: torch's words when it refuses what a custom Function's backward, jvp or forward returned.
TORCH_REFUSALS = (
    "returned an invalid gradient",
    "returned an incorrect number of gradients",
    "must return a tuple",
    "You must implement either the backward or vjp",
    "You must implement the jvp function",
    "does not have an autograd kernel",
    "element 0 of tensors does not require grad",
    "One of the differentiated Tensors appears to not have been used in the graph",
    "has been modified by an inplace operation",
    "no autograd formula was registered",
)
#: torch's words when a backward returns a gradient for an argument that is not a tensor requiring grad.
NOT_A_VARIABLE = "returned a gradient different than None at position"


def _user_frame(exc: BaseException) -> str | None:
    """The qualified name of the innermost frame of the user's code in `exc`'s traceback, or None."""
    found = None
    for frame, _line in traceback.walk_tb(exc.__traceback__):
        path = os.path.realpath(frame.f_code.co_filename)
        if not path.startswith(_NOT_USER) and not frame.f_code.co_filename.startswith("<"):
            found = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return found


def fault_in_user_code(exc: BaseException, spec: CheckSpec):
    """The failed record's reason (a Message) when `exc` is a fault of the user's code, else None."""
    if isinstance(exc, UserCodeFault):
        return exc.reason
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or any(words in str(exc) for words in OUT_OF_MEMORY):
        return None
    text = exception_line(exc)
    where = _user_frame(exc)
    if where is not None and where.endswith(".backward") and "NoneType" in text:
        return Message(
            "{where} raised {error} while the check ran: a grad_output it received was undefined (None), "
            "as autograd passes for an output the loss does not use once set_materialize_grads(False) is set; "
            "the backward must treat None as zeros",
            where=where,
            error=text,
        )
    if where is not None:
        return Message("{where} raised {error} while the check ran", where=where, error=text)
    if spec.expression is None and NOT_A_VARIABLE in str(exc):
        return Message(
            "the backward returned a gradient for a forward argument that is not an input under check "
            "(held fixed: {fixed}), where it must return None: {error}",
            fixed=", ".join(getattr(spec, "fixed", None) or {}) or "none",
            error=text,
        )
    if spec.expression is None and any(words in str(exc) for words in TORCH_REFUSALS):
        return Message("torch refused what the function under check returned: {error}", error=text)
    return None


def _add_custom_ops(record: dict, function, leaves: dict) -> None:
    """The `custom_op` block of a function that calls a torch.library custom op
    (core/check/autograd/forward_and_batched.py), where function_modes did not observe it (an op without
    register_autograd, one defined by torch.library.Library), its failures joined to the record's."""
    modes = record.get("function_modes") or {}
    if "custom_op" in modes:
        return
    block = opcheck_registration(function, leaves)
    if block is not None:
        record["function_modes"] = {"input": None, "functions": [], **modes, "custom_op": block}
        _join(record, block["failures"], passed=not block["failures"])


def _explains(found: dict, exc: BaseException) -> bool:
    """Whether a custom op's failure names the fault that stopped the check: the input the op wrote into, or the
    backward it has no formula for."""
    if found["comparison"] == "custom_op_schema":
        return found["input"] is not None and found["input"] == getattr(exc, "input_name", None)
    return found["comparison"] == "custom_op_registration" and NO_FORMULA in str(exc)


def _custom_op_fault(spec: CheckSpec, device: str, record: dict, exc: BaseException) -> dict:
    """The fault record of a function that calls custom ops, with their `custom_op` block: its failures in the
    place of the fault's where one of them names it (one fault, said once, at its op), else after it."""
    if spec.expression:
        return record
    block = opcheck_registration(spec.function, _leaves(spec, device, requires_grad=True))
    if block is None:
        return record
    record["function_modes"] = {"input": None, "functions": [], "custom_op": block}
    if any(_explains(found, exc) for found in block["failures"]):
        record["failures"] = block["failures"]
    else:
        record["failures"] = record["failures"] + block["failures"]
    record["failure"] = record["failures"][0]
    return record


def _not_differentiable(exc: NotDifferentiable) -> Message:
    """The reason of a Python callable whose output autograd sees no path to from its inputs."""
    return Message(
        "{refusal}: autograd sees no path from the inputs to the output, so there is no gradient to check "
        "(a graph cut by torch.tensor(...), .item(), .tolist(), .detach() or NumPy, or every output marked "
        "non-differentiable)",
        refusal=exc.message,
    )


def fault_record(spec: CheckSpec, device: str, reason, *, input_name: str | None = None) -> dict:
    """The failed record of a check the user's code stopped: nothing observed, one failure that says why
    (naming the input it concerns, where one is known)."""
    record = spec.to_dict()
    record.update(
        {
            "executed": True,
            "passed": False,
            "observations": {},
            "comparisons": [],
            "failures": [event_failure("user_code", reason, input_name=input_name)],
            "environment": capture_environment(device),
        }
    )
    return ensure_failure(record)


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
        _add_custom_ops(record, function, leaves)
    _add_nondeterminism(record, repeat_differences(part.raw, spec.dtype))
    if _sweep_wanted(sweep, leaves, passed=record["passed"]):
        record["step_sweep"] = part.sweeper()
    return record


def _add_nondeterminism(record: dict, block: dict | None) -> None:
    """Name a backward whose identical calls disagree: the `nondeterminism` block, and beyond
    `repeat_tolerance` the record's first failure, ahead of what the disagreement made fail."""
    if block is None:
        return
    record["nondeterminism"] = block
    if block["beyond_tolerance"]:
        record["failures"] = [nondeterminism_failure(block), *record.get("failures", [])]
        record["failure"] = record["failures"][0]
        record["passed"] = False


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
    if not spec.expression:
        _add_custom_ops(record, function, leaves)
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
