"""The class statement of a class that `inspect` cannot find: one defined in a notebook cell.

`inspect.getsource` finds a class through its module's file. A class defined in a notebook cell
belongs to `__main__`, which has no file, so on Python 3.11 it raises "source code not
available". Yet IPython (and so ipykernel) keeps every cell's text in `linecache`, under the
file name that the cell's code objects carry (`/tmp/ipykernel_NNN/NNNN.py`,
`<ipython-input-N-...>`), and the class's own methods (a custom `torch.autograd.Function`'s
`forward`, `setup_context`, `backward`, `jvp`, `vmap`) were compiled from that text. The class
statement is the one, in that text, that holds those methods' first lines: the cell's own class,
even when a later cell defines another class of the same name (its methods are another cell's).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import types


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
