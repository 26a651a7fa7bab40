"""A learned pattern's repeated rows given once (core/check/fd/structure.py, compact).

Where the tracer broadcast one index set over a body's trailing dimensions (a softmax's set over
its row), the pattern's rows repeat it; the coloured path reads each set once with its repeat
count instead of spelling out (rows x K) integers. These stories hold that compact form to the
full pattern: the same rows when spelled out, the same colours, the same runs of rows.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.check.fd import structure as coloured_path
from jupyterlab_gradcheck.core.check.fd import structure as column_colouring
from jupyterlab_gradcheck.core.check.fd import structure as sparsity

WEIGHTS = torch.rand(10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(3))


def _full(learned):
    return learned.dependency.reshape(-1, learned.dependency.shape[-1])


@pytest.mark.parametrize(
    ("function", "repeat"),
    [
        (lambda x: (torch.softmax(x.reshape(10, 10), dim=1) * WEIGHTS).sum(), 10),
        (lambda x: torch.log_softmax(x.reshape(4, 25), dim=1), 25),
        (lambda x: (x.reshape(20, 5).sum(1, keepdim=True) * WEIGHTS.reshape(20, 5)).sum(), 5),
        (lambda x: torch.tanh(x[1:] * x[:-1]).sum(), 1),
    ],
)
def test_compact_rows_spell_out_to_the_full_pattern_and_colour_it_alike(function, repeat):
    """Given block-wise bodies (a softmax, a log-softmax, a row's sum broadcast over the row by a product)
    and a band, over 100 elements,
    when their learned pattern is made compact,
    then each set is given once for `repeat` rows (the block's width; 1 for the band), the rows spelled
    out are the full pattern, and the colours and runs of rows found from them are the full pattern's."""
    learned = sparsity.learn(function, {"x": torch.randn(100, dtype=torch.float64)}, "x")
    rows, found = column_colouring.compact(learned.dependency)
    full = _full(learned)
    assert found == repeat
    assert torch.equal(rows.repeat_interleave(found, dim=0), full)
    compact_colours, compact_method = column_colouring.colour_columns(rows, 100)
    full_colours, full_method = column_colouring.colour_columns(full, 100)
    assert torch.equal(compact_colours, full_colours) and compact_method == full_method
    assert coloured_path.run_length(rows, found) == coloured_path.run_length(full)


@pytest.mark.parametrize(
    ("heads", "repeat"),
    [
        ([[5, 4], [5, 4], [3, 2]], 2),  # runs of 4 rows would cut the third set's pair: no runs
        ([[5, 4], [3, 2], [1, 0]], 2),  # each set's own pair of rows
        ([[5, 4], [5, 4], [3, 2], [3, 2]], 3),  # two sets over six rows each
        ([[7, 6, 5]], 4),  # one set over every row
    ],
)
def test_runs_found_on_compact_rows_are_those_of_the_rows_spelled_out(heads, repeat):
    """Given compact rows whose sets repeat in ways that do and do not divide the rows into equal runs,
    when the runs of rows sharing one set are looked for on the compact rows,
    then they are the runs found on the same rows spelled out (including none at all)."""
    rows = torch.tensor(heads)
    assert coloured_path.run_length(rows, repeat) == coloured_path.run_length(rows.repeat_interleave(repeat, dim=0))
