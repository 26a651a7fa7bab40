"""Explain a failed comparison: precision_limited, kink, nondeterministic or probable_bug.

- `nondeterministic`: repeated passes at the same point differ (the forward value, pass 2
  against twice pass 1, or the pass after clearing against pass 1).
- `kink`: one-sided forward and backward differences at the worst element disagree, and the
  disagreement does not shrink when the step does (a smooth function's does, linearly).
- `precision_limited`: the discrepancy is within what the dtype and step can resolve: the
  rounding floor eps*|phi|/h (eps*|w_i g_i|/h where the estimate came from a diagonal chain,
  core/check/fd/structure.py) (plus the step's own representation error and a truncation
  estimate) for a finite difference, or a few dozen ulps for exact derivatives.
- `probable_bug`: none of the above. The reason says which side the evidence points to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..i18n import Message
from ..values.form import as_number, complex_text
from .fd import structure as diagonal
from .fd.finite_difference import Probe, difference_quotient, rounding_explains
from .fd.steps import BOUND_FACTOR
from .record import spec as defaults

#: Multiple of the estimated floor within which a discrepancy is called precision-limited.
FLOOR_MARGIN = 2.0
#: Ulps of disagreement between two exact derivatives that rounding alone can explain.
EXACT_ULPS = 64
#: Relative change of the one-sided quotients between the kink test's two steps below which they have settled.
SETTLED = 1e-3


@dataclass
class DiagnosisContext:
    """What the engine observed, for explaining any failed comparison of one check."""

    function: object
    fd_values: dict
    fd_v: object
    dtype: str
    scheme: str
    step: object
    fd_tolerance: dict
    grads: dict  #: observation name -> {input name -> tensor}
    nondeterminism: str = ""
    #: input name -> the finite-difference path taken ("general", or a diagonal chain's kind)
    fd_structure: dict = field(default_factory=dict)
    #: input name -> what re-estimating its failing elements tried (core/check/fd/finite_difference.py)
    refinement: dict = field(default_factory=dict)


def _digits(value, other) -> str:
    """`value` with enough significant digits (6 to 17) to differ from `other` when it does."""
    if not isinstance(value, float) or not isinstance(other, float):
        return _fmt(value)
    for digits in range(6, 18):
        if f"{value:.{digits}g}" != f"{other:.{digits}g}":
            return f"{value:.{digits}g}"
    return f"{value:.17g}"


def _fmt(value) -> str:
    if isinstance(value, complex):
        return complex_text(value.real, value.imag, lambda part: f"{part:.6g}")
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _one_sided(probe: Probe, flat_index: int, h: float) -> tuple[float, float, float]:
    """(forward, backward, rounding bound of either) differences at one element, output by output.

    Outputs the element does not touch cancel exactly, as in the estimate itself; the rounding
    bound is eps * sum_j |v_j| (|f_j(x+)| + |f_j(x)| + |f_j(x-)|) / h over the outputs that moved.
    """
    x = probe.values[probe.name]
    index = torch.tensor([flat_index, flat_index], device=x.device)
    step = torch.tensor([h, -h], dtype=x.dtype, device=x.device)
    shifted = probe.shifted(step, indices=index)
    taken = shifted.reshape(2, -1)[:, flat_index] - x.reshape(-1)[flat_index]
    centre = probe.output(x)
    plus, minus = probe.outputs(shifted).unbind(0)
    forward = float(probe.contract((plus - centre).unsqueeze(0))[0] / taken[0])
    backward = float(probe.contract((centre - minus).unsqueeze(0))[0] / -taken[1])
    moved = (plus != centre) | (minus != centre)
    magnitude = ((plus.abs() + centre.abs() + minus.abs()) * moved).reshape(-1)
    weights = probe.v.abs().reshape(-1).to(magnitude.dtype)
    rounding = float(torch.finfo(magnitude.dtype).eps * (magnitude * weights).sum() / abs(h))
    return forward, backward, rounding


def kink_evidence(ctx: DiagnosisContext, input_name: str, flat_index: int):
    """(is_kink, forward, backward) from one-sided differences at two steps a decade apart.

    A kink needs the gap between the one-sided differences at the smaller step to exceed both
    the comparison's tolerance and what rounding alone can open (BOUND_FACTOR times the rounding
    bound of the two quotients), and not to shrink with the step as a smooth function's does.
    Without the rounding allowance a linear op differencing a large sum reads noise in the
    seventh digit as a kink.
    """
    eps = defaults.EPS[defaults.FD_DTYPE[ctx.dtype]]
    probe = Probe(ctx.function, ctx.fd_values, ctx.fd_v, input_name)
    x_i = float(ctx.fd_values[input_name].reshape(-1)[flat_index])
    h1 = eps**0.25 * max(1.0, abs(x_i))
    f1, b1, _ = _one_sided(probe, flat_index, h1)
    f2, b2, rounding = _one_sided(probe, flat_index, h1 / 10)
    d1, d2 = abs(f1 - b1), abs(f2 - b2)
    scale = max(abs(f2), abs(b2))
    threshold = ctx.fd_tolerance["atol"] + ctx.fd_tolerance["rtol"] * scale + 2 * BOUND_FACTOR * rounding
    # where each side has settled (its quotients at the two steps agree to SETTLED), their change is
    # measured noise: a linear op's quotients differ only by rounding, which the bound from |f|
    # underestimates when the op sums terms that cancel; a kink's gap stands far above it. A side
    # that has not settled (a pole, a staircase) is left to the test as it was
    drift = abs(f1 - f2) + abs(b1 - b2)
    if drift <= SETTLED * max(abs(f1), abs(f2), abs(b1), abs(b2)):
        threshold += 2 * drift
    return (d2 > threshold and d2 > 0.5 * d1), f2, b2


def crossed_discontinuity(ctx: DiagnosisContext, input_name: str, flat_index: int, fd: float, autograd: float):
    """The reason, or None, when the finite difference failed because its step crosses a kink or a jump
    near x (not at x): on a ladder of one-sided differences, steps a decade apart from eps**0.25,

    - a jump: at a smaller step the output does not move at all on either side, where a smooth function
      with the slope seen at a larger step would move well beyond rounding, and autograd gives 0 there;
    - a kink crossed: at one step the one-sided differences disagree beyond tolerance and rounding and
      their mean moves by a quarter of that gap at the next step, where they agree.

    Either way the differences at the smaller step side with autograd, within an allowance less than
    half the failing difference |fd - autograd|: a wrong backward at a smooth point is never excused."""
    eps = defaults.EPS[defaults.FD_DTYPE[ctx.dtype]]
    probe = Probe(ctx.function, ctx.fd_values, ctx.fd_v, input_name)
    x_i = float(ctx.fd_values[input_name].reshape(-1)[flat_index])
    tol = ctx.fd_tolerance["atol"] + ctx.fd_tolerance["rtol"] * abs(autograd)
    gap = abs(fd - autograd)
    ladder = []
    for k in range(6):
        h = eps**0.25 * max(1.0, abs(x_i)) / 10**k
        if h < 64 * eps * max(1.0, abs(x_i)):  # below a few dozen ulps of x the step is not taken as written
            break
        ladder.append((h, *_one_sided(probe, flat_index, h)))
    for (h, f, b, r), (h2, f2, b2, r2) in zip(ladder, ladder[1:]):
        allowance = tol + 2 * BOUND_FACTOR * r2
        if f2 == b2 == 0.0 and abs(autograd) <= tol and gap > 2 * tol:
            smooth_move = max(abs(f), abs(b)) * h2  # what the output would move by at h2 with the slope seen at h
            if smooth_move > 4 * BOUND_FACTOR * r * h:
                return Message(
                    "the step crosses a jump of the function near {where}: one-sided differences give "
                    "{forward} at step {step}, but at step {small} the output does not move at all, as autograd's 0 "
                    "says: the function is discontinuous within the step, not wrong at the point",
                    where=_where(input_name, ctx, flat_index),
                    forward=_fmt(max(f, b, key=abs)),
                    step=_fmt(h),
                    small=_fmt(h2),
                )
        crossed = abs(f - b) > tol + 2 * BOUND_FACTOR * r and abs((f + b) - (f2 + b2)) / 2 > 0.25 * abs(f - b)
        settled = abs(f2 - b2) <= allowance and abs((f2 + b2) / 2 - autograd) <= allowance
        if crossed and settled and gap > 2 * allowance:
            return Message(
                "the step crosses a kink of the function near {where}: one-sided differences disagree at step "
                "{step} (forward {forward}, backward {backward}) and agree with autograd at step {small}: the "
                "function is not differentiable within the step, not wrong at the point",
                where=_where(input_name, ctx, flat_index),
                step=_fmt(h),
                forward=_fmt(f),
                backward=_fmt(b),
                small=_fmt(h2),
            )
    return None


def _where(input_name: str, ctx: DiagnosisContext, flat_index: int) -> str:
    shape = tuple(ctx.fd_values[input_name].shape)
    if not shape:
        return input_name
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat_index), shape)]
    return f"{input_name}{index}"


def _rounding_floor(
    ctx: DiagnosisContext, input_name: str, flat_index: int, gradient: float
) -> tuple[float, float, float]:
    """(floor, rounding part, truncation part) of the finite difference at one element."""
    eps = defaults.EPS[defaults.FD_DTYPE[ctx.dtype]]
    probe = Probe(ctx.function, ctx.fd_values, ctx.fd_v, input_name)
    x = ctx.fd_values[input_name]
    magnitude = None
    if ctx.fd_structure.get(input_name, "general") != "general":  # element i's quotient rounds like |w_i g_i|
        magnitude = diagonal.element_magnitude(probe, flat_index)
    if magnitude is None:
        magnitude = float(torch.sum((ctx.fd_v * ctx.function(**ctx.fd_values)).abs()))
    x_i = float(x.reshape(-1)[flat_index])
    if isinstance(ctx.step, float):
        h = ctx.step
    else:
        h = defaults.fd_step(ctx.dtype, ctx.scheme) * max(1.0, abs(x_i))
    rounding = eps * magnitude / h + eps * max(abs(x_i), 1e-300) / h * abs(gradient)
    if ctx.scheme == "complex_step":
        return eps * abs(gradient), eps * abs(gradient), 0.0
    index = torch.tensor([flat_index], device=x.device)
    step = torch.tensor([h], dtype=x.dtype, device=x.device)
    scheme = "central" if ctx.scheme == "richardson" else ctx.scheme
    full = float(difference_quotient(probe, scheme, step, index)[0])
    half = float(difference_quotient(probe, scheme, step / 2, index)[0])
    truncation = abs(full - half)
    return rounding + truncation, rounding, truncation


def diagnose(comparison: dict, ctx: DiagnosisContext) -> tuple[str, str]:
    """(diagnosis, one-sentence reason) for one failed comparison."""
    name, input_name = comparison["name"], comparison["input"]
    worst = comparison["worst"]
    flat = worst["flat_index"]
    where = f"{input_name}{worst['index']}" if worst["index"] else input_name
    left, right = as_number(worst["left"]), as_number(worst["right"])
    if ctx.nondeterminism:
        return "nondeterministic", ctx.nondeterminism
    if name in ("pass_2_vs_twice_pass_1", "after_clear_none_vs_pass_1"):
        return "probable_bug", (
            Message(
                "repeated passes disagree at {where} ({first} vs {second}) although the forward "
                "value repeats: the backward keeps state between calls",
                where=where,
                first=_fmt(left),
                second=_fmt(right),
            )
        )
    complex_input = ctx.fd_values[input_name].is_complex()
    if complex_input and "finite_difference" in name and not ctx.refinement.get(input_name):
        # the kink and rounding-floor tests shift a real element; a complex one is differenced part by part
        return "probable_bug", (
            Message(
                "at {where} autograd gives {autograd} but finite differences of its real and imaginary parts "
                "give {fd}, beyond the tolerance of the modulus of their difference: suspect the backward",
                where=where,
                autograd=_fmt(right),
                fd=_fmt(left),
            )
        )
    is_kink, forward, backward = (False, None, None) if complex_input else kink_evidence(ctx, input_name, flat)
    if is_kink:
        return "kink", (
            Message(
                "one-sided differences at {where} disagree (forward {forward}, backward {backward}) and "
                "do not converge as the step shrinks: the function is not differentiable there, so "
                "any single derivative value is a convention",
                where=where,
                forward=_fmt(forward),
                backward=_fmt(backward),
            )
        )
    if "finite_difference" in name and not complex_input and isinstance(left, float) and isinstance(right, float):
        crossing = crossed_discontinuity(ctx, input_name, flat, left, right)
        if crossing is not None:
            return "kink", crossing
    abs_err = worst["abs_err"] if worst["abs_err"] is not None else float("inf")
    tried = ctx.refinement.get(input_name)
    if "finite_difference" in name and tried:
        cancelled = rounding_explains(
            ctx.function, ctx.fd_values, ctx.fd_v, input_name, dtype=ctx.dtype, grads=ctx.grads,
            tolerance=ctx.fd_tolerance, worst=(flat, left, right),
        )  # fmt: skip
        if cancelled is not None:
            return "precision_limited", cancelled
        bound = (comparison.get("error_bound") or {}).get("at_worst")
        return "probable_bug", (
            Message(
                "at {where} autograd gives {autograd} but finite differences give {fd}; the default "
                "step failed {elements} element(s), so {tried}, and {still_failing} still differ "
                "beyond their error estimate (here ≈ {bound}): suspect the backward",
                where=where,
                autograd=_digits(right, left),
                fd=_digits(left, right),
                elements=tried["elements"],
                tried=tried["tried"],
                still_failing=tried["still_failing"],
                bound=_fmt(bound),
            )
        )
    if "finite_difference" in name:
        floor, rounding, truncation = _rounding_floor(ctx, input_name, flat, right)
        if abs_err <= FLOOR_MARGIN * floor:
            return "precision_limited", (
                Message(
                    "the discrepancy {abs_err} at {where} is within what a {dtype} {scheme} difference "
                    "with this step can resolve (rounding bound ≈ {rounding}, truncation ≈ {truncation}): "
                    "choose the default step, not a tighter tolerance",
                    abs_err=_fmt(abs_err),
                    where=where,
                    dtype=ctx.dtype,
                    scheme=ctx.scheme,
                    rounding=_fmt(rounding),
                    truncation=_fmt(truncation),
                )
            )
        return "probable_bug", (
            Message(
                "at {where} autograd gives {autograd} but finite differences give {fd}, far beyond "
                "the step's error floor ≈ {floor}: suspect the backward",
                where=where,
                autograd=_fmt(right),
                fd=_fmt(left),
                floor=_fmt(floor),
            )
        )
    eps = defaults.EPS[ctx.dtype]
    if abs_err <= EXACT_ULPS * eps * max(abs(left), abs(right)):
        return "precision_limited", (
            Message(
                "the discrepancy {abs_err} at {where} is within {ulps} ulps of {dtype}: "
                "rounding, not a wrong derivative",
                abs_err=_fmt(abs_err),
                where=where,
                ulps=EXACT_ULPS,
                dtype=ctx.dtype,
            )
        )
    fd = ctx.grads.get("finite_difference", {}).get(input_name)
    autograd = ctx.grads["autograd_grad"][input_name]
    if fd is not None:
        fd_i = fd.reshape(-1)[flat].item()  # a Python complex for a complex input
        ag_i = autograd.reshape(-1)[flat].item()
        tol = ctx.fd_tolerance
        fd_agrees_autograd = abs(fd_i - ag_i) <= tol["atol"] + tol["rtol"] * abs(ag_i)
        fd_agrees_hand = abs(fd_i - left) <= tol["atol"] + tol["rtol"] * abs(left)
        if fd_agrees_autograd:
            return "probable_bug", (
                Message(
                    "the hand derivation gives {hand} at {where}, but autograd gives {autograd} and "
                    "finite differences agree with autograd ({fd}): the expectation is wrong",
                    hand=_fmt(left),
                    where=where,
                    autograd=_fmt(right),
                    fd=_fmt(fd_i),
                )
            )
        if fd_agrees_hand:
            return "probable_bug", (
                Message(
                    "autograd gives {autograd} at {where}, but the hand derivation and finite differences "
                    "agree on {hand}: suspect the backward",
                    autograd=_fmt(right),
                    where=where,
                    hand=_fmt(left),
                )
            )
        return "probable_bug", (
            Message(
                "at {where} the hand derivation ({hand}), autograd ({autograd}) and finite "
                "differences ({fd}) all disagree",
                where=where,
                hand=_fmt(left),
                autograd=_fmt(right),
                fd=_fmt(fd_i),
            )
        )
    return "probable_bug", Message(
        "the hand derivation gives {hand} at {where} but autograd gives {autograd}",
        hand=_fmt(left),
        where=where,
        autograd=_fmt(right),
    )
