"""The expectation of a custom `torch.autograd.Function` check: its own hand-written backward.

For a custom Function the hand derivation *is* its `backward`; asking its author to write it a
second time as `grad=` sends them back to `torch.autograd.gradcheck`. So a Python check with no
expectation, of a function whose graph passes through one or more custom Functions, takes as
its expectation "the backward of F": the gradient that autograd computes through the
Functions' own `backward`, in a fresh graph, with the check's grad_output. The observations
then hold that backward against finite differences, as gradcheck does.

The expectation is named by each Function's qualified name and the SHA-256 of its source
(`inspect.getsource` of its class). The name is what the ledger keeps for a callable
expectation, so a backward edited after a failure is a new expectation text: the ledger records
it as an expectation change, and grading flags it as revised after an observation.

A function whose graph holds no custom Function keeps the refusal of a missing expectation.
"""

from __future__ import annotations

from typing import Callable

from .callable_source import function_source


def backward_name(classes: list) -> str:
    """'the backward of Cube [sha256 1a2b3c4d5e6f]' (each Function, ' and ' between): the expectation's text."""
    parts = []
    for owner in classes:
        digest = function_source(owner).get("sha256") or "source unreadable"
        parts.append(f"{owner.__module__}.{owner.__qualname__} [sha256 {digest[:16]}]")
    return "the backward of " + " and ".join(parts)


def backward_expectation(function: Callable, names: list[str], classes: list, grad_output=None) -> dict:
    """{input name: callable of the inputs} giving d sum(v * f) / d input through the Functions' own backward.

    Each callable runs a fresh forward and `torch.autograd.grad` (grad mode on, whatever the
    caller's), so it observes the backward as written, not a value computed once and kept.
    """
    import torch

    from .observations import grad_output_for

    label = backward_name(classes)

    def gradients(**values):
        with torch.enable_grad():
            leaves = {n: t.detach().clone().requires_grad_(True) for n, t in values.items()}
            output = function(**leaves)
            v = grad_output_for(output.detach(), grad_output)
            returned = torch.autograd.grad(output, [leaves[n] for n in names], v, allow_unused=True)
        return {n: (torch.zeros_like(leaves[n]) if g is None else g.detach()) for n, g in zip(names, returned)}

    def one(name):
        def expectation(**values):
            return gradients(**values)[name]

        expectation.__qualname__ = expectation.__name__ = label
        return expectation

    return {name: one(name) for name in names}
