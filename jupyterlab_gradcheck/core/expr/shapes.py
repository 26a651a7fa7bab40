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
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SpecError
from ..i18n import Message
from .parser import DEFAULT_LIMITS, FUNCTIONS, Expression, call_parts, constant_value, literal_argument

# -------------------- shapes

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


# -------------------- model shapes
# Shape rules of the model-exercise functions, checked before anything runs.
#
# softmax, log_softmax, logsumexp, max, min, norm, outer, transpose, `.T`, reshape and
# cross_entropy each refuse, with a one-line message naming the problem, what torch would refuse
# (or, for `.T` on more than two dimensions, what torch deprecates): a dimension out of range or
# not an integer, a reshape to another number of elements, class indices out of range or of the
# wrong count. `shapes.py` calls them with the argument shapes it inferred; a constant argument
# (a dimension, a shape, a list of class indices) comes as its syntax tree, never evaluated.

#: Raises the one-line refusal of a Message (shapes.py adds the field and the column).
Fail = Callable[[Message], None]


def normal_dim(dim, rank: int, fail: Fail) -> int:
    """`dim` as a non-negative axis of a tensor of `rank` dimensions (a scalar counts as one)."""
    bound = max(rank, 1)
    if isinstance(dim, bool) or not isinstance(dim, int) or not -bound <= dim < bound:
        fail(
            Message(
                "dimension out of range (expected to be in range of [{low}, {high}], but got {dim})",
                low=-bound,
                high=bound - 1,
                dim=dim,
            )
        )
    return dim % bound


def reduced_shape(shape: tuple, dim, keepdim, fail: Fail) -> tuple[int, ...]:
    """The shape of a reduction (sum, mean, logsumexp, max, norm...) of `shape` along `dim`.

    Without `dim` the whole tensor is reduced: a scalar, or with keepdim ones of the same rank."""
    if dim is None:
        return (1,) * len(shape) if keepdim else ()
    axis = normal_dim(dim, len(shape), fail)
    if not shape:
        return ()
    if keepdim:
        return shape[:axis] + (1,) + shape[axis + 1 :]
    return shape[:axis] + shape[axis + 1 :]


def transposed_shape(shape: tuple, fail: Fail) -> tuple[int, ...]:
    """The shape of `x.T`: refused past two dimensions, where torch deprecates it."""
    if len(shape) > 2:
        fail(
            Message(
                ".T needs a tensor of at most 2 dimensions, got {rank}D (use transpose(x, d0, d1))", rank=len(shape)
            )
        )
    return tuple(reversed(shape))


def _integers(nodes: list) -> list[int]:
    if len(nodes) == 1 and isinstance(nodes[0], (ast.List, ast.Tuple)):
        nodes = nodes[0].elts
    return [constant_value(n) for n in nodes]


def _reshape(shape: tuple, nodes: list, fail: Fail) -> tuple[int, ...]:
    target = _integers(nodes)
    count = math.prod(shape)
    if len(target) > DEFAULT_LIMITS.max_input_rank:
        fail(
            Message(
                "reshape to {rank} dimensions; the limit is {limit}",
                rank=len(target),
                limit=DEFAULT_LIMITS.max_input_rank,
            )
        )
    if target.count(-1) > 1:
        fail(Message("reshape: only one dimension can be inferred (-1)"))
    if any(size < -1 for size in target):
        fail(Message("reshape: invalid shape dimension {size}", size=min(target)))
    known = math.prod(size for size in target if size != -1)
    invalid = Message("shape {target} is invalid for input of size {count}", target=list(target), count=count)
    if -1 in target:
        if known == 0 or count % known:
            fail(invalid)
        target[target.index(-1)] = count // known
    elif known != count:
        fail(invalid)
    return tuple(target)


def _extremum(name: str, shape: tuple, keywords: dict, fail: Fail) -> tuple[int, ...]:
    dim = keywords.get("dim")
    if dim is None and keywords.get("keepdim") is not None:
        fail(Message("{name}: keepdim needs dim", name=name))
    if math.prod(shape) == 0:
        fail(Message("{name} of a tensor with no elements has no value", name=name))
    return reduced_shape(shape, dim, keywords.get("keepdim"), fail)


