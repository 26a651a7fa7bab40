"""The source text of a Python callable, kept in its record so that a grader can read it.

A check of a Python callable (the API's `check(fn, ...)`) cannot be replayed outside the
kernel it ran in: the record names the callable (`function` is its qualified name) and the
expression language never evaluates Python. Keeping the callable's source and its SHA-256 in
the record (`function_source`) lets whoever verifies the ledger see what was checked, and
notice a source edited afterwards (its hash no longer matches). The text is what `inspect`
reads where the callable was defined: for a lambda, the whole lines that hold it; for a custom
`torch.autograd.Function`, its class. A class defined in a notebook cell, which `inspect` cannot
find, is read from the cell's text through its methods' code (record/class_source.py); a
`torch.library` custom op, and the Function torch generates for its autograd, by the user's
forward, setup_context and backward (record/custom_op_source.py), never by torch's own code.
"""

from __future__ import annotations

import hashlib
import inspect
import textwrap
import types
import weakref
from collections.abc import Callable

from .class_source import class_text
from .custom_op_source import op_functions

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
