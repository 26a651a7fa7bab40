"""The functions a user wrote for a `torch.library` custom operator, found behind what a check sees.

A check of a custom op sees torch's objects, not the user's code:
- `check(my_op, ...)` is given the `CustomOpDef` that `@torch.library.custom_op` returns;
- the graph of `my_op(x)` holds the `torch.autograd.Function` that `register_autograd` generates
  (`GeneratedBackwardFor_<namespace>_<name>_<overload>`), whose `forward` and `backward` are
  torch's and call the user's `setup_context` and `backward`.
Hashing either by its own source would name torch's code, the same for every op. Both carry the
user's functions in torch's autograd-info protocol (`_backward_fn` and `_setup_context_fn`, beside
`_init_fn`, the op's own forward, on a `CustomOpDef`); the generated Function holds that info and
the op in its backward's closure. The op's source is then those functions' sources, in the order
forward, setup_context, backward, and the op's name is `namespace::name`.
"""

from __future__ import annotations

import inspect

#: The attributes of torch's autograd info (torch._library.autograd.InfoProtocol), in the order kept.
PARTS = (("forward", "_init_fn"), ("setup_context", "_setup_context_fn"), ("backward", "_backward_fn"))
#: How deep the closures of a generated backward are searched for the info (torch wraps it once for lists).
DEPTH = 3


def _is_info(value) -> bool:
    return hasattr(value, "_backward_fn") and hasattr(value, "_setup_context_fn")


def _closure(function) -> dict:
    try:
        return inspect.getclosurevars(function).nonlocals
    except (TypeError, ValueError):  # not a Python function (a builtin, a C extension's method)
        return {}


def _generated_info(owner, depth: int = DEPTH):
    """(info, op) held by the closure of a generated Function's backward (or of what wraps it), or None."""
    backward = getattr(owner, "backward", None) if depth == DEPTH else owner
    backward = getattr(backward, "__func__", backward)
    nonlocals = _closure(backward)
    info = nonlocals.get("info")
    if _is_info(info):
        return info, nonlocals.get("op")
    if depth > 1:
        for value in nonlocals.values():
            if inspect.isfunction(value):
                found = _generated_info(value, depth - 1)
                if found is not None:
                    return found
    return None


def op_functions(function) -> tuple[str, list] | None:
    """(the op's name, [(part, user function), ...]) for a custom op or the Function torch generated for its
    autograd; None for anything else. Parts not registered (no setup_context, no backward) are left out."""
    if _is_info(function) and not inspect.isclass(function):
        info, name = function, getattr(function, "_qualname", None) or repr(function)
    elif inspect.isclass(function) and "backward" in vars(function):
        found = _generated_info(function)
        if found is None:
            return None
        info, op = found
        name = op.name() if callable(getattr(op, "name", None)) else getattr(function, "__qualname__", repr(function))
    else:
        return None
    parts = [(part, getattr(info, attribute, None)) for part, attribute in PARTS]
    return name, [(part, value) for part, value in parts if callable(value)]
