"""The step sweep's series, evaluated in the same batched call as the finite differences they illustrate.

A passing check draws its step sweep at the first input's first element (core/check/engine.py).
That is known before the finite differences run, so the sweep's shifted copies ride along
in the vmap call that evaluates that input's shifted copies: the float64 copies are appended to
the same stack, and the float32 copies, which need the function evaluated in float32, form a
second stack padded with unshifted copies to the same length. One call then serves both, instead
of a second call whose fixed cost (functorch's set-up, a trace of the function per dtype) was
most of the sweep's.

Nothing changes in what is recorded about the sweep: each series' copies and quotients are built
as core/check/fd/sweep.py builds them, and the batch guard of the finite differences checks
their last copy, as it does alone; where it passes, the sweep's copies are taken as faithful, as
they were when the sweep reused that guard's verdict. A float32 evaluation that raises is tried
once more with every float64 operand cast, as the sweep does alone. Where the shared call still
cannot be made (a large step leaves the function's domain) or the guard refuses, the finite
differences are evaluated on their own as before and the sweep draws its series itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from ...errors import exception_line
from ..record import spec as defaults
from .finite_difference import Probe, difference_quotient, quotient, tiled
from .steps import STEP_SCALE_CAP, signed_steps

# -------------------- sweep riders

#: Shifted copies of the finite differences above which no series rides along (the float32 stack is padded to
#: their number, so a large input would pay for as many float32 evaluations as it has copies).
RIDE_MAX_COPIES = 512


@dataclass
class Rider:
    """One dtype's series of the step sweep at one element, waiting for the call that evaluates it."""

    dtype: str  #: the series' dtype name ("float32", "float64")
    probe: object  #: an evaluations.Probe of the function in that dtype
    steps: list  #: the absolute steps, one per decade
    flat_index: int
    estimates: object = None  #: the series' difference quotients, once evaluated
    promoted: bool = False  #: the function returned a wider dtype (it holds tensors of its own in float64)
    note: str = ""  #: how the series was evaluated, where that differs from a plain evaluation


@dataclass
class Riding:
    """The riders of one sweep, handed to the finite differences of the input they sweep (a Probe's `riders`)."""

    riders: list

    def outputs(self, probe, stack, evaluate_alone):
        """The function's outputs on the probe's `stack`, the riders' estimates filled by the same call."""
        return outputs_with_riders(probe, stack, self.riders, evaluate_alone)


def sweep_riders(function, values: dict, v, name: str, flat_index: int, *, dtypes=("float32", "float64")) -> list:
    """The riders of a central-difference sweep of input `name` at `flat_index` (core/check/fd/sweep.py DECADES);
    none where the input's central differences alone would exceed RIDE_MAX_COPIES (the riders' tensors would only
    be held, in the way of the allocator reusing a large input's chunks)."""
    if 2 * values[name].numel() > RIDE_MAX_COPIES:
        return []

    from .finite_difference import Probe

    pass

    scale = max(1.0, abs(float(values[name].reshape(-1)[flat_index])))
    riders = []
    for dtype in dtypes:
        target = getattr(torch, defaults.FD_DTYPE[dtype])
        probe = Probe(function, {k: t.detach().to(target) for k, t in values.items()}, v.detach().to(target), name)
        riders.append(Rider(dtype, probe, [10.0**-k * scale for k in DECADES], flat_index))
    return riders


def found(riders: list, name: str, flat_index: int):
    """step_sweep's `together` for a sweep of `name` at `flat_index`: ({dtype: (estimates, note)}, "", promoted
    dtypes), or None where the riders were not evaluated (or are for another element)."""
    if (
        not riders
        or any(r.probe.name != name or r.flat_index != flat_index for r in riders)
        or all(r.estimates is None and not r.promoted for r in riders)
    ):
        return None
    kept = {
        r.dtype: (r.estimates.detach().to("cpu").double().tolist(), r.note) for r in riders if r.estimates is not None
    }
    return kept, "", {r.dtype for r in riders if r.promoted}


