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

# -------------------- limits
# Documented limits on what a check may ask for, so that bad input fails before it runs.
#
# Each default is chosen so that the course exercises and engineering checks fit with room to
# spare, while a hostile record cannot make the process allocate or loop without bound.


@dataclass(frozen=True)
class Limits:
    """Bounds applied by the expression parser and the record validator."""

    #: Characters in one expression: long enough for any hand derivation worth writing.
    max_expression_length: int = 2000
    #: Depth of the expression tree: deep nesting is a parser attack, not a derivative.
    max_expression_depth: int = 32
    #: Nodes in the expression tree.
    max_expression_nodes: int = 400
    #: Largest absolute value of a constant exponent in `**` or `pow`.
    max_exponent: float = 64.0
    #: Largest absolute numeric literal in an expression.
    max_literal: float = 1e12
    #: An instructor's cap on the elements over all inputs of one check. None (the default): the
    #: cap follows the device's free memory (core/run.py) and, on a
    #: server, the work its timeout allows (server/service.py `admit`).
    max_input_elements: int | None = None
    #: Elements of one value written as a nested list in a record (and entries of an integer
    #: list or a subscript in an expression): parsing JSON numbers costs about a microsecond
    #: each. Larger tensors come from Python, where they travel as stored values
    #: (core/values/form.py) and only memory bounds them.
    max_list_elements: int = 100_000
    #: Elements of any intermediate result the function builds (inferred from the shapes):
    #: broadcasting a 20000x1 input against a 1x20000 one stays within the input limit but
    #: would build 4e8 elements (3.2 GB in float64). 5e7 elements is 400 MB in float64.
    max_intermediate_elements: int = 50_000_000
    #: Nesting depth of an input list (a tensor of rank 8 is plenty for a gradient check).
    max_input_rank: int = 8
    #: Number of named inputs.
    max_inputs: int = 16
    #: Characters in a free-text field (origin, destination, justification, id).
    max_text_length: int = 4000
    #: Relative tolerances from this value up are refused: rtol >= 1 accepts any gradient
    #: of the right sign and magnitude up to twice the reference, so it checks nothing. An
    #: instructor may raise it (the server's `max_rtol` option).
    max_rtol: float = 1.0


DEFAULT_LIMITS = Limits()


# -------------------- functions
# The allow-list of functions an expression may call, and what each one is.
#
# This table is the whole vocabulary of the expression language. A name that is not here is
# refused by the parser before anything runs. `complex_analytic` says whether the complex-step
# finite difference is valid through the function (it is not for abs, relu, clamp, maximum,
# minimum, where or softplus, whose complex extensions either do not exist or are not the
# derivative of the real function), nor for the softmax family, logsigmoid and cross_entropy,
# whose torch kernels have no complex version, nor for norm, max and min).


@dataclass(frozen=True)
class Function:
    """One callable of the expression language."""

    name: str
    min_args: int
    max_args: int
    keywords: tuple[str, ...] = ()
    complex_analytic: bool = True
    method: bool = True  #: also callable as a tensor method, `x.name(...)`
    doc: str = ""
    #: Keywords that must be given (torch's implicit softmax dimension is deprecated).
    required: tuple[str, ...] = ()
    #: Argument positions (the tensor a method hangs on is position 0) that are not tensors
    #: but integer constants, or a constant tuple or list of them: dimensions and shapes.
    constant_args: tuple[int, ...] = ()
    #: Argument positions where a constant list of integers may stand for a tensor of integers
    #: (class indices), besides an ordinary tensor argument.
    index_list_args: tuple[int, ...] = ()
    #: Positions among `constant_args` where a tuple or list of integer constants is allowed.
    sequence_args: tuple[int, ...] = ()
    #: Why complex step is refused through this function, when `complex_analytic` is False
    #: (a Message: shown in the reader's language).
    complex_reason: str = ""


_ELEMENTWISE = {
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "exp": "exponential",
    "log": "natural logarithm",
    "log1p": "log(1 + x), accurate near 0",
    "sqrt": "square root",
    "tanh": "hyperbolic tangent",
    "sigmoid": "logistic function 1 / (1 + exp(-x))",
}

