"""Default tolerances and finite-difference steps, which depend on the dtype.

The reasoning, written down once (docs/tolerances.md repeats it for readers):

- Analytical vs autograd, and pass-to-pass comparisons: both sides evaluate an exact
  derivative, so they differ only by rounding in a handful of operations. The default allows
  a few hundred units in the last place of the dtype (rtol) plus an absolute floor for
  gradients that are exactly zero.
- Finite difference vs autograd: a central difference with step h has truncation error
  ~h^2 and rounding error ~eps/h, minimised at h ~ eps^(1/3) where the error is ~eps^(2/3)
  (forward: h ~ eps^(1/2), error ~eps^(1/2); Richardson on central differences: h ~ eps^(1/5),
  error ~eps^(4/5); complex step: no subtraction, error ~eps). The default tolerance is 100x
  that floor, because the constants in front (|f|, |f'''|) are rarely 1.
- float16 and bfloat16 cannot resolve a difference quotient at all (eps ~1e-3 and ~8e-3), so
  their finite differences are taken in float32 on the same function and the tolerance is
  that of the half-precision autograd result.
- complex128 and complex64 are pairs of float64 and float32 numbers: their eps, steps and
  tolerances are those of their parts (core/check/record/complex_values.py has the convention).
"""

from __future__ import annotations

#: Shifted copies per element for each scheme: the signed multiples of h evaluated.
SHIFTS = {"central": (1.0, -1.0), "forward": (1.0,), "complex_step": (1.0,), "richardson": (1.0, -1.0, 0.5, -0.5)}
#: Input elements above which torch.autograd.gradcheck runs in its fast mode (core/check/autograd/torch_gradcheck.py).
FAST_MODE_ABOVE = 1000

EPS = {
    "float64": 2.220446049250313e-16,
    "float32": 1.1920928955078125e-07,
    "float16": 0.0009765625,
    "bfloat16": 0.0078125,
    "complex128": 2.220446049250313e-16,
    "complex64": 1.1920928955078125e-07,
}

DTYPES = tuple(EPS)
#: The dtypes an expression can be checked in: expressions are real-valued (core/check/record/complex_values.py).
EXPRESSION_DTYPES = ("float64", "float32", "float16", "bfloat16")

#: Dtype in which finite differences are evaluated for each declared dtype.
FD_DTYPE = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float32",
    "bfloat16": "float32",
    "complex128": "complex128",
    "complex64": "complex64",
}

SCHEMES = ("central", "forward", "complex_step", "richardson")

#: Below this many stacked copies a plain loop is cheaper than vmap's tracing.
LOOP_BELOW = 24
#: Relative agreement required between a batched and a separate evaluation of one copy: far
#: above the rounding of a different kernel (~1e-14), far below a step's effect (~1e-6).
BATCH_AGREEMENT = 1e-9

#: finite_difference.mode: "auto" (the default) compares every element unless that is predicted to
#: take over a second, then projects; "exhaustive" always compares every element; "projected"
#: compares one random direction and localises a failure (core/check/fd/projected.py).
FD_MODES = ("auto", "exhaustive", "projected")

#: Exponent p such that the best achievable finite-difference error is ~eps^p, and the
#: exponent q of the step h ~ eps^q that reaches it.
_FLOOR_EXPONENT = {"central": 2 / 3, "forward": 1 / 2, "richardson": 4 / 5, "complex_step": 1.0}
_STEP_EXPONENT = {"central": 1 / 3, "forward": 1 / 2, "richardson": 1 / 5, "complex_step": 1.0}


def comparison_tolerance(dtype: str) -> dict:
    """Default `{rtol, atol}` for analytical vs autograd and pass-to-pass comparisons."""
    eps = EPS[dtype]
    rtol = {"float64": 1e-7, "float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2, "complex128": 1e-7, "complex64": 1e-4}[
        dtype
    ]
    return {"rtol": rtol, "atol": max(10 * eps, rtol * 1e-3)}


def fd_floor(dtype: str, scheme: str) -> float:
    """The theoretical best relative error of `scheme` in the dtype FD is evaluated in."""
    return EPS[FD_DTYPE[dtype]] ** _FLOOR_EXPONENT[scheme]


def fd_tolerance(dtype: str, scheme: str) -> dict:
    """Default `{rtol, atol}` for finite difference vs autograd.

    rtol is 100 x the floor. atol is an absolute floor for gradients that are zero in exact
    arithmetic (autograd's rounding residue there): 100 x the floor in float64 and complex128
    (3.7e-9 central), the floor itself in float32 and complex64 (2.4e-5 central), where 100 x
    (2.4e-3) would let a gradient element under ~0.25 be 1 % wrong unseen. Each element's rounding
    bound (core/check/fd/error_bound.py) covers what the differenced magnitude adds."""
    if dtype in ("float16", "bfloat16"):
        return dict(comparison_tolerance(dtype))
    floor = fd_floor(dtype, scheme)
    return {"rtol": 100 * floor, "atol": floor if EPS[dtype] > EPS["float64"] else 100 * floor}


def fd_step(dtype: str, scheme: str) -> float:
    """Default step, relative to max(1, |x|) element by element."""
    return EPS[FD_DTYPE[dtype]] ** _STEP_EXPONENT[scheme]
