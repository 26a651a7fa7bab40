"""The coloured path a chunk of colours at a time (core/check/fd/structure.py, CHUNK_ELEMENTS).

A large input's colours are evaluated and differenced in chunks so that each chunk's arrays stay
in cache. Splitting must change nothing but the memory: every column's differences come from the
one colour it has, so each chunk adds the same terms in the same order to the same columns. These
stories hold the chunked estimates, rounding bounds and evaluation counts against one chunk's.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.check.fd import finite_difference
from jupyterlab_gradcheck.core.check.fd import structure as coloured_path
from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients
from jupyterlab_gradcheck.core.check.first_order import numerical_verdict

WEIGHTS = torch.rand(10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
#: A fixed permutation: each row holds its own column and a far one, which no cyclic colouring fits.
PERMUTATION = torch.randperm(100, generator=torch.Generator().manual_seed(11))


@pytest.fixture(autouse=True)
def colour_every_size(monkeypatch):
    """Small inputs, read at a glance, still take the coloured path (COLOURED_FROM_WORK gates it by cost)."""
    monkeypatch.setattr(finite_difference, "COLOURED_FROM_WORK", 0)


def block_loss(x):
    return (torch.softmax(x.reshape(10, 10), dim=1) * WEIGHTS).sum()


def block_vector(x):
    return torch.softmax(x.reshape(10, 10), dim=1) * WEIGHTS


def banded_vector(x):
    return torch.tanh(x[1:] * x[:-1])


def permuted_loss(x):
    return torch.sin(x * x[PERMUTATION]).sum()


def _estimate(function, scheme: str):
    """(estimates, rounding bound, the input's record) of the coloured path at 100 elements."""
    x = torch.randn(100, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = function(x)
    v = (
        torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        if out.dim()
        else torch.ones((), dtype=torch.float64)
    )
    grads, info, rounding = fd_gradients(
        function, {"x": x}, v, FdOptions(dtype="float64", scheme=scheme, step=None, rounding=True)
    )
    return grads["x"], rounding["x"], info["inputs"]["x"]


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("scheme", ["central", "forward", "richardson"])
@pytest.mark.parametrize("function", [block_loss, block_vector, banded_vector, permuted_loss])
def test_chunks_of_colours_give_the_one_chunk_estimates_bit_for_bit(monkeypatch, function, scheme, batched):
    """Given a block-diagonal loss and vector output, a banded vector output and a loss whose pattern
    needs the greedy colouring, each of 100 elements, evaluated batched (vmap) or one copy at a time,
    when their differences and rounding bounds are taken in chunks of at most half the colours,
    then estimates, bounds and the record (colours, evaluations) equal those of one chunk exactly, and
    no call evaluated more copies than a chunk holds."""
    monkeypatch.setattr(coloured_path.defaults, "LOOP_BELOW", 1 if batched else 10**9)
    whole, whole_bound, whole_info = _estimate(function, scheme)
    assert whole_info["structure"] == "coloured"
    calls = []
    original = coloured_path.bodies_at if batched else coloured_path.body_at

    def counting(*args):
        calls.append(args[2].shape[0] if batched else 1)
        return original(*args)

    monkeypatch.setattr(coloured_path, "bodies_at" if batched else "body_at", counting)
    # a copy is 100 elements wide (the input; the body has at most 100 rows): chunks of at most half the colours
    most = max(1, whole_info["colours"] // 2)
    monkeypatch.setattr(coloured_path, "CHUNK_ELEMENTS", 100 * most)
    chunked, chunked_bound, chunked_info = _estimate(function, scheme)
    assert torch.equal(chunked, whole)
    assert torch.equal(chunked_bound, whole_bound)
    assert chunked_info == whole_info
    assert max(calls) <= most
    assert len(calls) > len(coloured_path.SCHEMES[scheme])  # really more than one chunk


def test_a_planted_error_is_still_named_when_the_colours_go_in_chunks(monkeypatch):
    """Given a block-diagonal loss of 10^4 elements (100 colours of 100 columns, in chunks of 25) through a
    custom Function whose backward is 1e-3 too high at element 4321 only,
    when its numerical verdict is taken,
    then the coloured path fails it and names element 4321."""
    from benchmarks.bench_structure import block_diagonal, wrong_at

    monkeypatch.setattr(coloured_path, "CHUNK_ELEMENTS", 1 << 18)
    function = block_diagonal(100, 100)

    def gradient(x, grad):
        leaf = x.detach().requires_grad_(True)
        with torch.enable_grad():
            (value,) = torch.autograd.grad(function(leaf), leaf)
        return value * grad

    x = torch.randn(10_000, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    verdict = numerical_verdict(wrong_at(function, gradient, 4321, 1e-3), {"x": x})
    info = verdict["finite_difference"]["inputs"]["x"]
    assert info["structure"] == "coloured" and info["colours"] == 100
    assert coloured_path.chunk_colours(100, 10_000) == 25
    assert not verdict["passed"]
    assert verdict["worst"]["index"] == [4321]