FUNCTIONS: dict[str, Function] = {name: Function(name, 1, 1, doc=doc) for name, doc in _ELEMENTWISE.items()}
FUNCTIONS.update(
    {
        "abs": Function("abs", 1, 1, complex_analytic=False, doc="absolute value (kink at 0)"),
        "relu": Function("relu", 1, 1, complex_analytic=False, doc="max(x, 0) (kink at 0)"),
        "softplus": Function("softplus", 1, 1, complex_analytic=False, method=False, doc="log(1 + exp(x))"),
        "sum": Function("sum", 1, 1, ("dim", "keepdim"), doc="sum of elements"),
        "mean": Function("mean", 1, 1, ("dim", "keepdim"), doc="mean of elements"),
        "prod": Function("prod", 1, 1, ("dim", "keepdim"), doc="product of elements"),
        "dot": Function("dot", 2, 2, doc="dot product of two vectors"),
        "matmul": Function("matmul", 2, 2, doc="matrix product, also written a @ b"),
        "pow": Function("pow", 2, 2, doc="power, also written a ** b"),
        "clamp": Function("clamp", 1, 3, ("min", "max"), complex_analytic=False, doc="clip to [min, max]"),
        "where": Function("where", 3, 3, complex_analytic=False, method=False, doc="where(cond, a, b)"),
        "maximum": Function("maximum", 2, 2, complex_analytic=False, doc="elementwise maximum"),
        "minimum": Function("minimum", 2, 2, complex_analytic=False, doc="elementwise minimum"),
    }
)

_NO_COMPLEX_KERNEL = Message("torch has no complex kernel for it")
#: The functions of the model exercises: softmax and its logarithm, the losses, reductions by
#: dimension, and the linear reshapings a linear or logistic model needs.
FUNCTIONS.update(
    {
        "logsigmoid": Function(
            "logsigmoid",
            1,
            1,
            complex_analytic=False,
            method=False,
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="log(sigmoid(x)), stable",
        ),
        "softmax": Function(
            "softmax",
            1,
            1,
            ("dim",),
            complex_analytic=False,
            required=("dim",),
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="exp(z) / sum(exp(z)) along dim",
        ),
        "log_softmax": Function(
            "log_softmax",
            1,
            1,
            ("dim",),
            complex_analytic=False,
            required=("dim",),
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="z - logsumexp(z) along dim",
        ),
        "logsumexp": Function(
            "logsumexp", 1, 1, ("dim", "keepdim"), required=("dim",), doc="log(sum(exp(z))) along dim, stable"
        ),
        "max": Function(
            "max",
            1,
            1,
            ("dim", "keepdim"),
            complex_analytic=False,
            complex_reason=Message("a maximum is not complex-analytic"),
            doc="largest element; with dim, the values along dim (not the indices)",
        ),
        "min": Function(
            "min",
            1,
            1,
            ("dim", "keepdim"),
            complex_analytic=False,
            complex_reason=Message("a minimum is not complex-analytic"),
            doc="smallest element; with dim, the values along dim (not the indices)",
        ),
        "norm": Function(
            "norm",
            1,
            1,
            ("dim", "keepdim"),
            complex_analytic=False,
            complex_reason=Message("it takes the modulus, |z|, which is not complex-analytic"),
            doc="2-norm of all elements, or along dim",
        ),
        "outer": Function("outer", 2, 2, doc="outer product of two vectors"),
        "transpose": Function("transpose", 3, 3, constant_args=(1, 2), doc="swap dimensions d0 and d1"),
        "reshape": Function(
            "reshape",
            2,
            9,
            constant_args=tuple(range(1, 9)),
            sequence_args=(1,),
            doc="the same elements in a constant shape (one -1 allowed)",
        ),
        "cross_entropy": Function(
            "cross_entropy",
            2,
            2,
            complex_analytic=False,
            method=False,
            index_list_args=(1,),
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="mean cross entropy of logits against class indices or probabilities",
        ),
        "one_hot": Function(
            "one_hot",
            2,
            2,
            constant_args=(0, 1),
            sequence_args=(0,),
            method=False,
            doc="one_hot(indices, classes): constant rows of 0 and 1, as torch's (integers)",
        ),
    }
)

#: Names an expression may not use for an input, because they name something else.
RESERVED_NAMES = frozenset(FUNCTIONS) | {"torch"}


def literal_argument(function: Function, position: int, node: ast.AST) -> bool:
    """Whether argument `position` of a call (a method's tensor is 0) is a constant taken as
    written (a dimension, a shape, class indices) rather than a tensor to evaluate."""
    if position in function.constant_args:
        return True
    if position not in function.index_list_args:
        return False
    inner = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) else node
    return isinstance(inner, (ast.List, ast.Tuple, ast.Constant))


# -------------------- parser


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


# -------------------- checker
# The walk that accepts a parsed tree only if every node is part of the expression language.
#
# `parse_expression` (parser.py) hands it Python's `ast` of the text. Each construct the language
# has is a `visit_` method that checks its own rule (the declared names, the listed functions and
# their keywords, integer exponents and indices, the size and depth limits); any other node is
# refused with a one-line `SpecError` naming it and its column.

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
