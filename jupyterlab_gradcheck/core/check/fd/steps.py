"""The precision a computation really runs in: its dtype's, or TF32's on a CUDA device that allows it.

On an NVIDIA card from Ampere on, torch may run float32 matrix products and convolutions in TF32,
whose mantissa has 10 bits (eps = 2^-10 ~ 9.8e-4, float16's) instead of float32's 23 (eps ~ 1.2e-7).
Three settings decide it: `torch.backends.cuda.matmul.allow_tf32` (matrix products),
`torch.backends.cudnn.allow_tf32` (convolutions; True by default) and
`torch.get_float32_matmul_precision()` ("high" or "medium" allow TF32 or bfloat16 passes for
products). A check cannot see which operations a function performs, so where any of them is on,
a float32 function on cuda is bounded with TF32's eps: a bound from float32's eps would blame the
backward for TF32's rounding. The environment (core/check/environment.py) records the settings.
"""

from __future__ import annotations

import torch

from ..record import spec as defaults

# -------------------- working precision

#: Unit roundoff of TF32's 10-bit mantissa: 2^-10, float16's.
TF32_EPS = 2.0**-10
#: The dtypes whose matrix products and convolutions TF32 may replace.
TF32_DTYPES = (torch.float32, torch.complex64)


def tf32_settings() -> list[str]:
    """The settings that let float32 run in TF32 on cuda, as written in Python (empty: none is on)."""
    on = []
    if torch.backends.cuda.matmul.allow_tf32:
        on.append("torch.backends.cuda.matmul.allow_tf32")
    if torch.backends.cudnn.allow_tf32:
        on.append("torch.backends.cudnn.allow_tf32")
    if torch.get_float32_matmul_precision() != "highest":
        on.append(f"torch.get_float32_matmul_precision() == {torch.get_float32_matmul_precision()!r}")
    return on


def runs_in_tf32(dtype, device) -> bool:
    """Whether a `dtype` computation on `device` may run in TF32 (float32 or complex64 on cuda with a
    TF32 setting on)."""
    return dtype in TF32_DTYPES and str(device).startswith("cuda") and bool(tf32_settings())


def working_eps(dtype, device) -> float:
    """eps of the precision a `dtype` computation on `device` runs in: the dtype's (a complex dtype's
    parts'), or TF32's where `runs_in_tf32`."""
    eps = torch.finfo(dtype).eps
    return max(eps, TF32_EPS) if runs_in_tf32(dtype, device) else eps


def precision_name(dtype, device) -> str:
    """The name of that precision, as a record writes it: "tf32", or the dtype's name."""
    return "tf32" if runs_in_tf32(dtype, device) else str(dtype).replace("torch.", "")


# -------------------- shifts
# The shifted copies a finite difference evaluates, and the steps it shifts by.
#
# A difference quotient of input element i evaluates phi at copies of the input shifted at i by
# signed multiples of a step (`defaults.SHIFTS`). The step is relative to min(max(1, |x_i|), STEP_SCALE_CAP) by
# default, and the shift is the one the arithmetic really takes, (x_i + s) - x_i. For a complex input
# the probe shifts one part at a time, its real or its imaginary part (`imaginary`), and the step
# is sized by that part (core/values/form.py).

#: Largest |x| the default step grows with: beyond it the step stays eps^(1/3) * STEP_SCALE_CAP, because a step that
#: grows with |x| without bound (0.06 at 1e4) measures curvature instead of slope; the rounding it costs is in each
#: element's bound (core/check/fd/steps.py).
STEP_SCALE_CAP = 16.0


def shifted(x, steps, *, imaginary: bool = False, indices=None):
    """Copies of x, copy k shifted by steps[k] at flat element indices[k]."""
    flat = x.reshape(-1)
    indices = torch.arange(flat.numel(), device=x.device) if indices is None else indices
    base = flat.to(complex_of(flat.dtype)) if imaginary else flat
    stack = base.expand(len(indices), flat.numel()).clone()
    shift = steps.to(stack.dtype) * (1j if imaginary else 1)
    stack.scatter_add_(1, indices.reshape(-1, 1), shift.reshape(-1, 1))
    return stack.reshape(len(indices), *x.shape)


