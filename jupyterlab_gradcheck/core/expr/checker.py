"""The walk that accepts a parsed tree only if every node is part of the expression language.

`parse_expression` (parser.py) hands it Python's `ast` of the text. Each construct the language
has is a `visit_` method that checks its own rule (the declared names, the listed functions and
their keywords, integer exponents and indices, the size and depth limits); any other node is
refused with a one-line `SpecError` naming it and its column.
"""

from __future__ import annotations

import ast

from ..errors import SpecError
from ..i18n import Message
from .functions import FUNCTIONS, RESERVED_NAMES
from .limits import Limits

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}
_UNARY = {ast.USub: "-", ast.UAdd: "+"}
_COMPARE = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}

_CONSTRUCT_NAMES = {
    ast.Lambda: "lambda",
    ast.ListComp: Message("list comprehension"),
    ast.SetComp: Message("set comprehension"),
    ast.DictComp: Message("dict comprehension"),
    ast.GeneratorExp: Message("generator expression"),
    ast.NamedExpr: Message("assignment expression (:=)"),
    ast.JoinedStr: "f-string",
    ast.FormattedValue: "f-string",
    ast.Starred: Message("starred argument"),
    ast.IfExp: Message("conditional expression"),
    ast.BoolOp: Message("boolean operator"),
    ast.Dict: Message("dict literal"),
    ast.Set: Message("set literal"),
    ast.List: Message("list literal"),
    ast.Tuple: Message("tuple"),
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}


def _column(node: ast.AST) -> int:
    """The 1-based column of `node` in the expression, as a refusal names it."""
    return getattr(node, "col_offset", 0) + 1


