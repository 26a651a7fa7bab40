"""Finite differences along the colours of a learned sparse Jacobian (core/check/fd/structure.py).

The coloured path shifts many elements at once, so it is only honest where the learned pattern
is right. These stories pin it: on banded, block-diagonal and reduce-after-a-stencil functions
every element equals the general path's estimate, the evaluations grow with the colours and not
with n, a one-element error in a custom backward is still caught and named, and where the
pattern cannot be learned the record says why and the general path runs.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.bench_structure import wrong_at
from jupyterlab_gradcheck.core.check.engine import check_callable
from jupyterlab_gradcheck.core.check.fd import finite_difference
from jupyterlab_gradcheck.core.check.fd import structure as coloured_path
from jupyterlab_gradcheck.core.check.fd import structure as column_colouring
from jupyterlab_gradcheck.core.check.fd import structure as sparsity
from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients
from jupyterlab_gradcheck.core.check.first_order import numerical_verdict

#: Both paths take central differences at the same steps, so the truncation is the same and they
#: differ by rounding alone, eps * |f_j| / h ~ 2e-16 / 6e-6 ~ 4e-11 per row for the O(1) values
#: here; 1e-9 leaves a margin of 25x and is still 10^4 below the 1e-5 tolerance a real error
#: would have to beat.
SAME_ESTIMATE = 1e-9

WEIGHTS = torch.rand(10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(3))


@pytest.fixture(autouse=True)
def colour_every_size(monkeypatch):
    """These stories tell the coloured path itself, at sizes small enough to read; the cost gate that
    keeps such small inputs on the general path (COLOURED_FROM_WORK) is told in
    tests/core/check/test_error_bound_policy.py."""
    monkeypatch.setattr(finite_difference, "COLOURED_FROM_WORK", 0)


def banded_loss(x):
    return torch.tanh(x[1:] * x[:-1]).sum()


def banded_vector(x):
    return torch.tanh(x[1:] * x[:-1])


def block_diagonal_loss(x):
    return (torch.softmax(x.reshape(10, -1), dim=1) * WEIGHTS.reshape(10, -1)[:, : x.numel() // 10]).sum()


def stencil_mean(x):
    return 3 * (x[2:] - 2 * x[1:-1] + x[:-2]).pow(2).mean() + 1


def _both(function, x, v=None):
    """(coloured estimate, general estimate, info of the coloured run)."""
    v = torch.ones_like(function(x)) if v is None else v
    fast, info, _ = fd_gradients(function, {"x": x}, v, FdOptions(dtype="float64", scheme="central", step=None))
    slow, _, _ = fd_gradients(
        function, {"x": x}, v, FdOptions(dtype="float64", scheme="central", step=None, structured=False)
    )
    return fast["x"], slow["x"], info["inputs"]["x"]


@pytest.mark.parametrize(
    ("function", "colours", "body"),
    [
        (banded_loss, 2, "the vector entering the final sum"),
        (banded_vector, 2, "the output"),
        (block_diagonal_loss, 10, "the vector entering the final sum"),
        (stencil_mean, 3, "the vector entering the final mean"),
    ],
)
def test_coloured_estimate_equals_the_general_path_element_by_element(function, colours, body):
    """Given a banded, block-diagonal or stencil-then-mean function of 100 elements,
    when its central differences are taken,
    then the coloured path is named with the fewest colours the pattern allows (its widest row)
    and every element equals the general path's estimate up to rounding."""
    x = torch.randn(100, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    v = (
        torch.randn(99, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        if function is banded_vector
        else None
    )
    fast, slow, info = _both(function, x, v)
    assert info["structure"] == "coloured"
    assert info["colours"] == colours
    assert info["body"] == body
    assert info["forward_evaluations"] == 1 + 2 * colours
    assert float((fast - slow).abs().max()) <= SAME_ESTIMATE


@pytest.mark.parametrize("n", [100, 3000])
def test_evaluations_grow_with_colours_not_with_n(n):
    """Given the banded loss at 100 and at 3000 elements,
    when its finite differences are taken,
    then both take the same 5 evaluations (one traced, two colours x two shifts), not 2n."""
    x = torch.linspace(-1.5, 1.5, n, dtype=torch.float64)
    _, info, _ = fd_gradients(
        banded_loss,
        {"x": x},
        torch.ones((), dtype=torch.float64),
        FdOptions(dtype="float64", scheme="central", step=None),
    )
    assert info["inputs"]["x"]["structure"] == "coloured"
    assert info["inputs"]["x"]["forward_evaluations"] == 5


def _banded_gradient(x):
    """The banded loss's true gradient, written by hand."""
    slope = 1 - torch.tanh(x[1:] * x[:-1]) ** 2
    result = torch.zeros_like(x)
    result[:-1] += slope * x[1:]
    result[1:] += slope * x[:-1]
    return result


#: The banded loss with a backward 1e-3 too high at element 37 only.
banded_wrong_at_37 = wrong_at(banded_loss, lambda x, grad: grad * _banded_gradient(x), 37, 1e-3)


def test_one_wrong_element_of_a_custom_backward_is_caught_and_named_on_the_coloured_path():
    """Given a custom Function for the banded loss whose backward adds 1e-3 at element 37 only,
    when the engine checks it over 200 elements,
    then the finite differences took the coloured path (its pattern learned from the forward, not
    from the wrong backward) and the failure names index [37]."""
    x = torch.linspace(-1.0, 1.0, 200, dtype=torch.float64)
    verdict = numerical_verdict(banded_wrong_at_37, {"x": x})
    assert verdict["finite_difference"]["inputs"]["x"]["structure"] == "coloured"
    assert not verdict["passed"]
    assert verdict["worst"]["index"] == [37]
    record = check_callable(banded_wrong_at_37, {"x": x.tolist()}, grad=_banded_gradient)
    assert not record["passed"]
    assert record["observations"]["finite_difference"]["inputs"]["x"]["structure"] == "coloured"
    failure = next(f for f in record["failures"] if f["comparison"] == "autograd_vs_finite_difference")
    assert failure["index"] == [37]


def test_a_dense_jacobian_is_refused_with_its_reason_and_the_general_path_runs():
    """Given tanh(A @ x) with a dense A,
    when its finite differences are taken,
    then the record says the general path ran and why the pattern was not used (dense)."""
    a = torch.randn(40, 40, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x = torch.randn(40, dtype=torch.float64)
    _, info, _ = fd_gradients(
        lambda x: torch.tanh(a @ x),
        {"x": x},
        torch.ones(40, dtype=torch.float64),
        FdOptions(dtype="float64", scheme="central", step=None),
    )
    info = info["inputs"]["x"]
    assert info["structure"] == "general"
    assert "dense" in info["structure_refused"]
    assert info["forward_evaluations"] == 2 * 40
    assert info["pattern_evaluations"] == 1


def test_an_operation_without_a_rule_leaves_the_pattern_unlearned_by_name():
    """Given a function through an operation the tracer has no rule for (a sort),
    when its pattern is learned,
    then learning refuses, naming the operation."""
    with pytest.raises(sparsity.Unlearnable, match="sort"):
        sparsity.learn(lambda x: torch.sort(x).values.sum() * x.sum(), {"x": torch.randn(8, dtype=torch.float64)}, "x")


def test_greedy_colouring_gives_no_row_two_columns_of_one_colour():
    """Given an irregular pattern no cyclic colouring fits within its tries (each row holds column 0
    and one other column),
    when its columns are coloured,
    then the Curtis-Powell-Reid greedy colouring is used, is valid, and needs two colours."""
    pattern = torch.tensor([[j, 0] for j in range(40, 0, -1)])
    colours, method = column_colouring.colour_columns(pattern, 41)
    assert method.startswith("greedy")
    assert column_colouring.valid(pattern, colours)
    assert int(colours.max()) + 1 == 2


def block_diagonal_vector(x):
    return torch.softmax(x.reshape(10, 10), dim=1) * WEIGHTS


def _with_rounding(function, x, v):
    """(estimates, rounding bound) of the coloured path, as the engine asks for them."""
    grads, info, rounding = fd_gradients(
        function, {"x": x}, v, FdOptions(dtype="float64", scheme="central", step=None, rounding=True)
    )
    assert info["inputs"]["x"]["structure"] == "coloured"
    return grads["x"], rounding["x"]


@pytest.mark.parametrize("function", [block_diagonal_loss, block_diagonal_vector])
def test_rows_sharing_a_block_are_summed_together_and_give_the_row_by_row_answer(monkeypatch, function):
    """Given a block-diagonal function of 100 elements (ten rows of ten sharing each block), as a loss and
    as a vector output with a random grad_output,
    when its central differences and their rounding bound are taken,
    then the plan groups the body's rows in runs of ten, and both the estimates and the bound equal
    those of the same plan taken row by row up to the order of the additions."""
    x = torch.randn(100, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    v = (
        torch.ones((), dtype=torch.float64)
        if function is block_diagonal_loss
        else torch.randn(10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    )
    learned = sparsity.learn(function, {"x": x}, "x")
    assert coloured_path.run_length(*column_colouring.compact(learned.dependency)) == 10
    grouped, grouped_bound = _with_rounding(function, x, v)
    monkeypatch.setattr(coloured_path, "run_length", lambda pattern, repeat=1: 1)
    by_row, by_row_bound = _with_rounding(function, x, v)
    # the same terms added in another order: a few ulps of the O(1e-1..1) quotients and O(1e-10) bounds
    assert torch.allclose(grouped, by_row, rtol=1e-12, atol=1e-14)
    assert torch.allclose(grouped_bound, by_row_bound, rtol=1e-12, atol=0.0)
    assert float(grouped_bound.min()) > 0.0


def test_rows_that_only_look_alike_at_their_ends_are_not_grouped():
    """Given a pattern whose rows come in pairs with the same highest and lowest column but, in the
    second pair, different columns between them,
    when the runs of rows sharing one index set are looked for,
    then none is taken (each row stays its own group)."""
    pattern = torch.tensor([[5, 3, 0], [5, 3, 0], [9, 7, 6], [9, 8, 6]])
    assert coloured_path.run_length(pattern) == 1
    assert coloured_path.run_length(pattern[:2]) == 2


def test_a_body_that_views_its_input_keeps_each_shift_values_when_evaluated_batched(monkeypatch):
    """Given a function whose output is a slice of its input (so a batched evaluation's values view
    the shifted copies themselves), evaluated in one vmap call even for its single colour,
    when its central differences are taken,
    then the values of the +h shift are kept before the -h shift rewrites the copies: every element
    equals the general path's estimate (1 where the element is in the slice, 0 for x[0])."""
    monkeypatch.setattr(coloured_path.defaults, "LOOP_BELOW", 1)
    x = torch.randn(50, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    fast, slow, info = _both(lambda x: x[1:], x)
    assert info["structure"] == "coloured"
    assert float((fast - slow).abs().max()) <= SAME_ESTIMATE
    assert float(fast[0]) == 0.0 and float((fast[1:] - 1).abs().max()) <= SAME_ESTIMATE


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (lambda x: x[1:] * x[:-1], [[j + 1, j] for j in range(5)]),
        (lambda x: x[:-1] * x[1:], [[j + 1, j] for j in range(5)]),
        (lambda x: (x[1:] * x[:-1]).flip(0), [[j + 1, j] for j in reversed(range(5))]),
        (lambda x: (x[1:] * x[:-1])[::2] + x[:-1:2], [[j + 1, j] for j in range(0, 5, 2)]),
        (lambda x: torch.cat([x[:1] * 2, x[1:] * x[:-1]])[:1], [[0]]),
    ],
)
def test_moved_and_multiplied_slices_give_each_row_its_exact_set(function, expected):
    """Given products of slices of x (6 elements), moved by flips, strided slices and a cat,
    when the sparsity pattern is learned,
    then each row holds exactly its set, highest index first, no wider than its widest row
    (a slice of rows narrower than the rest drops the padding column)."""
    learned = sparsity.learn(function, {"x": torch.randn(6, dtype=torch.float64)}, "x")
    assert learned.dependency.reshape(-1, learned.dependency.shape[-1]).tolist() == expected


#: The forward scheme's step is ~1.5e-8, so the general path's difference of the whole loss (|phi| ~ 5
#: here) rounds like eps * |phi| / h ~ 2.2e-16 * 5 / 1.5e-8 ~ 7e-8 (measured 7.8e-8 on the block loss);
#: 1e-6 leaves a margin of ~13x and is still far below what a wrong backward would move.
FORWARD_SAME = 1e-6


@pytest.mark.parametrize("function", [block_diagonal_loss, banded_vector])
@pytest.mark.parametrize(("scheme", "tolerance"), [("forward", FORWARD_SAME), ("richardson", SAME_ESTIMATE)])
def test_forward_and_richardson_differences_equal_the_general_path(function, scheme, tolerance):
    """Given the block-diagonal loss and the banded vector output of 100 elements,
    when their forward and Richardson differences are taken (the copies re-shifted for each
    multiple, and after the last shift reused for the differences),
    then every element equals the general path's estimate at the same steps up to rounding."""
    x = torch.randn(100, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    v = (
        torch.randn(99, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        if function is banded_vector
        else torch.ones((), dtype=torch.float64)
    )
    fast, info, _ = fd_gradients(function, {"x": x}, v, FdOptions(dtype="float64", scheme=scheme, step=None))
    slow, _, _ = fd_gradients(
        function, {"x": x}, v, FdOptions(dtype="float64", scheme=scheme, step=None, structured=False)
    )
    assert info["inputs"]["x"]["structure"] == "coloured"
    assert float((fast["x"] - slow["x"]).abs().max()) <= tolerance
