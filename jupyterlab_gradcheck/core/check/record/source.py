"""The source text of a Python callable, kept in its record so that a grader can read it.

A check of a Python callable (the API's `check(fn, ...)`) cannot be replayed outside the
kernel it ran in: the record names the callable (`function` is its qualified name) and the
expression language never evaluates Python. Keeping the callable's source and its SHA-256 in
the record (`function_source`) lets whoever verifies the ledger see what was checked, and
notice a source edited afterwards (its hash no longer matches). The text is what `inspect`
reads where the callable was defined: for a lambda, the whole lines that hold it; for a custom
`torch.autograd.Function`, its class. A class defined in a notebook cell, which `inspect` cannot
find, is read from the cell's text through its methods' code (record/source.py); a
`torch.library` custom op, and the Function torch generates for its autograd, by the user's
forward, setup_context and backward (record/source.py), never by torch's own code.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import textwrap
import types
import weakref
from collections.abc import Callable

# -------------------- callable source

#: The record field that holds `{"text", "sha256"}` (both None, with a `reason`, when unreadable).
FIELD = "function_source"
#: Longest source text kept in a record; a longer one keeps its hash and its first characters.
MAX_SOURCE_CHARS = 20_000


def source_hash(text: str) -> str:
    """SHA-256 (hex) of the source text as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: Each callable's source as first read, kept only while what it was read from lives: reading it
#: again cost 0.2-0.5 ms (Python tokenizes the file from the definition on), a tenth of a small
#: check. A function or class edited and run again is a new object, so its new source is read.
_READ: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def read_from(function):
    """What a callable's source is read from: a plain function's code object, else the callable itself.

    Closures made by one factory are new function objects that share one code object, and so one
    source text: keyed by the code, the text is read once for all of them. A wrapper (`__wrapped__`)
    is keyed by itself, since `inspect` follows it elsewhere.
    """
    if isinstance(function, types.FunctionType) and not hasattr(function, "__wrapped__"):
        return function.__code__
    return function


def function_source(function: Callable) -> dict:
    """`{"text", "sha256"}` of a callable's source; `{"text": None, "sha256": None, "reason"}`
    when Python cannot find it (a builtin, a callable typed at a plain interactive prompt)."""
    op = op_functions(_unwrapped(function))
    if op is not None:  # read afresh: register_autograd may have replaced a part since
        return _joined(op[1])
    key = read_from(function)
    try:
        return dict(_READ[key])
    except (KeyError, TypeError):  # not read yet, or a callable that cannot be weakly referenced
        pass
    source = _read(function)
    try:
        _READ[key] = source
    except TypeError:  # no weak reference to it (a builtin): read it again next time
        pass
    return dict(source)


def callable_name(owner) -> str:
    """How an expectation names a custom Function: `module.Qualname`, or for the Function torch generated
    for a custom op's autograd, the op (`namespace::name`)."""
    op = op_functions(owner) if inspect.isclass(owner) else None
    return op[0] if op is not None else f"{owner.__module__}.{owner.__qualname__}"


def _joined(parts: list) -> dict:
    """The source of a custom op: its parts' texts, two blank lines between, as in a module."""
    texts = []
    for part, function in parts:
        source = function_source(function)
        if source["text"] is None:
            return {"text": None, "sha256": None, "reason": f"{part}: {source['reason']}"}
        texts.append(source["text"])
    return _kept("\n\n\n".join(texts))