def outputs_with_riders(probe, stack, riders: list, evaluate_alone):
    """The function's outputs on `stack` (the probe's shifted copies), with each rider's estimates filled from the
    same vmap call; `evaluate_alone(stack)` gives them as before where that call cannot be made."""
    from .finite_difference import quotient, signed_steps, tiled

    count = stack.shape[0]
    shared = {rider.probe.component().dtype for rider in riders}
    if not probe.batched or count > RIDE_MAX_COPIES or stack.dtype not in shared:
        return evaluate_alone(stack)  # (a complex step's copies are complex: no series shares their stack)
    built = []
    for rider in riders:
        x = rider.probe.values[rider.probe.name]
        h = torch.tensor(rider.steps, dtype=x.dtype, device=x.device)
        index = torch.full((len(rider.steps),), rider.flat_index, device=x.device)
        signed = signed_steps(rider.probe, "central", h, index)
        built.append((rider, signed, rider.probe.shifted(signed.reshape(-1), indices=tiled(index, signed.shape[0]))))
    same = [b for b in built if b[2].dtype == stack.dtype]
    other = [b for b in built if b[2].dtype != stack.dtype]
    joint = torch.cat([stack] + [copies for _, _, copies in same])
    rows = joint.shape[0]
    padded = [
        torch.cat(
            [
                copies,
                rider.probe.values[rider.probe.name].unsqueeze(0).expand(rows - copies.shape[0], *copies.shape[1:]),
            ]
        )
        for rider, _, copies in other
    ]
    outs, failed = _evaluate(probe, joint, other, padded, narrowed=False)
    if failed == "narrow":  # a narrower evaluation raised: retried with every operand cast
        outs, failed = _evaluate(probe, joint, other, padded, narrowed=True)
    # the guard checks the last copy of the finite differences, as it does without riders
    if outs is None or (probe.guard and not probe.batch_agrees(stack, outs[-1][:count])):
        return evaluate_alone(stack)  # each evaluated on its own (a refusal is recorded with its reason)
    main = outs[-1]
    probe.stats["forward_evaluations"] += count
    offset = count
    for rider, signed, copies in same:
        rider.estimates = quotient(rider.probe, "central", main[offset : offset + copies.shape[0]], signed, None)[0]
        offset += copies.shape[0]
    for (rider, signed, copies), out in zip(other, outs[:-1]):
        estimates = quotient(rider.probe, "central", out[: copies.shape[0]], signed, None)[0]
        if estimates.dtype == copies.dtype:
            rider.estimates = estimates
        else:  # the function promoted the series to its own tensors' float64: the sweep evaluates it cast
            rider.promoted = True
    return main[:count]


def _evaluate(probe, joint, other: list, padded: list, *, narrowed: bool):
    """((each narrower rider's outputs..., the probe's outputs on `joint`) from one vmap call, None), or (None, which
    part raised: "narrow" or "main"); `narrowed` evaluates the narrower riders with every float64 operand cast (the
    function holds its own tensors)."""
    pass

    functions = [downcast(rider.probe.function) if narrowed else rider.probe.function for rider, _, _ in other]

    part = ["narrow"]

    def together(main, *extra):
        # the narrower evaluations first: they are the ones that may raise, before the main one has run
        narrow = tuple(f(**rider.probe.arguments(x)) for f, (rider, _, _), x in zip(functions, other, extra))
        part[0] = "main"
        return narrow + (probe.output(main),)

    try:
        outs = torch.func.vmap(together)(joint, *padded)
    except Exception:  # a float32 evaluation, or a large step the function refuses
        return None, part[0]
    for rider, _, _ in other:
        rider.note = CAST_NOTE.format(dtype=defaults.FD_DTYPE[rider.dtype]) if narrowed else ""
    return outs, None


# -------------------- step sweep
# The step sweep: finite-difference error against step, decade by decade, per dtype.
#
# It shows why a step cannot be chosen without looking at the dtype: the error falls with the
# step (truncation, ~h^2 for central differences) until rounding (~eps/h) takes over, so the
# best step sits near eps^(1/3) with an error near eps^(2/3). The reference is the float64
# autograd derivative at the same element. `sweep_svg.render` draws the data.
#
# The sweep is a side chart: `guarded_step_sweep` turns any failure into a note in the record,
# never a failed check. Its causes of failure are handled where they arise:
#
# - a function that holds float64 tensors of its own (a weight, saved statistics) cannot be
#   evaluated in float32 by casting its inputs alone; such a series is evaluated under a
#   torch-function mode that casts every float64 operand of every call to float32;
# - a large step can leave the function's domain (a probability shifted past 1, a matrix no
#   longer positive definite); the steps whose evaluation raises are left out of the series and
#   listed with the reason;
# - the reference gradient is autograd's own (passed by the engine), or computed with
#   `allow_unused` so that an input the output does not reach has a zero gradient.

