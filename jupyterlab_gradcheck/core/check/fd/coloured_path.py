"""Finite differences along column colours of a learned sparse Jacobian: a few evaluations for n elements.

core/check/fd/sparsity.py learns which input elements each element of the body depends on (the
function's output, or for a scalar loss the vector entering its final sum or mean);
core/check/fd/column_colouring.py groups the columns that share no row. All columns of one colour are
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

import torch

from ..record import defaults
from . import column_colouring, sparsity
from .error_bound import equal_evaluations_count

#: Schemes the coloured path computes (complex step needs complex arithmetic through the body: general path).
SCHEMES = {"central": (1.0, -1.0), "forward": (1.0,), "richardson": (1.0, -1.0, 0.5, -0.5)}
#: Elements (copies x the largest of input and body numel) per chunk of colours, as the general path's
#: chunks: it bounds the memory of the copies, values and differences whatever n is. Smaller chunks
#: (2^18: four of 100 colours at 10^4) measured ~20% slower on the B9 block-diagonal loss in the
#: benchmark's harness: each chunk costs a vmap call and its set-up.
CHUNK_ELEMENTS = 1 << 20
#: Use the colouring only when it needs at most this fraction of the general path's evaluations.
WORTH_BELOW = 0.5


@dataclass
class Colouring:
    """A learned pattern and its colours for one input: what the shifted evaluations reuse."""

    learned: object  #: sparsity.Learned
    colours: object  #: int64 colour per flat input element
    count: int  #: number of colours
    method: str  #: how the colours were found (column_colouring.colour_columns)
    rows: (
        object  #: the pattern's rows, each once for `repeat` consecutive rows that share it (column_colouring.compact)
    )
    repeat: int
    targets: object = None  #: see _targets, built on first use
    run: int = 1  #: body rows per group whose differences are summed before they reach a column (_targets)
    moves: object = None  #: flat position in the (colours x n) copies of each element's shifted value
    order: object = None  #: the elements sorted by colour, and where each colour starts among them (see chunk)
    starts: object = None

    def chunk(self, first: int, last: int):
        """(the elements of colours first..last-1, their positions in that chunk's copies), or (None, all
        positions) when the chunk holds every colour."""
        if first == 0 and last == self.count:
            return None, self.moves
        if self.order is None:
            self.order = torch.sort(self.colours, stable=True).indices
            self.starts = [0] + torch.bincount(self.colours, minlength=self.count).cumsum(0).tolist()
        members = self.order[self.starts[first] : self.starts[last]]
        return members, self.moves.take(members) - first * self.colours.numel()


def plan(probe) -> tuple[Colouring | None, str]:
    """(the colouring for probe's input, "") or (None, why the coloured path does not apply)."""
    x = probe.values[probe.name]
    try:
        learned = sparsity.learn(probe.function, probe.arguments(x), probe.name)
    except sparsity.Unlearnable as refusal:
        probe.stats["pattern_evaluations"] = 1  # the traced evaluation, apart from the path that then runs
        return None, f"sparsity pattern not learned: {refusal}"
    rows, repeat = column_colouring.compact(learned.dependency)
    colours, method = column_colouring.colour_columns(rows, x.numel())
    count = int(colours.max()) + 1 if colours.numel() else 0
    if count > WORTH_BELOW * x.numel():
        probe.stats["pattern_evaluations"] = 1
        return None, (
            f"the learned pattern needs {count} colours for {x.numel()} elements: no fewer evaluations "
            "than one element at a time"
        )
    probe.stats["forward_evaluations"] += 1  # the traced evaluation is the coloured path's first
    return Colouring(learned, colours.to(x.device), count, method, rows, repeat), ""


def coloured_estimates(probe, plan_: Colouring, scheme: str, h, *, exact: bool = False):
    """d phi / d x_i for every flat element i from the coloured evaluations, or None if a shifted one differs.

    The colours go a chunk at a time (chunk_colours): a chunk's copies are evaluated at every shift of
    the scheme and differenced, and their shares added to their columns' sums, before the next chunk's."""
    if scheme not in SCHEMES:
        return None
    x = probe.values[probe.name]
    flat = x.reshape(-1)
    learned = plan_.learned
    count = flat.numel()
    target = _targets(plan_, x.device)
    groups = target.numel() // plan_.count
    v = probe.v.reshape(-1)
    per_row = learned.body_kind == "output"  # an output's rows each have their weight; a loss's body one factor
    weight = v.reshape(1, -1) if per_row else v[0] * learned.factor
    points, taken = [], []  # per shift of the scheme: x shifted, and the shift each element really took
    for multiple in SCHEMES[scheme]:
        shift = h * multiple
        points.append(flat + shift)
        taken.append(torch.where(points[-1] == flat, shift, points[-1] - flat) if exact else shift)
    pairs = [(0, None)] if scheme == "forward" else [(0, 1), (2, 3)][: len(points) // 2]  # (None: the body at x)
    size = chunk_colours(plan_.count, max(count, learned.body.numel(), probe.work, 1))
    buffer = flat.expand(size, count).clone()  # a chunk's copies, made once: each shift rewrites its positions
    # few copies: separate calls cost less than vmap's set-up (as on the general path)
    batching = [probe.batched and plan_.count >= defaults.LOOP_BELOW]
    checked = []  # whether the batched evaluation was held against a separate one (once per estimate)
    sums, sizes = None, None  # per pair: each column's weighted differences and rounding sizes (+ a spare slot)
    counted_equal = None  # whether equal evaluations count in the rounding bound, once the dtype is seen
    for first in range(0, plan_.count, size):
        last = min(first + size, plan_.count)
        copies = buffer[: last - first]
        members, moves = plan_.chunk(first, last)  # the chunk's elements (None: all), their positions in copies
        values = []
        for point in points:
            copies.view(-1).index_copy_(0, moves, point if members is None else point.take(members))
            found = _evaluate(probe, learned, copies, batching, checked)
            if found is None:
                return None
            values.append(found)
        if sums is None:
            counted_equal = equal_evaluations_count(values[0].dtype, flat.dtype)
            sums = [values[0].new_zeros(count + 1) for _ in pairs]
            sizes = [values[0].new_zeros(count + 1) for _ in pairs] if probe.track_rounding else None
        part = target[first * groups : last * groups]
        for k, (one, other) in enumerate(pairs):
            second = values[other] if other is not None else learned.body.to(values[0].dtype).expand_as(values[0])
            # after the last shift of the last chunk the copies are free: they hold the differences
            room = copies if last == plan_.count and k == len(pairs) - 1 else None
            _share(
                values[one],
                second,
                part,
                plan_.run,
                per_row,
                weight,
                sums[k],
                None if sizes is None else sizes[k],
                room,
                equal_bounded=counted_equal,
                spent=other is not None,  # the body at x is kept for the next chunk: never overwritten
            )
        if members is not None and last < plan_.count:
            copies.view(-1).index_copy_(0, moves, flat.take(members))  # back to x for the next chunk
    widths = [taken[0] if other is None else taken[one] - taken[other] for one, other in pairs]
    results = [(total[:count] if per_row else total[:count] * weight) / width for total, width in zip(sums, widths)]
    rounding = None
    if sizes is not None:
        eps = torch.finfo(sizes[0].dtype).eps
        roundings = [
            eps * (total[:count] if per_row else total[:count] * weight.abs()) / width.abs()
            for total, width in zip(sizes, widths)
        ]
        rounding = roundings[0] if scheme != "richardson" else (4 * roundings[1] + roundings[0]) / 3
    probe.rounding = rounding
    return results[0] if scheme != "richardson" else (4 * results[1] - results[0]) / 3


def chunk_colours(colours: int, width: int) -> int:
    """Colours per chunk where a copy is `width` elements wide: up to CHUNK_ELEMENTS elements, chunks of equal size."""
    most = max(1, CHUNK_ELEMENTS // width)
    pieces = -(-colours // most)
    return -(-colours // pieces)


def _share(
    first,
    second,
    target,
    run: int,
    per_row: bool,
    weight,
    total,
    sizes,
    room=None,
    *,
    equal_bounded: bool = False,
    spent: bool = False,
):
    """Adds each column's share of the (colours x rows) differences first - second to `total`, and their
    rounding sizes to `sizes` (None: not tracked); group g's share under colour k goes to target[k, g].
    A row counts in its column's rounding where its two values differ, or always with `equal_bounded`
    (outputs in the differences' own dtype, error_bound.equal_evaluations_count): the learned pattern gives a column only the rows its element moves, so equal values
    there are a change below their rounding (core/check/fd/error_bound.py `moved_outputs`).

    An output's rows are weighted one by one; a loss's single weight multiplies the columns' sums at the
    end rather than every difference, and the one (colours x rows) temporary is weighted in place. `room`
    (copies no longer needed) holds that temporary where it fits: no fresh array to page in. `spent` says both
    evaluations are this chunk's own and needed no more once differenced: their magnitudes are taken in place."""
    if room is not None and first.numel() <= room.numel() and first.dtype == room.dtype:
        difference = torch.sub(first, second, out=room.view(-1)[: first.numel()].view(first.shape))
    else:
        difference = first - second
    if sizes is not None:
        # once differenced, evaluations that own their memory hold their magnitudes: a fresh array of
        # this size costs more in page faults than the arithmetic (B9's block-diagonal loss: 10^6 elements)
        size = first.abs_() if spent and _owned(first) else first.abs()
        size.add_(second.abs_() if spent and _owned(second) and second is not first else second.abs())
        if not equal_bounded:
            size.mul_(difference != 0)
        sizes.index_add_(0, target, _grouped(size.mul_(weight.abs()) if per_row else size, run))
    total.index_add_(0, target, _grouped(difference.mul_(weight) if per_row else difference, run))


def _owned(values) -> bool:
    """Whether `values` is the one contiguous tensor in its storage (an evaluation's own result, which may be
    overwritten once used), not a view of the copies, of the body at x or of a tensor the function holds."""
    return (
        values.is_contiguous()
        and values.storage_offset() == 0
        and values.untyped_storage().nbytes() == values.numel() * values.element_size()
    )


def _evaluate(probe, learned, copies, batching: list, checked: list):
    """The body's values at each copy (copies x rows), batched while `batching[0]`, else one by one; None if one
    differs. A refused batch is not tried again."""
    values = _batched(probe, learned, copies, checked) if batching[0] else None
    if values is None:
        batching[0] = False
        values = _one_at_a_time(probe, learned, copies)
    if values is not None and values.untyped_storage().data_ptr() == copies.untyped_storage().data_ptr():
        values = values.clone()  # a body that views its input: kept before the next shift rewrites it
    return values


def _targets(plan_: Colouring, device):
    """For each colour k and group g of body rows, the column whose quotient group g's differences under
    colour k belong to (flat, colours x groups), or n (a spare slot, dropped) where the group holds no
    column of colour k. A group is a run of `plan_.run` consecutive rows with one index set (a block of a
    block-diagonal pattern), whose differences are summed along the rows before they reach their column,
    a reshape instead of an index_add over every row; otherwise each row is its own group. Built once
    per plan, with the flat positions the shifted copies take: an adaptive step or a refinement asks again."""
    if plan_.targets is None:
        rows, repeat = plan_.rows.to(device), plan_.repeat
        run = run_length(rows, repeat)
        if run % repeat:  # no runs (1) though rows repeat: each row its own group, so each row spelled out
            rows, repeat = rows.repeat_interleave(repeat, dim=0), 1
        heads = rows[:: run // repeat]  # one row per group
        groups, count = heads.shape[0], plan_.colours.numel()
        full = bool((heads[:, -1] >= 0).all()) if heads.numel() else True  # no padding (a band, a block)
        valid = None if full else heads >= 0
        # padding entries write into a spare colour row past the last one
        colour = (
            plan_.colours.take(heads)
            if full
            else torch.where(valid, plan_.colours.take(heads.clamp(min=0)), plan_.count)
        )
        slots = torch.add(torch.arange(groups, device=device).unsqueeze(1), colour, alpha=groups)  # one pass
        targets = torch.full(((plan_.count + 1) * groups,), count, dtype=torch.long, device=device)
        targets.scatter_(0, slots.reshape(-1), (heads if full else torch.where(valid, heads, count)).reshape(-1))
        plan_.targets, plan_.run = targets[: plan_.count * groups], run
        plan_.moves = torch.add(torch.arange(count, device=device), plan_.colours, alpha=count)
    return plan_.targets


def run_length(pattern, repeat: int = 1) -> int:
    """L > 1 when the body rows fall into runs of L consecutive rows, each run with one index set; else 1.

    L is read off the first change of a row's highest column and then checked on every row: at once
    where the rows are full intervals (their highest columns then tell their sets), else entry by entry.
    `pattern` may give each set once for `repeat` consecutive rows that share it (column_colouring.compact):
    the runs are those of the rows spelled out, found on the rows as given."""
    given = pattern.shape[0]
    # a band's rows: told by the first two (equal where each row repeats)
    if given * repeat < 2 or (repeat == 1 and int(pattern[1, 0]) != int(pattern[0, 0])):
        return 1
    high, low, counts = column_colouring.spans(pattern)
    changes = torch.nonzero(high[1:] != high[:-1])
    run = int(changes[0]) + 1 if changes.numel() else given
    if run * repeat == 1 or given % run:
        return 1
    if bool((high - low + 1 == counts).all()):
        tops = high.reshape(-1, run)
        same = bool((tops == tops[:, :1]).all() and (low.reshape(-1, run) == low.reshape(-1, run)[:, :1]).all())
    else:
        blocks = pattern.reshape(-1, run, pattern.shape[-1])
        same = bool((blocks == blocks[:, :1]).all())
    return run * repeat if same else 1


def _grouped(values, run: int):
    """values (colours x rows) summed over each group of `run` consecutive rows, flat (colours x groups)."""
    return (values if run == 1 else values.reshape(values.shape[0], -1, run).sum(-1)).reshape(-1)


def _batched(probe, learned, copies, checked: list):
    """The bodies of all copies from one `vmap` call, or None where batching does not apply.

    The first time, the last copy is also evaluated on its own and must agree bit for bit within
    BATCH_AGREEMENT, as the general path's batch guard asks (core/check/fd/finite_difference.py)."""
    x = probe.values[probe.name]
    # shaped outside vmap: a reshape inside is one more operation
    values = sparsity.bodies_at(probe.function, probe.arguments, copies.reshape(copies.shape[0], *x.shape), learned)
    probe.stats["forward_evaluations"] += copies.shape[0]
    if values is None:
        return None
    if not checked:
        single = sparsity.body_at(probe.function, probe.arguments(copies[-1].reshape(x.shape)), learned)
        probe.stats["batch_check_evaluations"] = probe.stats.get("batch_check_evaluations", 0) + 1
        scale = float(single.abs().max()) if single is not None and single.numel() else 0.0
        if single is None or not torch.allclose(
            values[-1], single, rtol=defaults.BATCH_AGREEMENT, atol=defaults.BATCH_AGREEMENT * scale, equal_nan=True
        ):
            return None
        checked.append(True)
    return values


def _one_at_a_time(probe, learned, copies):
    """The bodies of the copies evaluated one by one (a function vmap cannot batch), or None if one differs."""
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
    found = coloured_estimates(probe, probe.colouring, scheme, h, exact=exact)
    if found is None:
        probe.structure_refused = "a shifted evaluation ran other operations than the traced one"
        probe.colouring = False
        return None
    probe.structure = "coloured"
    probe.stats["colours"] = probe.colouring.count
    probe.stats["colouring"] = probe.colouring.method
    probe.stats["body"] = (
        "the output"
        if probe.colouring.learned.body_kind == "output"
        else f"the vector entering the final {probe.colouring.learned.body_kind}"
    )
    return found
