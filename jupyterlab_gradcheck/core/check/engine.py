"""Run one gradient check: observe, compare, diagnose, and return the completed record.

`run_check` takes a record (or a parsed `CheckSpec`) and returns the record of
docs/contracts.md: every observation with its shape, dtype and device, every comparison with
its tolerance, the failures kept with their diagnosis, SymPy's opinion, the step sweep and
the environment. `check_callable` does the same for a Python callable, including the
`apply` of a custom `torch.autograd.Function`. Neither writes a ledger: `run.run_and_record`
wraps them for that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import SpecError
from ..expr.evaluator import compile_expression
from ..expr.symbolic import symbolic_opinion
from ..i18n import Message
from .autograd import several_outputs
from .autograd.custom_functions import graph_functions, only_built_in_formulas
from .autograd.expectation_tensors import analytical_tensors
from .autograd.forward_and_batched import MODES, function_modes
from .autograd.observations import observe_autograd
from .autograd.second_order import second_order, second_order_of_outputs
from .autograd.signature import check_signature
from .autograd.torch_gradcheck import gradcheck_fast, torch_gradcheck
from .autograd.undefined_grad import UNDEFINED_REASON
from .compare.comparison import Operand
from .compare.complex_tensors import with_complex_kept
from .compare.forward_pass import SeveralOutputs
from .compare.stacked_rows import compare_rows
from .compare.tensors import describe, to_tensor, to_value
from .diagnosis import DiagnosisContext, diagnose
from .environment import available_devices, capture_environment
from .fd import projected, time_budget
from .fd.error_bound import BOUND_FACTOR, element_tolerance
from .fd.finite_difference import fd_gradients
from .fd.refinement import refine_inputs
from .fd.shifts import STEP_SCALE_CAP
from .fd.step_sweep import guarded_step_sweep
from .fd.sweep_riders import Riding, found, sweep_riders
from .record import defaults
from .record.devices import resolve_device
from .record.spec import CheckSpec, parse_spec

#: Input elements above which the step sweep is left out of the record by default.
SWEEP_MAX_ELEMENTS = 10_000

_COMPARISON_ORDER = (
    "analytical_vs_backward_pass_1",
    "analytical_vs_autograd_grad",
    "autograd_vs_finite_difference",
    "pass_2_vs_twice_pass_1",
    "after_clear_none_vs_pass_1",
)


def _nondeterminism(function, leaves: dict) -> str:
    with torch.no_grad():
        detached = {n: t.detach() for n, t in leaves.items()}
        first, second = function(**detached), function(**detached)
    if first.dtype == torch.complex32:  # torch.equal has no complex-half kernel; widening is exact
        first, second = first.to(torch.complex64), second.to(torch.complex64)
    if not torch.equal(first, second):
        return Message("two forward passes at the same input give different outputs: the function is not deterministic")
    return ""


def _comparisons(
    spec: CheckSpec, analytical: dict, raw: dict, fd: dict, bounds: dict | None, projected_rows: dict | None = None
) -> list[dict]:
    tol, fd_tol = spec.tolerance, spec.finite_difference
    rows = []
    for name in spec.inputs:
        # each tensor is read once, however many comparisons it takes part in
        expected, autograd = Operand(analytical[name]), Operand(raw["autograd_grad"][name])
        pass_1 = Operand(raw["backward_pass_1"][name])
        twice = Operand.doubled(pass_1)
        projected_row = (projected_rows or {}).get(name)
        requests = [
            dict(
                name="analytical_vs_backward_pass_1",
                input_name=name,
                left=expected,
                right=pass_1,
                left_label="analytical",
                right_label="backward_pass_1",
                **tol,
            ),
            dict(
                name="analytical_vs_autograd_grad",
                input_name=name,
                left=expected,
                right=autograd,
                left_label="analytical",
                right_label="autograd_grad",
                **tol,
            ),
            dict(
                name="pass_2_vs_twice_pass_1",
                input_name=name,
                left=raw["backward_pass_2_accumulated"][name],
                right=twice,
                left_label="backward_pass_2_accumulated",
                right_label="2 x backward_pass_1",
                **tol,
            ),
            dict(
                name="after_clear_none_vs_pass_1",
                input_name=name,
                left=raw["after_clear_none"][name],
                right=pass_1,
                left_label="after_clear_none",
                right_label="backward_pass_1",
                **tol,
            ),
        ] + (
            []
            if projected_row
            else [
                dict(
                    name="autograd_vs_finite_difference",
                    input_name=name,
                    left=fd[name],
                    right=autograd,
                    left_label="finite_difference",
                    right_label="autograd_grad",
                    rtol=fd_tol["rtol"],
                    atol=fd_tol["atol"],
                    bound=bounds[name] if bounds else None,
                )
            ]
        )
        # one input's rows computed together (core/check/compare/stacked_rows.py compare_rows); the sort below orders them
        rows += compare_rows(requests) + ([projected_row] if projected_row else [])
    rows.sort(key=lambda row: _COMPARISON_ORDER.index(row["name"]))
    return rows


def _as_dtype(tensor, dtype):
    """`tensor.to(dtype)`, which is the tensor itself when it has that dtype already."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def _path_note(fd_info: dict) -> str:
    """Which inputs had every element shifted at once (an observed elementwise chain), or a colour of
    elements at a time (a learned sparse pattern, core/check/fd/coloured_path.py), in words."""
    inputs = fd_info["inputs"].items()
    chains = [
        f"{name} ({info['structure']}, {info['forward_evaluations']} evaluations)"
        for name, info in inputs
        if info.get("structure", "general") not in ("general", "coloured")
    ]
    coloured = [
        f"{name} ({info['colours']} colours, {info['forward_evaluations']} evaluations)"
        for name, info in inputs
        if info.get("structure") == "coloured"
    ]
    return (f" Every element shifted at once for {', '.join(chains)}." if chains else "") + (
        f" Elements sharing no output shifted together, one colour at a time, for {', '.join(coloured)}."
        if coloured
        else ""
    )