#: Decades of step swept: 10^0 down to 10^-16.
DECADES = tuple(range(0, 17))
#: The note of a narrower series evaluated with the function's own float64 tensors cast at every call.
CAST_NOTE = "evaluated with every float64 operand cast to {dtype} (the function holds its own tensors)"
#: Why a check with a complex input or output has no sweep: it casts the inputs to float32 and float64.
COMPLEX_NOTE = (
    "the step sweep is not drawn for complex values: it evaluates each real dtype in turn, and a "
    "complex input or output has no real dtype to cast to; the check does not depend on it"
)


def guarded_step_sweep(function, values: dict, v, name: str, flat_index: int = 0, **options) -> dict:
    """`step_sweep`, or a record of why it could not be drawn (the check's verdict never depends on it)."""
    if v.is_complex() or values[name].is_complex():
        return {
            "input": name,
            "flat_index": flat_index,
            "scheme": options.get("scheme", "central"),
            "series": [],
            "note": COMPLEX_NOTE,
        }
    try:
        return step_sweep(function, values, v, name, flat_index, **options)
    except Exception as exc:  # a side chart must never break a check
        message = exception_line(exc)
        return {
            "input": name,
            "flat_index": flat_index,
            "scheme": options.get("scheme", "central"),
            "series": [],
            "note": f"the step sweep could not be drawn ({message}); the check does not depend on it",
        }


def step_sweep(
    function,
    values: dict,
    v,
    name: str,
    flat_index: int = 0,
    *,
    dtypes=("float32", "float64"),
    scheme: str = "central",
    chosen: dict | None = None,
    reference=None,
    batching: str | None = None,
    together=None,
) -> dict:
    """Error of `scheme` at one element for each decade of step, for each dtype.

    `reference` is autograd's float64 gradient of the input (computed here when absent);
    The rounding floor's step scale is capped as the check's is (STEP_SCALE_CAP). `batching` is what
    the check's finite differences found about batching this input: "" faithful (their batch
    guard passed), a reason when it was refused, None when not tried (the sweep's own batch
    then runs the same guard, core/check/fd/finite_difference.py). `together` is what `_together` would give,
    already evaluated with the check's finite differences (core/check/fd/sweep.py `found`).
    """
    if reference is None:
        reference = _reference(function, values, v, name)
    reference = float(reference.reshape(-1)[flat_index])
    x_i = float(values[name].reshape(-1)[flat_index])
    scale = max(1.0, abs(x_i))
    floor_scale = min(scale, STEP_SCALE_CAP)
    relative = abs(reference) > 0
    series, notes = [], []
    together, refused, promoted = (
        together
        if together is not None and scheme == "central"
        else _together(function, values, v, name, flat_index, dtypes, scheme, scale, batching)
    )
    for dtype in dtypes:
        if dtype in together:
            steps, (estimates, note) = [10.0**-k * scale for k in DECADES], together[dtype]
        else:
            steps, estimates, note = _estimates(
                function,
                values,
                v,
                name,
                flat_index,
                dtype,
                scheme,
                scale,
                refused=refused,
                guard=batching is None and not refused,
                promotes=dtype in promoted,
            )
        if note:
            notes.append(f"{dtype}: {note}")
        if not steps:
            continue
        errors = [abs(e - reference) / (abs(reference) if relative else 1.0) for e in estimates]
        best = min(range(len(steps)), key=lambda k: errors[k] if errors[k] == errors[k] else float("inf"))
        eps = defaults.EPS[defaults.FD_DTYPE[dtype]]
        series.append(
            {
                "dtype": dtype,
                "steps": steps,
                "errors": errors,
                "chosen_step": (chosen or {}).get(dtype, defaults.fd_step(dtype, scheme) * floor_scale),
                "floor_step": defaults.fd_step(dtype, scheme) * floor_scale,
                "floor_error": defaults.fd_floor(dtype, scheme),
                "best_step": steps[best],
                "best_error": errors[best],
                "eps": eps,
            }
        )
    result = {
        "input": name,
        "flat_index": flat_index,
        "x": x_i,
        "scheme": scheme,
        "reference": reference,
        "error_kind": "relative" if relative else "absolute",
        "series": series,
    }
    if refused:
        notes.insert(0, f"each step evaluated on its own: {refused}")
    if notes:
        result["note"] = "; ".join(notes)
    return result


