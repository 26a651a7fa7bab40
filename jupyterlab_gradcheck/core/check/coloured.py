"""Finite differences along column colours of a learned sparse Jacobian: a few evaluations for n elements.

core/check/sparsity.py learns which input elements each element of the body depends on (the
function's output, or for a scalar loss the vector entering its final sum or mean);
core/check/colouring.py groups the columns that share no row. All columns of one colour are
shifted at once, each by its own step, and the body evaluated at the shifted points. Row j of
that difference moved because of the one column of this colour in its pattern, so its share
w_j (g_j(x+) - g_j(x-)) belongs to that column's quotient alone: every element is estimated,
from (colours x shifts) evaluations instead of n x shifts, and compared like any other.

Each shifted evaluation must run the operations the traced one ran, else the estimate is
abandoned and the general path runs. The weight w_j is grad_output's element for an output
body, and grad_output times the reduction's constant factor (1/N for a mean) for a loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import colouring, defaults, sparsity

#: Schemes the coloured path computes (complex step needs complex arithmetic through the body: general path).
SCHEMES = {"central": (1.0, -1.0), "forward": (1.0,), "richardson": (1.0, -1.0, 0.5, -0.5)}
#: Elements (copies x the larger of input and body numel) per vmap call, as the general path's chunks.
CHUNK_ELEMENTS = 1 << 20
#: Use the colouring only when it needs at most this fraction of the general path's evaluations.
WORTH_BELOW = 0.5


@dataclass
class Colouring:
    """A learned pattern and its colours for one input: what the shifted evaluations reuse."""

    learned: object  #: sparsity.Learned
    colours: object  #: int64 colour per flat input element
    count: int  #: number of colours
    method: str  #: how the colours were found (colouring.colour_columns)
    targets: object = None  #: see _targets, built on first use


def plan(probe) -> tuple[Colouring | None, str]:
    """(the colouring for probe's input, "") or (None, why the coloured path does not apply)."""
    x = probe.values[probe.name]
    try:
        learned = sparsity.learn(probe.function, probe.arguments(x), probe.name)
    except sparsity.Unlearnable as refusal:
        probe.stats["pattern_evaluations"] = 1  # the traced evaluation, apart from the path that then runs
        return None, f"sparsity pattern not learned: {refusal}"
    colours, method = colouring.colour_columns(learned.pattern, x.numel())
    count = int(colours.max()) + 1 if colours.numel() else 0
    if count > WORTH_BELOW * x.numel():
        probe.stats["pattern_evaluations"] = 1
        return None, (f"the learned pattern needs {count} colours for {x.numel()} elements: no fewer evaluations "
                      "than one element at a time")
    probe.stats["forward_evaluations"] += 1  # the traced evaluation is the coloured path's first
    return Colouring(learned, colours.to(x.device), count, method), ""


def estimates(probe, plan_: Colouring, scheme: str, h, *, exact: bool = False):
    """d phi / d x_i for every flat element i from the coloured evaluations, or None if a shifted one differs."""
    import torch

    if scheme not in SCHEMES:
        return None
    x = probe.values[probe.name]
    flat = x.reshape(-1)
    learned, colours = plan_.learned, plan_.colours
    count = flat.numel()
    target = _targets(plan_, x.device)
    v = probe.v.reshape(-1)
    weight = v.reshape(1, -1) if learned.body_kind == "output" else v[0] * learned.factor

    checked = []  # whether the batched evaluation was held against a separate one (once per estimate)

    def shifted(multiple: float):
        """(body values, one column per colour; the shift each element really took)."""
        shift = h * multiple
        point = flat + shift
        taken = torch.where(point == flat, shift, point - flat) if exact else shift
        copies = flat.expand(plan_.count, count).clone()
        copies[colours, torch.arange(count, device=x.device)] = point  # copy k moves the elements of colour k
        # few copies: separate calls cost less than vmap's set-up (as on the general path)
        values = _batched(probe, learned, copies, checked) if plan_.count >= defaults.LOOP_BELOW else None
        if values is None:
            values = _one_at_a_time(probe, learned, copies)
        return (None, None) if values is None else (values, taken)

    def share(first, second, width):
        """Each column's quotient: its rows' weighted differences summed, and their rounding bound."""
        difference = first - second  # (colours x rows): row j's share of colour k goes to target[k, j]
        total = torch.zeros(count + 1, dtype=difference.dtype, device=difference.device)
        estimate = total.index_add(0, target, (weight * difference).reshape(-1))[:count] / width
        rounding = None
        if probe.track_rounding:
            eps = torch.finfo(difference.dtype).eps
            size = (weight * 1.0).abs() * (first.abs() + second.abs()) * (difference != 0)
            rounding = eps * total.index_add(0, target, size.reshape(-1))[:count] / width.abs()
        return estimate, rounding

    if scheme == "forward":
        plus, up = shifted(1.0)
        if plus is None:
            return None
        base = learned.body.to(plus.dtype).unsqueeze(0).expand_as(plus)
        result, rounding = share(plus, base, up)
    else:
        (plus, up), (minus, down) = shifted(1.0), shifted(-1.0)
        if plus is None or minus is None:
            return None
        result, rounding = share(plus, minus, up - down)
        if scheme == "richardson":
            (half_plus, half_up), (half_minus, half_down) = shifted(0.5), shifted(-0.5)
            if half_plus is None or half_minus is None:
                return None
            half, half_rounding = share(half_plus, half_minus, half_up - half_down)
            result = (4 * half - result) / 3
            rounding = (4 * half_rounding + rounding) / 3 if probe.track_rounding else None
    probe.rounding = rounding
    return result


def _targets(plan_: Colouring, device):
    """For each colour k and body row j, the column whose quotient row j's difference under colour k
    belongs to (flat, colours x rows), or n (a spare slot, dropped) where row j holds no column of
    colour k. Built once per plan: an adaptive step or a refinement asks again."""
    import torch

    if plan_.targets is None:
        pattern = plan_.learned.pattern.to(device)
        rows, count = pattern.shape[0], plan_.colours.numel()
        valid = pattern >= 0
        # padding entries write into a spare colour row past the last one
        colour = torch.where(valid, plan_.colours[pattern.clamp(min=0)], plan_.count)
        targets = torch.full((plan_.count + 1, rows), count, dtype=torch.long, device=device)
        targets[colour, torch.arange(rows, device=device).unsqueeze(1).expand_as(pattern)] = \
            torch.where(valid, pattern, count)
        plan_.targets = targets[:plan_.count].reshape(-1)
    return plan_.targets


def _batched(probe, learned, copies, checked: list):
    """The bodies of all copies from `vmap` calls a chunk at a time, or None where batching does not apply.

    The first time, the last copy is also evaluated on its own and must agree bit for bit within
    BATCH_AGREEMENT, as the general path's batch guard asks (core/check/finite_difference.py)."""
    import torch

    x = probe.values[probe.name]
    if not probe.batched:
        return None
    width = max(x.numel(), learned.pattern.shape[0], probe.work, 1)
    chunk = max(1, CHUNK_ELEMENTS // width)
    parts = []
    shaped = copies.reshape(copies.shape[0], *x.shape)  # shaped outside vmap: a reshape inside is one more operation
    for start in range(0, copies.shape[0], chunk):
        part = sparsity.bodies_at(probe.function, probe.arguments, shaped[start:start + chunk], learned)
        probe.stats["forward_evaluations"] += copies[start:start + chunk].shape[0]
        if part is None:
            return None
        parts.append(part)
    values = torch.cat(parts) if len(parts) > 1 else parts[0]
    if not checked:
        single = sparsity.body_at(probe.function, probe.arguments(copies[-1].reshape(x.shape)), learned)
        probe.stats["batch_check_evaluations"] = probe.stats.get("batch_check_evaluations", 0) + 1
        scale = float(single.abs().max()) if single is not None and single.numel() else 0.0
        if single is None or not torch.allclose(values[-1], single, rtol=defaults.BATCH_AGREEMENT,
                                                atol=defaults.BATCH_AGREEMENT * scale, equal_nan=True):
            return None
        checked.append(True)
    return values


def _one_at_a_time(probe, learned, copies):
    """The bodies of the copies evaluated one by one (a function vmap cannot batch), or None if one differs."""
    import torch

    x = probe.values[probe.name]
    values = []
    for copy in copies:
        body = sparsity.body_at(probe.function, probe.arguments(copy.reshape(x.shape)), learned)
        probe.stats["forward_evaluations"] += 1
        if body is None:
            return None
        values.append(body)
    return torch.stack(values)


def estimates_for(probe, scheme: str, h, *, exact: bool = False):
    """The coloured path's estimates for probe's input, or None, with the reason kept on the probe.

    The plan is learned once per probe (an adaptive step asks again and again) and reused."""
    if probe.colouring is None:
        plan_, reason = plan(probe)
        probe.colouring, probe.structure_refused = (plan_ or False), reason
    if not probe.colouring:
        return None
    if scheme not in SCHEMES:
        probe.structure_refused = f"the coloured path does not compute {scheme} differences"
        return None
    found = estimates(probe, probe.colouring, scheme, h, exact=exact)
    if found is None:
        probe.structure_refused = "a shifted evaluation ran other operations than the traced one"
        probe.colouring = False
        return None
    probe.structure = "coloured"
    probe.stats["colours"] = probe.colouring.count
    probe.stats["colouring"] = probe.colouring.method
    probe.stats["body"] = ("the output" if probe.colouring.learned.body_kind == "output"
                           else f"the vector entering the final {probe.colouring.learned.body_kind}")
    return found
