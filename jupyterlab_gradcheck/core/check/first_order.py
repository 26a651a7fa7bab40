"""The first-order check of one output: finite differences, the comparisons, diagnosis, and the record fields.

The engine (engine.py) observes autograd, then calls `first_order` once for a function of one output
and once per differentiable output of a function of several; it adds second order, forward mode and
the step sweep around it. Here: the finite differences (exhaustive, or projected when asked or over
budget), their rounding bounds and refinement, the comparisons between every pair of gradients,
each failure's diagnosis, and the step sweep to take at the worst element once the record wants one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..i18n import Message
from .autograd.expectation_tensors import analytical_tensors
from .autograd.failures import failure
from .autograd.torch_gradcheck import gradcheck_fast, torch_gradcheck
from .compare.comparison import Operand
from .compare.described_once import Descriptions
from .compare.stacked_rows import compare_rows
from .diagnosis import DiagnosisContext, diagnose
from .differences import as_dtype, finite_differences
from .fd.shifts import STEP_SCALE_CAP
from .fd.step_sweep import guarded_step_sweep
from .fd.sweep_riders import found
from .record.spec import CheckSpec

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
        # one input's rows computed together (core/check/compare/stacked_rows.py compare_rows); the sort below orders them
        rows += compare_rows(requests) + ([projected_row] if projected_row else [])
    rows.sort(key=lambda row: COMPARISON_ORDER.index(row["name"]))
    return rows


def path_note(fd_info: dict) -> str:
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


def batching(info: dict) -> str | None:
    """What the finite differences found about batching an input: "" faithful, the reason it was refused, or None."""
    if info.get("batched_refused"):
        return info["batched_refused"]
    return "" if info.get("batched") and info.get("batch_check_evaluations") else None


def diagnosed_failures(spec: CheckSpec, function, leaves: dict, diffs, grads: dict, comparisons: list) -> list:
    """The failures of the failed `comparisons`, each with its diagnosis, against the finite differences `diffs`
    (core/check/differences.py) and the gradients `grads` (observation name -> {input name -> tensor})."""
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
    its series for a passing check are evaluated with the finite differences (core/check/fd/sweep_riders.py)."""
    observations, raw, v = observed
    analytical = analytical_tensors(spec, leaves)
    # the record's tensors with the same bits are stored once (core/check/compare/described_once.py)
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
    fields = {
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
