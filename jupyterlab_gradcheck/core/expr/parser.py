"""The safe expression language: parse a string into a checked tree, never evaluate text.

`parse_expression` reads a function or derivative such as `x*x`, `(x**2).sum()`,
`torch.sin(x)*y` or `1 - torch.tanh(x)**2` with Python's `ast` module and accepts only:

- numbers and the declared input names;
- `+ - * / ** @`, unary minus and plus, and single comparisons (`x > 0`, for `where`);
- calls of the functions in `functions.FUNCTIONS`, written `torch.f(...)` or `f(...)`, or as
  tensor methods `x.f(...)`, with only the keywords each one documents, given as constants;
- subscripts by integer constants and constant slices (`x[0]`, `x[1:3]`, `w[0, 1]`).

Everything else (attributes outside the list, dunders, lambdas, comprehensions, imports,
strings, starred or double-starred arguments, walrus, f-strings) is refused with a one-line
`SpecError` naming the construct and its column. The checked tree is evaluated by
`expr_eval`, which walks it node by node.
"""

from __future__ import annotations

import ast
import unicodedata
import warnings
from dataclasses import dataclass, field

from ..errors import SpecError
from ..i18n import Message
from .checker import Checker
from .functions import FUNCTIONS
from .limits import DEFAULT_LIMITS, Limits


@dataclass(frozen=True)
class Expression:
    """A parsed and checked expression: its source, tree and the names it uses."""

    source: str
    tree: ast.Expression
    names: frozenset[str]
    functions: frozenset[str]
    has_comparison: bool = False
    subscripts: bool = False
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def complex_analytic(self) -> bool:
        """Whether the complex-step finite difference is valid through every call here."""
        return not self.has_comparison and all(FUNCTIONS[name].complex_analytic for name in self.functions)

    def non_analytic_functions(self) -> list[str]:
        """The calls (or comparison) that rule out the complex step, for the error message."""
        found = sorted(_with_reason(FUNCTIONS[name]) for name in self.functions if not FUNCTIONS[name].complex_analytic)
        if self.has_comparison:
            found.append(Message("comparison"))
        return found


def _with_reason(function) -> str:
    if not function.complex_reason:
        return function.name
    return Message("{name} ({reason})", name=function.name, reason=function.complex_reason)


def call_parts(node: ast.Call) -> tuple[str, list]:
    """A checked call's function name and its arguments, a method's tensor first:
    `x.sum(dim=0)`, `sum(x, dim=0)` and `torch.sum(x, dim=0)` all give ("sum", [x])."""
    func = node.func
    args = list(node.args)
    if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id == "torch"):
        args.insert(0, func.value)
    return (func.id if isinstance(func, ast.Name) else func.attr), args


def constant_value(node: ast.AST):
    """The Python value of a checked constant argument: a number, a negated one, a constant
    slice, or a list of them (a shape, class indices). Only called on what the checker allowed."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [constant_value(item) for item in node.elts]
    if isinstance(node, ast.Slice):
        return slice(*(None if b is None else constant_value(b) for b in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.UnaryOp):
        value = constant_value(node.operand)
        return -value if isinstance(node.op, ast.USub) else +value
    return node.value


def _refuse_invisible(text: str, field_name: str) -> None:
    for column, char in enumerate(text, start=1):
        if char.isascii():
            if char.isprintable() or char in " \t":
                continue
        category = unicodedata.category(char)
        name = unicodedata.name(char, f"U+{ord(char):04X}")
        raise SpecError(
            "{where}: character {name} ({category}) at column {column} is not allowed; expressions are plain ASCII",
            where=field_name,
            name=name,
            category=category,
            column=column,
            field=field_name,
        )


def _parse_quietly(text: str) -> ast.Expression:
    """`ast.parse` in expression mode, without the SyntaxWarnings Python prints for text such as
    `1if x else y`: the refusal that follows is the one line the user sees."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(text, mode="eval")


def parse_expression(
    text: str,
    names,
    *,
    limits: Limits = DEFAULT_LIMITS,
    field_name: str = "function",
) -> Expression:
    """Parse and check `text` against the language; raise SpecError naming what is refused."""
    if not isinstance(text, str):
        raise SpecError(
            "{where} must be a string, got {kind}", where=field_name, kind=type(text).__name__, field=field_name
        )
    if len(text) > limits.max_expression_length:
        raise SpecError(
            "{where} is {length} characters; the limit is {limit}",
            where=field_name,
            length=len(text),
            limit=limits.max_expression_length,
            field=field_name,
        )
    if not text.strip():
        raise SpecError("{where} is empty", where=field_name, field=field_name)
    _refuse_invisible(text, field_name)
    comment = text.find("#")  # outside a string (strings are refused anyway) it starts a comment
    if comment >= 0:
        raise SpecError(
            "{where}: a comment (#) is not allowed at column {column}: only the "
            "expression is checked, yet a comment would be kept and shown as if it were",
            where=field_name,
            column=comment + 1,
            field=field_name,
        )
    try:
        tree = _parse_quietly(text.strip())
    except SyntaxError as exc:
        raise SpecError(
            "{where}: syntax error at column {column}: {detail}",
            where=field_name,
            column=exc.offset or 0,
            detail=exc.msg,
            field=field_name,
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise SpecError(
            "{where}: expression is too deeply nested to parse", where=field_name, field=field_name
        ) from None
    checker = Checker(frozenset(names), limits, field_name)
    for node in ast.walk(tree):
        dunder = getattr(node, "id", None) or getattr(node, "attr", None)
        if isinstance(dunder, str) and dunder.startswith("__"):
            checker.fail(Message("dunder name {name!r} is not allowed", name=dunder), node)
    checker.visit(tree.body)
    return Expression(
        source=text.strip(),
        tree=tree,
        names=frozenset(checker.used),
        functions=frozenset(checker.calls),
        has_comparison=checker.comparison,
        subscripts=checker.subscripts,
    )