def shifted_range(x, start: int, stop: int, steps, *, imaginary: bool = False):
    """Copies of x for flat elements start..stop-1, one block per row of `steps`.

    Block b holds, for each element i in the range, x shifted by steps[b, i - start] at i.
    """
    flat = x.reshape(-1)
    base = flat.to(complex_of(flat.dtype)) if imaginary else flat
    blocks, rows = steps.shape[0], stop - start
    stack = base.expand(blocks * rows, flat.numel()).clone()
    shift = steps.to(stack.dtype) * 1j if imaginary else steps
    stack.view(blocks, rows, -1).diagonal(offset=start, dim1=1, dim2=2).add_(shift)
    return stack.reshape(blocks * rows, *x.shape)


def complex_of(dtype):
    """The complex dtype of a real one's precision (a complex dtype is its own)."""
    if dtype.is_complex:
        return dtype
    return {torch.float64: torch.complex128, torch.float32: torch.complex64}[dtype]


def step_vector(probe, step, dtype: str, scheme: str, indices=None):
    """Absolute step per element: relative to max(1, |x|) by default (that scale capped at
    STEP_SCALE_CAP), else the fixed step."""
    flat = probe.component().reshape(-1)
    if indices is not None:
        flat = flat[indices]
    if step is None:
        scale = torch.clamp(flat.abs(), min=1.0, max=STEP_SCALE_CAP)
        return defaults.fd_step(dtype, scheme) * scale
    return torch.full_like(flat, float(step))


def signed_steps(probe, scheme: str, h, indices=None, *, exact: bool = False):
    """The shifts of each element for `scheme`, one row per multiple of h (`defaults.SHIFTS`).

    With `exact`, each shift is the one the arithmetic actually takes, (x_i + s) - x_i: x_i + s
    rounds to the grid around x_i, so the quotient divides by the step really taken and the
    rounding of the step itself (eps |x_i| / h, large where |x_i| is) leaves no error.
    """
    multiples = defaults.SHIFTS[scheme]
    if not exact or scheme == "complex_step":
        return torch.stack([h * m for m in multiples]) if len(multiples) > 1 else h.unsqueeze(0)
    flat = probe.component().reshape(-1)
    x = flat if indices is None else flat[indices]
    # A shift below half an ulp of x_i vanishes (x_i + s == x_i): the nominal shift is kept there,
    # so the quotient is 0 / 2h, the honest answer of a step the dtype cannot resolve, not 0 / 0.
    shifts = []
    for m in multiples:
        taken = (x + h * m) - x
        shifts.append(torch.where(taken == 0, h * m, taken))
    return torch.stack(shifts)


# -------------------- adaptive step
# The adaptive step: the step per decade whose estimated error, truncation plus rounding, is smallest.
#
# Moved out of core/check/fd/finite_difference.py, which evaluates the quotients it compares.


def adaptive(probe, scheme: str, dtype: str, difference_quotient):
    """Pick the step with the smallest estimated error; return it with the telemetry.

    The estimate at step h is |D(h) - D(h/2)| (truncation) plus the rounding,
    eps * (|phi| + |x_i| |D_i|) / h: the first term from the values of phi, the second from
    x_i + h itself being rounded, which dominates where phi is zero (log at 1). The rounding
    term matters: at tiny steps D(h) and D(h/2) can coincide by quantisation, which alone
    would look like a perfect step. `difference_quotient` is core/check/fd/finite_difference.py's, passed
    in by it (that module evaluates the quotients this one compares).
    """
    import math

    eps = defaults.EPS[defaults.FD_DTYPE[dtype]]
    x = probe.values[probe.name]
    scale = torch.clamp(x.reshape(-1).abs(), min=1.0)
    magnitude = float(torch.sum((probe.v * probe.function(**probe.values)).abs()))
    telemetry, best = [], None
    for k in range(1, int(-math.log10(eps)) + 1):
        relative = 10.0**-k
        h = relative * scale
        estimate = difference_quotient(probe, scheme, h)
        halved = difference_quotient(probe, scheme, h / 2)
        truncation = float((estimate - halved).abs().max())
        representation = float((x.reshape(-1).abs() / scale * halved.abs()).max()) if x.numel() else 0.0
        rounding = eps * (magnitude + representation) / relative
        total = truncation + rounding
        telemetry.append(
            {"step": relative, "change_when_halved": truncation, "rounding_estimate": rounding, "error_estimate": total}
        )
        if best is None or total < best[0]:
            best = (total, relative, halved)
    total, relative, estimate = best
    return (
        estimate,
        relative,
        {
            "rule": "step minimising |D(h) - D(h/2)| + eps*(|phi| + |x_i||D_i|)/h over decades; the estimate at h/2 is kept",
            "candidates": telemetry,
            "chosen_step": relative,
            "error_estimate": total,
        },
    )


