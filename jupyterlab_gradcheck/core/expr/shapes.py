"""Shape inference over a checked expression, without torch and without evaluating it.

Some bad input only shows in the shapes: `x[5]` on two elements, `dot` of a scalar,
`x @ y` with a scalar, `sum(x, dim=5)`, shapes that do not broadcast, an analytical
gradient or a `grad_output` that does not fit. The record gives every input's shape, so
these are refused here, as bad input with a one-line message, before anything is written
to a ledger or run. The rules are torch's (broadcasting, reductions, indexing, matmul).
Constant sub-expressions are folded with Python numbers, so `1/0` and overflowing integers
are refused too.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass

from ..errors import SpecError
from ..i18n import Message
from .functions import FUNCTIONS, literal_argument
from .limits import DEFAULT_LIMITS
from .model_shapes import model_shape, reduced_shape, transposed_shape
from .parser import Expression, call_parts, constant_value

_INT_LIMIT = 2**63


@dataclass(frozen=True)
class _Value:
    """A tensor of known shape, or a Python constant (shape None)."""

    shape: tuple[int, ...] | None
    constant: float | int | None = None

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    @property
    def as_tensor_shape(self) -> tuple[int, ...]:
        return self.shape if self.shape is not None else ()


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy/torch broadcasting; ValueError naming the shapes when they do not broadcast (its
    argument a Message, so a surface can show it in the reader's language)."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(rank):
        sizes = {s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0} - {1}
        if len(sizes) > 1:
            listed = str(list(shapes[0]))
            for shape in shapes[1:]:  # "[2] and [3] and [1]", the joining word translated when shown
                listed = Message("{left} and {right}", left=listed, right=str(list(shape)))
            raise ValueError(Message("shapes {listed} cannot broadcast: sizes must match or be 1", listed=listed))
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


class _Inference:
    def __init__(self, shapes: dict, field: str, limit: int):
        self.shapes = {name: tuple(shape) for name, shape in shapes.items()}
        self.field = field
        self.limit = limit
        self.largest = max((math.prod(s) for s in self.shapes.values()), default=1)

    def fail(self, problem: Message, node: ast.AST) -> None:
        """Refuse `problem` (a Message, translated when shown) at the column of `node`."""
        raise SpecError(
            "{where}: {problem} at column {column}",
            where=self.field,
            problem=problem,
            column=getattr(node, "col_offset", 0) + 1,
            field=self.field,
        )

    def infer(self, node: ast.AST, where_condition: bool = False) -> _Value:
        try:
            value = self._infer(node, where_condition)
        except SpecError:
            raise
        except ValueError as exc:  # a broadcast that does not fit
            self.fail(exc.args[0] if exc.args and isinstance(exc.args[0], Message) else str(exc), node)
        if value.is_tensor:
            size = math.prod(value.shape)
            if size > self.limit:
                self.fail(
                    Message(
                        "an intermediate result of shape {shape} has {size} elements; the limit is {limit}",
                        shape=list(value.shape),
                        size=size,
                        limit=self.limit,
                    ),
                    node,
                )
            self.largest = max(self.largest, size)
        return value

    def _infer(self, node, where_condition):
        if isinstance(node, ast.Constant):
            return _Value(None, node.value)
        if isinstance(node, ast.Name):
            return _Value(self.shapes[node.id])
        if isinstance(node, ast.UnaryOp):
            value = self.infer(node.operand)
            if value.is_tensor:
                return value
            return _Value(None, -value.constant if isinstance(node.op, ast.USub) else value.constant)
        if isinstance(node, ast.Compare):
            if not where_condition:
                self.fail(Message("a comparison is only allowed as the condition of where(...)"), node)
            left, right = self.infer(node.left), self.infer(node.comparators[0])
            return _Value(broadcast(left.as_tensor_shape, right.as_tensor_shape))
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Attribute):  # .T, the only attribute the parser lets through
            value = self.infer(node.value)
            return _Value(transposed_shape(value.as_tensor_shape, lambda message: self.fail(message, node)))
        raise ValueError(Message("{construct} is not allowed", construct=type(node).__name__))  # refused first

    def _binary(self, node: ast.BinOp) -> _Value:
        left, right = self.infer(node.left), self.infer(node.right)
        if isinstance(node.op, ast.MatMult):
            return _Value(self._matmul(left, right, node))
        if left.is_tensor or right.is_tensor:
            return _Value(broadcast(left.as_tensor_shape, right.as_tensor_shape))
        ops = {
            ast.Add: operator.add,
            ast.Sub: operator.sub,
            ast.Mult: operator.mul,
            ast.Div: operator.truediv,
            ast.Pow: operator.pow,
        }
        try:
            value = ops[type(node.op)](left.constant, right.constant)
        except ZeroDivisionError:
            self.fail(Message("division by zero in a constant"), node)
        except OverflowError:
            self.fail(Message("a constant overflows"), node)
        if isinstance(value, complex):
            self.fail(Message("a constant is not a real number"), node)
        if isinstance(value, int) and abs(value) >= _INT_LIMIT:
            self.fail(Message("an integer constant exceeds 2**63"), node)
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(Message("a constant is not finite"), node)
        return _Value(None, value)

    def _matmul(self, left: _Value, right: _Value, node) -> tuple[int, ...]:
        a, b = left.as_tensor_shape, right.as_tensor_shape
        if not a or not b:
            self.fail(
                Message(
                    "both arguments to matmul need to be at least 1D, got {left}D and {right}D",
                    left=len(a),
                    right=len(b),
                ),
                node,
            )
        if len(a) == 1 and len(b) == 1:
            if a != b:
                self.fail(Message("matmul of vectors of lengths {left} and {right}", left=a[0], right=b[0]), node)
            return ()
        inner_a = a[-1]
        inner_b = b[0] if len(b) == 1 else b[-2]
        if inner_a != inner_b:
            self.fail(
                Message(
                    "matmul shapes {left} and {right} do not multiply ({inner_left} vs {inner_right})",
                    left=list(a),
                    right=list(b),
                    inner_left=inner_a,
                    inner_right=inner_b,
                ),
                node,
            )
        batch = broadcast(a[:-2], b[:-2])
        rows = a[-2:-1] if len(a) > 1 else ()
        cols = b[-1:] if len(b) > 1 else ()
        return batch + rows + cols

    def _subscript(self, node: ast.Subscript) -> _Value:
        value = self.infer(node.value)
        if not value.is_tensor:
            self.fail(Message("a number cannot be subscripted"), node)
        shape = value.shape
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        if not shape:
            self.fail(Message("invalid index of a 0-dim tensor (a scalar input has no elements to pick)"), node)
        if len(parts) > len(shape):
            self.fail(Message("too many indices for tensor of dimension {rank}", rank=len(shape)), node)
        result = []
        for axis, part in enumerate(parts):
            size = shape[axis]
            if isinstance(part, ast.Slice):
                bounds = [None if b is None else constant_value(b) for b in (part.lower, part.upper, part.step)]
                if bounds[2] is not None and bounds[2] <= 0:
                    self.fail(
                        Message("slice step cannot be zero")
                        if bounds[2] == 0
                        else Message("slice step must be positive"),
                        node,
                    )
                result.append(len(range(*slice(*bounds).indices(size))))
            else:
                position = constant_value(part)
                if not -size <= position < size:
                    self.fail(
                        Message(
                            "index {position} is out of bounds for dimension {axis} with size {size}",
                            position=position,
                            axis=axis,
                            size=size,
                        ),
                        node,
                    )
        return _Value(tuple(result) + shape[len(parts) :])

    def _call(self, node: ast.Call) -> _Value:
        name, args = call_parts(node)
        keywords = {k.arg: constant_value(k.value) for k in node.keywords}
        if name == "where":
            if not isinstance(args[0], ast.Compare):
                self.fail(Message("the condition of where(...) must be a comparison such as x > 0"), node)
            shapes = [self.infer(args[0], where_condition=True)] + [self.infer(a) for a in args[1:]]
            return _Value(broadcast(*(v.as_tensor_shape for v in shapes)))
        function = FUNCTIONS[name]
        literal = [literal_argument(function, position, a) for position, a in enumerate(args)]
        values = [None if constant else self.infer(a) for a, constant in zip(args, literal)]
        shapes = [None if v is None else v.as_tensor_shape for v in values]
        modelled = model_shape(name, args, shapes, keywords, lambda message: self.fail(message, node))
        if modelled is not None:
            return _Value(modelled)
        if name in ("sum", "mean", "prod"):
            return _Value(self._reduce(shapes[0], keywords, node))
        if name == "dot":
            if len(shapes[0]) != 1 or len(shapes[1]) != 1:
                self.fail(
                    Message(
                        "dot: 1D tensors expected, but got {left}D and {right}D tensors",
                        left=len(shapes[0]),
                        right=len(shapes[1]),
                    ),
                    node,
                )
            if shapes[0] != shapes[1]:
                self.fail(
                    Message("dot: vectors of lengths {left} and {right}", left=shapes[0][0], right=shapes[1][0]), node
                )
            return _Value(())
        if name == "matmul":
            return _Value(self._matmul(values[0], values[1], node))
        if name == "clamp" and len(values) == 1 and not keywords:
            self.fail(Message("clamp needs min or max"), node)
        return _Value(broadcast(*shapes))

    def _reduce(self, shape, keywords, node) -> tuple[int, ...]:
        dim = keywords.get("dim")
        if dim is None and keywords.get("keepdim") is not None:  # torch refuses keepdim alone
            self.fail(Message("keepdim needs dim"), node)
        return reduced_shape(shape, dim, keywords.get("keepdim"), lambda message: self.fail(message, node))


@dataclass(frozen=True)
class ShapeReport:
    """What shape inference found: the result's shape and the largest tensor built on the way."""

    shape: tuple[int, ...]
    largest: int


def infer_shapes(
    expression: Expression, shapes: dict, field: str = "function", limit: int = DEFAULT_LIMITS.max_intermediate_elements
) -> ShapeReport:
    """The shapes `expression` builds on inputs of `shapes`; SpecError when torch would refuse
    them or one is larger than `limit` elements."""
    inference = _Inference(shapes, field, limit)
    value = inference.infer(expression.tree.body)
    return ShapeReport(value.as_tensor_shape, inference.largest)


def output_shape(expression: Expression, shapes: dict, field: str = "function") -> tuple[int, ...]:
    """The shape `expression` has on inputs of `shapes`; SpecError when torch would refuse it."""
    return infer_shapes(expression, shapes, field).shape
