"""The shifted copies a finite difference evaluates, and the steps it shifts by.

A difference quotient of input element i evaluates phi at copies of the input shifted at i by
signed multiples of a step (`defaults.SHIFTS`). The step is relative to min(max(1, |x_i|), STEP_SCALE_CAP) by
default, and the shift is the one the arithmetic really takes, (x_i + s) - x_i. For a complex input
the probe shifts one part at a time, its real or its imaginary part (`imaginary`), and the step
is sized by that part (core/check/record/complex_values.py).
"""

from __future__ import annotations

import torch

from ..record import defaults

#: Largest |x| the default step grows with: beyond it the step stays eps^(1/3) * STEP_SCALE_CAP, because a step that
#: grows with |x| without bound (0.06 at 1e4) measures curvature instead of slope; the rounding it costs is in each
#: element's bound (core/check/fd/error_bound.py).
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
