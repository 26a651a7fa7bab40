"""The rounding bound of each finite-difference estimate, from the values actually differenced.

A central estimate of element i is sum_j v_j (f_j(x + h e_i) - f_j(x - h e_i)) / 2h, taken
output by output. Each evaluated output carries a rounding error of a few units of eps |f_j|
(more where f_j is itself a sum whose terms cancel), so the quotient's rounding is bounded by

    rounding_i = eps * sum_j |v_j| (|f_j(x + h e_i)| + |f_j(x - h e_i)|) / 2h,

summed over the outputs that element i changed (outputs it does not touch are evaluated
identically and cancel exactly). Two equal evaluations of an output the element does move say only
that the change is below the output's rounding: a row whose outputs all came out equal counts them
all (`moved_outputs`). This grows with the magnitude that is differenced and with
1/h, which is what a fixed absolute tolerance ignores: at |x| = 1e4, or for a sum of a thousand
outputs, eps * |f| / h alone exceeds 3.7e-9. So each element's default tolerance adds
BOUND_FACTOR * rounding_i to `atol + rtol * |autograd_i|` (docs/tolerances.md).

The truncation error (~h^2 |f'''| / 6 for central differences) is not estimated for every
element, which would double the evaluations: an element that fails is re-estimated at smaller
steps with Richardson extrapolation, whose successive values give its truncation error
(core/check/fd/refinement.py).
"""

from __future__ import annotations

import torch

from .working_precision import working_eps

#: Multiple of the rounding bound allowed per element: one evaluation of f_j may round by a
#: few eps |f_j| (a libm function by ~1 ulp, a sum of k terms by up to k ulps of its largest
#: term), so the bound from |f_j| alone is widened by this constant.
BOUND_FACTOR = 4.0


def rounding_of(probe, first, second, width):
    """eps * sum_j |v_j| (|first_j| + |second_j|) / |width| per row, over outputs that differ.

    `first` and `second` are the stacked outputs (one row per element) whose difference is the
    quotient's numerator, or `second` None for the complex step (no subtraction: the imaginary
    part's own rounding, eps * |Im f| / h). eps is that of the precision the outputs were computed in
    (core/check/fd/working_precision.py): TF32's on a cuda device that lets float32 run in it.
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
