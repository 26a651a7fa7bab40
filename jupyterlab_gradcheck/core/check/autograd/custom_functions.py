"""Which custom `torch.autograd.Function`s a function goes through, read from its autograd graph.

The graph that produced an output names, at each node of a custom Function, the Function's class
(`_forward_cls`). A check uses that to take a Function's own backward as the expectation
(core/check/autograd/backward_expectation.py) and to observe its forward mode and batched gradients
(core/check/autograd/forward_and_batched.py); nothing is assumed from the function's name or source.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

#: The class name of a node PyTorch's own derivative formulas make (SinBackward0, MmBackward0), and of a leaf's.
_BUILT_IN = re.compile(r"^([A-Z][A-Za-z0-9]*Backward\d*|AccumulateGrad)$")


def custom_functions(function: Callable, inputs: dict, dtype: str = "float64", device: str = "cpu") -> list:
    """The custom autograd Function classes one forward pass of `function` at `inputs` (numbers, lists or
    tensors, in `dtype` on `device`) goes through, in graph order."""
    leaves = {
        n: torch.as_tensor(v, dtype=getattr(torch, dtype), device=device).detach().clone().requires_grad_(True)
        for n, v in inputs.items()
    }
    with torch.enable_grad():
        output = function(**leaves)
    return graph_functions(output)


def graph_nodes(output):
    """Each node of the graph that produced `output` (a tensor, or a tuple or list of outputs) once, depth first
    from the first output."""
    roots = list(output) if isinstance(output, (tuple, list)) else [output]
    seen, stack = set(), [getattr(root, "grad_fn", None) for root in reversed(roots)]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(next_node for next_node, _ in getattr(node, "next_functions", ()))


def graph_functions(output) -> list:
    """The custom autograd Function classes in the graph that produced `output` (a tensor, or a tuple or
    list of outputs), in graph order."""
    found = []
    for node in graph_nodes(output):
        owner = getattr(node, "_forward_cls", None)
        if owner is not None and owner not in found:
            found.append(owner)
    return found


def only_built_in_formulas(output) -> bool:
    """Whether every node of the graph that produced `output` (a tensor, or a tuple or list of them) is one of
    PyTorch's own derivative formulas or a leaf: no custom Function, no C++ extension's node, nothing unknown."""
    return all(
        getattr(node, "_forward_cls", None) is None and _BUILT_IN.match(type(node).__name__)
        for node in graph_nodes(output)
    )
