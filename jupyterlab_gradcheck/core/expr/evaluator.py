"""Turn a checked `Expression` into a torch callable by walking its tree.

Nothing here compiles or evaluates text: each node of the tree that `expr.parse_expression`
accepted maps to one torch operation. Torch is imported on first use, so the parser stays
usable where torch is not loaded (the server process).
"""

from __future__ import annotations

import ast
import operator
from typing import Callable

from .parser import Expression


def _torch_ops():
    import torch
    import torch.nn.functional as F

    return {
        "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "exp": torch.exp,
        "log": torch.log, "log1p": torch.log1p, "sqrt": torch.sqrt, "abs": torch.abs,
        "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
        "softplus": F.softplus, "sum": torch.sum, "mean": torch.mean, "prod": torch.prod,
        "dot": torch.dot, "matmul": torch.matmul, "pow": torch.pow, "clamp": torch.clamp,
        "where": torch.where, "maximum": torch.maximum, "minimum": torch.minimum,
    }


_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow, ast.MatMult: operator.matmul,
}
_COMPARE = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le}


def _index(node: ast.AST):
    if isinstance(node, ast.Slice):
        return slice(*(None if b is None else _index(b) for b in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.UnaryOp):
        return -_index(node.operand)
    return node.value


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
            key = tuple(_index(p) for p in index.elts) if isinstance(index, ast.Tuple) else _index(index)
            return self.eval(node.value)[key]
        if isinstance(node, ast.Call):
            return self.call(node)
        raise TypeError(f"unchecked node {type(node).__name__}")  # parser guarantees unreachable

    def call(self, node: ast.Call):
        import torch

        func = node.func
        args = [self.eval(a) for a in node.args]
        if isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id == "torch"
        ):
            args.insert(0, self.eval(func.value))
            name = func.attr
        else:
            name = func.id if isinstance(func, ast.Name) else func.attr
        kwargs = {k.arg: _index(k.value) for k in node.keywords}
        reference = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if reference is not None and name not in ("clamp",):
            args = [
                torch.as_tensor(a, dtype=reference.dtype, device=reference.device)
                if not isinstance(a, torch.Tensor) else a
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


def compile_expression(expression: Expression) -> Callable[..., "object"]:
    """A callable taking the inputs as keyword tensors and returning the expression's value."""

    body = expression.tree.body

    def evaluate(**values):
        return _Evaluator(values).eval(body)

    evaluate.__name__ = "expression"
    evaluate.__qualname__ = f"expression({expression.source})"
    return evaluate
