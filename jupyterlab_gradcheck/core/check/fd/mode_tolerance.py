"""Tolerances of forward mode, batched gradients and the second order, per dtype and device.

These modes compare two kinds of values, as the first order does:

- `exact`: two exact derivatives that differ by rounding alone (forward AD against the backward's
  Jacobian, vmap's batched gradients against one-at-a-time ones, an analytical Hessian against
  autograd's). In float64 rtol = atol = 1e-9: rounding of sums of 10^4 terms with a wide margin.
  In any other precision, the first order's analytical-vs-autograd rtol for that precision
  (core/check/record/defaults.py: 1e-4 float32, 1e-2 float16 and TF32, 5e-2 bfloat16), as atol too
  (a sum that cancels keeps the rounding of its terms).
- `differences`: central differences against an exact derivative (the finite differences along a
  direction u, the finite differences of the gradient that make a Hessian). In float64
  rtol = atol = 1e-6: truncation and rounding are each ~eps^(2/3) ~ 4e-11 times the scale of the
  third derivative and of the differenced values, allowed up to 10^4. In float32 the first order's
  100 x eps^(2/3) (2.4e-3), as rtol and atol; in float16 and bfloat16 the first order's rule: the
  differences are taken in float32 (`fd_dtype`) and the tolerance is the half-precision result's.
  Where the caller has the differenced values, `difference_bound` adds each element's rounding
  bound in the precision really used (TF32's on a device that runs float32 in it,
  core/check/fd/working_precision.py), as the first order's finite differences do.

A backward 1 % wrong still fails in float32 (2.4e-3 < 1e-2), and the float64 values are those the
modes have always used.
"""

from __future__ import annotations

import torch

from ..record import defaults
from .error_bound import BOUND_FACTOR
from .working_precision import precision_name, working_eps

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
    on its device: BOUND_FACTOR * eps * (|plus| + |minus|) / |width| (core/check/fd/error_bound.py)."""
    real = plus.real if plus.is_complex() else plus
    eps = working_eps(real.dtype, plus.device)
    magnitude = plus.detach().abs().to(torch.float64) + minus.detach().abs().to(torch.float64)
    return BOUND_FACTOR * eps * magnitude / abs(float(width))
