"""B3, finite-difference accuracy against the theoretical limits, scheme by scheme, per dtype.

Workload: sin, exp, tanh, log, a polynomial 3x^3 - 2x^2 + x - 5, and the composition
log(1 + exp(sin x)), each at x = 0.5, 1 and 2. For every scheme (`core.check.fd.finite_difference`,
through `fd_gradients`, the engine's own path) in float32 and float64, the error is the
relative error |fd - f'| / |f'| against the float64 autograd derivative at the same point
(the point rounded to the dtype first, so both sides differentiate at the same x).

The floor is the best relative error a scheme can reach in the dtype: eps^(2/3) central,
eps^(1/2) forward, eps^(4/5) Richardson, eps complex step (`core.check.record.spec.fd_floor`).

Goals: the default step within 10x of the floor (worst case over functions and points);
adaptive or Richardson <= 1e-12 in float64; complex step <= 1e-15 in float64. Also shown:
the error of gradcheck's fixed eps = 1e-6 central difference in float32, and how many of
gradcheck's own float32 verdicts fail on these correct functions.
"""

from __future__ import annotations

import statistics
import warnings

from . import device, graded, row

FLOOR_FACTOR_GOAL = 10.0
REFINED_GOAL = 1e-12
COMPLEX_STEP_GOAL = 1e-15
POINTS = (0.5, 1.0, 2.0)
DTYPES = ("float64", "float32")


def _polynomial(x):
    return 3 * x**3 - 2 * x**2 + x - 5


def _functions():
    import torch

    return {
        "sin": torch.sin,
        "exp": torch.exp,
        "tanh": torch.tanh,
        "log": torch.log,
        "polynomial": _polynomial,
        "log(1+exp(sin x))": lambda x: torch.log(1 + torch.exp(torch.sin(x))),
    }


def _reference(function, x: float) -> float:
    """f'(x) by float64 autograd."""
    import torch

    leaf = torch.tensor(x, dtype=torch.float64, device=device(), requires_grad=True)
    (gradient,) = torch.autograd.grad(function(leaf), leaf)
    return float(gradient)


def _estimate(function, x: float, dtype: str, scheme: str, step) -> float:
    """The engine's finite-difference estimate of f'(x) in `dtype`."""
    import torch

    from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients

    target = getattr(torch, dtype)
    value = torch.tensor(x, dtype=target, device=device())
    grads, _, _ = fd_gradients(
        lambda x: function(x),
        {"x": value},
        torch.ones((), dtype=target, device=device()),
        FdOptions(dtype=dtype, scheme=scheme, step=step),
    )
    return float(grads["x"])


def errors(dtype: str, scheme: str, step) -> list[tuple[float, str, float]]:
    """(relative error, function, point) for every function and point."""
    import torch

    result = []
    for name, function in _functions().items():
        for point in POINTS:
            x = float(torch.tensor(point, dtype=getattr(torch, dtype)))  # the point the dtype holds
            reference = _reference(function, x)
            estimate = _estimate(function, x, dtype, scheme, step)
            result.append((abs(estimate - reference) / abs(reference), name, point))
    return result


def _summary(found: list[tuple[float, str, float]]) -> str:
    worst = max(found)
    return (
        f"worst {worst[0]:.2g} ({worst[1]} at x={worst[2]:g}), median "
        f"{statistics.median(e for e, _, _ in found):.2g} over {len(found)} cases"
    )


def _gradcheck_float32_failures() -> int:
    """How many of gradcheck's float32 verdicts, at its defaults, fail on these correct functions."""
    import torch

    failures = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gradcheck warns that float32 is not double precision
        for function in _functions().values():
            for point in POINTS:
                leaf = torch.tensor(point, dtype=torch.float32, device=device(), requires_grad=True)
                failures += not torch.autograd.gradcheck(function, (leaf,), raise_exception=False)
    return failures


def run(quick: bool) -> list[dict]:
    """B3 rows: default step against the floor for every scheme and dtype, and the three goals."""
    from jupyterlab_gradcheck.core.check.record import spec as defaults

    rows = []
    found = {}
    for dtype in DTYPES:
        for scheme in defaults.SCHEMES:
            found[dtype, scheme, None] = errors(dtype, scheme, None)
            floor = defaults.fd_floor(dtype, scheme)
            worst = max(found[dtype, scheme, None])[0]
            rows.append(
                graded(
                    f"B3 {scheme}, default step, {dtype}: worst error / floor",
                    round(worst / floor, 2),
                    "x floor",
                    f"<= {FLOOR_FACTOR_GOAL:g}x",
                    worst <= FLOOR_FACTOR_GOAL * floor,
                    f"floor {floor:.2g}; {_summary(found[dtype, scheme, None])}",
                )
            )

    complex_worst = max(found["float64", "complex_step", None])[0]
    rows.append(
        graded(
            "B3 complex step, float64: worst error",
            complex_worst,
            "rel",
            f"<= {COMPLEX_STEP_GOAL:g}",
            complex_worst <= COMPLEX_STEP_GOAL,
            _summary(found["float64", "complex_step", None]),
        )
    )

    refined = {
        "richardson, default step": found["float64", "richardson", None],
        "richardson, adaptive step": errors("float64", "richardson", "adaptive"),
        "central, adaptive step": errors("float64", "central", "adaptive"),
    }
    for label, cases in refined.items():
        rows.append(row(f"B3 {label}, float64: worst error", max(cases)[0], "rel", "-", "INFO", _summary(cases)))
    best_label = min(refined, key=lambda label: max(refined[label])[0])
    best = max(refined[best_label])[0]
    rows.append(
        graded(
            "B3 adaptive or Richardson, float64: worst error of the best",
            best,
            "rel",
            f"<= {REFINED_GOAL:g}",
            best <= REFINED_GOAL,
            f"best is {best_label}; " + "; ".join(f"{label} {max(cases)[0]:.2g}" for label, cases in refined.items()),
        )
    )

    fixed = errors("float32", "central", 1e-6)
    ours = max(found["float32", "central", None])[0]
    failures = _gradcheck_float32_failures()
    total = len(_functions()) * len(POINTS)
    rows.append(
        row(
            "B3 gradcheck's eps=1e-6 central difference, float32: worst error",
            max(fixed)[0],
            "rel",
            "-",
            "INFO",
            f"{_summary(fixed)}; our default float32 step: worst {ours:.2g}; gradcheck itself fails "
            f"{failures} of {total} float32 checks of these correct functions at its default tolerances",
        )
    )
    return rows
