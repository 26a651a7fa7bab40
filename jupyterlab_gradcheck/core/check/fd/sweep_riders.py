"""The step sweep's series, evaluated in the same batched call as the finite differences they illustrate.

A passing check draws its step sweep at the first input's first element (core/check/engine.py).
That is known before the finite differences run, so the sweep's shifted copies ride along
in the vmap call that evaluates that input's shifted copies: the float64 copies are appended to
the same stack, and the float32 copies, which need the function evaluated in float32, form a
second stack padded with unshifted copies to the same length. One call then serves both, instead
of a second call whose fixed cost (functorch's set-up, a trace of the function per dtype) was
most of the sweep's.

Nothing changes in what is recorded about the sweep: each series' copies and quotients are built
as core/check/fd/step_sweep.py builds them, and the batch guard of the finite differences checks
their last copy, as it does alone; where it passes, the sweep's copies are taken as faithful, as
they were when the sweep reused that guard's verdict. A float32 evaluation that raises is tried
once more with every float64 operand cast, as the sweep does alone. Where the shared call still
cannot be made (a large step leaves the function's domain) or the guard refuses, the finite
differences are evaluated on their own as before and the sweep draws its series itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..record import defaults

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
    """The riders of a central-difference sweep of input `name` at `flat_index` (core/check/fd/step_sweep.py DECADES);
    none where the input's central differences alone would exceed RIDE_MAX_COPIES (the riders' tensors would only
    be held, in the way of the allocator reusing a large input's chunks)."""
    if 2 * values[name].numel() > RIDE_MAX_COPIES:
        return []

    from .evaluations import Probe
    from .step_sweep import DECADES

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
    from .step_sweep import CAST_NOTE, downcast

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