def _batching(info: dict) -> str | None:
    """What the finite differences found about batching an input: "" faithful, the reason it was refused, or None."""
    if info.get("batched_refused"):
        return info["batched_refused"]
    return "" if info.get("batched") and info.get("batch_check_evaluations") else None


def _failure(row: dict, diagnosis: str, reason: str) -> dict:
    """The failure of a comparison row, naming its output where the row does (a function of several outputs)."""
    worst = row["worst"]
    return {
        "comparison": row["name"],
        "input": row["input"],
        "index": worst["index"],
        "left_label": row["left"],
        "right_label": row["right"],
        "left": worst["left"],
        "right": worst["right"],
        "abs_err": worst["abs_err"],
        "rel_err": worst["rel_err"],
        "rtol": row["rtol"],
        "atol": row["atol"],
        "diagnosis": diagnosis,
        "reason": reason,
        **({"output": row["output"]} if "output" in row else {}),
    }


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
    rows = [row for key in MODES for row in modes[key].get("comparisons", [])]
    failed = [_failure(row, "probable_bug", _MODE_REASONS[row["name"]]) for row in rows if not row["passed"]]
    failed += modes["undefined_grad"].get("failures", [])
    _join(record, failed, passed=not failed)


def _join(record: dict, failures: list, *, passed: bool) -> None:
    """Add a further block's failures to the record's, and its verdict to the record's `passed`."""
    record["failures"] = record["failures"] + failures
    record["failure"] = record["failures"][0] if record["failures"] else None
    record["passed"] = record["passed"] and passed


def run_check(spec, *, sweep: bool | None = None, devices: list | None = None, symbolic: bool = True) -> dict:
    """Run the check described by `spec` and return the completed record.

    `sweep` (default: when the inputs hold at most SWEEP_MAX_ELEMENTS elements) adds the step
    sweep; `symbolic=False` leaves out SymPy's opinion (recorded as skipped, with that reason).
    A Python function returning a tuple or list of tensors is checked output by output
    (core/check/autograd/several_outputs.py).
    """
    spec = parse_spec(spec)
    device = resolve_device(spec.device, available_devices() if devices is None else devices)
    if not spec.expression:
        check_signature(spec.function, list(spec.inputs))
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
            return _one_output(spec, function, leaves, device, observed, sweep=sweep, symbolic=symbolic)
    return _several_outputs(spec, function, leaves, device, found, sweep=sweep, symbolic=symbolic)


def _elements(tensors) -> int:
    """How many elements the tensors hold together (non-tensors, such as an output that is None, count none)."""
    return sum(t.numel() for t in tensors if hasattr(t, "numel"))


def _sweep_wanted(sweep: bool | None, leaves: dict) -> bool:
    return sweep if sweep is not None else _elements(leaves.values()) <= SWEEP_MAX_ELEMENTS


def _one_output(spec: CheckSpec, function, leaves: dict, device: str, observed: tuple, *, sweep, symbolic) -> dict:
    """The record of a function with one output, as it has always been."""
    part = _first_order(spec, function, leaves, device, observed, whole=True, sweep=_sweep_wanted(sweep, leaves))
    record = spec.to_dict()
    record.update(
        {
            "executed": True,
            **part.fields,
            "symbolic": _symbolic(spec, leaves, part, symbolic),
            "environment": capture_environment(device),
        }
    )
    if spec.hessian is not None:
        block = second_order(function, leaves, part.v, spec.hessian, spec.tolerance)
        record["second_order"] = block
        _join(record, block["failures"], passed=block["passed"])
    if not spec.expression:
        _add_function_modes(
            record, function_modes(function, leaves, part.v, part.raw["autograd_grad"], part.raw["custom_functions"])
        )
    if _sweep_wanted(sweep, leaves):
        record["step_sweep"] = part.sweeper()
    return record