def _cross_entropy(logits: tuple, target_node: ast.AST, target: tuple | None, fail: Fail) -> tuple[int, ...]:
    if len(logits) not in (1, 2):
        fail(
            Message(
                "cross_entropy: logits of 1 (classes) or 2 (batch x classes) dimensions expected, got {rank}D",
                rank=len(logits),
            )
        )
    classes = logits[-1]
    batch = logits[0] if len(logits) == 2 else 1
    if classes == 0 or batch == 0:
        fail(Message("cross_entropy: logits of shape {shape} have no class or no sample", shape=list(logits)))
    if target is not None:  # a tensor: class probabilities
        if target != logits:
            fail(
                Message(
                    "cross_entropy: a tensor target gives class probabilities and must have the logits' shape "
                    "{shape}, got {target}; class indices are constant integers, e.g. cross_entropy(z, [0, 2])",
                    shape=list(logits),
                    target=list(target),
                )
            )
        return ()
    if isinstance(target_node, (ast.List, ast.Tuple)):
        if len(logits) == 1:
            fail(
                Message(
                    "cross_entropy: for 1-D logits (one sample) the class index is one integer, "
                    "e.g. cross_entropy(z, 2)"
                )
            )
        indices = _integers([target_node])
        if len(indices) != batch:
            if len(indices) == 1:
                fail(Message("cross_entropy: {count} class index for a batch of {batch}", count=1, batch=batch))
            fail(
                Message("cross_entropy: {count} class indices for a batch of {batch}", count=len(indices), batch=batch)
            )
    else:
        index = constant_value(target_node)
        if type(index) is not int:
            fail(Message("cross_entropy: a constant target must be an integer class index, got {index!r}", index=index))
        if len(logits) == 2:
            example = ", ".join(["0"] * min(batch, 3)) + (", ..." if batch > 3 else "")
            fail(
                Message(
                    "cross_entropy: a batch of {batch} needs a list of {batch} class indices, e.g. "
                    "cross_entropy(z, [{example}])",
                    batch=batch,
                    example=example,
                )
            )
        indices = [constant_value(target_node)]
    wrong = next((i for i in indices if not 0 <= i < classes), None)
    if wrong is not None:
        fail(
            Message(
                "cross_entropy: class index {index} is out of range for {classes} classes", index=wrong, classes=classes
            )
        )
    return ()


def _one_hot(indices_node: ast.AST, classes: int, fail: Fail) -> tuple[int, ...]:
    indices = constant_value(indices_node)
    listed = isinstance(indices, list)
    if classes < 1:
        fail(Message("one_hot: the number of classes must be positive, got {classes}", classes=classes))
    wrong = next((i for i in (indices if listed else [indices]) if not 0 <= i < classes), None)
    if wrong is not None:
        fail(
            Message("one_hot: class index {index} is out of range for {classes} classes", index=wrong, classes=classes)
        )
    return (len(indices), classes) if listed else (classes,)


def model_shape(name: str, nodes: list, shapes: list, keywords: dict, fail: Fail) -> tuple[int, ...] | None:
    """The result shape of calling `name` (a model-exercise function), or None for another name.

    `nodes` are the arguments' trees (a method's tensor first), `shapes` their inferred shapes
    (None for a constant argument), `fail` raises the one-line refusal."""
    first = shapes[0] or ()
    if name in ("softmax", "log_softmax"):
        normal_dim(keywords.get("dim"), len(first), fail)
        return first
    if name == "logsumexp":
        return reduced_shape(first, keywords.get("dim"), keywords.get("keepdim"), fail)
    if name in ("max", "min"):
        return _extremum(name, first, keywords, fail)
    if name == "norm":
        return reduced_shape(first, keywords.get("dim"), keywords.get("keepdim"), fail)
    if name == "outer":
        if len(first) != 1 or len(shapes[1]) != 1:
            fail(
                Message(
                    "outer: 1D tensors expected, but got {left}D and {right}D tensors",
                    left=len(first),
                    right=len(shapes[1]),
                )
            )
        return first + shapes[1]
    if name == "transpose":
        d0, d1 = (normal_dim(constant_value(n), len(first), fail) for n in nodes[1:])
        if not first:
            return ()
        swapped = list(first)
        swapped[d0], swapped[d1] = first[d1], first[d0]
        return tuple(swapped)
    if name == "reshape":
        return _reshape(first, nodes[1:], fail)
    if name == "cross_entropy":
        return _cross_entropy(first, nodes[1], shapes[1], fail)
    if name == "one_hot":
        return _one_hot(nodes[0], constant_value(nodes[1]), fail)
    return None
