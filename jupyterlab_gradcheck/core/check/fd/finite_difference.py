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
from dataclasses import dataclass, field

import torch

from ...errors import SpecError
from ..compare import complex_tensors
from ..record import complex_values, defaults
from . import adaptive_step, coloured_path, diagonal, error_bound, shifts, time_budget
from .shifts import STEP_SCALE_CAP, signed_steps, step_vector

#: Element evaluations (elements x the larger of input and output numel) from which the coloured path is tried:
#: below, the general path's 2n batched copies cost less than learning the pattern (about 1.5 ms; the general path
#: of a 1-D banded loss crosses it between 128 and 256 elements).
COLOURED_FROM_WORK = 1 << 15

#: Elements (stacked copies x the larger of input and output numel) per vmap call: this
#: bounds the memory a chunk needs, and so the peak, independently of n.
CHUNK_ELEMENTS = 1 << 20
#: Below this many stacked copies a plain loop is cheaper than vmap's tracing (core/check/record/defaults.py).
LOOP_BELOW = defaults.LOOP_BELOW
#: From this many elements a diagonal chain is worth recognising (one element gains nothing).
DIAGONAL_FROM = 2
#: With a time budget (the engine's mode auto), elements from which the general path is timed on a
#: first part of 1/BUDGET_PARTS of them before the rest runs, and the whole predicted from it.
BUDGET_FROM = 128
BUDGET_PARTS = 8
#: ... and only when its work (elements x the larger of input and output numel) reaches this many
#: element evaluations: below it the general path is quick, and splitting it would only add calls.
BUDGET_WORK_FROM = 1 << 22
#: Relative agreement required between a batched and a separate evaluation (core/check/record/defaults.py).
BATCH_AGREEMENT = defaults.BATCH_AGREEMENT


