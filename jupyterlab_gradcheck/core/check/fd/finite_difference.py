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

import time
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from ...errors import SpecError
from ...i18n import Message
from ...values import form as complex_values
from ...values import tensors as complex_tensors
from ..record import spec as defaults
from . import steps as adaptive_step
from . import steps as error_bound
from . import steps as shifts
from . import structure as coloured_path
from . import structure as diagonal
from .steps import STEP_SCALE_CAP, signed_steps, step_vector

# -------------------- time budget
# The time budget of finite_difference.mode auto: when the exhaustive comparison would be too slow.
#
# Mode auto (the default) compares every element unless that is predicted to take over
# AUTO_BUDGET_S; the general path times its first part and raises ExhaustiveOverBudget with the
# prediction, and the engine then compares in the projected mode (core/check/fd/projected.py).
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
    #: Step-sweep series to evaluate in the same call as this input's copies (a core/check/fd/sweep.py Riding).
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
        return torch.stack([self.output(x.clone()) for x in xs])

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
    probe's riders are evaluated in the same call (core/check/fd/sweep.py)."""
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
    gives step-sweep series to evaluate with an input's copies (core/check/fd/sweep.py). With
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
