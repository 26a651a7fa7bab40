"""Reshapes and cuts of one tensor move its index sets directly (core/check/fd/structure.py, DIRECT).

The tracer's general rule for an operation that only moves values runs it on the positions of a
table of index sets and gathers the rows. For a reshape, or a slice, select or narrow of a single
tensor, the same operation on the index sets themselves gives the same sets without the table;
these stories hold the two rules to the same learned pattern.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.check.fd import structure as sparsity
from jupyterlab_gradcheck.core.check.fd import structure as sparsity_tracer


@pytest.mark.parametrize(
    "function",
    [
        lambda x: torch.tanh(x[1:] * x[:-1]).sum(),
        lambda x: (x.reshape(6, 4)[:, 1:] * x.reshape(6, 4)[:, :-1]).sum(),
        lambda x: x.reshape(4, 6).select(-1, 2) * x.reshape(4, 6).select(1, -1),
        lambda x: x.reshape(2, 3, 4).narrow(-2, 1, 2).exp().reshape(-1) * x[8:],
        lambda x: torch.softmax(x.view(4, 6), dim=-1)[:, ::2].sum(),
        lambda x: torch.cumsum(x.reshape(3, 8), dim=1)[1:].reshape(-1)[2:9],
    ],
)
def test_direct_moves_learn_the_pattern_the_table_rule_learns(monkeypatch, function):
    """Given functions of 24 elements through reshapes, views, slices with steps and negative ends,
    selects and narrows with negative dimensions, before and after softmax and cumsum,
    when their sparsity pattern is learned with the direct rule and with the table rule alone,
    then both learn the same index set for every row and the same operations."""
    x = torch.randn(24, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    direct = sparsity.learn(function, {"x": x}, "x")
    monkeypatch.setattr(sparsity_tracer, "DIRECT", {})
    table = sparsity.learn(function, {"x": x}, "x")
    rows = [d.reshape(-1, d.shape[-1]).tolist() for d in (direct.dependency, table.dependency)]
    assert rows[0] == rows[1]
    assert direct.operations == table.operations
    assert any(name in ("slice", "select", "narrow", "view") for name in direct.operations)