def _text(function: Callable) -> str:
    """What `inspect` reads for `function`; else, for a class (or an instance with `__call__`, its class),
    the class statement its methods' code points to. Never the source of a metaclass: every custom
    autograd Function's class is torch's FunctionMeta."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError) as exc:
        unreadable = exc
    target = _unwrapped(function)
    if not inspect.isclass(target):
        if isinstance(target, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
            raise unreadable
        target = type(target)  # an instance with __call__: the source of its class
        try:
            return inspect.getsource(target)
        except (OSError, TypeError):
            pass
    text = class_text(target)
    if text is None:
        raise unreadable
    return text


def _unwrapped(function):
    """What `function` wraps (the api's wrappers name a Function's class or a custom op), or itself."""
    try:
        return inspect.unwrap(function)
    except ValueError:  # a cycle of __wrapped__
        return function


def _read(function: Callable) -> dict:
    try:
        text = _text(function)
    except (OSError, TypeError) as exc:
        return {"text": None, "sha256": None, "reason": f"{type(exc).__name__}: {exc}"}
    return _kept(textwrap.dedent(text).rstrip("\n"))


def _kept(text: str) -> dict:
    """`{"text", "sha256"}` of a source text, the text cut to MAX_SOURCE_CHARS (its hash is of all of it)."""
    source = {"text": text, "sha256": source_hash(text)}
    if len(text) > MAX_SOURCE_CHARS:
        source.update(text=text[:MAX_SOURCE_CHARS], truncated_from=len(text))
    return source


# -------------------- class source
# The class statement of a class that `inspect` cannot find: one defined in a notebook cell.
#
# `inspect.getsource` finds a class through its module's file. A class defined in a notebook cell
# belongs to `__main__`, which has no file, so on Python 3.11 it raises "source code not
# available". Yet IPython (and so ipykernel) keeps every cell's text in `linecache`, under the
# file name that the cell's code objects carry (`/tmp/ipykernel_NNN/NNNN.py`,
# `<ipython-input-N-...>`), and the class's own methods (a custom `torch.autograd.Function`'s
# `forward`, `setup_context`, `backward`, `jvp`, `vmap`) were compiled from that text. The class
# statement is the one, in that text, that holds those methods' first lines: the cell's own class,
# even when a later cell defines another class of the same name (its methods are another cell's).


def method_codes(owner: type) -> list[types.CodeType]:
    """The code objects of the functions defined in the class body itself (plain, static and class
    methods, properties), in definition order; inherited ones belong to other classes."""
    codes = []
    for value in vars(owner).values():
        for function in (getattr(value, "__func__", value), getattr(value, "fget", None)):
            if isinstance(function, types.FunctionType):
                codes.append(function.__code__)
    return codes


def _statement(tree: ast.AST, name: str, lines: set[int]) -> ast.ClassDef | None:
    """The innermost `class name` statement of the tree whose lines hold every line of `lines`."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            if all(node.lineno <= line <= (node.end_lineno or node.lineno) for line in lines):
                if found is None or node.lineno > found.lineno:
                    found = node
    return found


def class_text(owner: type) -> str | None:
    """The text of `owner`'s class statement (decorators included), read from the file its methods'
    code names, as `inspect.getsource` would cut it from a module; None when it has no method, or
    its methods' file is not kept (a class typed at a plain interactive prompt)."""
    by_file: dict[str, set[int]] = {}
    for code in method_codes(owner):
        by_file.setdefault(code.co_filename, set()).add(code.co_firstlineno)
    for filename, lines in by_file.items():
        text = linecache.getlines(filename)
        if not text:
            continue
        try:
            tree = ast.parse("".join(text))
        except (SyntaxError, ValueError):  # a file changed since the class was compiled from it
            continue
        node = _statement(tree, owner.__name__, lines)
        if node is not None:
            start = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
            return "".join(inspect.getblock(text[start - 1 :]))
    return None


# -------------------- custom op source
# The functions a user wrote for a `torch.library` custom operator, found behind what a check sees.
#
# A check of a custom op sees torch's objects, not the user's code:
# - `check(my_op, ...)` is given the `CustomOpDef` that `@torch.library.custom_op` returns;
# - the graph of `my_op(x)` holds the `torch.autograd.Function` that `register_autograd` generates
#   (`GeneratedBackwardFor_<namespace>_<name>_<overload>`), whose `forward` and `backward` are
#   torch's and call the user's `setup_context` and `backward`.
# Hashing either by its own source would name torch's code, the same for every op. Both carry the
# user's functions in torch's autograd-info protocol (`_backward_fn` and `_setup_context_fn`, beside
# `_init_fn`, the op's own forward, on a `CustomOpDef`); the generated Function holds that info and
# the op in its backward's closure. The op's source is then those functions' sources, in the order
# forward, setup_context, backward, and the op's name is `namespace::name`.

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