# -------------------- error bound
# The rounding bound of each finite-difference estimate, from the values actually differenced.
#
# A central estimate of element i is sum_j v_j (f_j(x + h e_i) - f_j(x - h e_i)) / 2h, taken
# output by output. Each evaluated output carries a rounding error of a few units of eps |f_j|
# (more where f_j is itself a sum whose terms cancel), so the quotient's rounding is bounded by
#
#     rounding_i = eps * sum_j |v_j| (|f_j(x + h e_i)| + |f_j(x - h e_i)|) / 2h,
#
# summed over the outputs that element i changed (outputs it does not touch are evaluated
# identically and cancel exactly). Two equal evaluations of an output the element does move say only
# that the change is below the output's rounding: a row whose outputs all came out equal counts them
# all (`moved_outputs`). This grows with the magnitude that is differenced and with
# 1/h, which is what a fixed absolute tolerance ignores: at |x| = 1e4, or for a sum of a thousand
# outputs, eps * |f| / h alone exceeds 3.7e-9. So each element's default tolerance adds
# BOUND_FACTOR * rounding_i to `atol + rtol * |autograd_i|` (docs/tolerances.md).
#
# The truncation error (~h^2 |f'''| / 6 for central differences) is not estimated for every
# element, which would double the evaluations: an element that fails is re-estimated at smaller
# steps with Richardson extrapolation, whose successive values give its truncation error
# (core/check/fd/finite_difference.py).

#: Multiple of the rounding bound allowed per element: one evaluation of f_j may round by a
#: few eps |f_j| (a libm function by ~1 ulp, a sum of k terms by up to k ulps of its largest
#: term), so the bound from |f_j| alone is widened by this constant.
BOUND_FACTOR = 4.0


def rounding_of(probe, first, second, width):
    """eps * sum_j |v_j| (|first_j| + |second_j|) / |width| per row, over outputs that differ.

    `first` and `second` are the stacked outputs (one row per element) whose difference is the
    quotient's numerator, or `second` None for the complex step (no subtraction: the imaginary
    part's own rounding, eps * |Im f| / h). eps is that of the precision the outputs were computed in
    (core/check/fd/steps.py): TF32's on a cuda device that lets float32 run in it.
    """
    real = first.real if first.is_complex() else first
    eps = working_eps(real.dtype, real.device)  # TF32's where float32 may run in it on cuda
    rows = first.shape[0]
    if second is None:
        magnitude = first.abs()
    else:
        precision = probe.values[probe.name].dtype
        moved = moved_outputs(first, second, precision)
        if probe.touched is not None and probe.rows_of is not None and equal_evaluations_count(first.dtype, precision):
            moved = moved | touched_rows(probe.touched, probe.rows_of).reshape(moved.shape)
        magnitude = (first.abs() + second.abs()) * moved
    weights = probe.v.abs().reshape(-1).to(magnitude.dtype)
    total = (magnitude.reshape(rows, -1) * weights).sum(1)
    return eps * total / width.abs()


def equal_evaluations_count(dtype, precision) -> bool:
    """Whether two equal evaluations in `dtype` may count in a bound: only for outputs computed in
    `precision`, the finite differences' dtype. An equal pair of an output rounded to a narrower dtype
    counts 0: its rounding at a step chosen for the wider dtype would make a bound larger than any
    derivative it could check (a cast to bfloat16: about 10^4)."""
    return torch.finfo(dtype).eps == torch.finfo(precision).eps


def moved_outputs(first, second, precision):
    """Which outputs of each row (one row per shifted element) count in its bound: those whose two
    evaluations differ and, where `equal_evaluations_count`, every output of a row whose evaluations
    are all equal. Equal values mean a change below their rounding, not a derivative of 0, and an
    all-equal row (one output, or several of which the element moves none by more than its rounding)
    gives a quotient of exactly 0 that only this bound can qualify. In a row where some outputs
    differ, an equal one may be an output the element does not touch, and it still counts 0."""
    differs = first != second
    if not equal_evaluations_count(first.dtype, precision):
        return differs
    rows = differs.shape[0]
    all_equal = ~differs.reshape(rows, -1).any(1)
    return differs | all_equal.reshape(rows, *([1] * (differs.dim() - 1)))


