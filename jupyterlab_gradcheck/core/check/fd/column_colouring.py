"""Column colouring of a sparse Jacobian: columns that share no row get one colour.

Shifting every column of one colour at once, each output row then moves because of one column
alone, so one finite difference per colour recovers every element (Curtis, Powell and Reid,
1974, as `scipy.optimize` does for sparse finite differences). Two colourings are tried:

- cyclic, column i gets colour i mod c, for the few c from the widest row up: a banded or
  block-diagonal pattern is coloured this way with the fewest colours possible (the widest
  row's width), checked on the whole pattern in a few tensor operations;
- otherwise the greedy colouring of Curtis-Powell-Reid: columns in order, each taking the
  smallest colour no column sharing a row with it has.
"""

from __future__ import annotations

import torch

#: Cyclic colour counts tried above the widest row before the greedy colouring.
CYCLIC_TRIES = 8


def valid(pattern, colours) -> bool:
    """Whether no row of `pattern` (int64 rows x K, -1 padded) holds two columns of one colour."""
    if pattern.shape[-1] <= 1:
        return True
    mask = pattern >= 0
    coloured = torch.where(
        mask, colours[pattern.clamp(min=0)], -1 - torch.arange(pattern.shape[-1], device=pattern.device)
    )
    ordered = torch.sort(coloured, dim=-1).values
    return not bool((ordered[:, 1:] == ordered[:, :-1]).any())


def spans(pattern):
    """(highest column, lowest column, number of columns) of each row of a pattern whose rows are in
    descending order with the -1 padding last (as core/check/fd/sparsity.py keeps them).

    Where every row is full, as in a band's interior or a block, the lowest column is the last one
    and the count the pattern's width, one int for all rows: read in two slices, without a reduction
    along the rows (an int64 one along a short last dimension costs ~50x an elementwise operation)."""
    high, last = pattern[:, 0], pattern[:, -1]
    if bool((last >= 0).all()):
        return high, last, pattern.shape[-1]
    counts = (pattern >= 0).sum(-1)
    low = pattern.gather(1, (counts - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    return high, low, counts


def compact(dependency):
    """(rows, repeat): a body's index sets, shaped (body shape, K), as the pattern's rows, each set given
    once for the `repeat` consecutive rows that share it where the body's trailing dimensions are
    broadcast (stride 0: the tracer expanded one set over them, as a softmax's over its row), else
    (every row, 1). A block-diagonal body's repeated rows are then neither copied nor read again:
    colouring the rows as given colours the full pattern, which holds no other sets."""
    import math

    shape, strides = dependency.shape[:-1], dependency.stride()[:-1]
    cut = len(shape)
    while cut and (strides[cut - 1] == 0 or shape[cut - 1] == 1):
        cut -= 1
    repeat = math.prod(shape[cut:])
    if repeat <= 1 or dependency.numel() == 0:
        return dependency.reshape(-1, dependency.shape[-1]), 1
    return dependency[(slice(None),) * cut + (0,) * (len(shape) - cut)].reshape(-1, dependency.shape[-1]), repeat


def greedy(pattern, columns: int):
    """Curtis-Powell-Reid: each column, in order, takes the smallest colour none of its row-mates has."""
    rows_of = [[] for _ in range(columns)]
    entries = torch.nonzero(pattern >= 0)
    for row, column in zip(entries[:, 0].tolist(), pattern[pattern >= 0].tolist()):
        rows_of[column].append(row)
    members = pattern.tolist()
    colour = [-1] * columns
    for column in range(columns):
        taken = {colour[m] for row in rows_of[column] for m in members[row] if m >= 0}
        c = 0
        while c in taken:
            c += 1
        colour[column] = c
    return torch.tensor(colour, dtype=torch.long, device=pattern.device)


def colour_columns(pattern, columns: int):
    """(colours per column, how they were found) for a pattern of `columns` columns, on the pattern's
    device (a pattern learned on cuda is indexed by these colours there)."""
    index = torch.arange(columns, device=pattern.device)
    if pattern.numel() == 0:
        return index % 1, "cyclic (column i takes colour i mod 1)"
    high, low, counts = spans(pattern)
    full = isinstance(counts, int)
    width = counts if full else int(counts.max())
    # colour i mod c is valid at once when every row spans fewer than c columns, else checked row by row
    spread = high - low if full or bool((counts > 0).all()) else (high - low)[counts > 0]
    widest = int(spread.max()) if spread.numel() else -1
    for count in range(max(width, 1), max(width, 1) + CYCLIC_TRIES):
        if widest < count or valid(pattern, torch.arange(int(high.max()) + 1, device=pattern.device) % count):
            return index % count, f"cyclic (column i takes colour i mod {count})"
    colours = greedy(pattern, columns)
    return colours, "greedy (Curtis-Powell-Reid, columns in order)"
