"""Which custom `torch.autograd.Function`s a function goes through, read from its autograd graph.

The graph that produced an output names, at each node of a custom Function, the Function's class
(`_forward_cls`). A check uses that to take a Function's own backward as the expectation
(core/check/autograd/observations.py) and to observe its forward mode and batched gradients
(core/check/autograd/forward_and_batched.py); nothing is assumed from the function's name or source.
"""

from __future__ import annotations

import inspect
import re
import types
import weakref
from collections.abc import Callable

import torch

from ...errors import SpecError
from ..record.source import read_from

# -------------------- signature
# Whether a Python callable can take the check's inputs, asked before anything runs.
#
# A callable is called with the inputs as keyword arguments (`f(x=..., w=...)`); a custom
# `torch.autograd.Function` is called through its `apply`, the inputs in the order of its
# `forward`'s parameters. A callable that cannot take them would otherwise fail inside the
# first forward pass with a bare `TypeError`, after its expectation was written to the ledger
# as a run that failed. It is bad input instead: one line that names the parameters and the
# inputs, nothing executed, nothing appended.
#
# A callable whose signature Python cannot read (some builtins) is let through: its first
# call says whatever it says.


def _function_class(function):
    """The custom autograd Function a callable stands for (`apply`, or the api's wrapper of it), or None."""
    for candidate in (getattr(function, "__wrapped__", None), getattr(function, "__self__", None), function):
        if inspect.isclass(candidate) and issubclass(candidate, torch.autograd.Function):
            return candidate
    return None


def _readable(function):
    try:  # the callable's own signature: a wrapper that binds held arguments takes the inputs alone
        return inspect.signature(function, follow_wrapped=False)
    except (TypeError, ValueError):  # a builtin without a readable signature
        return None


#: The input names each live callable was found to take, so that a check asked twice (declared,
#: then run) or repeated reads the signature once. A plain function is keyed by its code object
#: (callable_source.read_from), with which of its parameters have defaults beside the names.
_TAKES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _taken(function, names: list[str]) -> tuple:
    """The names, with what else decides whether a plain function takes them: its defaults."""
    if isinstance(function, types.FunctionType):
        return tuple(names), len(function.__defaults__ or ()), tuple(sorted(function.__kwdefaults__ or ()))
    return (tuple(names),)


def check_signature(function, names: list[str]) -> None:
    """Raise SpecError when `function` cannot be called with the inputs `names`; else return."""
    # a function given a signature of its own (`__signature__`) is asked as itself
    key = function if hasattr(function, "__signature__") else read_from(function)
    taken = _taken(function, names)
    try:
        if taken in _TAKES.get(key, ()):
            return
    except TypeError:  # a callable that cannot be weakly referenced: ask every time
        pass
    _check(function, names)
    try:
        _TAKES.setdefault(key, set()).add(taken)
    except TypeError:
        pass


def _check(function, names: list[str]) -> None:
    function_class = _function_class(function)
    if function_class is not None:
        _check_forward(function_class, names)
        return
    signature = _readable(function)
    if signature is None:
        return
    try:
        signature.bind(**{name: None for name in names})
    except TypeError:
        parameters = [p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        raise SpecError(
            "function {function} takes ({parameters}) but the inputs are named {names}: name each input "
            "as the parameter it is passed to",
            function=getattr(function, "__qualname__", type(function).__name__),
            parameters=", ".join(parameters),
            names=", ".join(names),
            field="function",
        ) from None


def _new_style(function_class) -> bool:
    """Whether the Function has its own `setup_context`: then its `forward` takes no ctx."""
    return function_class.setup_context is not torch.autograd.Function.setup_context


def _check_forward(function_class, names: list[str]) -> None:
    """A Function's `forward(ctx, ...)` (or `forward(...)` beside a `setup_context`) takes the inputs
    positionally: their number must fit."""
    signature = _readable(function_class.forward)
    if signature is None:
        return
    new_style = _new_style(function_class)
    parameters = list(signature.parameters.values())[0 if new_style else 1 :]  # after ctx, where there is one
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) <= len(names) <= len(positional):
        return
    if new_style:
        raise SpecError(
            "{function}.forward takes {count} input(s) ({parameters}) but {given} were given ({names})",
            function=function_class.__qualname__,
            count=len(positional),
            parameters=", ".join(p.name for p in positional),
            given=len(names),
            names=", ".join(names),
            field="function",
        )
    raise SpecError(
        "{function}.forward takes {count} input(s) after ctx ({parameters}) but {given} were given ({names})",
        function=function_class.__qualname__,
        count=len(positional),
        parameters=", ".join(p.name for p in positional),
        given=len(names),
        names=", ".join(names),
        field="function",
    )


# -------------------- custom functions

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
