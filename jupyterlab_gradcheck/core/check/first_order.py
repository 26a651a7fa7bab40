"""The first-order check of one output: finite differences, the comparisons, diagnosis, and the record fields.

The engine (engine.py) observes autograd, then calls `first_order` once for a function of one output
and once per differentiable output of a function of several; it adds second order, forward mode and
the step sweep around it. Here: the finite differences (exhaustive, or projected when asked or over
budget), their rounding bounds and refinement, the comparisons between every pair of gradients,
each failure's diagnosis, and the step sweep to take at the worst element once the record wants one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import SpecError
from ..i18n import Message
from ..values.tensors import Descriptions, with_complex_kept
from .autograd.observations import analytical_tensors, failure, gradcheck_fast, torch_gradcheck
from .compare.comparison import Operand, autograd_vjp, compare, compare_rows, unravel
from .diagnosis import DiagnosisContext, diagnose
from .fd import finite_difference as projected
from .fd import finite_difference as time_budget
from .fd.finite_difference import (
    FdOptions,
    Riding,
    fd_gradients,
    found,
    guarded_step_sweep,
    refine_inputs,
    sweep_riders,
)
from .fd.steps import BOUND_FACTOR, STEP_SCALE_CAP, element_tolerance
from .record import spec as defaults
from .record.spec import CheckSpec

# -------------------- numerical verdict
# The numerical verdict alone: finite differences against autograd, the question gradcheck answers.
#
# `numerical_verdict` is the fast path for a Python callable when only that question matters
# (a loop over many functions, a large input): one forward and one `torch.autograd.grad`
# for v^T J, the batched finite-difference estimate of the same vector, and one comparison
# per input that keeps the worst element with its index. It writes no ledger and makes none of
# the other observations; `engine.run_check` is the full record.


def _dtype_name(tensor) -> str:
    name = str(tensor.dtype).replace("torch.", "")
    if name not in defaults.DTYPES:
        raise SpecError(
            "input dtype {name} is not one of {choices}", name=name, choices=", ".join(defaults.DTYPES), field="inputs"
        )
    return name


def numerical_verdict(
    function: Callable,
    inputs: dict,
    *,
    grad_output=None,
    scheme: str = "central",
    step=None,
    rtol: float | None = None,
    atol: float | None = None,
    structured: bool = True,
) -> dict:
    """Whether finite differences of `function` agree with autograd at `inputs`.

    `inputs` maps keyword names to floating-point tensors (all of one dtype). The tolerance
    defaults to the dtype's finite-difference tolerance for `scheme` (core/check/record/spec.py).
    Returns `{"passed", "dtype", "scheme", "step", "rtol", "atol", "comparisons", "worst"}`,
    where each comparison is the engine's `autograd_vs_finite_difference` row for one input
    and `worst` is the worst element of the first failing input (else of the largest error).
    `structured=False` forces the general finite-difference path even for an elementwise chain
    (core/check/fd/structure.py).
    """
    if scheme not in defaults.SCHEMES:
        raise SpecError(
            "scheme {scheme!r} is not one of {choices}",
            scheme=scheme,
            choices=", ".join(defaults.SCHEMES),
            field="scheme",
        )
    if not inputs:
        raise SpecError("numerical_verdict needs at least one input", field="inputs")
    dtypes = {_dtype_name(t) for t in inputs.values()}
    if len(dtypes) != 1:
        raise SpecError("inputs mix dtypes {dtypes}: give them one dtype", dtypes=sorted(dtypes), field="inputs")
    dtype = dtypes.pop()
    leaves, v, autograd = autograd_vjp(function, inputs, grad_output)

    fd_dtype = getattr(torch, defaults.FD_DTYPE[dtype])
    fd_values = {name: t.detach().to(fd_dtype) for name, t in inputs.items()}
    fd_v = with_complex_kept(v.detach(), fd_dtype)  # a complex output's grad_output stays complex, a real one real
    fd_raw, info, _ = fd_gradients(
        function, fd_values, fd_v, FdOptions(dtype=dtype, scheme=scheme, step=step, structured=structured)
    )
    tolerance = defaults.fd_tolerance(dtype, scheme)
    rtol = tolerance["rtol"] if rtol is None else rtol
    atol = tolerance["atol"] if atol is None else atol
    rows = [
        compare(
            "autograd_vs_finite_difference",
            name,
            fd_raw[name].to(autograd[name].dtype),
            autograd[name],
            left_label="finite_difference",
            right_label="autograd_grad",
            rtol=rtol,
            atol=atol,
        )
        for name in leaves
    ]
    failing = [row for row in rows if not row["passed"]]
    chosen = failing[0] if failing else max(rows, key=lambda row: row["worst"]["abs_err"] or 0.0)
    return {
        "passed": not failing,
        "dtype": dtype,
        "scheme": scheme,
        "step": info["step"],
        "step_kind": info["step_kind"],
        "rtol": rtol,
        "atol": atol,
        "comparisons": rows,
        "worst": {"input": chosen["input"], **chosen["worst"]},
        "finite_difference": info,
    }


# -------------------- differences
# One output's finite differences, as a check takes them: the dtype they are taken in, the path
# (exhaustive, or projected when asked or over its time budget), each element's rounding bound at the
# default step and tolerance, and the re-estimation of failing elements. `first_order.py` compares
# them with autograd's gradients.


def as_dtype(tensor, dtype):
    """`tensor.to(dtype)`, which is the tensor itself when it has that dtype already."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


