"""Turn a checked `Expression` into a torch callable by walking its tree.

Nothing here compiles or evaluates text: each node of the tree that `expr.parse_expression`
accepted maps to one torch operation. Torch is imported on first use, so the parser stays
usable where torch is not loaded (the server process).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from .parser import FUNCTIONS, Expression, call_parts, constant_value, literal_argument


def _torch_ops():
    import torch
    import torch.nn.functional as F

    return {
        "sin": torch.sin,
        "cos": torch.cos,
        "tan": torch.tan,
        "exp": torch.exp,
        "log": torch.log,
        "log1p": torch.log1p,
        "sqrt": torch.sqrt,
        "abs": torch.abs,
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
        "relu": torch.relu,
        "softplus": F.softplus,
        "sum": torch.sum,
        "mean": torch.mean,
        "prod": torch.prod,
        "dot": torch.dot,
        "matmul": torch.matmul,
        "pow": torch.pow,
        "clamp": torch.clamp,
        "where": torch.where,
        "maximum": torch.maximum,
        "minimum": torch.minimum,
        "logsigmoid": F.logsigmoid,
        "softmax": torch.softmax,
        "log_softmax": torch.log_softmax,
        "logsumexp": torch.logsumexp,
        "max": _extremum(torch.max),
        "min": _extremum(torch.min),
        "norm": torch.linalg.vector_norm,
        "outer": torch.outer,
        "transpose": torch.transpose,
        "reshape": _reshape,
        "cross_entropy": F.cross_entropy,
        "one_hot": F.one_hot,
    }


def _extremum(reduce):
    """torch.max / torch.min as the language means them: with `dim`, the values only.

    torch returns (values, indices) when a dimension is given; an expression is differentiated,
    and indices have no derivative, so `max(x, dim=0)` is the values, as `amax` would be, but
    with torch.max's gradient (to the first maximal element, not shared among ties)."""

    def extremum(tensor, dim=None, keepdim=False):
        return reduce(tensor) if dim is None else reduce(tensor, dim=dim, keepdim=keepdim).values

    return extremum


def _reshape(tensor, *shape):
    """reshape(x, (2, 3)), reshape(x, [2, 3]) and x.reshape(2, 3) alike."""
    return tensor.reshape(shape[0] if len(shape) == 1 and isinstance(shape[0], list) else shape)


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.MatMult: operator.matmul,
}
_COMPARE = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le}


class _Evaluator:
    def __init__(self, values: dict):
        self.values = values
        self.ops = _OPS_CACHE.get("ops") or _OPS_CACHE.setdefault("ops", _torch_ops())

    def eval(self, node: ast.AST):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.values[node.id]
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self.eval(node.left), self.eval(node.right))
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand)
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.Compare):
            return _COMPARE[type(node.ops[0])](self.eval(node.left), self.eval(node.comparators[0]))
        if isinstance(node, ast.Subscript):
            index = node.slice
            key = (
                tuple(constant_value(p) for p in index.elts) if isinstance(index, ast.Tuple) else constant_value(index)
            )
            return self.eval(node.value)[key]
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Attribute):  # .T, the only attribute the parser lets through
            return self.eval(node.value).T
        raise TypeError(f"unchecked node {type(node).__name__}")  # parser guarantees unreachable

    def call(self, node: ast.Call):
        import torch

        name, nodes = call_parts(node)
        spec = FUNCTIONS[name]
        literal = [literal_argument(spec, position, a) for position, a in enumerate(nodes)]
        args = [constant_value(a) if constant else self.eval(a) for a, constant in zip(nodes, literal)]
        kwargs = {k.arg: constant_value(k.value) for k in node.keywords}
        if name == "one_hot":  # constants only: on the inputs' device, so that it mixes with them
            device = next(iter(self.values.values())).device
            return self.ops[name](torch.tensor(args[0], dtype=torch.long, device=device), args[1])
        if any(literal):
            return self.ops[name](*_class_indices(spec, args, literal), **kwargs)
        reference = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if reference is not None and name not in ("clamp",):
            args = [
                torch.as_tensor(a, dtype=reference.dtype, device=reference.device)
                if not isinstance(a, torch.Tensor)
                else a
                for a in args
            ]
        elif reference is None:
            args = [torch.as_tensor(a, dtype=torch.float64) for a in args]
        if name == "clamp":
            names = ("min", "max")
            for position, bound in enumerate(args[1:]):
                kwargs[names[position]] = bound
            args = args[:1]
        return self.ops[name](*args, **kwargs)


_OPS_CACHE: dict = {}


def _class_indices(spec, args: list, literal: list) -> list:
    """The arguments with a constant list of class indices made a tensor of integers on the
    logits' device (cross_entropy's target); dimensions and shapes stay Python integers."""
    import torch

    return [
        torch.tensor(a, dtype=torch.long, device=args[0].device) if constant and position in spec.index_list_args else a
        for position, (a, constant) in enumerate(zip(args, literal))
    ]


def compile_expression(expression: Expression) -> Callable[..., object]:
    """A callable taking the inputs as keyword tensors and returning the expression's value."""

    body = expression.tree.body

    def evaluate(**values):
        return _Evaluator(values).eval(body)

    evaluate.__name__ = "expression"
    evaluate.__qualname__ = f"expression({expression.source})"
    return evaluate