def _together(function, values, v, name, flat_index, dtypes, scheme, scale, batching) -> tuple[dict, str, set]:
    """({dtype: (estimates as floats, note)} of the series one batched evaluation gave, why batching was
    refused or "", the dtypes whose series came back promoted to float64 by the function's own tensors).

    Every series' shifted copies go through one vmap call (`quotients_together` below), each
    stacked and evaluated as a series alone would be, so the values are those of separate
    evaluations. When that call fails without a refusal, a narrower series
    has usually met a float64 tensor the function holds (float32 @ float64 raises): the call is
    made once more with the narrower series evaluated with every operand cast (`downcast`).
    A series left out (promoted to float64, or the batch could not run) is evaluated on its own
    by `_estimates`.
    """
    if batching:  # the check's own batch guard refused this input
        return {}, batching, set()
    guard = batching is None  # "": the check's own guard found batching this input faithful
    found = _batched_series(function, values, v, name, flat_index, dtypes, scheme, scale, cast=False, guard=guard)
    if found[0] is None and not found[1]:
        found = _batched_series(function, values, v, name, flat_index, dtypes, scheme, scale, cast=True, guard=guard)
    return ({}, found[1], set()) if found[0] is None else found


def _batched_series(function, values, v, name, flat_index, dtypes, scheme, scale, *, cast: bool, guard: bool):
    """`_together`'s one vmap call; with `cast`, the series narrower than float64 are evaluated under `downcast`;
    with `guard`, the batch is first checked against a separate evaluation (evaluations.Probe)."""
    targets = [getattr(torch, defaults.FD_DTYPE[dtype]) for dtype in dtypes]
    guarded = torch.float64 if torch.float64 in targets else targets[0]  # at 1e-9, float32's rounding would refuse
    narrowed = {dtype for dtype, target in zip(dtypes, targets) if cast and target != torch.float64}
    probes = [
        Probe(
            downcast(function) if dtype in narrowed else function,
            {k: t.detach().to(target) for k, t in values.items()},
            v.detach().to(target),
            name,
            guard=guard and target == guarded,
        )
        for dtype, target in zip(dtypes, targets)
    ]
    device = values[name].device
    steps = [10.0**-k * scale for k in DECADES]
    index = torch.tensor([flat_index] * len(steps), device=device)
    found = quotients_together(
        probes, scheme, [torch.tensor(steps, dtype=t, device=device) for t in targets], [index] * len(probes)
    )
    if found is None:
        return None, next((p.refused for p in probes if p.refused), ""), set()
    kept = {
        dtype: (
            estimate.detach().to("cpu", torch.float64).tolist(),
            CAST_NOTE.format(dtype=defaults.FD_DTYPE[dtype]) if dtype in narrowed else "",
        )
        for dtype, estimate, target in zip(dtypes, found, targets)
        if estimate.dtype == target
    }
    return kept, "", {dtype for dtype, estimate, target in zip(dtypes, found, targets) if estimate.dtype != target}


def _estimates(
    function,
    values,
    v,
    name,
    flat_index,
    dtype,
    scheme,
    scale,
    *,
    refused: str = "",
    guard: bool = False,
    promotes: bool = False,
) -> tuple[list, list, str]:
    """(steps kept, their estimates as floats, a note on what was left out or how it was evaluated).

    With `refused`, each shifted copy is evaluated on its own (no batch); `guard` checks a batch first.
    `promotes` says the function is already known to promote this dtype to its own tensors' float64
    (a batched evaluation showed it), so the series goes straight to the cast-at-every-call evaluation.
    """
    target = getattr(torch, defaults.FD_DTYPE[dtype])
    cast = {k: t.detach().to(target) for k, t in values.items()}
    cast_v = v.detach().to(target)
    steps = [10.0**-k * scale for k in DECADES]
    device = cast[name].device
    index = torch.tensor([flat_index] * len(steps), device=device)
    h = torch.tensor(steps, dtype=target, device=device)
    note = ""
    probe = Probe(function, cast, cast_v, name, batched=not refused, guard=guard and target == torch.float64)
    needs_cast = promotes
    if not promotes:
        try:
            found = difference_quotient(probe, scheme, h, index)
            needs_cast = found.dtype != target  # a float64 result: the function promoted to its own tensors' dtype
            if not needs_cast:
                return steps, found.detach().to("cpu", torch.float64).tolist(), note
        except Exception:  # it cannot run on cast inputs alone, or some step leaves the domain
            needs_cast = not _runs_in(probe, cast[name], target)
    if needs_cast:
        # the function holds tensors of another dtype: cast them at every call instead
        probe = Probe(downcast(function), cast, cast_v, name, batched=not refused)
        note = CAST_NOTE.format(dtype=defaults.FD_DTYPE[dtype])
        try:
            found = difference_quotient(probe, scheme, h, index)
            return steps, found.detach().to("cpu", torch.float64).tolist(), note
        except Exception:  # some step leaves the domain: evaluate step by step and keep what runs
            pass
    kept, estimates, refused = [], [], []
    for step in steps:
        try:
            one = difference_quotient(
                probe,
                scheme,
                torch.tensor([step], dtype=target, device=device),
                torch.tensor([flat_index], device=device),
            )
            kept.append(step)
            estimates.append(float(one[0]))
        except Exception as exc:
            refused.append((step, " ".join(str(exc).split())[:120]))
    if refused:
        left_out = ", ".join(f"{s:.0e}" for s, _ in refused)
        note = (note + "; " if note else "") + f"steps {left_out} left out: the function raised there ({refused[0][1]})"
    return kept, estimates, note