def _several_outputs(spec: CheckSpec, function, leaves: dict, device: str, found, *, sweep, symbolic) -> dict:
    """The record of a function returning several outputs: each differentiable output checked as a
    one-output function of its own, then merged (core/check/autograd/several_outputs.py)."""
    plan = several_outputs.plan(spec, function, found)
    parts = {}
    for k, (part_spec, part_function) in plan.parts.items():
        observed = observe_autograd(part_function, leaves, part_spec.grad_output)
        parts[k] = _first_order(part_spec, part_function, leaves, device, observed, whole=False)
    first = parts[min(parts)]
    record = spec.to_dict()
    verdict = torch_gradcheck(
        function,
        leaves,
        spec.dtype,
        device,
        fast=gradcheck_fast(_elements(leaves.values()), _elements(found)),
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
    if spec.hessian is not None:
        block = second_order_of_outputs(function, leaves, weights, spec.hessian, spec.tolerance)
        record["second_order"] = block
        _join(record, block["failures"], passed=block["passed"])
    _add_function_modes(
        record,
        function_modes(function, leaves, None, None, graph_functions(found), outputs=len(found), weights=weights),
    )
    if _sweep_wanted(sweep, leaves):
        k = several_outputs.sweep_output(record, parts)
        record["step_sweep"] = {**parts[k].sweeper(), "output": k}
    return record


def _symbolic(spec: CheckSpec, leaves: dict, part: _Part, requested: bool) -> dict:
    if not requested:
        return {"status": "skipped", "reason": Message("SymPy opinion not requested for this run")}
    return symbolic_opinion(spec, leaves, part.analytical, part.raw["autograd_grad"])


@dataclass
class _Part:
    """The first-order check of one output: its record fields, and what the rest of the record needs."""

    fields: dict
    raw: dict
    v: Any
    analytical: dict
    sweeper: Callable[[], dict]


def _first_order(
    spec: CheckSpec, function, leaves: dict, device: str, observed: tuple, *, whole: bool, sweep: bool = False
) -> _Part:
    """Finite differences, comparisons and diagnosis of one output's autograd observations; `whole`
    adds torch.autograd.gradcheck's verdict on the function (for one output of several it is run
    once on the whole function instead). `sweep` says the record will have a step sweep:
    its series for a passing check are evaluated with the finite differences (core/check/fd/sweep_riders.py)."""
    observations, raw, v = observed
    analytical = analytical_tensors(spec, leaves)

    fd_dtype = defaults.FD_DTYPE[spec.dtype]
    fd_values = {n: _as_dtype(t.detach(), getattr(torch, fd_dtype)) for n, t in leaves.items()}
    fd_v = with_complex_kept(v.detach(), getattr(torch, fd_dtype))  # a complex output's grad_output stays complex
    fd_scheme, fd_step = spec.finite_difference["scheme"], spec.finite_difference["step"]
    # The error bound widens only the default tolerance at the default step: an explicit tolerance
    # or a chosen step is applied as written (a step too small for the dtype stays a failure).
    bounded = not spec.fd_tolerance_explicit and fd_step is None and fd_dtype == spec.dtype
    rounding = {} if bounded else None
    # the projected mode (core/check/fd/projected.py): asked for, or chosen when the exhaustive one is over budget
    projection, projected_rows = projected.requested(spec.finite_difference), None
    names = list(spec.inputs)
    riders = (
        sweep_riders(function, fd_values, fd_v, names[0], 0)
        if (sweep and fd_dtype == spec.dtype == "float64" and not fd_v.is_complex())
        else []
    )
    if not projection:
        try:
            fd_raw, fd_info = fd_gradients(
                function,
                fd_values,
                fd_v,
                dtype=spec.dtype,
                scheme=fd_scheme,
                step=fd_step,
                work_elements=spec.work_elements,
                rounding=rounding,
                budget_s=time_budget.budget(spec.finite_difference),
                chains=raw.get("chain_possible"),
                riders={names[0]: Riding(riders)} if riders else None,
            )
        except time_budget.ExhaustiveOverBudget as over:
            projection = str(over)
    if projection:
        projected_rows, fd_info = projected.compare_inputs(
            function,
            fd_values,
            fd_v,
            raw["autograd_grad"],
            dtype=spec.dtype,
            reason=projection,
            rtol=spec.finite_difference["rtol"],
            atol=spec.finite_difference["atol"],
            work_elements=spec.work_elements,
        )
        fd_raw, rounding, bounded = {}, None, False
    bounds = {n: element_tolerance(r).reshape(fd_raw[n].shape) for n, r in rounding.items()} if bounded else None
    if bounded:
        fd_info["error_bound"] = (
            f"each element's tolerance adds {BOUND_FACTOR:g} x the rounding bound of its own "
            "difference, eps * sum_j |v_j| (|f_j(x+)| + |f_j(x-)|) / width"
        )
    if bounded and fd_scheme == "central":
        refined = refine_inputs(
            function,
            fd_values,
            fd_v,
            dtype=spec.dtype,
            autograd=raw["autograd_grad"],
            estimates=fd_raw,
            bounds=bounds,
            rtol=spec.finite_difference["rtol"],
            atol=spec.finite_difference["atol"],
            work_elements=spec.work_elements,
            structures={n: i["structure"] for n, i in fd_info["inputs"].items()},
        )
        if refined:
            fd_info["refinement"] = refined
    fd = {n: _as_dtype(g, leaves[n].dtype) for n, g in fd_raw.items()}
    half_note = (
        f" Evaluated in {fd_dtype}: a {spec.dtype} step cannot resolve a derivative." if fd_dtype != spec.dtype else ""
    )
    observations["finite_difference"] = {
        "name": "finite_difference",
        "description": Message(
            "{scheme} difference of sum(grad_output * f) along each input element", scheme=fd_scheme
        ),
        "note": f"step {fd_info['step']:.3g} ({fd_info['step_kind']}).{half_note}{_path_note(fd_info)}",
        "gradients": {n: describe(fd[n]) for n in fd},
        **fd_info,
    }
    if whole:
        observations["torch_gradcheck"] = torch_gradcheck(
            function,
            leaves,
            spec.dtype,
            device,
            fast=gradcheck_fast(_elements(leaves.values()), v.numel()),
            undefined_grad=not raw["built_in_only"],
        )
    raw["finite_difference"] = fd

    comparisons = _comparisons(spec, analytical, raw, fd, bounds, projected_rows)
    context = DiagnosisContext(
        function=function,
        fd_values=fd_values,
        fd_v=fd_v,
        dtype=spec.dtype,
        scheme=fd_scheme,
        step=fd_info["step"] if fd_step is not None else None,
        fd_tolerance=spec.finite_difference,
        grads=raw,
        # two more forward passes, needed only to explain a failure
        nondeterminism=_nondeterminism(function, leaves) if any(not r["passed"] for r in comparisons) else "",
        fd_structure={n: i["structure"] for n, i in fd_info["inputs"].items()},
        refinement=fd_info.get("refinement", {}),
    )
    failures = [_failure(row, *diagnose(row, context)) for row in comparisons if not row["passed"]]
    verdict = observations["torch_gradcheck"]["status"] if whole else None
    # the pass-1 tensors read once more (a value of its own, not shared with the observation's)
    pass_1 = raw["backward_pass_1"]
    observed_gradient = to_value(pass_1[names[0]]) if len(names) == 1 else {n: to_value(pass_1[n]) for n in names}
    fields = {
        "observed_gradient": observed_gradient,
        "passed": not failures and verdict != "failed",
        "grad_output_used": describe(v),
        "analytical": {n: describe(analytical[n]) for n in names},
        "observations": observations,
        "comparisons": comparisons,
        "failure": failures[0] if failures else None,
        "failures": failures,
    }

    def sweeper() -> dict:
        """The step sweep at the worst element of the first failure (else the first input's first element)."""
        first = failures[0] if failures else None
        name = first["input"] if first else names[0]
        flat = next(
            (
                r["worst"]["flat_index"]
                for r in comparisons
                if first and r["name"] == first["comparison"] and r["input"] == name
            ),
            0,
        )
        x_i = float(fd_values[name].reshape(-1)[flat].abs())
        scale = min(max(1.0, x_i), STEP_SCALE_CAP)
        chosen = (
            {spec.dtype: fd_info["step"] * scale if fd_step is None else fd_info["step"]}
            if fd_step != "adaptive"
            else None
        )
        reference = raw["autograd_grad"][name] if spec.dtype == "float64" else None
        return guarded_step_sweep(
            function,
            fd_values,
            fd_v,
            name,
            flat,
            chosen=chosen,
            reference=reference,
            batching=_batching(fd_info["inputs"][name]),
            together=found(riders, name, flat),
        )

    return _Part(fields, raw, v, analytical, sweeper)


def check_callable(function: Callable, inputs: dict, grad: Any = None, **options) -> dict:
    """Run a check on a Python callable taking the inputs as keyword arguments."""
    if not callable(function):
        raise SpecError("function must be callable", field="function")
    record = {"function": function, "inputs": inputs, "analytical_gradient": grad, **options}
    return run_check(record)
