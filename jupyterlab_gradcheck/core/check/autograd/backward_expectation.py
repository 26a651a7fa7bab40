"""The expectation of a custom `torch.autograd.Function` check: its own hand-written backward.

For a custom Function the hand derivation *is* its `backward`; asking its author to write it a
second time as `grad=` sends them back to `torch.autograd.gradcheck`. So a Python check with no
expectation, of a function whose graph passes through one or more custom Functions, takes as
its expectation "the backward of F": the gradient that autograd computes through the
Functions' own `backward`, in a fresh graph, with the check's grad_output. The observations
then hold that backward against finite differences, as gradcheck does.

The expectation is named by each Function's qualified name and the SHA-256 of its source
(its class, also when defined in a notebook cell; for a `torch.library` custom op, the op's name
and its author's functions: record/callable_source.py). The name is what the ledger keeps for a callable
expectation, so a backward edited after a failure is a new expectation text: the ledger records
it as an expectation change, and grading flags it as revised after an observation.

A function whose graph holds no custom Function keeps the refusal of a missing expectation.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..compare.forward_pass import grad_output_for
from ..record.callable_source import callable_name, function_source
from .several_outputs import differentiable


def backward_name(classes: list) -> str:
    """'the backward of Cube [sha256 1a2b3c4d5e6f]' (each Function, ' and ' between): the expectation's text."""
    parts = []
    for owner in classes:
        digest = function_source(owner).get("sha256") or "source unreadable"
        parts.append(f"{callable_name(owner)} [sha256 {digest[:16]}]")
    return "the backward of " + " and ".join(parts)


def backward_expectation(
    function: Callable, names: list[str], classes: list, grad_output=None, outputs: list[bool] | None = None
) -> dict:
    """{input name: callable of the inputs} giving d sum(v * f) / d input through the Functions' own backward.

    Each callable runs a fresh forward and `torch.autograd.grad` (grad mode on, whatever the
    caller's), so it observes the backward as written, not a value computed once and kept.
    For a function returning several outputs (`outputs`: whether each is differentiable) it is
    `{"outputs": [e_0, e_1, ...]}`: e_k the same for output k, through the backward with v_k at output k
    and zeros at the others (`grad_output` then a list with one entry per output, or None), and None
    for an output that is not differentiable.
    """
    label = backward_name(classes)

    def named(compute, name):
        def expectation(**values):
            return compute(**values)[name]

        expectation.__qualname__ = expectation.__name__ = label
        return expectation

    if outputs is None:

        @_once_per_point
        def gradients(**values):
            return _through_backward(function, names, values, lambda output: [grad_output_for(output, grad_output)])

        return {name: named(gradients, name) for name in names}

    def for_output(k):
        wanted = None if grad_output is None else grad_output[k]

        @_once_per_point
        def gradients(**values):
            return _through_backward(
                function,
                names,
                values,
                lambda *found: [grad_output_for(o, wanted) if i == k else _zeros(o) for i, o in found],
            )

        return {name: named(gradients, name) for name in names}

    return {"outputs": [for_output(k) if flag else None for k, flag in enumerate(outputs)]}


def _once_per_point(compute: Callable) -> Callable:
    """`compute`, run once for the same input tensors, unchanged since: every input's expectation is its part
    of one fresh forward and backward, instead of one forward and backward per input. New tensors, or the
    same ones modified in place, are a new point and run it again."""
    last: dict = {}

    def run(**values):
        point = {n: (t, getattr(t, "_version", None)) for n, t in values.items()}
        seen = last.get("point")
        if (
            seen is not None
            and seen.keys() == point.keys()
            and all(seen[n][0] is t and seen[n][1] == version for n, (t, version) in point.items())
        ):
            return last["result"]
        last.clear()  # a computation that raises leaves nothing to reuse
        result = compute(**values)
        last.update(point=point, result=result)
        return result

    return run


def _zeros(output):
    """Zeros shaped like an output: the grad_output of every output but the one checked."""
    return torch.zeros_like(output)


def _through_backward(function: Callable, names: list[str], values: dict, weights: Callable) -> dict:
    """d sum_k(v_k * f_k) / d input for each input, by a fresh forward and `torch.autograd.grad`; `weights`
    gives the v_k of the (index, detached output) pairs of the differentiable outputs (of the one output)."""
    with torch.enable_grad():
        leaves = {n: t.detach().clone().requires_grad_(True) for n, t in values.items()}
        found = function(**leaves)
        if isinstance(found, (tuple, list)):
            used = [(i, o) for i, o in enumerate(found) if differentiable(o)]
            v = weights(*[(i, o.detach()) for i, o in used])
            found = [o for _, o in used]
        else:
            v = weights(found.detach())
        returned = torch.autograd.grad(found, [leaves[n] for n in names], v, allow_unused=True)
    return {n: (torch.zeros_like(leaves[n]) if g is None else g.detach()) for n, g in zip(names, returned)}
