"""Richardson extrapolation of central differences at a ladder of steps, with an error estimate per element.

Shared by the refinement of failing elements (smaller steps, core/check/fd/refinement.py) and the
re-judging of elements that pass only inside their rounding bound (wider steps,
core/check/fd/wide_steps.py).
"""

from __future__ import annotations

import torch

from . import error_bound
from .evaluations import Probe
from .finite_difference import difference_quotient, signed_steps

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
        # rounding that of one element, not that of the whole sum (core/check/fd/diagonal.py)
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