def element_tolerance(rounding):
    """The part of each element's tolerance that comes from its rounding bound."""
    return BOUND_FACTOR * rounding


def touched_rows(touched: dict, elements):
    """The outputs each row's element moved at a wide step, one row per element of `elements`: where such
    an output came out equal at the step differenced, its change there was below its rounding, and it counts (for
    outputs in the differences' own precision, as `equal_evaluations_count` says)."""
    return torch.stack([touched[int(i)] for i in elements])


# -------------------- mode tolerance
# Tolerances of forward mode, batched gradients and the second order, per dtype and device.
#
# These modes compare two kinds of values, as the first order does:
#
# - `exact`: two exact derivatives that differ by rounding alone (forward AD against the backward's
#   Jacobian, vmap's batched gradients against one-at-a-time ones, an analytical Hessian against
#   autograd's). In float64 rtol = atol = 1e-9: rounding of sums of 10^4 terms with a wide margin.
#   In any other precision, the first order's analytical-vs-autograd rtol for that precision
#   (core/check/record/spec.py: 1e-4 float32, 1e-2 float16 and TF32, 5e-2 bfloat16), as atol too
#   (a sum that cancels keeps the rounding of its terms).
# - `differences`: central differences against an exact derivative (the finite differences along a
#   direction u, the finite differences of the gradient that make a Hessian). In float64
#   rtol = atol = 1e-6: truncation and rounding are each ~eps^(2/3) ~ 4e-11 times the scale of the
#   third derivative and of the differenced values, allowed up to 10^4. In float32 the first order's
#   100 x eps^(2/3) (2.4e-3), as rtol and atol; in float16 and bfloat16 the first order's rule: the
#   differences are taken in float32 (`fd_dtype`) and the tolerance is the half-precision result's.
#   Where the caller has the differenced values, `difference_bound` adds each element's rounding
#   bound in the precision really used (TF32's on a device that runs float32 in it,
#   core/check/fd/steps.py), as the first order's finite differences do.
#
# A backward 1 % wrong still fails in float32 (2.4e-3 < 1e-2), and the float64 values are those the
# modes have always used.

#: float64 and complex128: see the module's docstring.
WIDE = {"exact": {"rtol": 1e-9, "atol": 1e-9}, "differences": {"rtol": 1e-6, "atol": 1e-6}}
#: The dtype whose first-order tolerances each precision takes (TF32 has float16's 10-bit mantissa).
_AS = {"float32": "float32", "complex64": "float32", "tf32": "float16", "float16": "float16", "bfloat16": "bfloat16"}


def mode_tolerances(dtype, device) -> dict:
    """{"precision", "exact", "differences", "fd_dtype"} for a mode run in `dtype` on `device`:
    `exact` and `differences` are {rtol, atol}; `precision` names the precision really used ("tf32"
    where TF32 may replace float32); `fd_dtype` is the dtype the differences are to be taken in."""
    precision = precision_name(dtype, device)
    name = str(dtype).replace("torch.", "")
    fd_dtype = getattr(torch, defaults.FD_DTYPE.get(name, name))
    if precision in ("float64", "complex128"):
        return {"precision": precision, **{k: dict(v) for k, v in WIDE.items()}, "fd_dtype": fd_dtype}
    like = _AS[precision]
    exact = defaults.comparison_tolerance(like)["rtol"]
    differences = defaults.fd_tolerance(like, "central")["rtol"] if like == "float32" else exact
    return {
        "precision": precision,
        "exact": {"rtol": exact, "atol": exact},
        "differences": {"rtol": differences, "atol": differences},
        "fd_dtype": fd_dtype,
    }


def difference_bound(plus, minus, width):
    """Each element's rounding bound of (plus - minus) / width, in the precision `plus` was computed in
    on its device: BOUND_FACTOR * eps * (|plus| + |minus|) / |width| (core/check/fd/steps.py)."""
    real = plus.real if plus.is_complex() else plus
    eps = working_eps(real.dtype, plus.device)
    magnitude = plus.detach().abs().to(torch.float64) + minus.detach().abs().to(torch.float64)
    return BOUND_FACTOR * eps * magnitude / abs(float(width))
