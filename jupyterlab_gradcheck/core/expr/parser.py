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
from .functions import FUNCTIONS, RESERVED_NAMES
from .limits import DEFAULT_LIMITS, Limits

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}
_UNARY = {ast.USub: "-", ast.UAdd: "+"}
_COMPARE = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}

_CONSTRUCT_NAMES = {
    ast.Lambda: "lambda",
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
    ast.NamedExpr: "assignment expression (:=)",
    ast.JoinedStr: "f-string",
    ast.FormattedValue: "f-string",
    ast.Starred: "starred argument",
    ast.IfExp: "conditional expression",
    ast.BoolOp: "boolean operator",
    ast.Dict: "dict literal",
    ast.Set: "set literal",
    ast.List: "list literal",
    ast.Tuple: "tuple",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}


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
        return not self.has_comparison and all(
            FUNCTIONS[name].complex_analytic for name in self.functions
        )

    def non_analytic_functions(self) -> list[str]:
        """The calls (or comparison) that rule out the complex step, for the error message."""
        found = sorted(_with_reason(FUNCTIONS[name]) for name in self.functions
                       if not FUNCTIONS[name].complex_analytic)
        if self.has_comparison:
            found.append("comparison")
        return found


def _with_reason(function) -> str:
    return f"{function.name} ({function.complex_reason})" if function.complex_reason else function.name


def _where(node: ast.AST) -> str:
    return f"column {getattr(node, 'col_offset', 0) + 1}"


