"""The autograd graph tells which inputs cannot be an elementwise chain (core/check/autograd/observations.py).

The diagonal recorder's evaluation is skipped only where its answer is already known: these
stories pin that it is skipped for a matrix product, still run for an elementwise chain and for
a custom Function, and that a check's record is the same either way.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.autograd.observations import chain_possible, refused_by_recorder
from jupyterlab_gradcheck.core.check.engine import check_callable
from jupyterlab_gradcheck.core.check.fd import structure as diagonal
from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients
from support.functions import Cube

W = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(4, 3)


def _leaves(**tensors):
    return {n: t.detach().clone().requires_grad_(True) for n, t in tensors.items()}


def test_a_matrix_product_on_one_input_rules_out_only_that_input():
    """Given f(x, w) = sum(sin(x) * (w @ c)) with c a constant,
    when the graph of one forward pass is read,
    then w (behind a matrix product) cannot be a chain, and x (behind sin and a product with a tensor
    that does not depend on it) may be one."""
    leaves = _leaves(x=torch.rand(4, dtype=torch.float64), w=torch.rand(4, 3, dtype=torch.float64))
    c = torch.ones(3, dtype=torch.float64)
    output = (leaves["x"].sin() * (leaves["w"] @ c)).sum()

    assert chain_possible(output, leaves) == {"x": True, "w": False}


def test_an_input_used_twice_is_ruled_out_by_either_path():
    """Given sum(sin(x) * (W^T x)) (x reaches the output through sin and through a matrix product),
    when the graph is read, then x cannot be a chain: the recorder refuses the product too."""
    leaves = _leaves(x=torch.rand(4, dtype=torch.float64))
    output = (leaves["x"][:3].sin() * (W.T @ leaves["x"])).sum()

    assert chain_possible(output, leaves) == {"x": False}
    assert diagonal.record(lambda x: (x[:3].sin() * (W.T @ x)).sum(), {"x": leaves["x"].detach()}, "x") is None


def test_elementwise_operations_and_reductions_are_left_to_the_recorder():
    """Given a chain of elementwise operations spelled as the graph spells them (clamp_min, log1p,
    _to_copy, rsub, where, pow, a full mean scaled by 3), when the graph is read, then x may be a chain,
    and the recorder indeed finds one."""

    def f(x):
        y = torch.where(x > 0.5, x, -x).clamp_min(0.1)
        return ((2.0 - torch.log1p(y).to(torch.float32).double()) ** 2).mean() * 3

    x = torch.rand(6, dtype=torch.float64)
    leaves = _leaves(x=x)

    assert chain_possible(f(**leaves), leaves) == {"x": True}
    assert diagonal.record(f, {"x": x}, "x").kind == "elementwise then mean"


def test_a_custom_function_is_never_ruled_out_by_its_node():
    """Given a custom Function computing x ** 3, whose graph node names no operation,
    when the graph is read, then the recorder still decides, and finds the chain inside its forward."""
    x = torch.rand(5, dtype=torch.float64)
    leaves = _leaves(x=x)
    output = Cube.apply(leaves["x"]).sum()

    assert not refused_by_recorder(output.grad_fn.next_functions[0][0])
    assert chain_possible(output, leaves) == {"x": True}
    assert diagonal.record(lambda x: Cube.apply(x).sum(), {"x": x}, "x") is not None


def test_a_check_of_a_matrix_function_spends_no_evaluation_on_the_recorder(monkeypatch):
    """Given f(x) = sum(tanh(x @ W)) (not a chain),
    when it is checked, then the diagonal recorder never evaluates it, and its finite differences are
    those of the general path with the recorder allowed to look (value for value, same path and
    evaluation count)."""
    calls = []
    real_record = diagonal.record
    monkeypatch.setattr(diagonal, "record", lambda *a, **k: calls.append(a) or real_record(*a, **k))
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).reshape(5, 4)

    def f(x):
        return torch.tanh(x @ W).sum()

    record = check_callable(f, {"x": x.tolist()}, lambda x: (1 - torch.tanh(x @ W) ** 2) @ W.T)
    looked, looked_info, _ = fd_gradients(
        f, {"x": x}, torch.ones(()), FdOptions(dtype="float64", scheme="central", step=None)
    )
    skipped, skipped_info, _ = fd_gradients(
        f, {"x": x}, torch.ones(()), FdOptions(dtype="float64", scheme="central", step=None, chains={"x": False})
    )

    assert record["passed"]
    assert len(calls) == 1  # the fd_gradients call above that was allowed to look, not the check's
    assert record["observations"]["finite_difference"]["inputs"]["x"]["structure"] == "general"
    assert torch.equal(looked["x"], skipped["x"])
    assert looked_info["inputs"]["x"]["forward_evaluations"] == skipped_info["inputs"]["x"]["forward_evaluations"]


def test_a_check_of_an_elementwise_chain_still_takes_the_diagonal_path():
    """Given f(x) = sum(sin(x) * x) on 40 elements, when it is checked,
    then the graph leaves the decision to the recorder, which finds the chain: the diagonal path runs."""
    x = torch.linspace(-2, 2, 40, dtype=torch.float64)
    record = check_callable(
        lambda x: (torch.sin(x) * x).sum(), {"x": x.tolist()}, lambda x: torch.cos(x) * x + torch.sin(x)
    )

    assert record["passed"]
    assert record["observations"]["finite_difference"]["inputs"]["x"]["structure"] == "elementwise then sum"
