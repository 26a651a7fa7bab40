"""Which inputs could be an elementwise chain, read from the autograd graph a check already built.

The diagonal path (core/check/fd/diagonal.py) decides by evaluating the function once under a
recorder that refuses any operation on a tensor derived from x that is not elementwise (or a
full sum or mean). That evaluation costs about two forward passes and is wasted on most
functions, which are not such a chain. The graph of the check's first autograd pass already names
the derivative formula of every operation between the output and each input: where one of them
belongs to an operation the recorder refuses (a matrix product, an index, a reshape), the
recorder would refuse too, and its evaluation is skipped. Anything the graph cannot name for
certain (a custom Function, whose forward the recorder sees operation by operation; an in-place
copy into a view) leaves the recorder to decide, as before: the shortcut only ever skips an
evaluation whose answer is known, so no check takes another path because of it.
"""

from __future__ import annotations

import re

from ..fd.diagonal import ELEMENTWISE, REDUCTIONS

#: An autograd formula node's class name: the operation's name in camel case, "Backward", an overload number.
_FORMULA = re.compile(r"^([A-Z][A-Za-z0-9]*)Backward\d*$")
#: The operations the recorder accepts on a tensor derived from x, in the graph's spelling (no underscores, lower
#: case): every elementwise one, the full reductions, and the constant scales and shifts that may follow them.
_ACCEPTED = frozenset(
    name.replace("_", "").lower() for name in ELEMENTWISE | set(REDUCTIONS) | {"mul", "div", "neg", "add", "sub"}
)


def refused_by_recorder(node) -> bool:
    """Whether this graph node is the formula of an operation the diagonal recorder refuses, for certain."""
    if getattr(node, "_forward_cls", None) is not None:
        return False  # a custom Function: the recorder sees its forward operation by operation
    match = _FORMULA.match(type(node).__name__)
    return bool(match) and match.group(1).lower() not in _ACCEPTED


def chain_possible(output, leaves: dict) -> dict:
    """For each input name: False where the graph that produced `output` shows an operation the recorder refuses
    between the output and that input, True where the recorder has to decide."""
    root = getattr(output, "grad_fn", None)
    names = {id(leaf): name for name, leaf in leaves.items()}
    reach: dict = {}  # id(node) -> the names of the inputs reachable from that node
    refused: set = set()
    stack = [(root, False)] if root is not None else []
    while stack:  # depth first, each node finished after all of its children
        node, children_done = stack.pop()
        if id(node) in reach:
            continue
        children = [child for child, _ in getattr(node, "next_functions", ()) if child is not None]
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in reach)
            continue
        variable = getattr(node, "variable", None)
        here = {names[id(variable)]} if variable is not None and id(variable) in names else set()
        for child in children:
            here |= reach[id(child)]
        reach[id(node)] = here
        if refused_by_recorder(node):
            refused |= here
    return {name: name not in refused for name in leaves}