def _runs_in(probe: Probe, x, target) -> bool:
    """Whether the function runs at x itself with a result in `target` (then only some steps failed)."""
    try:
        with torch.no_grad():
            return probe.output(x).dtype == target
    except Exception:  # it cannot run on these inputs at all
        return False


@cache
def _downcast_mode_class():
    """A torch-function mode casting every float64 (complex128) operand to float32 (complex64); made on first use.

    It works at the level of torch functions, before composite operations check their operands'
    dtypes (prelu refuses mixed dtypes before any aten operation would be dispatched).
    """
    from torch.overrides import TorchFunctionMode

    narrower = {torch.float64: torch.float32, torch.complex128: torch.complex64}

    def cast(value):
        if isinstance(value, torch.Tensor) and value.dtype in narrower:
            return value.to(narrower[value.dtype])
        if isinstance(value, (list, tuple)):
            return type(value)(cast(item) for item in value)
        return value

    class Downcast(TorchFunctionMode):
        """Evaluates every torch function with its float64 operands in float32."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {k: cast(val) for k, val in (kwargs or {}).items()}
            if kwargs.get("dtype") in narrower:
                kwargs["dtype"] = narrower[kwargs["dtype"]]
            return func(*cast(tuple(args)), **kwargs)

    return Downcast


def downcast(function):
    """`function` evaluated under the downcast mode (float32 is the only narrower dtype swept)."""

    def narrowed(**inputs):
        with torch.no_grad(), _downcast_mode_class()():
            return function(**inputs)

    return narrowed


def _reference(function, values, v, name):
    """autograd's float64 gradient of phi = sum(v * f) with respect to input `name` (zeros if unused)."""
    leaves = {k: t.detach().to(torch.float64) for k, t in values.items()}
    leaves[name] = leaves[name].clone().requires_grad_(True)
    output = function(**leaves)
    (gradient,) = torch.autograd.grad(torch.sum(v.detach().to(torch.float64) * output), leaves[name], allow_unused=True)
    return torch.zeros_like(leaves[name]) if gradient is None else gradient


def quotients_together(probes: list, scheme: str, steps: list, indices: list):
    """Each probe's `difference_quotient(probe, scheme, h, index)` from one vmap call, copies stacked as alone (the
    same values); None where a probe does not batch, vmap or a batch guard refuses, or copies are too few or many."""
    built = [
        (
            signed,
            probe.shifted(
                signed.reshape(-1),
                imaginary=scheme == "complex_step" or probe.imaginary_shift,
                indices=tiled(index, signed.shape[0]),
            ),
        )
        for probe, h, index in zip(probes, steps, indices)
        for signed in [signed_steps(probe, scheme, h, index)]
    ]
    if (
        not all(p.batched and len(i) <= p.rows_per_chunk(s.shape[0]) for p, i, (s, _) in zip(probes, indices, built))
        or len({stack.shape[0] for _, stack in built}) != 1
        or built[0][1].shape[0] < defaults.LOOP_BELOW
    ):
        return None
    try:
        outs = torch.func.vmap(lambda *xs: tuple(p.output(x) for p, x in zip(probes, xs)))(*(s for _, s in built))
    except Exception:  # a callable vmap cannot trace: the caller's separate path says why
        return None
    found = []
    for probe, (signed, stack), out in zip(probes, built, outs):
        probe.stats["forward_evaluations"] += stack.shape[0]
        if probe.guard and not probe.batch_agrees(stack, out):
            return None
        found.append(
            quotient(
                probe, scheme, out, signed, probe.output(probe.values[probe.name]) if scheme == "forward" else None
            )[0]
        )
    return found