class _Checker:
    """Walks the tree once, refusing anything outside the language."""

    def __init__(self, names: frozenset[str], limits: Limits, field_name: str):
        self.allowed = names
        self.limits = limits
        self.field = field_name
        self.used: set[str] = set()
        self.calls: set[str] = set()
        self.nodes = 0
        self.comparison = False
        self.subscripts = False

    def fail(self, message: str, node: ast.AST) -> None:
        raise SpecError(f"{self.field}: {message} at {_where(node)}", field=self.field)

    def visit(self, node: ast.AST, depth: int = 0) -> None:
        self.nodes += 1
        if self.nodes > self.limits.max_expression_nodes:
            self.fail(f"expression has more than {self.limits.max_expression_nodes} nodes", node)
        if depth > self.limits.max_expression_depth:
            self.fail(f"expression nests deeper than {self.limits.max_expression_depth}", node)
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            construct = _CONSTRUCT_NAMES.get(type(node), type(node).__name__)
            self.fail(f"{construct} is not allowed", node)
        method(node, depth + 1)

    def visit_Constant(self, node: ast.Constant, depth: int) -> None:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            kind = "string" if isinstance(value, (str, bytes)) else type(value).__name__
            self.fail(f"{kind} constant {value!r:.40} is not allowed", node)
        if abs(value) > self.limits.max_literal:
            self.fail(f"number {value!r:.40} exceeds the limit {self.limits.max_literal:g}", node)

    def visit_Name(self, node: ast.Name, depth: int) -> None:
        if node.id.startswith("__"):
            self.fail(f"dunder name {node.id!r} is not allowed", node)
        if node.id not in self.allowed:
            hint = " (call it, e.g. torch.sin(x))" if node.id in RESERVED_NAMES else ""
            declared = ", ".join(sorted(self.allowed)) or "none"
            self.fail(f"unknown name {node.id!r}{hint}; declared inputs: {declared}", node)
        self.used.add(node.id)

    def visit_BinOp(self, node: ast.BinOp, depth: int) -> None:
        if type(node.op) not in _BINARY:
            self.fail(f"operator {type(node.op).__name__} is not allowed", node)
        if isinstance(node.op, ast.Pow):
            self._check_exponent(node.right, node)
        self.visit(node.left, depth)
        self.visit(node.right, depth)

    def _check_exponent(self, exponent: ast.AST, node: ast.AST) -> None:
        if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.operand, ast.Constant):
            exponent = exponent.operand
        if isinstance(exponent, ast.Constant) and isinstance(exponent.value, (int, float)):
            if not isinstance(exponent.value, bool) and abs(exponent.value) > self.limits.max_exponent:
                self.fail(
                    f"exponent {exponent.value!r:.40} exceeds the limit {self.limits.max_exponent:g}",
                    node,
                )
        elif isinstance(exponent, ast.BinOp) and isinstance(exponent.op, ast.Pow):
            self.fail("a power of a power in an exponent (tower) is not allowed", node)

    def visit_UnaryOp(self, node: ast.UnaryOp, depth: int) -> None:
        if type(node.op) not in _UNARY:
            self.fail(f"operator {type(node.op).__name__} is not allowed", node)
        self.visit(node.operand, depth)

    def visit_Compare(self, node: ast.Compare, depth: int) -> None:
        if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
            self.fail("only one comparison of <, <=, > or >= is allowed", node)
        self.comparison = True
        self.visit(node.left, depth)
        self.visit(node.comparators[0], depth)

    def visit_Subscript(self, node: ast.Subscript, depth: int) -> None:
        self.subscripts = True
        self.visit(node.value, depth)
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        for part in parts:
            if isinstance(part, ast.Slice):
                for bound in (part.lower, part.upper, part.step):
                    if bound is not None:
                        self._check_index_constant(bound)
            else:
                self._check_index_constant(part)

    def _check_index_constant(self, node: ast.AST) -> None:
        inner = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) else node
        if not (isinstance(inner, ast.Constant) and type(inner.value) is int):
            self.fail("a subscript must be an integer constant or a constant slice", node)
        if abs(inner.value) > self.limits.max_input_elements:
            self.fail("subscript is out of any allowed input's range", node)

    def visit_Call(self, node: ast.Call, depth: int) -> None:
        func = node.func
        receiver = None
        if isinstance(func, ast.Name):
            name = func.id
        elif isinstance(func, ast.Attribute):
            name = func.attr
            if name.startswith("_"):
                self.fail(f"attribute {name!r} is not allowed", func)
            if isinstance(func.value, ast.Name) and func.value.id == "torch":
                pass
            else:
                receiver = func.value
        else:
            self.fail("only named functions can be called", node)
            return
        if receiver is not None:
            self.visit(receiver, depth)  # refuse what the method hangs on before its arity
        spec = FUNCTIONS.get(name)
        if spec is None:
            self.fail(f"function {name!r} is not in the allowed list", func)
        if receiver is not None and not spec.method:
            self.fail(f"{name!r} cannot be called as a tensor method; write {name}(...)", func)
        count = len(node.args) + (1 if receiver is not None else 0)
        if name in ("max", "min") and count == 2:
            self.fail(f"{name} reduces one tensor; the elementwise {name} of two is {name}imum(a, b)", node)
        if not spec.min_args <= count <= spec.max_args:
            hint = " (give the dimension as a keyword, dim=...)" if count > spec.max_args and "dim" in spec.keywords else ""
            self.fail(f"{name} takes {spec.min_args} to {spec.max_args} arguments, got {count}{hint}", node)
        given: set[str] = set()
        for keyword in node.keywords:
            if keyword.arg is None:
                self.fail("** keyword unpacking is not allowed", keyword.value)
            if keyword.arg in given:  # ast accepts it; only the compiler would refuse it
                self.fail(f"keyword {keyword.arg!r} is given twice", keyword.value)
            given.add(keyword.arg)
            if keyword.arg not in spec.keywords:
                allowed = ", ".join(spec.keywords) or "none"
                self.fail(f"keyword {keyword.arg!r} is not allowed for {name} (allowed: {allowed})", keyword.value)
            value = keyword.value
            if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
                value = value.operand
            if keyword.arg == "keepdim":
                if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                    self.fail("keepdim must be True or False", keyword.value)
            elif not (isinstance(value, ast.Constant) and isinstance(value.value, (int, float))
                      and not isinstance(value.value, bool)):
                self.fail(f"keyword {keyword.arg!r} must be a number constant", keyword.value)
        missing = [k for k in spec.required if k not in given]
        if missing:
            self.fail(f"{name} needs the keyword {missing[0]}, e.g. {name}(z, {missing[0]}=0)", node)
        if name == "pow":
            self._check_exponent(node.args[-1], node)
        self.calls.add(name)
        first = 1 if receiver is not None else 0
        for position, argument in enumerate(node.args, start=first):
            if position in spec.constant_args:
                sequence_allowed = position in spec.sequence_args and (name != "reshape" or count == 2)
                self._check_integers(argument, f"{name}: argument {position + 1}", sequence_allowed)
            elif position in spec.index_list_args and isinstance(argument, (ast.List, ast.Tuple)):
                self._check_integers(argument, f"{name}: a list of class indices", True)
            else:
                self.visit(argument, depth)

    def _check_integers(self, node: ast.AST, what: str, sequence_allowed: bool) -> None:
        """An integer constant (a dimension, a size, a class index), or a flat constant tuple or
        list of them where `sequence_allowed`: never evaluated, so never a tensor or an input."""
        items = node.elts if sequence_allowed and isinstance(node, (ast.List, ast.Tuple)) else [node]
        if len(items) > self.limits.max_input_elements:
            self.fail(f"{what} has more than {self.limits.max_input_elements} entries", node)
        for item in items:
            self.nodes += 1
            inner = item.operand if isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub) else item
            if not (isinstance(inner, ast.Constant) and type(inner.value) is int):
                kind = "a tuple or list of integer constants" if sequence_allowed else "an integer constant"
                self.fail(f"{what} must be {kind}", item)
            if abs(inner.value) > self.limits.max_literal:
                self.fail(f"number {inner.value!r:.40} exceeds the limit {self.limits.max_literal:g}", item)
        if self.nodes > self.limits.max_expression_nodes:
            self.fail(f"expression has more than {self.limits.max_expression_nodes} nodes", node)

    def visit_Attribute(self, node: ast.Attribute, depth: int) -> None:
        if node.attr.startswith("__"):
            self.fail(f"dunder attribute {node.attr!r} is not allowed", node)
        if node.attr == "T":  # the transpose of a matrix, x.T: the one attribute the language has
            self.visit(node.value, depth)
            return
        self.fail(f"attribute {node.attr!r} is not allowed (only .T and calls of listed functions)", node)


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
            f"{field_name}: character {name} ({category}) at column {column} is not allowed; "
            "expressions are plain ASCII",
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
        raise SpecError(f"{field_name} must be a string, got {type(text).__name__}", field=field_name)
    if len(text) > limits.max_expression_length:
        raise SpecError(
            f"{field_name} is {len(text)} characters; the limit is {limits.max_expression_length}",
            field=field_name,
        )
    if not text.strip():
        raise SpecError(f"{field_name} is empty", field=field_name)
    _refuse_invisible(text, field_name)
    comment = text.find("#")  # outside a string (strings are refused anyway) it starts a comment
    if comment >= 0:
        raise SpecError(f"{field_name}: a comment (#) is not allowed at column {comment + 1}: only the "
                        "expression is checked, yet a comment would be kept and shown as if it were",
                        field=field_name)
    try:
        tree = _parse_quietly(text.strip())
    except SyntaxError as exc:
        raise SpecError(
            f"{field_name}: syntax error at column {exc.offset or 0}: {exc.msg}", field=field_name
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise SpecError(f"{field_name}: expression is too deeply nested to parse", field=field_name) from None
    checker = _Checker(frozenset(names), limits, field_name)
    for node in ast.walk(tree):
        dunder = getattr(node, "id", None) or getattr(node, "attr", None)
        if isinstance(dunder, str) and dunder.startswith("__"):
            checker.fail(f"dunder name {dunder!r} is not allowed", node)
    checker.visit(tree.body)
    return Expression(
        source=text.strip(),
        tree=tree,
        names=frozenset(checker.used),
        functions=frozenset(checker.calls),
        has_comparison=checker.comparison,
        subscripts=checker.subscripts,
    )
