"""One output's finite differences, as a check takes them: the dtype they are taken in, the path
(exhaustive, or projected when asked or over its time budget), each element's rounding bound at the
default step and tolerance, and the re-estimation of failing elements. `first_order.py` compares
them with autograd's gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .compare.complex_tensors import with_complex_kept
from .fd import projected, time_budget
from .fd.error_bound import BOUND_FACTOR, element_tolerance
from .fd.finite_difference import FdOptions, fd_gradients
from .fd.refinement import refine_inputs
from .fd.sweep_riders import Riding, sweep_riders
from .record import defaults
from .record.spec import CheckSpec


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
    failing elements are re-estimated (core/check/fd/refinement.py); with `sweep`, the step sweep's
    series ride along (core/check/fd/sweep_riders.py)."""
    fd_dtype = defaults.FD_DTYPE[spec.dtype]
    fd_values = {n: as_dtype(t.detach(), getattr(torch, fd_dtype)) for n, t in leaves.items()}
    fd_v = with_complex_kept(v.detach(), getattr(torch, fd_dtype))  # a complex output's grad_output stays complex
    fd_scheme, fd_step = spec.finite_difference["scheme"], spec.finite_difference["step"]
    # The error bound widens only the default tolerance at the default step: an explicit tolerance
    # or a chosen step is applied as written (a step too small for the dtype stays a failure).
    bounded = not spec.fd_tolerance_explicit and fd_step is None and fd_dtype == spec.dtype
    rounding = None
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
