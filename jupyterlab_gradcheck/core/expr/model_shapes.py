"""Shape rules of the model-exercise functions, checked before anything runs.

softmax, log_softmax, logsumexp, max, min, norm, outer, transpose, `.T`, reshape and
cross_entropy each refuse, with a one-line message naming the problem, what torch would refuse
(or, for `.T` on more than two dimensions, what torch deprecates): a dimension out of range or
not an integer, a reshape to another number of elements, class indices out of range or of the
wrong count. `shapes.py` calls them with the argument shapes it inferred; a constant argument
(a dimension, a shape, a list of class indices) comes as its syntax tree, never evaluated.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

from ..i18n import Message
from .limits import DEFAULT_LIMITS
from .parser import constant_value

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
