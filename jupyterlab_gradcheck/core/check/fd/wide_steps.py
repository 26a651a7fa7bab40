"""Re-judge, at wider steps, the elements that pass only thanks to their rounding bound.

At the default step h the rounding bound of an element, 4 eps sum_j |v_j| (|f_j(x+)| + |f_j(x-)|) / 2h
(core/check/fd/error_bound.py), is honest but can be wide: in float32, for a function reduced to a
scalar of magnitude |phi| ~ 80, it is ~7.5e-3, so a backward wrong by 1 % at an element of ~0.15
passes inside it. The rounding bound falls as 1/h while the truncation error of a central difference
grows as h^2, and Richardson extrapolation over successive steps removes that h^2 term. So an
element whose error exceeds the plain tolerance atol + rtol |autograd| but not that tolerance plus its
bound is estimated again at WIDE_MULTIPLES of h (the same extrapolation as core/check/fd/refinement.py),
and, where the error estimate found there (the difference of two successive extrapolations plus the
rounding bound at their steps) is tighter than the default bound, judged with it:

    |refined - autograd| <= atol + rtol |autograd| + REFINED_MARGIN x (that error estimate).

An element that fails there takes the wider estimate and its bound into the record; one that passes
keeps its default estimate and bound, so a correct function's record is what it was; the refinement's
record gives `wide_steps` (what was tried, how many elements, which still fail) when one fails.

An element whose wide estimates do not settle (a kink or the edge of the domain within the wider
steps: successive extrapolations disagree, or the function raised), or settle on a value that the
default estimate contradicts (beyond the two bounds together: wide steps that cross a kink or a
change of branch, clamp's limit, a sort's ties), keeps its default estimate and bound, and passes
as before.
"""

from __future__ import annotations

import torch

from ...i18n import Message
from .evaluations import Probe
from .richardson import MAX_ELEMENTS, REFINED_MARGIN, extrapolate

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
