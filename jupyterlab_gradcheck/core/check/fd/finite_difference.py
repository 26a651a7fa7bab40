"""Finite-difference estimates of v^T J, one input element at a time, batched.

For input element i the estimate is a difference quotient of the scalar
phi(x) = sum(v * f(x)) along e_i. Perturbed copies of the input are stacked, a chunk at a
time, and evaluated with `torch.func.vmap`, so that n elements cost a few batched forward
passes instead of 2n Python-level calls, and peak memory stays bounded by the chunk whatever
n is; a function vmap cannot trace falls back to a loop.

The outputs at the two shifted points are subtracted output by output before they are
weighted by v and summed. Outputs that element i does not touch then cancel exactly, so the
rounding error of an elementwise function's estimate does not grow with the number of
elements (differencing the two sums would leave eps * |phi| / h, which at 10^3 elements
already exceeds the default float64 tolerance).

Schemes (docs/tolerances.md explains their error floors):
`central` (phi(x+h) - phi(x-h)) / 2h, `forward` (phi(x+h) - phi(x)) / h,
`richardson` (4 D(h/2) - D(h)) / 3 on central differences, and `complex_step`
Im phi(x + ih) / h, valid only through complex-analytic functions.

Complex values follow PyTorch's convention (core/values/form.py): phi is the real
sum(Re(conj(v) f)), and a complex input's element is differenced twice, its real part shifted
and then its imaginary part, giving d_re + i d_im. An elementwise chain takes the diagonal path
as a real one does (every element's part shifted at once); otherwise those inputs (and a complex
output) take the general path: the coloured path is for real values.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

import torch

from ...errors import SpecError, UserCodeFault, exception_line
from ...i18n import Message
from ...values import form as complex_values
from ...values import tensors as complex_tensors
from ..compare.comparison import compare
from ..record import spec as defaults
from . import steps as adaptive_step
from . import steps as error_bound
from . import steps as shifts
from . import structure as coloured_path
from . import structure as diagonal
from .steps import BOUND_FACTOR, STEP_SCALE_CAP, signed_steps, step_vector

# -------------------- finite difference

# -------------------- time budget
# The time budget of finite_difference.mode auto: when the exhaustive comparison would be too slow.
#
# Mode auto (the default) compares every element unless that is predicted to take over
# AUTO_BUDGET_S; the general path times its first part and raises ExhaustiveOverBudget with the
# prediction, and the engine then compares in the projected mode (core/check/fd/finite_difference.py).
# Apart from both, so that the finite differences need not import the projected mode that uses them.

#: Above this many seconds predicted for the exhaustive comparison, "auto" chooses the projected mode.
AUTO_BUDGET_S = 1.0


class ExhaustiveOverBudget(Exception):
    """The exhaustive comparison would take longer than the budget; the message says from what."""

    def __init__(self, name: str, elements: int, done: int, seconds: float, predicted: float):
        super().__init__(
            f"the exhaustive comparison of {name!r} would take about {predicted:.2g} s "
            f"({done} of its {elements} elements took {seconds:.2g} s), over the "
            f"{AUTO_BUDGET_S:g} s budget of mode auto"
        )
        self.predicted = predicted


def budget(finite_difference: dict) -> float | None:
    """Seconds the exhaustive path may take before the projected mode replaces it (None: no limit)."""
    return AUTO_BUDGET_S if finite_difference.get("mode", "auto") == "auto" else None


def check_budget(probe, total: int, done: int, seconds: float) -> None:
    """Raise ExhaustiveOverBudget when the first chunk's time, scaled to every element, is over budget."""
    predicted = seconds * total / done
    if predicted > probe.budget_s:
        raise ExhaustiveOverBudget(probe.name, total, done, seconds, predicted)


def exhaustive_reason(inputs: dict, elements: int, budget_s: float | None) -> str:
    """Why every element was compared, for the record (`mode_reason`): asked for, or mode auto's choice, with
    its forward evaluations beside the 2 per element of gradcheck's slow mode (the projected mode writes its own)."""
    evaluations = sum(info["forward_evaluations"] for info in inputs.values())
    paths = ", ".join(f"{name} {info['structure']}" for name, info in inputs.items())
    if budget_s is None:
        return (
            f"requested: finite_difference.mode is exhaustive; every element compared in {evaluations} forward "
            f"evaluations ({paths})"
        )
    return (
        f"auto: every element compared in {evaluations} forward evaluations ({paths}), where gradcheck's slow mode "
        f"makes {2 * elements}; auto projects only when the general path's first part predicts more than "
        f"{budget_s:g} s"
    )


# -------------------- evaluations
# The function under check evaluated at shifted copies of one input: phi(x) = sum(v * f(x)), on batches.
#
# A `Probe` holds one input's finite-difference setting (the other inputs, v, the path taken, the
# statistics the record reports) and evaluates phi on a stack of shifted copies, batched with
# `torch.func.vmap` where that is faithful, one copy at a time where it is not, and chunk by chunk so
# that the memory stays bounded whatever the input's size. finite_difference.py turns its evaluations
# into difference quotients.

#: Elements (stacked copies x the larger of input and output numel) per vmap call: this
#: bounds the memory a chunk needs, and so the peak, independently of n.
CHUNK_ELEMENTS = 1 << 20
#: Below this many stacked copies a plain loop is cheaper than vmap's tracing (core/check/record/spec.py).
LOOP_BELOW = defaults.LOOP_BELOW
#: Relative agreement required between a batched and a separate evaluation (core/check/record/spec.py).
BATCH_AGREEMENT = defaults.BATCH_AGREEMENT


def _shape_or_dtype(output, what: str) -> str:
    """An evaluation's output as `stacked` names it: its dtype or its shape, or its type when not a tensor."""
    if not isinstance(output, torch.Tensor):
        return type(output).__name__
    return str(output.dtype).replace("torch.", "") if what == "dtype" else str(tuple(output.shape))


def stacked(outputs: list, name: str) -> torch.Tensor:
    """The outputs of evaluations at perturbed copies of input `name`, stacked along dimension 0;
    `UserCodeFault` when they differ in shape or dtype.

    A function whose output's shape or dtype depends on the values of its input (`x[:2] if x[0] > 1
    else x`) has no derivative where it switches: finite differences would compare outputs of
    different functions, and `torch.stack` would fail or silently promote the dtype.
    """
    first = outputs[0]
    for other in outputs[1:]:
        if not isinstance(other, torch.Tensor) or other.shape != first.shape or other.dtype != first.dtype:
            what = "dtype" if isinstance(other, torch.Tensor) and other.shape == first.shape else "shape"
            seen = [_shape_or_dtype(o, what) for o in (first, other)]
            raise UserCodeFault(
                Message(
                    "the output's {what} changes when input {name} is perturbed for finite differences "
                    "({one} at one point, {two} at another): a function whose output {what} depends on "
                    "its input's values has no derivative where it switches",
                    what=what,
                    name=name,
                    one=seen[0],
                    two=seen[1],
                ),
                input_name=name,
            )
    return torch.stack(outputs)


