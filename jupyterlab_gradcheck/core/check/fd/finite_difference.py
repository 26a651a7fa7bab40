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

Complex values follow PyTorch's convention (core/check/record/complex_values.py): phi is the real
sum(Re(conj(v) f)), and a complex input's element is differenced twice, its real part shifted
and then its imaginary part, giving d_re + i d_im. An elementwise chain takes the diagonal path
as a real one does (every element's part shifted at once); otherwise those inputs (and a complex
output) take the general path: the coloured path is for real values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ...errors import SpecError
from ..record import complex_values, defaults
from . import adaptive_step, coloured_path, diagonal, error_bound, evaluations, time_budget
from .evaluations import Probe
from .shifts import STEP_SCALE_CAP, signed_steps, step_vector

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
    afterwards (core/check/fd/error_bound.py says how it is counted).
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
        rows = min(
            rows, max(evaluations.LOOP_BELOW, -(-total // BUDGET_PARTS))
        )  # a first part timed before the rest runs
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
            time_budget.check_budget(probe, total, stop, time.perf_counter() - started)
        if rounding is not None:
            probe.rounding[start:stop] = rounding
    return estimates


def _chunk_estimates(probe: Probe, scheme: str, steps, indices, start: int, stop: int, base, *, ride: bool = False):
    """(estimates, rounding or None) for elements start..stop-1 (of `indices` when given); with `ride`, the
    probe's riders are evaluated in the same call (core/check/fd/sweep_riders.py)."""
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
    per-element rounding bound as well. `chains` (core/check/autograd/chain_paths.py) names the inputs
    the graph shows are no elementwise chain, so that no evaluation is spent looking for one; `riders`
    gives step-sweep series to evaluate with an input's copies (core/check/fd/sweep_riders.py). With
    `budget_s`, an input whose general path would take longer raises `time_budget.ExhaustiveOverBudget`
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
    d_re + i d_im, and the record states the convention (core/check/record/complex_values.py).
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