@dataclass
class Probe:
    """phi(x) = sum(v * f(inputs with `name` replaced by x)), evaluable on batches of x."""

    function: object
    values: dict  #: detached inputs, already in the finite-difference dtype
    v: object  #: grad_output, in the finite-difference dtype
    name: str
    batched: bool = True
    #: Elements of the largest tensor one evaluation builds; bounds a chunk's memory.
    work: int = 1
    #: Whether to look for a diagonal (elementwise) chain before the general path.
    structured: bool = True
    #: False where the autograd graph already shows the recorder would refuse x (core/check/autograd/chain_paths.py).
    chain_possible: bool = True
    #: Which path the estimates came from: "general", the chain core/check/fd/diagonal.py observed, or
    #: "coloured" (a learned sparse pattern, core/check/fd/coloured_path.py).
    structure: str = "general"
    #: Why no structured path applied to this input ("" while one does or none was tried).
    structure_refused: str = ""
    #: Seconds the general path may take for this input before projected.ExhaustiveOverBudget (None: no limit).
    budget_s: float | None = None
    #: The coloured path's plan once learned (core/check/fd/coloured_path.py); False when it does not apply
    #: (the input is too small for it to pay: COLOURED_FROM_WORK, or complex).
    colouring: object = None
    stats: dict = field(default_factory=lambda: {"forward_evaluations": 0})
    #: Check the first batched evaluation against a separate evaluation of one copy.
    guard: bool = False
    #: Why the batched path was refused for this input ("" while it is used or never tried).
    refused: str = ""
    #: Whether difference_quotient also fills `rounding` (core/check/fd/error_bound.py).
    track_rounding: bool = False
    #: Per element of the last difference_quotient: the rounding bound of its quotient.
    rounding: object = None
    #: For a complex input: shift the imaginary part of each element instead of the real part.
    imaginary_shift: bool = False
    #: Step-sweep series to evaluate in the same call as this input's copies (a core/check/fd/sweep_riders.py Riding).
    riders: object = None
    #: Flat element -> the outputs it moved at a wide step (core/check/fd/refinement.py), and the elements of
    #: the rows being differenced, so that their bound counts those outputs where they came out equal.
    touched: dict | None = None
    rows_of: object = None
    _mapped: object = field(default=None, init=False, repr=False)

    def arguments(self, x) -> dict:
        """The keyword arguments of f with input `name` replaced by x (any dtype, real or complex)."""
        others = {
            k: (t.to(x.dtype) if x.is_complex() and not t.is_complex() else t)
            for k, t in self.values.items()
            if k != self.name
        }
        return {**others, self.name: x}

    def output(self, x):
        """f with input `name` replaced by x (any dtype, real or complex)."""
        return self.function(**self.arguments(x))

    def outputs(self, xs):
        """f for each x stacked along dimension 0, stacked the same way."""
        count = xs.shape[0]
        self.stats["forward_evaluations"] += count
        if self.batched and count >= LOOP_BELOW:
            try:
                if self._mapped is None:
                    self._mapped = torch.func.vmap(self.output)
                out = self._mapped(xs)
            except Exception:  # a callable vmap cannot trace: fall back, and say so
                self.batched = False
            else:
                if not self.guard or self.batch_agrees(xs, out):
                    return out
        # Each copy is cloned into storage of its own: a row of the stack is a view at an offset,
        # and a function that reads storage directly (as_strided with a storage_offset) would
        # read the first, unshifted row instead of its own.
        return torch.stack([self.output(x.clone()) for x in xs])

    def batch_agrees(self, xs, out) -> bool:
        """Whether batching is faithful for this function; else refuse the batched path, saying why.

        The batch's last copy is evaluated once more on its own, its values placed after other
        values in a larger buffer (a non-zero storage offset). A function that reads storage
        directly (as_strided with a storage_offset) then reads the other values and disagrees
        with the batch, and so does a batching rule that is wrong: either way each copy is
        evaluated on its own instead.
        """
        self.guard = False  # once per input: the first batch shows whether batching is faithful
        copy = xs[-1]
        buffer = torch.cat([copy.reshape(-1) + 1, copy.reshape(-1)])  # other values first
        single = self.output(buffer[copy.numel() :].view(copy.shape))
        self.stats["batch_check_evaluations"] = self.stats.get("batch_check_evaluations", 0) + 1
        if out[-1].dtype == single.dtype and torch.equal(out[-1], single):
            return True  # the same values (and no nan): the agreement below holds without computing it
        # the largest finite magnitude (a copy may hold nan or inf, which must then match exactly)
        scale = float(single.abs().nan_to_num(nan=0.0, posinf=0.0).max()) if single.numel() else 0.0
        if out[-1].shape == single.shape and torch.allclose(
            out[-1], single, rtol=BATCH_AGREEMENT, atol=BATCH_AGREEMENT * scale, equal_nan=True
        ):
            return True
        self.batched = False
        self.refused = (
            "a separate evaluation of one copy, its input at another storage offset, differed from the "
            "batched one (the function reads its input's storage directly, as as_strided does, or "
            "cannot be batched faithfully): every copy is evaluated on storage of its own"
        )
        return False

    def component(self):
        """The real values this probe shifts: the input, or the part of a complex input it shifts."""
        x = self.values[self.name]
        if not x.is_complex():
            return x
        return x.imag if self.imaginary_shift else x.real

    def contract(self, outputs):
        """sum(v * output) for each output stacked along dimension 0; sum(Re(conj(v) * output)) for a
        complex grad_output, the real loss of a complex output (core/check/record/complex_values.py)."""
        if self.v.is_complex():
            return complex_tensors.contract_real(outputs, self.v)
        v = self.v.to(outputs.dtype) if outputs.is_complex() else self.v
        # A product and a row sum, not a matrix-vector product: BLAS picks its gemv kernel by the
        # number of rows, so a row's rounding would depend on the chunk it landed in.
        return (outputs.reshape(outputs.shape[0], -1) * v.reshape(-1)).sum(1)

    def phi_batch(self, xs):
        """phi for each x stacked along dimension 0."""
        return self.contract(self.outputs(xs))

    def rows_per_chunk(self, copies: int) -> int:
        """Input elements whose `copies` shifted copies fit in one chunk."""
        width = max(self.values[self.name].numel(), self.v.numel(), self.work, 1)
        return max(1, CHUNK_ELEMENTS // (copies * width))

    def shifted(self, steps, *, imaginary: bool = False, indices=None):
        """Copies of x, copy k shifted by steps[k] at flat element indices[k] (core/check/fd/shifts.py)."""
        return shifts.shifted(self.values[self.name], steps, imaginary=imaginary, indices=indices)

    def shifted_range(self, start: int, stop: int, steps, *, imaginary: bool = False):
        """Copies of x for flat elements start..stop-1, one block per row of `steps` (core/check/fd/shifts.py)."""
        return shifts.shifted_range(self.values[self.name], start, stop, steps, imaginary=imaginary)


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
        rows = min(rows, max(LOOP_BELOW, -(-total // BUDGET_PARTS)))  # a first part timed before the rest runs
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


def fd_gradients(
    function,
    values: dict,
    v,
    *,
    dtype: str,
    scheme: str,
    step,
    work_elements: int = 1,
    structured: bool = True,
    rounding: dict | None = None,
    budget_s: float | None = None,
    chains: dict | None = None,
    riders: dict | None = None,
) -> tuple[dict, dict]:
    """Finite-difference gradient per input (in the values' dtype) and what was done.

    A `rounding` dict is filled with each input's per-element
    rounding bound (flat tensors). `structured=False` forces the general path (one shifted
    copy per element) even where the function is an elementwise chain; the benchmarks use it
    to show both costs. `chains` (core/check/autograd/chain_paths.py) names the inputs the graph shows are no
    elementwise chain, so that no evaluation is spent looking for one; `riders` gives step-sweep series
    to evaluate with an input's copies (core/check/fd/sweep_riders.py). With `budget_s`, an input whose
    general path would take longer raises `projected.ExhaustiveOverBudget` after its first chunk (the
    engine's mode auto then projects).
    A complex input is differenced along its real and then its imaginary parts, combined as
    d_re + i d_im, and the record states the convention (core/check/record/complex_values.py).
    """
    complex_seen = v.is_complex() or any(x.is_complex() for x in values.values())
    if complex_seen and scheme == "complex_step":
        raise SpecError(
            "finite_difference.scheme complex_step needs real inputs and a real output (use central or richardson)",
            field="finite_difference.scheme",
        )
    grads, info = {}, {"scheme": scheme, "fd_dtype": defaults.FD_DTYPE[dtype], "mode": "exhaustive", "inputs": {}}
    options = dict(
        dtype=dtype,
        scheme=scheme,
        step=step,
        work_elements=work_elements,
        structured=structured,
        track=rounding is not None,
        budget_s=None if complex_seen else budget_s,
    )
    for name, x in values.items():
        parts = [
            _estimate(
                function,
                values,
                v,
                name,
                imaginary,
                chain=(chains or {}).get(name, True),
                riders=None if imaginary else (riders or {}).get(name),
                **options,
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
    return grads, info


#: Why a check with a complex input or output that is no elementwise chain takes the general path.
COMPLEX_GENERAL = (
    "complex values: no elementwise chain was observed, and the coloured path is for real inputs "
    "and outputs, so every element is shifted on its own"
)


def _estimate(
    function,
    values: dict,
    v,
    name: str,
    imaginary: bool,
    *,
    dtype: str,
    scheme: str,
    step,
    work_elements: int,
    structured: bool,
    track: bool,
    budget_s,
    chain: bool = True,
    riders=None,
):
    """(flat estimates, step recorded, step kind, adaptive telemetry or None, probe) of one input, or of one
    part of a complex input (`imaginary`: its imaginary part shifted)."""
    x = values[name]
    probe = Probe(
        function,
        values,
        v,
        name,
        work=work_elements,
        structured=structured,
        guard=True,
        track_rounding=track,
        budget_s=budget_s,
        imaginary_shift=imaginary,
        chain_possible=chain,
        riders=riders,
    )
    if x.numel() * max(x.numel(), v.numel(), work_elements) < COLOURED_FROM_WORK:
        probe.colouring = False
    if x.is_complex() or v.is_complex():
        probe.colouring, probe.structure_refused = False, COMPLEX_GENERAL
    if step == "adaptive":
        flat, used, telemetry = adaptive_step.adaptive(probe, scheme, dtype, difference_quotient)
        return flat, used, "adaptive", telemetry, probe
    h = step_vector(probe, step, dtype, scheme)
    flat = difference_quotient(probe, scheme, h, exact=True)
    used = defaults.fd_step(dtype, scheme) if step is None else float(step)
    kind = "fixed" if step is not None else f"relative to min(max(1, |x|), {STEP_SCALE_CAP:g}), the step taken exact"
    return flat, used, kind, None, probe