@dataclass
class Differences:
    """One output's finite differences: the values and v they were taken at (in their dtype), the
    estimates, what was done, each element's widened tolerance, and the projected mode's rows."""

    dtype: str
    values: dict
    v: Any
    estimates: dict
    info: dict
    bounds: dict | None
    projected_rows: list | None
    riders: list


def finite_differences(spec: CheckSpec, function, leaves: dict, raw: dict, v, *, sweep: bool) -> Differences:
    """The finite differences of one output: exhaustive, or projected when asked or over the time
    budget; at the default step and tolerance, each element's rounding bound widens its tolerance and
    failing elements are re-estimated (core/check/fd/finite_difference.py); with `sweep`, the step sweep's
    series ride along (core/check/fd/finite_difference.py)."""
    fd_dtype = defaults.FD_DTYPE[spec.dtype]
    fd_values = {n: as_dtype(t.detach(), getattr(torch, fd_dtype)) for n, t in leaves.items()}
    fd_v = with_complex_kept(v.detach(), getattr(torch, fd_dtype))  # a complex output's grad_output stays complex
    fd_scheme, fd_step = spec.finite_difference["scheme"], spec.finite_difference["step"]
    # The error bound widens only the default tolerance at the default step: an explicit tolerance
    # or a chosen step is applied as written (a step too small for the dtype stays a failure).
    bounded = not spec.fd_tolerance_explicit and fd_step is None and fd_dtype == spec.dtype
    rounding = None
    # the projected mode (core/check/fd/finite_difference.py): asked for, or chosen when the exhaustive one is over budget
    projection, projected_rows = projected.requested(spec.finite_difference), None
    names = list(spec.inputs)
    riders = (
        sweep_riders(function, fd_values, fd_v, names[0], 0)
        if (sweep and fd_dtype == spec.dtype == "float64" and not fd_v.is_complex())
        else []
    )
    if not projection:
        try:
            fd_raw, fd_info, rounding = fd_gradients(
                function,
                fd_values,
                fd_v,
                FdOptions(
                    dtype=spec.dtype,
                    scheme=fd_scheme,
                    step=fd_step,
                    work_elements=spec.work_elements,
                    rounding=bounded,
                    budget_s=time_budget.budget(spec.finite_difference),
                    chains=raw.get("chain_possible"),
                    riders={names[0]: Riding(riders)} if riders else None,
                ),
            )
            elements = sum(x.numel() * (2 if x.is_complex() else 1) for x in fd_values.values())
            fd_info["mode_reason"] = time_budget.exhaustive_reason(
                fd_info["inputs"], elements, time_budget.budget(spec.finite_difference)
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
    return Differences(fd_dtype, fd_values, fd_v, fd_raw, fd_info, bounds, projected_rows, riders)


# -------------------- first order

#: The order of a record's comparisons.
COMPARISON_ORDER = (
    "analytical_vs_backward_pass_1",
    "analytical_vs_autograd_grad",
    "autograd_vs_finite_difference",
    "pass_2_vs_twice_pass_1",
    "after_clear_none_vs_pass_1",
)


def nondeterminism(function, leaves: dict) -> str:
    with torch.no_grad():
        detached = {n: t.detach() for n, t in leaves.items()}
        first, second = function(**detached), function(**detached)
    if first.dtype == torch.complex32:  # torch.equal has no complex-half kernel; widening is exact
        first, second = first.to(torch.complex64), second.to(torch.complex64)
    if not torch.equal(first, second):
        return Message("two forward passes at the same input give different outputs: the function is not deterministic")
    return ""


def comparisons_of(
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
        # one input's rows computed together (core/check/compare/comparison.py compare_rows); the sort below orders them
        rows += compare_rows(requests) + ([projected_row] if projected_row else [])
    rows.sort(key=lambda row: COMPARISON_ORDER.index(row["name"]))
    return rows


# -------------------- detection floor
# What a check in a low precision could not see. A one-element error in the gradient is caught only
# where it exceeds that element's finite-difference allowance: the tolerance, plus the rounding bound
# the check measured from its own evaluations. In float32 that allowance is about 1e-3 of the value,
# so a record that passes says "no error above this floor", never "no error". The floor is the smallest
# relative one-element error the check could have caught: the least allowance / |gradient| over the
# elements, with where it is.

#: The dtypes whose records state their detection floor.
FLOOR_DTYPES = ("float32", "float16", "bfloat16", "complex64")


def detection_floor(spec: CheckSpec, autograd: dict, bounds: dict | None) -> dict | None:
    """The `detection_floor` block of a record in a low precision (FLOOR_DTYPES), else None."""
    if spec.dtype not in FLOOR_DTYPES:
        return None
    rtol, atol = spec.finite_difference["rtol"], spec.finite_difference["atol"]
    best = None
    for name, gradient in autograd.items():
        magnitude = gradient.detach().abs().to(torch.float64).reshape(-1)
        allowed = atol + rtol * magnitude
        if bounds:
            allowed = allowed + bounds[name].detach().abs().to(torch.float64).reshape(-1).to(allowed.device)
        usable = torch.isfinite(magnitude) & (magnitude > 0) & torch.isfinite(allowed)
        if not bool(usable.any()):
            continue
        ratio = torch.where(usable, allowed / torch.where(usable, magnitude, 1.0), math.inf)
        at = int(ratio.argmin())
        if best is None or float(ratio[at]) < best["relative"]:
            best = {
                "relative": float(ratio[at]),
                "input": name,
                "index": unravel(at, gradient.shape),
                "gradient": float(magnitude[at]),
                "allowed": float(allowed[at]),
            }
    if best is None:
        return None
    best["reason"] = Message(
        "in {dtype}, a one-element error in autograd's gradient (a custom backward's, say) below {floor} of "
        "its value is within the finite-difference allowance (tolerance and measured rounding) and could not be seen",
        dtype=spec.dtype,
        floor=f"{best['relative']:.2g}",
    )
    return best


def path_note(fd_info: dict) -> str:
    """Which inputs had every element shifted at once (an observed elementwise chain), or a colour of
    elements at a time (a learned sparse pattern, core/check/fd/structure.py), in words."""
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


def batching(info: dict) -> str | None:
    """What the finite differences found about batching an input: "" faithful, the reason it was refused, or None."""
    if info.get("batched_refused"):
        return info["batched_refused"]
    return "" if info.get("batched") and info.get("batch_check_evaluations") else None


def diagnosed_failures(spec: CheckSpec, function, leaves: dict, diffs, grads: dict, comparisons: list) -> list:
    """The failures of the failed `comparisons`, each with its diagnosis, against the finite differences `diffs`
    (core/check/first_order.py) and the gradients `grads` (observation name -> {input name -> tensor})."""
    if all(row["passed"] for row in comparisons):
        return []
    fd_step = spec.finite_difference["step"]
    context = DiagnosisContext(
        function=function,
        fd_values=diffs.values,
        fd_v=diffs.v,
        dtype=spec.dtype,
        scheme=spec.finite_difference["scheme"],
        step=diffs.info["step"] if fd_step is not None else None,
        fd_tolerance=spec.finite_difference,
        grads=grads,
        # two more forward passes, needed only to explain a failure
        nondeterminism=nondeterminism(function, leaves),
        fd_structure={n: i["structure"] for n, i in diffs.info["inputs"].items()},
        refinement=diffs.info.get("refinement", {}),
    )
    return [failure(row, *diagnose(row, context)) for row in comparisons if not row["passed"]]


def elements(tensors) -> int:
    """How many elements the tensors hold together (non-tensors, such as an output that is None, count none)."""
    return sum(t.numel() for t in tensors if hasattr(t, "numel"))


@dataclass
class FirstOrder:
    """The first-order check of one output: its record fields, and what the rest of the record needs."""

    fields: dict
    raw: dict
    v: Any
    analytical: dict
    sweeper: Callable[[], dict]


@dataclass
class SweepAtWorst:
    """The step sweep of one output's check, at the worst element of its first failure (else the first
    input's first element); called once the record knows it wants one."""

    spec: CheckSpec
    function: Callable
    fd_values: dict
    fd_v: Any
    fd_info: dict
    autograd: dict
    comparisons: list
    failures: list
    riders: list

    def __call__(self) -> dict:
        spec, fd_info, fd_step = self.spec, self.fd_info, self.spec.finite_difference["step"]
        first = self.failures[0] if self.failures else None
        name = first["input"] if first else list(spec.inputs)[0]
        flat = next(
            (
                r["worst"]["flat_index"]
                for r in self.comparisons
                if first and r["name"] == first["comparison"] and r["input"] == name
            ),
            0,
        )
        x_i = float(self.fd_values[name].reshape(-1)[flat].abs())
        scale = min(max(1.0, x_i), STEP_SCALE_CAP)
        chosen = (
            {spec.dtype: fd_info["step"] * scale if fd_step is None else fd_info["step"]}
            if fd_step != "adaptive"
            else None
        )
        reference = self.autograd[name] if spec.dtype == "float64" else None
        return guarded_step_sweep(
            self.function,
            self.fd_values,
            self.fd_v,
            name,
            flat,
            chosen=chosen,
            reference=reference,
            batching=batching(fd_info["inputs"][name]),
            together=found(self.riders, name, flat),
        )


def first_order(
    spec: CheckSpec, function, leaves: dict, device: str, observed: tuple, *, whole: bool, sweep: bool = False
) -> FirstOrder:
    """Finite differences, comparisons and diagnosis of one output's autograd observations; `whole`
    adds torch.autograd.gradcheck's verdict on the function (for one output of several it is run
    once on the whole function instead). `sweep` says the record will have a step sweep:
    its series for a passing check are evaluated with the finite differences (core/check/fd/finite_difference.py)."""
    observations, raw, v = observed
    analytical = analytical_tensors(spec, leaves)
    # the record's tensors with the same bits are stored once (core/values/tensors.py)
    descriptions = raw.get("descriptions") or Descriptions()

    diffs = finite_differences(spec, function, leaves, raw, v, sweep=sweep)
    fd_values, fd_v, fd_raw, fd_info, fd_dtype = diffs.values, diffs.v, diffs.estimates, diffs.info, diffs.dtype
    bounds, projected_rows, riders = diffs.bounds, diffs.projected_rows, diffs.riders
    fd_scheme = spec.finite_difference["scheme"]
    names = list(spec.inputs)
    fd = {n: as_dtype(g, leaves[n].dtype) for n, g in fd_raw.items()}
    half_note = (
        f" Evaluated in {fd_dtype}: a {spec.dtype} step cannot resolve a derivative." if fd_dtype != spec.dtype else ""
    )
    observations["finite_difference"] = {
        "name": "finite_difference",
        "description": Message(
            "{scheme} difference of sum(grad_output * f) along each input element", scheme=fd_scheme
        ),
        "note": f"step {fd_info['step']:.3g} ({fd_info['step_kind']}).{half_note}{path_note(fd_info)}",
        "gradients": {n: descriptions.describe(fd[n]) for n in fd},
        **fd_info,
    }
    if whole:
        observations["torch_gradcheck"] = torch_gradcheck(
            function,
            leaves,
            spec.dtype,
            device,
            fast=gradcheck_fast(elements(leaves.values()), v.numel()),
            undefined_grad=not raw["built_in_only"],
        )
    raw["finite_difference"] = fd

    comparisons = comparisons_of(spec, analytical, raw, fd, bounds, projected_rows)
    failures = diagnosed_failures(spec, function, leaves, diffs, raw, comparisons)
    verdict = observations["torch_gradcheck"]["status"] if whole else None
    # the pass-1 tensors once more (a value of its own, not shared with the observation's)
    pass_1 = raw["backward_pass_1"]
    observed_gradient = (
        descriptions.value(pass_1[names[0]]) if len(names) == 1 else {n: descriptions.value(pass_1[n]) for n in names}
    )
    floor = detection_floor(spec, raw["autograd_grad"], bounds) if not projected_rows else None
    fields = {
        **({"detection_floor": floor} if floor else {}),
        "observed_gradient": observed_gradient,
        "passed": not failures and verdict != "failed",
        "grad_output_used": descriptions.describe(v),
        "analytical": {n: descriptions.describe(analytical[n]) for n in names},
        "observations": observations,
        "comparisons": comparisons,
        "failure": failures[0] if failures else None,
        "failures": failures,
    }

    sweeper = SweepAtWorst(
        spec, function, fd_values, fd_v, fd_info, raw["autograd_grad"], comparisons, failures, riders
    )
    return FirstOrder(fields, raw, v, analytical, sweeper)
