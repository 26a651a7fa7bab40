"""One element's finite difference evaluated again in float64, to tell a float32 rounding from a wrong backward.

The rounding bound of a float32 difference (core/check/fd/error_bound.py) is counted from the
magnitudes |f_j| of the outputs. Where an output is a sum whose terms cancel (an inverse FFT of a
nearly symmetric signal), its real rounding is that of its terms, larger than eps |f_j|, and a
correct backward can fail beyond that bound and beyond the refinement's error estimate. The
difference itself says which it is once the rounding is gone: the same function at the same
points (the float32 input, cast exactly to float64), differenced in float64 at float64's default
step and Richardson-extrapolated, gives the derivative to ~1e-10 of |phi|. If autograd's float32
gradient agrees with it within the float32 tolerance, the discrepancy was the float32
evaluations' rounding; a backward wrong by 1 % stays 1 % away from it.
"""

from __future__ import annotations

import torch

from ..record import defaults
from .evaluations import Probe
from .finite_difference import difference_quotient

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