class Checker:
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

    def fail(self, problem: Message, node: ast.AST) -> None:
        """Refuse `problem` (a Message, translated when shown) at the column of `node`."""
        raise SpecError(
            "{where}: {problem} at column {column}",
            where=self.field,
            problem=problem,
            column=_column(node),
            field=self.field,
        )

    def visit(self, node: ast.AST, depth: int = 0) -> None:
        self.nodes += 1
        if self.nodes > self.limits.max_expression_nodes:
            self.fail(Message("expression has more than {count} nodes", count=self.limits.max_expression_nodes), node)
        if depth > self.limits.max_expression_depth:
            self.fail(Message("expression nests deeper than {depth}", depth=self.limits.max_expression_depth), node)
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            construct = _CONSTRUCT_NAMES.get(type(node), type(node).__name__)
            self.fail(Message("{construct} is not allowed", construct=construct), node)
        method(node, depth + 1)

    def visit_Constant(self, node: ast.Constant, depth: int) -> None:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            kind = Message("string") if isinstance(value, (str, bytes)) else type(value).__name__
            self.fail(Message("{kind} constant {value!r:.40} is not allowed", kind=kind, value=value), node)
        if abs(value) > self.limits.max_literal:
            self.fail(
                Message("number {value!r:.40} exceeds the limit {limit:g}", value=value, limit=self.limits.max_literal),
                node,
            )

    def visit_Name(self, node: ast.Name, depth: int) -> None:
        if node.id.startswith("__"):
            self.fail(Message("dunder name {name!r} is not allowed", name=node.id), node)
        if node.id not in self.allowed:
            hint = Message(" (call it, e.g. torch.sin(x))") if node.id in RESERVED_NAMES else ""
            declared = ", ".join(sorted(self.allowed)) or Message("none")
            self.fail(
                Message(
                    "unknown name {name!r}{hint}; declared inputs: {declared}",
                    name=node.id,
                    hint=hint,
                    declared=declared,
                ),
                node,
            )
        self.used.add(node.id)

    def visit_BinOp(self, node: ast.BinOp, depth: int) -> None:
        if type(node.op) not in _BINARY:
            self.fail(Message("operator {operator} is not allowed", operator=type(node.op).__name__), node)
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
                    Message(
                        "exponent {value!r:.40} exceeds the limit {limit:g}",
                        value=exponent.value,
                        limit=self.limits.max_exponent,
                    ),
                    node,
                )
        elif isinstance(exponent, ast.BinOp) and isinstance(exponent.op, ast.Pow):
            self.fail(Message("a power of a power in an exponent (tower) is not allowed"), node)

    def visit_UnaryOp(self, node: ast.UnaryOp, depth: int) -> None:
        if type(node.op) not in _UNARY:
            self.fail(Message("operator {operator} is not allowed", operator=type(node.op).__name__), node)
        self.visit(node.operand, depth)

    def visit_Compare(self, node: ast.Compare, depth: int) -> None:
        if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
            self.fail(Message("only one comparison of <, <=, > or >= is allowed"), node)
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
            self.fail(Message("a subscript must be an integer constant or a constant slice"), node)
        if abs(inner.value) > self.limits.max_list_elements:
            self.fail(Message("subscript is out of any allowed input's range"), node)

    def visit_Call(self, node: ast.Call, depth: int) -> None:
        func = node.func
        receiver = None
        if isinstance(func, ast.Name):
            name = func.id
        elif isinstance(func, ast.Attribute):
            name = func.attr
            if name.startswith("_"):
                self.fail(Message("attribute {name!r} is not allowed", name=name), func)
            if isinstance(func.value, ast.Name) and func.value.id == "torch":
                pass
            else:
                receiver = func.value
        else:
            self.fail(Message("only named functions can be called"), node)
            return
        if receiver is not None:
            self.visit(receiver, depth)  # refuse what the method hangs on before its arity
        spec = FUNCTIONS.get(name)
        if spec is None:
            self.fail(Message("function {name!r} is not in the allowed list", name=name), func)
        if receiver is not None and not spec.method:
            self.fail(Message("{name!r} cannot be called as a tensor method; write {name}(...)", name=name), func)
        count = len(node.args) + (1 if receiver is not None else 0)
        if name in ("max", "min") and count == 2:
            self.fail(
                Message("{name} reduces one tensor; the elementwise {name} of two is {name}imum(a, b)", name=name), node
            )
        if not spec.min_args <= count <= spec.max_args:
            hint = (
                Message(" (give the dimension as a keyword, dim=...)")
                if count > spec.max_args and "dim" in spec.keywords
                else ""
            )
            self.fail(
                Message(
                    "{name} takes {least} to {most} arguments, got {count}{hint}",
                    name=name,
                    least=spec.min_args,
                    most=spec.max_args,
                    count=count,
                    hint=hint,
                ),
                node,
            )
        given: set[str] = set()
        for keyword in node.keywords:
            if keyword.arg is None:
                self.fail(Message("** keyword unpacking is not allowed"), keyword.value)
            if keyword.arg in given:  # ast accepts it; only the compiler would refuse it
                self.fail(Message("keyword {keyword!r} is given twice", keyword=keyword.arg), keyword.value)
            given.add(keyword.arg)
            if keyword.arg not in spec.keywords:
                allowed = ", ".join(spec.keywords) or Message("none")
                self.fail(
                    Message(
                        "keyword {keyword!r} is not allowed for {name} (allowed: {allowed})",
                        keyword=keyword.arg,
                        name=name,
                        allowed=allowed,
                    ),
                    keyword.value,
                )
            value = keyword.value
            if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
                value = value.operand
            if keyword.arg == "keepdim":
                if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                    self.fail(Message("keepdim must be True or False"), keyword.value)
            elif not (
                isinstance(value, ast.Constant)
                and isinstance(value.value, (int, float))
                and not isinstance(value.value, bool)
            ):
                self.fail(Message("keyword {keyword!r} must be a number constant", keyword=keyword.arg), keyword.value)
        missing = [k for k in spec.required if k not in given]
        if missing:
            self.fail(
                Message(
                    "{name} needs the keyword {keyword}, e.g. {name}(z, {keyword}=0)", name=name, keyword=missing[0]
                ),
                node,
            )
        if name == "pow":
            self._check_exponent(node.args[-1], node)
        self.calls.add(name)
        first = 1 if receiver is not None else 0
        for position, argument in enumerate(node.args, start=first):
            if position in spec.constant_args:
                sequence_allowed = position in spec.sequence_args and (name != "reshape" or count == 2)
                what = Message("{name}: argument {position}", name=name, position=position + 1)
                self._check_integers(argument, what, sequence_allowed)
            elif position in spec.index_list_args and isinstance(argument, (ast.List, ast.Tuple)):
                self._check_integers(argument, Message("{name}: a list of class indices", name=name), True)
            else:
                self.visit(argument, depth)

    def _check_integers(self, node: ast.AST, what: Message, sequence_allowed: bool) -> None:
        """An integer constant (a dimension, a size, a class index), or a flat constant tuple or
        list of them where `sequence_allowed`: never evaluated, so never a tensor or an input."""
        items = node.elts if sequence_allowed and isinstance(node, (ast.List, ast.Tuple)) else [node]
        if len(items) > self.limits.max_list_elements:
            self.fail(
                Message("{what} has more than {count} entries", what=what, count=self.limits.max_list_elements), node
            )
        for item in items:
            self.nodes += 1
            inner = item.operand if isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub) else item
            if not (isinstance(inner, ast.Constant) and type(inner.value) is int):
                kind = (
                    Message("a tuple or list of integer constants")
                    if sequence_allowed
                    else Message("an integer constant")
                )
                self.fail(Message("{what} must be {kind}", what=what, kind=kind), item)
            if abs(inner.value) > self.limits.max_literal:
                self.fail(
                    Message(
                        "number {value!r:.40} exceeds the limit {limit:g}",
                        value=inner.value,
                        limit=self.limits.max_literal,
                    ),
                    item,
                )
        if self.nodes > self.limits.max_expression_nodes:
            self.fail(Message("expression has more than {count} nodes", count=self.limits.max_expression_nodes), node)

    def visit_Attribute(self, node: ast.Attribute, depth: int) -> None:
        if node.attr.startswith("__"):
            self.fail(Message("dunder attribute {name!r} is not allowed", name=node.attr), node)
        if node.attr == "T":  # the transpose of a matrix, x.T: the one attribute the language has
            self.visit(node.value, depth)
            return
        self.fail(
            Message("attribute {name!r} is not allowed (only .T and calls of listed functions)", name=node.attr), node
        )