@dataclass
class Probe:
    """phi(x) = sum(v * f(inputs with `name` replaced by x)), evaluable on batches of x."""

    function: object
    values: dict  #: detached inputs, already in the finite-difference dtype
    v: object  #: grad_output, in the finite-difference dtype
    name: str
    batched: bool = True
    #: Elements of the largest tensor one evaluation builds; bounds a chunk's memory.
    work: int = 1
    #: Whether to look for a diagonal (elementwise) chain before the general path.
    structured: bool = True
    #: False where the autograd graph already shows the recorder would refuse x (core/check/autograd/observations.py).
    chain_possible: bool = True
    #: Which path the estimates came from: "general", the chain core/check/fd/structure.py observed, or
    #: "coloured" (a learned sparse pattern, core/check/fd/structure.py).
    structure: str = "general"
    #: Why no structured path applied to this input ("" while one does or none was tried).
    structure_refused: str = ""
    #: Seconds the general path may take for this input before projected.ExhaustiveOverBudget (None: no limit).
    budget_s: float | None = None
    #: The coloured path's plan once learned (core/check/fd/structure.py); False when it does not apply
    #: (the input is too small for it to pay: COLOURED_FROM_WORK, or complex).
    colouring: object = None
    stats: dict = field(default_factory=lambda: {"forward_evaluations": 0})
    #: Check the first batched evaluation against a separate evaluation of one copy.
    guard: bool = False
    #: Why the batched path was refused for this input ("" while it is used or never tried).
    refused: str = ""
    #: Whether difference_quotient also fills `rounding` (core/check/fd/steps.py).
    track_rounding: bool = False
    #: Per element of the last difference_quotient: the rounding bound of its quotient.
    rounding: object = None
    #: For a complex input: shift the imaginary part of each element instead of the real part.
    imaginary_shift: bool = False
    #: Step-sweep series to evaluate in the same call as this input's copies (a core/check/fd/finite_difference.py Riding).
    riders: object = None
    #: Flat element -> the outputs it moved at a wide step (core/check/fd/finite_difference.py), and the elements of
    #: the rows being differenced, so that their bound counts those outputs where they came out equal.
    touched: dict | None = None
    rows_of: object = None
    _mapped: object = field(default=None, init=False, repr=False)

    def arguments(self, x) -> dict:
        """The keyword arguments of f with input `name` replaced by x (any dtype, real or complex)."""
        others = {
            k: (t.to(x.dtype) if x.is_complex() and not t.is_complex() else t)
            for k, t in self.values.items()
            if k != self.name
        }
        return {**others, self.name: x}

    def output(self, x):
        """f with input `name` replaced by x (any dtype, real or complex)."""
        return self.function(**self.arguments(x))

    def outputs(self, xs):
        """f for each x stacked along dimension 0, stacked the same way."""
        count = xs.shape[0]
        self.stats["forward_evaluations"] += count
        if self.batched and count >= LOOP_BELOW:
            try:
                if self._mapped is None:
                    self._mapped = torch.func.vmap(self.output)
                out = self._mapped(xs)
            except Exception:  # a callable vmap cannot trace: fall back, and say so
                self.batched = False
            else:
                if not self.guard or self.batch_agrees(xs, out):
                    return out
        # Each copy is cloned into storage of its own: a row of the stack is a view at an offset,
        # and a function that reads storage directly (as_strided with a storage_offset) would
        # read the first, unshifted row instead of its own.
        return stacked([self.output(x.clone()) for x in xs], self.name)

    def batch_agrees(self, xs, out) -> bool:
        """Whether batching is faithful for this function; else refuse the batched path, saying why.

        The batch's last copy is evaluated once more on its own, its values placed after other
        values in a larger buffer (a non-zero storage offset). A function that reads storage
        directly (as_strided with a storage_offset) then reads the other values and disagrees
        with the batch, and so does a batching rule that is wrong: either way each copy is
        evaluated on its own instead.
        """
        self.guard = False  # once per input: the first batch shows whether batching is faithful
        copy = xs[-1]
        buffer = torch.cat([copy.reshape(-1) + 1, copy.reshape(-1)])  # other values first
        single = self.output(buffer[copy.numel() :].view(copy.shape))
        self.stats["batch_check_evaluations"] = self.stats.get("batch_check_evaluations", 0) + 1
        if out[-1].dtype == single.dtype and torch.equal(out[-1], single):
            return True  # the same values (and no nan): the agreement below holds without computing it
        # the largest finite magnitude (a copy may hold nan or inf, which must then match exactly)
        scale = float(single.abs().nan_to_num(nan=0.0, posinf=0.0).max()) if single.numel() else 0.0
        if out[-1].shape == single.shape and torch.allclose(
            out[-1], single, rtol=BATCH_AGREEMENT, atol=BATCH_AGREEMENT * scale, equal_nan=True
        ):
            return True
        self.batched = False
        self.refused = (
            "a separate evaluation of one copy, its input at another storage offset, differed from the "
            "batched one (the function reads its input's storage directly, as as_strided does, or "
            "cannot be batched faithfully): every copy is evaluated on storage of its own"
        )
        return False

    def component(self):
        """The real values this probe shifts: the input, or the part of a complex input it shifts."""
        x = self.values[self.name]
        if not x.is_complex():
            return x
        return x.imag if self.imaginary_shift else x.real

    def contract(self, outputs):
        """sum(v * output) for each output stacked along dimension 0; sum(Re(conj(v) * output)) for a
        complex grad_output, the real loss of a complex output (core/values/form.py)."""
        if self.v.is_complex():
            return complex_tensors.contract_real(outputs, self.v)
        v = self.v.to(outputs.dtype) if outputs.is_complex() else self.v
        # A product and a row sum, not a matrix-vector product: BLAS picks its gemv kernel by the
        # number of rows, so a row's rounding would depend on the chunk it landed in.
        return (outputs.reshape(outputs.shape[0], -1) * v.reshape(-1)).sum(1)

    def phi_batch(self, xs):
        """phi for each x stacked along dimension 0."""
        return self.contract(self.outputs(xs))

    def rows_per_chunk(self, copies: int) -> int:
        """Input elements whose `copies` shifted copies fit in one chunk."""
        width = max(self.values[self.name].numel(), self.v.numel(), self.work, 1)
        return max(1, CHUNK_ELEMENTS // (copies * width))

    def shifted(self, steps, *, imaginary: bool = False, indices=None):
        """Copies of x, copy k shifted by steps[k] at flat element indices[k] (core/check/fd/steps.py)."""
        return shifts.shifted(self.values[self.name], steps, imaginary=imaginary, indices=indices)

    def shifted_range(self, start: int, stop: int, steps, *, imaginary: bool = False):
        """Copies of x for flat elements start..stop-1, one block per row of `steps` (core/check/fd/steps.py)."""
        return shifts.shifted_range(self.values[self.name], start, stop, steps, imaginary=imaginary)


# -------------------- richardson
# Richardson extrapolation of central differences at a ladder of steps, with an error estimate per element.
#
# Shared by the refinement of failing elements (smaller steps, core/check/fd/finite_difference.py) and the
# re-judging of elements that pass only inside their rounding bound (wider steps,
# core/check/fd/finite_difference.py).

#: Most elements of one input re-estimated (the worst by excess); the others keep their verdict.
MAX_ELEMENTS = 256
#: Multiple of the refined estimate's own error estimate allowed in its tolerance.
REFINED_MARGIN = 2.0


def extrapolate(probe: Probe, h, elements, multiples):
    """(refined, error, best) for `elements`: central differences at h x each of `multiples` (decreasing by
    about 2), Richardson-extrapolated pair by pair, the later of the two successive extrapolations that agree
    best and, as its error estimate, their difference plus the rounding bound at those steps; `best` indexes
    the pair kept. The probe must track its rounding."""
    count, k = elements.numel(), len(multiples)
    if probe.structured:
        # an observed elementwise chain: every element at once per step keeps each quotient's
        # rounding that of one element, not that of the whole sum (core/check/fd/structure.py)
        rows, roundings, widths = [], [], []
        for m in multiples:
            rows.append(difference_quotient(probe, "central", h * m, exact=True)[elements])
            roundings.append(probe.rounding[elements])
            taken = signed_steps(probe, "central", h[elements] * m, elements, exact=True)
            widths.append(taken[0] - taken[1])
        central, rounding, widths = torch.stack(rows), torch.stack(roundings), torch.stack(widths)
    else:
        indices = elements.repeat(k)
        steps = torch.cat([h[elements] * m for m in multiples])
        central = difference_quotient(probe, "central", steps, indices, exact=True).reshape(k, count)
        rounding = probe.rounding.reshape(k, count)
        taken = signed_steps(probe, "central", steps, indices, exact=True)
        widths = (taken[0] - taken[1]).reshape(k, count)
    if central.is_complex():  # the loss of a complex output, as a complex number: its real part is phi
        central = central.real
    ratio = widths[:-1] / widths[1:]  # ~2: the Richardson weights use the steps really taken
    weight = ratio * ratio
    extrapolated = (weight * central[1:] - central[:-1]) / (weight - 1)
    extrapolated_rounding = (weight * rounding[1:] + rounding[:-1]) / (weight - 1)
    change = (extrapolated[1:] - extrapolated[:-1]).abs()
    error = change + error_bound.element_tolerance(torch.maximum(extrapolated_rounding[1:], extrapolated_rounding[:-1]))
    error = torch.where(torch.isnan(error), torch.full_like(error, float("inf")), error)
    best = torch.argmin(error, dim=0)
    columns = torch.arange(count, device=extrapolated.device)
    return extrapolated[best + 1, columns], error[best, columns], best


# -------------------- wide steps
# Re-judge, at wider steps, the elements that pass only thanks to their rounding bound.
#
# At the default step h the rounding bound of an element, 4 eps sum_j |v_j| (|f_j(x+)| + |f_j(x-)|) / 2h
# (core/check/fd/steps.py), is honest but can be wide: in float32, for a function reduced to a
# scalar of magnitude |phi| ~ 80, it is ~7.5e-3, so a backward wrong by 1 % at an element of ~0.15
# passes inside it. The rounding bound falls as 1/h while the truncation error of a central difference
# grows as h^2, and Richardson extrapolation over successive steps removes that h^2 term. So an
# element whose error exceeds the plain tolerance atol + rtol |autograd| but not that tolerance plus its
# bound is estimated again at WIDE_MULTIPLES of h (the same extrapolation as core/check/fd/finite_difference.py),
# and, where the error estimate found there (the difference of two successive extrapolations plus the
# rounding bound at their steps) is tighter than the default bound, judged with it:
#
#     |refined - autograd| <= atol + rtol |autograd| + REFINED_MARGIN x (that error estimate).
#
# An element that fails there takes the wider estimate and its bound into the record; one that passes
# keeps its default estimate and bound, so a correct function's record is what it was; the refinement's
# record gives `wide_steps` (what was tried, how many elements, which still fail) when one fails.
#
# An element whose wide estimates do not settle (a kink or the edge of the domain within the wider
# steps: successive extrapolations disagree, or the function raised), or settle on a value that the
# default estimate contradicts (beyond the two bounds together: wide steps that cross a kink or a
# change of branch, clamp's limit, a sort's ties), keeps its default estimate and bound, and passes
# as before.

#: Step multiples of the default step at which an element passing only inside its rounding bound is re-estimated.
WIDE_MULTIPLES = (64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0)


def bound_only(autograd, estimate, bound, *, rtol: float, atol: float):
    """The flat indices of the elements outside the plain tolerance but inside it plus their bound,
    the farthest outside first (at most MAX_ELEMENTS)."""
    plain = (estimate - autograd).abs() - (atol + rtol * autograd.abs())
    inside = (plain > 0) & (plain <= bound)
    elements = torch.nonzero(inside).reshape(-1)
    return elements[torch.argsort(plain[elements], descending=True)[:MAX_ELEMENTS]]


def rejudge(probe: Probe, h, autograd, estimate, bound, *, rtol: float, atol: float, default_bound=None):
    """(estimate, bound, info) with the elements that pass only inside their bound re-judged at wider steps.

    `h`, `autograd`, `estimate` and `bound` are the flat default step, reference, estimate and
    allowance of one input, after refinement: an element it re-estimated at smaller steps, whose
    rounding bound grows as the step shrinks, qualifies as a default one does. info is None when
    no element failed at the wider steps. `default_bound` (the bound at the default step, before
    refinement; `bound` where None) is what the wider estimate must agree with the estimate within:
    a refined element's own bound, grown at steps down to h/16, would let wider steps that cross a
    change of branch (two near-tied values of a sort) contradict it unseen.
    """
    elements = bound_only(autograd, estimate, bound, rtol=rtol, atol=atol)
    if elements.numel() == 0:
        return estimate, bound, None
    probe.track_rounding, probe.touched = True, None
    try:
        refined, error, _ = extrapolate(probe, h, elements, WIDE_MULTIPLES)
    except Exception:  # a wider step left the function's domain: every element keeps its default verdict
        return estimate, bound, None
    # tighter than the bound it replaces, and consistent with the estimate it replaces: wide steps that cross a kink
    # or a change of branch (clamp's bound, a sort's ties) give an estimate the default step's contradicts
    margin = REFINED_MARGIN * error
    agreement = torch.minimum(bound, bound if default_bound is None else default_bound)[elements]
    tighter = (
        torch.isfinite(refined)
        & (margin < bound[elements])
        & ((refined - estimate[elements]).abs() <= agreement + margin)
    )
    reference = autograd[elements]
    failing = tighter & ((refined - reference).abs() > atol + rtol * reference.abs() + margin)
    # only an element the wider steps fail takes their estimate and bound: one they pass keeps its record as it was
    kept = elements[failing]
    new_estimate, new_bound = estimate.clone(), bound.clone()
    new_estimate[kept] = refined[failing]
    new_bound[kept] = margin[failing]
    if kept.numel() == 0:  # every element re-judged passes: the record is the default one
        return estimate, bound, None
    k = len(WIDE_MULTIPLES)
    return (
        new_estimate,
        new_bound,
        {
            "elements": int(elements.numel()),
            "tighter": int(tighter.sum()),
            "resolved": int(elements.numel() - int(failing.sum())),
            "still_failing": int(failing.sum()),
            "flat_indices": [int(i) for i in kept[:16]],
            "tried": Message(
                "outside the plain tolerance but within their rounding bound, they were estimated again by "
                "central differences at {count} steps from {first:g}h to {last:g}h, Richardson-extrapolated "
                "pair by pair, and judged with the error estimate found there where it is tighter than that bound",
                count=k,
                first=WIDE_MULTIPLES[0],
                last=WIDE_MULTIPLES[-1],
            ),
            "chosen_multiples": [],
            "forward_evaluations": (2 * k) if probe.structured else 2 * k * int(elements.numel()),
        },
    )


# -------------------- wider precision
# One element's finite difference evaluated again in float64, to tell a float32 rounding from a wrong backward.
#
# The rounding bound of a float32 difference (core/check/fd/steps.py) is counted from the
# magnitudes |f_j| of the outputs. Where an output is a sum whose terms cancel (an inverse FFT of a
# nearly symmetric signal), its real rounding is that of its terms, larger than eps |f_j|, and a
# correct backward can fail beyond that bound and beyond the refinement's error estimate. The
# difference itself says which it is once the rounding is gone: the same function at the same
# points (the float32 input, cast exactly to float64), differenced in float64 at float64's default
# step and Richardson-extrapolated, gives the derivative to ~1e-10 of |phi|. If autograd's float32
# gradient agrees with it within the float32 tolerance, the discrepancy was the float32
# evaluations' rounding; a backward wrong by 1 % stays 1 % away from it.

#: Most failing elements of one input re-differenced in float64; with more, no second opinion is given.
WIDER_MAX_ELEMENTS = 256


def float64_derivatives(function, values: dict, v, name: str, elements):
    """d phi / d x_i at the real flat `elements`, differenced in float64; None where the function cannot run in
    float64 (it raised, or gave a value that is not finite) or an input is complex."""
    if any(t.is_complex() for t in values.values()) or v.is_complex():
        return None
    wide = {k: (t.to(torch.float64) if t.is_floating_point() else t) for k, t in values.items()}
    probe = Probe(function, wide, v.to(torch.float64), name, structured=False)
    x = wide[name].reshape(-1)[elements]
    h = defaults.fd_step("float64", "central") * torch.clamp(x.abs(), min=1.0)
    try:
        quotients = difference_quotient(probe, "central", torch.cat([h, h / 2]), elements.repeat(2), exact=True)
    except Exception:  # the function does not run in float64: no second opinion
        return None
    full, half = quotients.real.reshape(2, -1)
    value = (4 * half - full) / 3  # Richardson: the h^2 term cancels
    return value if bool(torch.isfinite(value).all()) else None


def rounding_explains(function, values: dict, v, name: str, *, dtype: str, grads: dict, tolerance, worst: tuple):
    """The reason, or None: where a check narrower than float64 failed its finite difference but, at every element
    that failed (at most WIDER_MAX_ELEMENTS), the float64 derivative agrees with autograd within the check's tolerance
    (atol + rtol |autograd|), the discrepancy is the narrower evaluations', not the backward's. `grads` maps
    "finite_difference" and "autograd_grad" to {input: gradient}; `worst` is (flat index, fd, autograd) of the
    element the reason names."""
    from ...i18n import Message

    fd, autograd = grads.get("finite_difference", {}).get(name), grads.get("autograd_grad", {}).get(name)
    if defaults.EPS[defaults.FD_DTYPE[dtype]] <= defaults.EPS["float64"] or fd is None or autograd is None:
        return None
    fd, autograd = fd.reshape(-1).double(), autograd.reshape(-1).double()
    if fd.is_complex() or autograd.is_complex():
        return None
    allowed = tolerance["atol"] + tolerance["rtol"] * autograd.abs()
    elements = torch.nonzero(~((fd - autograd).abs() <= allowed)).reshape(-1)
    if elements.numel() == 0 or elements.numel() > WIDER_MAX_ELEMENTS:
        return None
    exact = float64_derivatives(function, values, v, name, elements.to(values[name].device))
    if exact is None or not bool(((exact.cpu() - autograd[elements]).abs() <= allowed[elements]).all()):
        return None
    flat, left, right = worst
    at = int(torch.nonzero(elements == flat).reshape(-1)[0]) if bool((elements == flat).any()) else 0
    return Message(
        "finite differences in {dtype} give {fd} but the same function differenced in float64, at float64's "
        "smaller step, gives {exact}, within the tolerance of autograd's {autograd} (and so at each of the "
        "{count} element(s) that failed): the {dtype} difference is off (its evaluations round by more than "
        "their bound from |f|, where terms cancel, or its wider step crosses a change of branch), not the backward",
        dtype=dtype,
        fd=f"{left:.6g}",
        exact=f"{float(exact[at]):.6g}",
        autograd=f"{right:.6g}",
        count=int(elements.numel()),
    )


# -------------------- refinement
# Re-estimate the elements a default finite difference could not resolve, before failing them.
#
# A central difference at the default step has a truncation error ~h^2 |f'''| / 6 that no
# tolerance written in advance can cover near a singularity (tan near pi/2, digamma near a
# pole, logit near 0 or 1), and a rounding error that grows with the magnitude differenced. So
# the elements of a finite-difference comparison that fail are estimated again,
# and only fail if the better estimate fails too:
#
# 1. central differences of each such element at seven steps, 4h, 2h, h, h/2, ..., h/16
#    (h the default step actually taken), in one batch;
# 2. Richardson extrapolation of each neighbouring pair, R_k = (4 D(h_k / 2) - D(h_k)) / 3,
#    which cancels the h^2 term;
# 3. for each element, the pair of successive extrapolations that agree best: the later one is
#    the refined estimate, and their difference, plus the rounding bound at that step, is its
#    error estimate.
#
# An element passes when |refined - autograd| <= atol + rtol |autograd| + REFINED_MARGIN x
# (that error estimate). A wrong backward is not excused: the refined estimate converges to the
# true derivative, so a backward wrong by 1e-4 of the gradient's scale stays 1e-4 away while
# the error estimate of a smooth function falls to ~1e-10. The record's finite-difference
# observation lists what was tried, for which elements, and what was kept.

#: Step multiples of the default step at which failing elements are re-estimated.
MULTIPLES = (4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.0625)
#: Multiple of the default step at which refinement looks for the outputs a failing element moves (about 6e-3
#: max(1, |x_i|) in float64): an output that moves there but not at the steps differenced changed by less than its
#: rounding at those steps, and counts in their bound; one that does not move even there has a derivative below
#: eps |f_j| / (WIDE h), a thousandth of what its rounding at h would allow.
WIDE = 1024.0


def touched_outputs(probe: Probe, h, failing) -> dict | None:
    """Flat element -> the outputs it moves at WIDE times its step (one central pair per failing element), or None
    where that evaluation cannot be made. An output that is not finite at the wide step says nothing and is left out."""
    pass

    steps = signed_steps(probe, "central", h[failing] * WIDE, failing, exact=True)
    try:
        out = probe.outputs(
            probe.shifted(steps.reshape(-1), imaginary=probe.imaginary_shift, indices=tiled(failing, steps.shape[0]))
        )
    except Exception:  # the wide step left the function's domain: no outputs are added
        return None
    count = failing.numel()
    plus, minus = out[:count].reshape(count, -1), out[count : 2 * count].reshape(count, -1)
    moved = (plus != minus) & torch.isfinite(plus) & torch.isfinite(minus)
    return {int(i): row for i, row in zip(failing, moved)}


def refine(probe: Probe, h, autograd, estimate, bound, *, rtol: float, atol: float):
    """(estimate, bound, info) with the failing elements of one input re-estimated.

    `h` is the default step vector (flat, per element), `autograd`, `estimate` and `bound` flat
    tensors of the reference, the default estimate and its rounding allowance. Returns the flat
    tensors with the refined elements replaced, and the record's description of the refinement.
    On the general path the bounds also count the outputs each element moves at WIDE times its step
    (`touched_outputs`).
    """
    excess = (estimate - autograd).abs() - (atol + rtol * autograd.abs() + bound)
    excess = torch.where(torch.isnan(excess), torch.full_like(excess, float("inf")), excess)
    failing = torch.nonzero(excess > 0).reshape(-1)
    if failing.numel() == 0:
        return estimate, bound, None
    if failing.numel() > MAX_ELEMENTS:
        failing = failing[torch.argsort(excess[failing], descending=True)[:MAX_ELEMENTS]]
    count, k = failing.numel(), len(MULTIPLES)
    probe.track_rounding = True
    if not probe.structured:
        probe.touched = touched_outputs(probe, h, failing)
    refined, refined_error, best = extrapolate(probe, h, failing, MULTIPLES)
    new_estimate, new_bound = estimate.clone(), bound.clone()
    new_estimate[failing] = refined
    new_bound[failing] = REFINED_MARGIN * refined_error
    reference = autograd[failing]
    still = (
        (refined - reference).abs() > atol + rtol * reference.abs() + REFINED_MARGIN * refined_error
    ) | torch.isnan(refined)
    info = {
        "elements": int(count),
        "resolved": int(count - int(still.sum())),
        "still_failing": int(still.sum()),
        "flat_indices": [int(i) for i in failing[:16]],
        "tried": Message(
            "central differences at {count} steps from {first:g}h to {last:g}h, Richardson-extrapolated "
            "pair by pair; kept the later of the two successive extrapolations that agree best, with "
            "their difference plus the rounding bound as its error estimate",
            count=len(MULTIPLES),
            first=MULTIPLES[0],
            last=MULTIPLES[-1],
        ),
        "chosen_multiples": sorted({MULTIPLES[int(b) + 2] for b in best[:64]}),
        "forward_evaluations": (2 * k) if probe.structured else 2 * k * int(count),
    }
    if not probe.structured:
        info["wide_step"] = {
            "multiple": WIDE,
            "forward_evaluations": 2 * int(count),
            **(
                {"outputs_moved": int(sum(int(r.sum()) for r in probe.touched.values()))}
                if probe.touched is not None
                else {
                    "outputs_moved": None,
                    "reason": Message(
                        "the function could not be evaluated at the wide step (it "
                        "raised there): no outputs were added to the bound"
                    ),
                }
            ),
        }
    return new_estimate, new_bound, info


def refine_inputs(
    function,
    values: dict,
    v,
    *,
    dtype: str,
    autograd: dict,
    estimates: dict,
    bounds: dict,
    rtol: float,
    atol: float,
    structures: dict,
    work_elements: int = 1,
) -> dict:
    """Refine every input's failing elements in place (flat views of `estimates`, `bounds`); info by input.

    `structures` names the path each input's estimate took ("general" or a diagonal chain). A complex
    input is refined part by part (refine_complex).
    """
    pass

    report = {}
    for name, estimate in estimates.items():
        reference = autograd[name].detach().reshape(estimate.shape).to(estimate.dtype)
        if bool(((estimate - reference).abs() <= atol + rtol * reference.abs()).all()):
            continue  # every element passes without its bound: nothing to refine (NaN compares False)
        if values[name].is_complex():
            info = refine_complex(
                function,
                values,
                v,
                name,
                dtype=dtype,
                autograd=reference,
                estimates=estimates,
                bounds=bounds,
                rtol=rtol,
                atol=atol,
                work_elements=work_elements,
            )
            if info is not None:
                report[name] = info
            continue
        probe = Probe(
            function,
            values,
            v,
            name,
            work=work_elements,
            structured=structures.get(name, "general") != "general",
        )
        h = step_vector(probe, None, dtype, "central")
        flat_estimate, flat_bound = estimate.reshape(-1), bounds[name].reshape(-1)
        reference = reference.reshape(-1)
        new_estimate, new_bound, info = refine(probe, h, reference, flat_estimate, flat_bound, rtol=rtol, atol=atol)
        # the elements that pass only inside their bound, the default one or the refinement's
        new_estimate, new_bound, wide = rejudge(
            probe, h, reference, new_estimate, new_bound, rtol=rtol, atol=atol, default_bound=flat_bound
        )
        if info is not None or wide is not None:
            estimates[name] = new_estimate.reshape(estimate.shape)
            bounds[name] = new_bound.reshape(estimate.shape)
            report[name] = wide if info is None else {**info, **({"wide_steps": wide} if wide is not None else {})}
    return report


def refine_complex(
    function,
    values: dict,
    v,
    name: str,
    *,
    dtype: str,
    autograd,
    estimates: dict,
    bounds: dict,
    rtol: float,
    atol: float,
    work_elements: int = 1,
) -> dict | None:
    """Refine a complex input's failing elements part by part; its report, or None when nothing failed.

    A complex element's estimate is d_re + i d_im, each part the central difference along that part
    (core/check/fd/finite_difference.py), so each part is re-estimated as a real element is, against
    autograd's part of the same element. The element's new error estimate is the sum of its parts'
    (|d| <= |d_re| + |d_im|), a part left as it was keeping the default rounding bound.
    """
    pass

    estimate, bound = estimates[name], bounds[name]
    flat_estimate, flat_bound = estimate.reshape(-1), bounds[name].reshape(-1)
    reference = autograd.reshape(-1)
    parts, infos = [], []
    for imaginary in (False, True):
        probe = Probe(
            function,
            values,
            v,
            name,
            work=work_elements,
            structured=False,
            imaginary_shift=imaginary,
        )
        h = step_vector(probe, None, dtype, "central")
        pick = (lambda t: t.imag) if imaginary else (lambda t: t.real)
        new_part, new_bound, info = refine(
            probe, h, pick(reference), pick(flat_estimate), flat_bound, rtol=rtol, atol=atol
        )
        parts.append(
            (
                new_part,
                torch.where(new_bound != flat_bound, new_bound, torch.zeros_like(new_bound)),
                new_bound != flat_bound,
            )
        )
        if info is not None:
            infos.append(info)
    if not infos:
        return None
    (real, real_bound, real_changed), (imag, imag_bound, imag_changed) = parts
    changed = real_changed | imag_changed
    summed = torch.where(real_changed, real_bound, flat_bound) + torch.where(imag_changed, imag_bound, flat_bound)
    estimates[name] = torch.complex(real, imag).reshape(estimate.shape)
    bounds[name] = torch.where(changed, summed, flat_bound).reshape(bound.shape)
    return {
        "elements": sum(i["elements"] for i in infos),
        "resolved": sum(i["resolved"] for i in infos),
        "still_failing": sum(i["still_failing"] for i in infos),
        "flat_indices": sorted({k for i in infos for k in i["flat_indices"]})[:16],
        "tried": infos[0]["tried"],
        "chosen_multiples": sorted({m for i in infos for m in i["chosen_multiples"]}),
        "forward_evaluations": sum(i["forward_evaluations"] for i in infos),
    }


# -------------------- finite difference

#: Element evaluations (elements x the larger of input and output numel) from which the coloured path is tried:
#: below, the general path's 2n batched copies cost less than learning the pattern (about 1.5 ms; the general path
#: of a 1-D banded loss crosses it between 128 and 256 elements).
COLOURED_FROM_WORK = 1 << 15

#: From this many elements a diagonal chain is worth recognising (one element gains nothing).
DIAGONAL_FROM = 2
#: With a time budget (the engine's mode auto), elements from which the general path is timed on a
#: first part of 1/BUDGET_PARTS of them before the rest runs, and the whole predicted from it.
BUDGET_FROM = 128
BUDGET_PARTS = 8
#: ... and only when its work (elements x the larger of input and output numel) reaches this many
#: element evaluations: below it the general path is quick, and splitting it would only add calls.
BUDGET_WORK_FROM = 1 << 22


def difference_quotient(probe: Probe, scheme: str, h, indices=None, *, exact: bool = False):
    """The scheme's estimate of d phi / d x_i for every (or the given) flat element i.

    When `probe.track_rounding` is set, `probe.rounding` holds each estimate's rounding bound
    afterwards (core/check/fd/steps.py says how it is counted).
    """
    x = probe.values[probe.name]
    if indices is None and probe.structured and x.numel() >= DIAGONAL_FROM:
        estimates = diagonal.estimates(probe, scheme, h, exact=exact) if probe.chain_possible else None
        if estimates is not None:
            return estimates
        estimates = coloured_path.estimates_for(probe, scheme, h, exact=exact)
        if estimates is not None:
            return estimates
        probe.structured = False  # neither a diagonal chain nor a usable colouring: do not look again
    total = x.numel() if indices is None else len(indices)
    base = probe.output(x) if scheme == "forward" else None
    steps = signed_steps(probe, scheme, h, indices, exact=exact)
    rows = probe.rows_per_chunk(steps.shape[0])
    if (
        probe.budget_s is not None
        and indices is None
        and total >= BUDGET_FROM
        and total * max(x.numel(), probe.v.numel(), probe.work) >= BUDGET_WORK_FROM
    ):
        rows = min(rows, max(LOOP_BELOW, -(-total // BUDGET_PARTS)))  # a first part timed before the rest runs
    if total <= rows:  # one chunk: nothing to assemble
        estimates, rounding = _chunk_estimates(probe, scheme, steps, indices, 0, total, base, ride=indices is None)
        probe.rounding = rounding
        return estimates
    # Allocated once, before the chunks: a small tensor kept alive between the chunks' large
    # temporaries would split the freed blocks, and the allocator would take fresh memory
    # for every chunk (the resident size then grows with n instead of staying at one chunk).
    real_dtype = probe.component().dtype
    estimates = torch.empty(total, dtype=real_dtype, device=x.device)
    probe.rounding = torch.empty(total, dtype=real_dtype, device=x.device) if probe.track_rounding else None
    started = time.perf_counter()
    for start in range(0, total, rows):
        stop = min(start + rows, total)
        estimates[start:stop], rounding = _chunk_estimates(probe, scheme, steps, indices, start, stop, base)
        if probe.budget_s is not None and indices is None and start == 0:
            check_budget(probe, total, stop, time.perf_counter() - started)
        if rounding is not None:
            probe.rounding[start:stop] = rounding
    return estimates


def _chunk_estimates(probe: Probe, scheme: str, steps, indices, start: int, stop: int, base, *, ride: bool = False):
    """(estimates, rounding or None) for elements start..stop-1 (of `indices` when given); with `ride`, the
    probe's riders are evaluated in the same call (core/check/fd/finite_difference.py)."""
    imaginary = scheme == "complex_step" or probe.imaginary_shift
    chunk = steps[:, start:stop]
    if indices is None:
        stack = probe.shifted_range(start, stop, chunk, imaginary=imaginary)
    else:
        stack = probe.shifted(
            chunk.reshape(-1), imaginary=imaginary, indices=tiled(indices[start:stop], steps.shape[0])
        )
    probe.rows_of = None if indices is None else indices[start:stop]
    if ride and probe.riders is not None:
        riding, probe.riders = probe.riders, None
        return quotient(probe, scheme, riding.outputs(probe, stack, probe.outputs), chunk, base)
    return quotient(probe, scheme, probe.outputs(stack), chunk, base)


def tiled(indices, times: int):
    """`indices.repeat(times)` of a flat index tensor, by cat: the same values, without repeat's ~10 us on a small
    tensor (it is called for every sweep and every indexed chunk)."""
    return torch.cat([indices] * times)


def quotient(probe: Probe, scheme: str, out, steps, base):
    """One chunk's estimates from its shifted outputs, differenced output by output.

    Returns (estimates, rounding bound per estimate, or None when not tracked).
    """
    count = steps.shape[1]
    track = probe.track_rounding
    if scheme == "complex_step":
        estimate = probe.contract(out).imag / steps[0]
        return estimate, (error_bound.rounding_of(probe, out.imag, None, steps[0]) if track else None)
    if scheme == "forward":
        estimate = probe.contract(out - base) / steps[0]
        return estimate, (error_bound.rounding_of(probe, out, base, steps[0]) if track else None)
    plus, minus = out[:count], out[count : 2 * count]
    width = steps[0] - steps[1]
    central = probe.contract(plus - minus) / width
    rounding = error_bound.rounding_of(probe, plus, minus, width) if track else None
    if scheme == "richardson":
        half_plus, half_minus = out[2 * count : 3 * count], out[3 * count :]
        half_width = steps[2] - steps[3]
        half = probe.contract(half_plus - half_minus) / half_width
        if track:
            rounding = (4 * error_bound.rounding_of(probe, half_plus, half_minus, half_width) + rounding) / 3
        return (4 * half - central) / 3, rounding
    return central, rounding


@dataclass(frozen=True)
class FdOptions:
    """How `fd_gradients` differences the inputs.

    `structured=False` forces the general path (one shifted copy per element) even where the function
    is an elementwise chain; the benchmarks use it to show both costs. `rounding` asks for each input's
    per-element rounding bound as well. `chains` (core/check/autograd/observations.py) names the inputs
    the graph shows are no elementwise chain, so that no evaluation is spent looking for one; `riders`
    gives step-sweep series to evaluate with an input's copies (core/check/fd/finite_difference.py). With
    `budget_s`, an input whose general path would take longer raises `ExhaustiveOverBudget`
    after its first chunk (the engine's mode auto then projects).
    """

    dtype: str
    scheme: str
    step: float | str | None
    work_elements: int = 1
    structured: bool = True
    rounding: bool = False
    budget_s: float | None = None
    chains: dict | None = None
    riders: dict | None = None


class FdResult(NamedTuple):
    """The finite-difference gradient of each input (in the values' dtype), what was done, and each
    input's per-element rounding bound (flat tensors; None unless `FdOptions.rounding` asked)."""

    gradients: dict
    info: dict
    rounding: dict | None


def fd_gradients(function, values: dict, v, options: FdOptions) -> FdResult:
    """Finite-difference gradient per input, what was done, and (when asked) the rounding bounds.

    A complex input is differenced along its real and then its imaginary parts, combined as
    d_re + i d_im, and the record states the convention (core/values/form.py).
    """
    complex_seen = v.is_complex() or any(x.is_complex() for x in values.values())
    if complex_seen and options.scheme == "complex_step":
        raise SpecError(
            "finite_difference.scheme complex_step needs real inputs and a real output (use central or richardson)",
            field="finite_difference.scheme",
        )
    grads, info = (
        {},
        {"scheme": options.scheme, "fd_dtype": defaults.FD_DTYPE[options.dtype], "mode": "exhaustive", "inputs": {}},
    )
    rounding = {} if options.rounding else None
    budget_s = None if complex_seen else options.budget_s
    for name, x in values.items():
        parts = [
            _estimate(
                function,
                values,
                v,
                name,
                imaginary,
                options,
                budget_s=budget_s,
                chain=(options.chains or {}).get(name, True),
                riders=None if imaginary else (options.riders or {}).get(name),
            )
            for imaginary in ((False, True) if x.is_complex() else (False,))
        ]
        flat, used, kind, telemetry, probe = parts[0]
        if x.is_complex():
            flat = torch.complex(flat.real, parts[1][0].real)
        grads[name] = flat.reshape(x.shape) if x.is_complex() else flat.reshape(x.shape).real
        if rounding is not None:
            rounding[name] = probe.rounding if len(parts) == 1 else parts[0][4].rounding + parts[1][4].rounding
        stats = [part[4].stats for part in parts]
        refused = next((part[4].refused for part in parts if part[4].refused), "")
        info["inputs"][name] = {
            "step": used,
            "step_kind": kind,
            "batched": all(part[4].batched for part in parts),
            "structure": probe.structure,
            "forward_evaluations": sum(st["forward_evaluations"] for st in stats),
            **(
                {"batch_check_evaluations": sum(st.get("batch_check_evaluations", 0) for st in stats)}
                if "batch_check_evaluations" in probe.stats
                else {}
            ),
            **({"batched_refused": refused} if refused else {}),
            **{
                key: probe.stats[key]
                for key in ("colours", "colouring", "body", "pattern_evaluations")
                if key in probe.stats
            },
            **(
                {"structure_refused": probe.structure_refused}
                if probe.structure == "general" and probe.structure_refused
                else {}
            ),
            **({"telemetry": telemetry} if telemetry else {}),
        }
    first = next(iter(info["inputs"].values()))
    info["step"], info["step_kind"] = first["step"], first["step_kind"]
    if complex_seen:
        info["convention"] = complex_values.CONVENTION
    return FdResult(grads, info, rounding)


#: Why a check with a complex input or output that is no elementwise chain takes the general path.
COMPLEX_GENERAL = (
    "complex values: no elementwise chain was observed, and the coloured path is for real inputs "
    "and outputs, so every element is shifted on its own"
)


def _estimate(
    function, values: dict, v, name: str, imaginary: bool, options: FdOptions, *, budget_s, chain: bool, riders
):
    """(flat estimates, step recorded, step kind, adaptive telemetry or None, probe) of one input, or of one
    part of a complex input (`imaginary`: its imaginary part shifted)."""
    x = values[name]
    probe = Probe(
        function,
        values,
        v,
        name,
        work=options.work_elements,
        structured=options.structured,
        guard=True,
        track_rounding=options.rounding,
        budget_s=budget_s,
        imaginary_shift=imaginary,
        chain_possible=chain,
        riders=riders,
    )
    if x.numel() * max(x.numel(), v.numel(), options.work_elements) < COLOURED_FROM_WORK:
        probe.colouring = False
    if x.is_complex() or v.is_complex():
        probe.colouring, probe.structure_refused = False, COMPLEX_GENERAL
    dtype, scheme, step = options.dtype, options.scheme, options.step
    if step == "adaptive":
        flat, used, telemetry = adaptive_step.adaptive(probe, scheme, dtype, difference_quotient)
        return flat, used, "adaptive", telemetry, probe
    h = step_vector(probe, step, dtype, scheme)
    flat = difference_quotient(probe, scheme, h, exact=True)
    used = defaults.fd_step(dtype, scheme) if step is None else float(step)
    kind = "fixed" if step is not None else f"relative to min(max(1, |x|), {STEP_SCALE_CAP:g}), the step taken exact"
    return flat, used, kind, None, probe


# -------------------- projected
# The projected comparison: finite differences against autograd along a random direction, then group testing.
#
# For a dense Jacobian the exhaustive comparison costs two evaluations per input element. The
# projected mode, like gradcheck's `fast_mode`, compares one number instead: the directional
# difference D = (phi(x + s) - phi(x - s)) / 2 along s = h * u (u random signs over sqrt(n), h
# each element's default step) against autograd's G = sum_i g_i s_i. Two evaluations, whatever n.
#
# The tolerance is the one every element would have had, carried through the projection: if each
# element satisfies |fd_i - g_i| <= atol + rtol |g_i|, then |D - G| <= sum_i |s_i| (atol + rtol |g_i|),
# plus the rounding bound of the two sums differenced (core/check/fd/steps.py's BOUND_FACTOR x
# eps (|phi+| + |phi-|) / 2, over |v_j f_j|). A direction that fails is taken again at 2s: the
# central difference's truncation, |D(2s) - 2 D(s)| / 6, is allowed three times over before the
# failure stands, so curvature along a long direction is not mistaken for a bug.
#
# A failure is then localised by group testing: the index set is halved, the direction restricted
# to each half compared the same way, and the half whose excess over its tolerance is larger kept,
# down to one element, whose own central difference and autograd value are compared as the
# exhaustive mode would: one bad element is named, with its index, in about 6 log2(n) + 4 more
# evaluations. Its power (what one-element error it catches) is measured, not assumed:
# benchmarks/bench_structure.py sweeps it beside gradcheck's fast and slow modes.

#: Seed of the random direction: a record is reproducible, and a rerun draws the same direction.
SEED = 20
#: Multiple of the measured truncation allowed before a direction's failure stands.
TRUNCATION_MARGIN = 3.0


def requested(finite_difference: dict) -> str:
    """Why the spec asks for the projected mode ("" when it does not)."""
    return "requested: finite_difference.mode is projected" if finite_difference.get("mode") == "projected" else ""


class _Direction:
    """phi along one random direction restricted to a subset, compared with autograd."""

    def __init__(self, probe, autograd, rtol: float, atol: float, dtype: str):
        pass

        x = probe.values[probe.name]
        n = x.numel()
        generator = torch.Generator(device="cpu").manual_seed(SEED)
        signs = torch.randint(0, 2, (n,), generator=generator).to(x.device, x.dtype) * 2 - 1
        self.probe, self.n = probe, n
        self.h = step_vector(probe, None, dtype, "central")
        self.s = signs * self.h / math.sqrt(n)
        self.g = autograd.detach().reshape(-1).to(x.dtype)
        self.rtol, self.atol = rtol, atol
        self.evaluations = 0

    def _difference(self, shift):
        """((phi(x+shift) - phi(x-shift)) / 2, its rounding bound)."""
        x = self.probe.values[self.probe.name]
        outputs = torch.stack(
            [self.probe.output(x + shift.reshape(x.shape)), self.probe.output(x - shift.reshape(x.shape))]
        )
        self.evaluations += 2
        plus, minus = self.probe.contract(outputs)  # sum(v * f), or sum(Re(conj(v) f)) for a complex output
        magnitude = (outputs.reshape(2, -1).abs() * self.probe.v.reshape(-1).abs()).sum()
        eps = torch.finfo(plus.dtype).eps
        return float(plus - minus) / 2, eps * float(magnitude) / 2

    def test(self, subset=None) -> dict:
        """The direction (restricted to `subset`, flat indices) compared; with its excess over the tolerance."""
        s = self.s if subset is None else torch.zeros_like(self.s).index_copy_(0, subset, self.s[subset])
        difference, rounding = self._difference(s)
        reference = float((self.g * s).sum())
        tolerance = float((s.abs() * (self.atol + self.rtol * self.g.abs())).sum()) + BOUND_FACTOR * rounding
        result = {
            "finite_difference": difference,
            "autograd": reference,
            "tolerance": tolerance,
            "excess": abs(difference - reference) - tolerance,
        }
        if result["excess"] > 0:  # before a failure stands, allow for the truncation along this direction
            doubled, doubled_rounding = self._difference(2 * s)
            truncation = abs(doubled - 2 * difference) / 6
            result["truncation"] = truncation
            result["tolerance"] = tolerance + TRUNCATION_MARGIN * truncation + BOUND_FACTOR * doubled_rounding / 2
            result["excess"] = abs(difference - reference) - result["tolerance"]
        return result


def _element(direction: _Direction, index: int, name: str, shape, rtol: float, atol: float) -> dict:
    """The one element's central difference against autograd, as the exhaustive comparison reports it."""
    probe, h = direction.probe, float(direction.h[index])
    x = probe.values[probe.name]
    shift = torch.zeros(x.numel(), dtype=x.dtype, device=x.device)
    shift[index] = h
    value = x.reshape(-1)[index]
    width = float((value + h) - (value - h))  # the steps the arithmetic really takes
    difference, _ = direction._difference(shift)
    estimate = 2 * difference / width
    row = compare(
        "autograd_vs_finite_difference",
        name,
        torch.tensor([estimate], dtype=torch.float64),
        direction.g[index : index + 1].to(torch.float64),
        left_label="finite_difference",
        right_label="autograd_grad",
        rtol=rtol,
        atol=atol,
    )
    flat = int(index)
    unravelled = []
    for size in reversed(list(shape)):
        unravelled.append(flat % size)
        flat //= size
    row["worst"].update({"index": list(reversed(unravelled)), "flat_index": int(index)})
    return row


def localise(direction: _Direction) -> tuple[int, list]:
    """The flat index whose half kept the larger excess at every split, and the steps taken."""
    x = direction.probe.values[direction.probe.name]
    subset = torch.arange(direction.n, device=x.device)
    steps = []
    while subset.numel() > 1:
        half = subset.numel() // 2
        first, second = subset[:half], subset[half:]
        a, b = direction.test(first), direction.test(second)
        subset = first if a["excess"] >= b["excess"] else second
        steps.append({"elements": int(subset.numel()), "excess": max(a["excess"], b["excess"])})
    return int(subset[0]), steps


def compare_inputs(
    function,
    values: dict,
    v,
    autograd: dict,
    *,
    dtype: str,
    rtol: float,
    atol: float,
    reason: str,
    work_elements: int = 1,
) -> tuple[dict, dict]:
    """(comparison row by input, the finite_difference observation's fields) in projected mode.

    Each row is the engine's `autograd_vs_finite_difference` row: on a pass, `worst` holds the
    projected values (its index null: no element was singled out); on a failure, the localised
    element as the exhaustive comparison would report it. `projection` says what was compared.
    """
    pass

    rows, inputs = {}, {}
    for name, x in values.items():
        probe = Probe(function, values, v, name, work=work_elements, structured=False)
        direction = _Direction(probe, autograd[name], rtol, atol, dtype)
        whole = direction.test()
        projection = {"directions": 1, "seed": SEED, **whole}
        if whole["excess"] <= 0:
            row = {
                "name": "autograd_vs_finite_difference",
                "input": name,
                "left": "finite_difference",
                "right": "autograd_grad",
                "max_abs_err": abs(whole["finite_difference"] - whole["autograd"]),
                "max_rel_err": None,
                "rtol": rtol,
                "atol": atol,
                "passed": True,
                "worst": {
                    "index": None,
                    "flat_index": None,
                    "left": whole["finite_difference"],
                    "right": whole["autograd"],
                    "abs_err": abs(whole["finite_difference"] - whole["autograd"]),
                    "rel_err": None,
                },
            }
        else:
            index, steps = localise(direction)
            row = _element(direction, index, name, x.shape, rtol, atol)
            row["passed"] = False  # the direction failed: the check fails even where the element alone passes
            projection["localisation"] = {
                "splits": len(steps),
                "element": int(index),
                "element_alone_passed": bool(
                    row["worst"]["abs_err"] is not None
                    and row["worst"]["abs_err"] <= atol + rtol * abs(row["worst"]["right"])
                ),
            }
        row["mode"] = "projected"
        row["projection"] = projection
        rows[name] = row
        inputs[name] = {
            "step": defaults.fd_step(dtype, "central"),
            "batched": False,
            "structure": "projected",
            "forward_evaluations": direction.evaluations,
        }
    info = {
        "scheme": "central",
        "fd_dtype": defaults.FD_DTYPE[dtype],
        "mode": "projected",
        "mode_reason": reason,
        "description": Message(
            "central difference of sum(grad_output * f) along one random direction against "
            "autograd's projection; a failure localised by halving the index set"
        ),
        "note": f"projected mode ({reason}): one random direction compared, not every element.",
        "step": defaults.fd_step(dtype, "central"),
        "step_kind": "relative to min(max(1, |x|), 16), times a random sign over sqrt(n) per element",
        "inputs": inputs,
    }
    return rows, info


def projected_verdict(
    function, inputs: dict, *, grad_output=None, rtol: float | None = None, atol: float | None = None
) -> dict:
    """`numerical_verdict`'s answer in projected mode: one direction compared, a failure localised.

    Returns `{"passed", "dtype", "rtol", "atol", "comparisons", "worst", "finite_difference"}`.
    """
    from ..compare.comparison import autograd_vjp

    dtype = str(next(iter(inputs.values())).dtype).replace("torch.", "")
    leaves, v, autograd = autograd_vjp(function, inputs, grad_output)
    fd_dtype = getattr(torch, defaults.FD_DTYPE[dtype])
    tolerance = defaults.fd_tolerance(dtype, "central")
    rtol = tolerance["rtol"] if rtol is None else rtol
    atol = tolerance["atol"] if atol is None else atol
    rows, info = compare_inputs(
        function,
        {n: t.detach().to(fd_dtype) for n, t in inputs.items()},
        v.detach().to(fd_dtype),
        autograd,
        dtype=dtype,
        rtol=rtol,
        atol=atol,
        reason="requested",
    )
    failing = [row for row in rows.values() if not row["passed"]]
    chosen = failing[0] if failing else next(iter(rows.values()))
    return {
        "passed": not failing,
        "dtype": dtype,
        "rtol": rtol,
        "atol": atol,
        "comparisons": list(rows.values()),
        "worst": {"input": chosen["input"], **chosen["worst"]},
        "finite_difference": info,
    }


# -------------------- sweep
# The step sweep's series, evaluated in the same batched call as the finite differences they illustrate.
#
# A passing check draws its step sweep at the first input's first element (core/check/engine.py).
# That is known before the finite differences run, so the sweep's shifted copies ride along
# in the vmap call that evaluates that input's shifted copies: the float64 copies are appended to
# the same stack, and the float32 copies, which need the function evaluated in float32, form a
# second stack padded with unshifted copies to the same length. One call then serves both, instead
# of a second call whose fixed cost (functorch's set-up, a trace of the function per dtype) was
# most of the sweep's.
#
# Nothing changes in what is recorded about the sweep: each series' copies and quotients are built
# as core/check/fd/finite_difference.py builds them, and the batch guard of the finite differences checks
# their last copy, as it does alone; where it passes, the sweep's copies are taken as faithful, as
# they were when the sweep reused that guard's verdict. A float32 evaluation that raises is tried
# once more with every float64 operand cast, as the sweep does alone. Where the shared call still
# cannot be made (a large step leaves the function's domain) or the guard refuses, the finite
# differences are evaluated on their own as before and the sweep draws its series itself.

# -------------------- sweep riders

#: Shifted copies of the finite differences above which no series rides along (the float32 stack is padded to
#: their number, so a large input would pay for as many float32 evaluations as it has copies).
RIDE_MAX_COPIES = 512


@dataclass
class Rider:
    """One dtype's series of the step sweep at one element, waiting for the call that evaluates it."""

    dtype: str  #: the series' dtype name ("float32", "float64")
    probe: object  #: an evaluations.Probe of the function in that dtype
    steps: list  #: the absolute steps, one per decade
    flat_index: int
    estimates: object = None  #: the series' difference quotients, once evaluated
    promoted: bool = False  #: the function returned a wider dtype (it holds tensors of its own in float64)
    note: str = ""  #: how the series was evaluated, where that differs from a plain evaluation


@dataclass
class Riding:
    """The riders of one sweep, handed to the finite differences of the input they sweep (a Probe's `riders`)."""

    riders: list

    def outputs(self, probe, stack, evaluate_alone):
        """The function's outputs on the probe's `stack`, the riders' estimates filled by the same call."""
        return outputs_with_riders(probe, stack, self.riders, evaluate_alone)


def sweep_riders(function, values: dict, v, name: str, flat_index: int, *, dtypes=("float32", "float64")) -> list:
    """The riders of a central-difference sweep of input `name` at `flat_index` (core/check/fd/finite_difference.py DECADES);
    none where the input's central differences alone would exceed RIDE_MAX_COPIES (the riders' tensors would only
    be held, in the way of the allocator reusing a large input's chunks)."""
    if 2 * values[name].numel() > RIDE_MAX_COPIES:
        return []

    pass

    pass

    scale = max(1.0, abs(float(values[name].reshape(-1)[flat_index])))
    riders = []
    for dtype in dtypes:
        target = getattr(torch, defaults.FD_DTYPE[dtype])
        probe = Probe(function, {k: t.detach().to(target) for k, t in values.items()}, v.detach().to(target), name)
        riders.append(Rider(dtype, probe, [10.0**-k * scale for k in DECADES], flat_index))
    return riders


def found(riders: list, name: str, flat_index: int):
    """step_sweep's `together` for a sweep of `name` at `flat_index`: ({dtype: (estimates, note)}, "", promoted
    dtypes), or None where the riders were not evaluated (or are for another element)."""
    if (
        not riders
        or any(r.probe.name != name or r.flat_index != flat_index for r in riders)
        or all(r.estimates is None and not r.promoted for r in riders)
    ):
        return None
    kept = {
        r.dtype: (r.estimates.detach().to("cpu").double().tolist(), r.note) for r in riders if r.estimates is not None
    }
    return kept, "", {r.dtype for r in riders if r.promoted}


def outputs_with_riders(probe, stack, riders: list, evaluate_alone):
    """The function's outputs on `stack` (the probe's shifted copies), with each rider's estimates filled from the
    same vmap call; `evaluate_alone(stack)` gives them as before where that call cannot be made."""
    pass

    count = stack.shape[0]
    shared = {rider.probe.component().dtype for rider in riders}
    if not probe.batched or count > RIDE_MAX_COPIES or stack.dtype not in shared:
        return evaluate_alone(stack)  # (a complex step's copies are complex: no series shares their stack)
    built = []
    for rider in riders:
        x = rider.probe.values[rider.probe.name]
        h = torch.tensor(rider.steps, dtype=x.dtype, device=x.device)
        index = torch.full((len(rider.steps),), rider.flat_index, device=x.device)
        signed = signed_steps(rider.probe, "central", h, index)
        built.append((rider, signed, rider.probe.shifted(signed.reshape(-1), indices=tiled(index, signed.shape[0]))))
    same = [b for b in built if b[2].dtype == stack.dtype]
    other = [b for b in built if b[2].dtype != stack.dtype]
    joint = torch.cat([stack] + [copies for _, _, copies in same])
    rows = joint.shape[0]
    padded = [
        torch.cat(
            [
                copies,
                rider.probe.values[rider.probe.name].unsqueeze(0).expand(rows - copies.shape[0], *copies.shape[1:]),
            ]
        )
        for rider, _, copies in other
    ]
    outs, failed = _evaluate(probe, joint, other, padded, narrowed=False)
    if failed == "narrow":  # a narrower evaluation raised: retried with every operand cast
        outs, failed = _evaluate(probe, joint, other, padded, narrowed=True)
    # the guard checks the last copy of the finite differences, as it does without riders
    if outs is None or (probe.guard and not probe.batch_agrees(stack, outs[-1][:count])):
        return evaluate_alone(stack)  # each evaluated on its own (a refusal is recorded with its reason)
    main = outs[-1]
    probe.stats["forward_evaluations"] += count
    offset = count
    for rider, signed, copies in same:
        rider.estimates = quotient(rider.probe, "central", main[offset : offset + copies.shape[0]], signed, None)[0]
        offset += copies.shape[0]
    for (rider, signed, copies), out in zip(other, outs[:-1]):
        estimates = quotient(rider.probe, "central", out[: copies.shape[0]], signed, None)[0]
        if estimates.dtype == copies.dtype:
            rider.estimates = estimates
        else:  # the function promoted the series to its own tensors' float64: the sweep evaluates it cast
            rider.promoted = True
    return main[:count]


def _evaluate(probe, joint, other: list, padded: list, *, narrowed: bool):
    """((each narrower rider's outputs..., the probe's outputs on `joint`) from one vmap call, None), or (None, which
    part raised: "narrow" or "main"); `narrowed` evaluates the narrower riders with every float64 operand cast (the
    function holds its own tensors)."""
    pass

    functions = [downcast(rider.probe.function) if narrowed else rider.probe.function for rider, _, _ in other]

    part = ["narrow"]

    def together(main, *extra):
        # the narrower evaluations first: they are the ones that may raise, before the main one has run
        narrow = tuple(f(**rider.probe.arguments(x)) for f, (rider, _, _), x in zip(functions, other, extra))
        part[0] = "main"
        return narrow + (probe.output(main),)

    try:
        outs = torch.func.vmap(together)(joint, *padded)
    except Exception:  # a float32 evaluation, or a large step the function refuses
        return None, part[0]
    for rider, _, _ in other:
        rider.note = CAST_NOTE.format(dtype=defaults.FD_DTYPE[rider.dtype]) if narrowed else ""
    return outs, None


# -------------------- step sweep
# The step sweep: finite-difference error against step, decade by decade, per dtype.
#
# It shows why a step cannot be chosen without looking at the dtype: the error falls with the
# step (truncation, ~h^2 for central differences) until rounding (~eps/h) takes over, so the
# best step sits near eps^(1/3) with an error near eps^(2/3). The reference is the float64
# autograd derivative at the same element. `sweep_svg.render` draws the data.
#
# The sweep is a side chart: `guarded_step_sweep` turns any failure into a note in the record,
# never a failed check. Its causes of failure are handled where they arise:
#
# - a function that holds float64 tensors of its own (a weight, saved statistics) cannot be
#   evaluated in float32 by casting its inputs alone; such a series is evaluated under a
#   torch-function mode that casts every float64 operand of every call to float32;
# - a large step can leave the function's domain (a probability shifted past 1, a matrix no
#   longer positive definite); the steps whose evaluation raises are left out of the series and
#   listed with the reason;
# - the reference gradient is autograd's own (passed by the engine), or computed with
#   `allow_unused` so that an input the output does not reach has a zero gradient.

#: Decades of step swept: 10^0 down to 10^-16.
DECADES = tuple(range(0, 17))
#: The note of a narrower series evaluated with the function's own float64 tensors cast at every call.
CAST_NOTE = "evaluated with every float64 operand cast to {dtype} (the function holds its own tensors)"
#: Why a check with a complex input or output has no sweep: it casts the inputs to float32 and float64.
COMPLEX_NOTE = (
    "the step sweep is not drawn for complex values: it evaluates each real dtype in turn, and a "
    "complex input or output has no real dtype to cast to; the check does not depend on it"
)


def guarded_step_sweep(function, values: dict, v, name: str, flat_index: int = 0, **options) -> dict:
    """`step_sweep`, or a record of why it could not be drawn (the check's verdict never depends on it)."""
    if v.is_complex() or values[name].is_complex():
        return {
            "input": name,
            "flat_index": flat_index,
            "scheme": options.get("scheme", "central"),
            "series": [],
            "note": COMPLEX_NOTE,
        }
    try:
        return step_sweep(function, values, v, name, flat_index, **options)
    except Exception as exc:  # a side chart must never break a check
        message = exception_line(exc)
        return {
            "input": name,
            "flat_index": flat_index,
            "scheme": options.get("scheme", "central"),
            "series": [],
            "note": f"the step sweep could not be drawn ({message}); the check does not depend on it",
        }


def step_sweep(
    function,
    values: dict,
    v,
    name: str,
    flat_index: int = 0,
    *,
    dtypes=("float32", "float64"),
    scheme: str = "central",
    chosen: dict | None = None,
    reference=None,
    batching: str | None = None,
    together=None,
) -> dict:
    """Error of `scheme` at one element for each decade of step, for each dtype.

    `reference` is autograd's float64 gradient of the input (computed here when absent);
    The rounding floor's step scale is capped as the check's is (STEP_SCALE_CAP). `batching` is what
    the check's finite differences found about batching this input: "" faithful (their batch
    guard passed), a reason when it was refused, None when not tried (the sweep's own batch
    then runs the same guard, core/check/fd/finite_difference.py). `together` is what `_together` would give,
    already evaluated with the check's finite differences (core/check/fd/finite_difference.py `found`).
    """
    if reference is None:
        reference = _reference(function, values, v, name)
    reference = float(reference.reshape(-1)[flat_index])
    x_i = float(values[name].reshape(-1)[flat_index])
    scale = max(1.0, abs(x_i))
    floor_scale = min(scale, STEP_SCALE_CAP)
    relative = abs(reference) > 0
    series, notes = [], []
    together, refused, promoted = (
        together
        if together is not None and scheme == "central"
        else _together(function, values, v, name, flat_index, dtypes, scheme, scale, batching)
    )
    for dtype in dtypes:
        if dtype in together:
            steps, (estimates, note) = [10.0**-k * scale for k in DECADES], together[dtype]
        else:
            steps, estimates, note = _estimates(
                function,
                values,
                v,
                name,
                flat_index,
                dtype,
                scheme,
                scale,
                refused=refused,
                guard=batching is None and not refused,
                promotes=dtype in promoted,
            )
        if note:
            notes.append(f"{dtype}: {note}")
        if not steps:
            continue
        errors = [abs(e - reference) / (abs(reference) if relative else 1.0) for e in estimates]
        best = min(range(len(steps)), key=lambda k: errors[k] if errors[k] == errors[k] else float("inf"))
        eps = defaults.EPS[defaults.FD_DTYPE[dtype]]
        series.append(
            {
                "dtype": dtype,
                "steps": steps,
                "errors": errors,
                "chosen_step": (chosen or {}).get(dtype, defaults.fd_step(dtype, scheme) * floor_scale),
                "floor_step": defaults.fd_step(dtype, scheme) * floor_scale,
                "floor_error": defaults.fd_floor(dtype, scheme),
                "best_step": steps[best],
                "best_error": errors[best],
                "eps": eps,
            }
        )
    result = {
        "input": name,
        "flat_index": flat_index,
        "x": x_i,
        "scheme": scheme,
        "reference": reference,
        "error_kind": "relative" if relative else "absolute",
        "series": series,
    }
    if refused:
        notes.insert(0, f"each step evaluated on its own: {refused}")
    if notes:
        result["note"] = "; ".join(notes)
    return result


def _together(function, values, v, name, flat_index, dtypes, scheme, scale, batching) -> tuple[dict, str, set]:
    """({dtype: (estimates as floats, note)} of the series one batched evaluation gave, why batching was
    refused or "", the dtypes whose series came back promoted to float64 by the function's own tensors).

    Every series' shifted copies go through one vmap call (`quotients_together` below), each
    stacked and evaluated as a series alone would be, so the values are those of separate
    evaluations. When that call fails without a refusal, a narrower series
    has usually met a float64 tensor the function holds (float32 @ float64 raises): the call is
    made once more with the narrower series evaluated with every operand cast (`downcast`).
    A series left out (promoted to float64, or the batch could not run) is evaluated on its own
    by `_estimates`.
    """
    if batching:  # the check's own batch guard refused this input
        return {}, batching, set()
    guard = batching is None  # "": the check's own guard found batching this input faithful
    found = _batched_series(function, values, v, name, flat_index, dtypes, scheme, scale, cast=False, guard=guard)
    if found[0] is None and not found[1]:
        found = _batched_series(function, values, v, name, flat_index, dtypes, scheme, scale, cast=True, guard=guard)
    return ({}, found[1], set()) if found[0] is None else found


def _batched_series(function, values, v, name, flat_index, dtypes, scheme, scale, *, cast: bool, guard: bool):
    """`_together`'s one vmap call; with `cast`, the series narrower than float64 are evaluated under `downcast`;
    with `guard`, the batch is first checked against a separate evaluation (evaluations.Probe)."""
    targets = [getattr(torch, defaults.FD_DTYPE[dtype]) for dtype in dtypes]
    guarded = torch.float64 if torch.float64 in targets else targets[0]  # at 1e-9, float32's rounding would refuse
    narrowed = {dtype for dtype, target in zip(dtypes, targets) if cast and target != torch.float64}
    probes = [
        Probe(
            downcast(function) if dtype in narrowed else function,
            {k: t.detach().to(target) for k, t in values.items()},
            v.detach().to(target),
            name,
            guard=guard and target == guarded,
        )
        for dtype, target in zip(dtypes, targets)
    ]
    device = values[name].device
    steps = [10.0**-k * scale for k in DECADES]
    index = torch.tensor([flat_index] * len(steps), device=device)
    found = quotients_together(
        probes, scheme, [torch.tensor(steps, dtype=t, device=device) for t in targets], [index] * len(probes)
    )
    if found is None:
        return None, next((p.refused for p in probes if p.refused), ""), set()
    kept = {
        dtype: (
            estimate.detach().to("cpu", torch.float64).tolist(),
            CAST_NOTE.format(dtype=defaults.FD_DTYPE[dtype]) if dtype in narrowed else "",
        )
        for dtype, estimate, target in zip(dtypes, found, targets)
        if estimate.dtype == target
    }
    return kept, "", {dtype for dtype, estimate, target in zip(dtypes, found, targets) if estimate.dtype != target}


def _estimates(
    function,
    values,
    v,
    name,
    flat_index,
    dtype,
    scheme,
    scale,
    *,
    refused: str = "",
    guard: bool = False,
    promotes: bool = False,
) -> tuple[list, list, str]:
    """(steps kept, their estimates as floats, a note on what was left out or how it was evaluated).

    With `refused`, each shifted copy is evaluated on its own (no batch); `guard` checks a batch first.
    `promotes` says the function is already known to promote this dtype to its own tensors' float64
    (a batched evaluation showed it), so the series goes straight to the cast-at-every-call evaluation.
    """
    target = getattr(torch, defaults.FD_DTYPE[dtype])
    cast = {k: t.detach().to(target) for k, t in values.items()}
    cast_v = v.detach().to(target)
    steps = [10.0**-k * scale for k in DECADES]
    device = cast[name].device
    index = torch.tensor([flat_index] * len(steps), device=device)
    h = torch.tensor(steps, dtype=target, device=device)
    note = ""
    probe = Probe(function, cast, cast_v, name, batched=not refused, guard=guard and target == torch.float64)
    needs_cast = promotes
    if not promotes:
        try:
            found = difference_quotient(probe, scheme, h, index)
            needs_cast = found.dtype != target  # a float64 result: the function promoted to its own tensors' dtype
            if not needs_cast:
                return steps, found.detach().to("cpu", torch.float64).tolist(), note
        except Exception:  # it cannot run on cast inputs alone, or some step leaves the domain
            needs_cast = not _runs_in(probe, cast[name], target)
    if needs_cast:
        # the function holds tensors of another dtype: cast them at every call instead
        probe = Probe(downcast(function), cast, cast_v, name, batched=not refused)
        note = CAST_NOTE.format(dtype=defaults.FD_DTYPE[dtype])
        try:
            found = difference_quotient(probe, scheme, h, index)
            return steps, found.detach().to("cpu", torch.float64).tolist(), note
        except Exception:  # some step leaves the domain: evaluate step by step and keep what runs
            pass
    kept, estimates, refused = [], [], []
    for step in steps:
        try:
            one = difference_quotient(
                probe,
                scheme,
                torch.tensor([step], dtype=target, device=device),
                torch.tensor([flat_index], device=device),
            )
            kept.append(step)
            estimates.append(float(one[0]))
        except Exception as exc:
            refused.append((step, " ".join(str(exc).split())[:120]))
    if refused:
        left_out = ", ".join(f"{s:.0e}" for s, _ in refused)
        note = (note + "; " if note else "") + f"steps {left_out} left out: the function raised there ({refused[0][1]})"
    return kept, estimates, note


def _runs_in(probe: Probe, x, target) -> bool:
    """Whether the function runs at x itself with a result in `target` (then only some steps failed)."""
    try:
        with torch.no_grad():
            return probe.output(x).dtype == target
    except Exception:  # it cannot run on these inputs at all
        return False


@cache
def _downcast_mode_class():
    """A torch-function mode casting every float64 (complex128) operand to float32 (complex64); made on first use.

    It works at the level of torch functions, before composite operations check their operands'
    dtypes (prelu refuses mixed dtypes before any aten operation would be dispatched).
    """
    from torch.overrides import TorchFunctionMode

    narrower = {torch.float64: torch.float32, torch.complex128: torch.complex64}

    def cast(value):
        if isinstance(value, torch.Tensor) and value.dtype in narrower:
            return value.to(narrower[value.dtype])
        if isinstance(value, (list, tuple)):
            return type(value)(cast(item) for item in value)
        return value

    class Downcast(TorchFunctionMode):
        """Evaluates every torch function with its float64 operands in float32."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {k: cast(val) for k, val in (kwargs or {}).items()}
            if kwargs.get("dtype") in narrower:
                kwargs["dtype"] = narrower[kwargs["dtype"]]
            return func(*cast(tuple(args)), **kwargs)

    return Downcast


def downcast(function):
    """`function` evaluated under the downcast mode (float32 is the only narrower dtype swept)."""

    def narrowed(**inputs):
        with torch.no_grad(), _downcast_mode_class()():
            return function(**inputs)

    return narrowed


def _reference(function, values, v, name):
    """autograd's float64 gradient of phi = sum(v * f) with respect to input `name` (zeros if unused)."""
    leaves = {k: t.detach().to(torch.float64) for k, t in values.items()}
    leaves[name] = leaves[name].clone().requires_grad_(True)
    output = function(**leaves)
    (gradient,) = torch.autograd.grad(torch.sum(v.detach().to(torch.float64) * output), leaves[name], allow_unused=True)
    return torch.zeros_like(leaves[name]) if gradient is None else gradient


def quotients_together(probes: list, scheme: str, steps: list, indices: list):
    """Each probe's `difference_quotient(probe, scheme, h, index)` from one vmap call, copies stacked as alone (the
    same values); None where a probe does not batch, vmap or a batch guard refuses, or copies are too few or many."""
    built = [
        (
            signed,
            probe.shifted(
                signed.reshape(-1),
                imaginary=scheme == "complex_step" or probe.imaginary_shift,
                indices=tiled(index, signed.shape[0]),
            ),
        )
        for probe, h, index in zip(probes, steps, indices)
        for signed in [signed_steps(probe, scheme, h, index)]
    ]
    if (
        not all(p.batched and len(i) <= p.rows_per_chunk(s.shape[0]) for p, i, (s, _) in zip(probes, indices, built))
        or len({stack.shape[0] for _, stack in built}) != 1
        or built[0][1].shape[0] < defaults.LOOP_BELOW
    ):
        return None
    try:
        outs = torch.func.vmap(lambda *xs: tuple(p.output(x) for p, x in zip(probes, xs)))(*(s for _, s in built))
    except Exception:  # a callable vmap cannot trace: the caller's separate path says why
        return None
    found = []
    for probe, (signed, stack), out in zip(probes, built, outs):
        probe.stats["forward_evaluations"] += stack.shape[0]
        if probe.guard and not probe.batch_agrees(stack, out):
            return None
        found.append(
            quotient(
                probe, scheme, out, signed, probe.output(probe.values[probe.name]) if scheme == "forward" else None
            )[0]
        )
    return found
