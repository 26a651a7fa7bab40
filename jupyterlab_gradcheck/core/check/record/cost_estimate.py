"""What a check will cost before it runs, from its shapes and the path its inputs will take.

A server with a timeout must refuse, before anything is written, a check that cannot finish
within it, and keep heavy checks from taking every worker. Both need the work known in advance.
The work of a check is dominated by its finite differences: an input whose Jacobian is observed
to be diagonal (an elementwise chain, optionally summed; see `diagonal.py`) costs a handful of
evaluations whatever its size, and any other input costs one evaluation per shifted copy of
each of its elements. Each evaluation builds tensors up to `work_elements`. The estimate counts
element evaluations, a lower bound on the real work: it predicts the diagonal path only where
the written expression is such a chain, which the engine would also observe.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from .defaults import FAST_MODE_ABOVE, SHIFTS

#: Calls that map element i to element i, keeping the shape of a same-shaped argument.
_ELEMENTWISE_CALLS = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "exp",
        "log",
        "log1p",
        "sqrt",
        "tanh",
        "sigmoid",
        "abs",
        "relu",
        "softplus",
        "logsigmoid",
        "clamp",
        "where",
        "maximum",
        "minimum",
        "pow",
    }
)
#: Full reductions a diagonal chain may end in (see diagonal.REDUCTIONS).
_REDUCTIONS = frozenset({"sum", "mean"})
#: Evaluations of the diagonal path: both shifts of all elements, the base and a refinement.
DIAGONAL_EVALUATIONS = 8
#: Evaluations the embedded `torch.autograd.gradcheck` adds in its fast mode (a few products).
GRADCHECK_FAST_EVALUATIONS = 4


@dataclass(frozen=True)
class Cost:
    """The predicted work of one check."""

    #: Evaluations of the function: finite differences and the embedded gradcheck.
    evaluations: int
    #: Element evaluations: evaluations times the elements of the largest tensor built.
    element_evaluations: int
    #: Per input, "diagonal" (a few evaluations) or "general" (one per shifted element).
    paths: dict

    def seconds(self, rate: float) -> float:
        """The time the work takes at `rate` element evaluations per second."""
        return self.element_evaluations / rate


def estimate_cost(spec) -> Cost:
    """The predicted work of a validated CheckSpec (see the module docstring)."""
    sizes = {name: math.prod(shape) for name, shape in spec.shapes.items()}
    diagonal = _diagonal_inputs(spec)
    shifts = len(SHIFTS.get(spec.finite_difference.get("scheme"), SHIFTS["central"]))
    evaluations, paths = 1, {}
    for name, size in sizes.items():
        if name in diagonal:
            paths[name] = "diagonal"
            evaluations += DIAGONAL_EVALUATIONS
        else:
            paths[name] = "general"
            evaluations += shifts * size
    total = sum(sizes.values())
    # gradcheck's slow mode perturbs every element both ways; its fast mode a few products.
    evaluations += 2 * total if total <= FAST_MODE_ABOVE else GRADCHECK_FAST_EVALUATIONS
    return Cost(evaluations, evaluations * max(1, spec.work_elements), paths)


def _diagonal_inputs(spec) -> set[str]:
    """The inputs the engine will take on the diagonal path, predicted from the expression:
    those whose shape is the shape of an elementwise body that is the output or the operand of
    one full sum or mean (with constant factors around it). A callable predicts none."""
    expression = getattr(spec, "expression", None)
    if expression is None:
        return set()
    body = _strip_reduction(expression.tree.body)
    if body is None or not _elementwise(body):
        return set()
    names = {node.id for node in ast.walk(body) if isinstance(node, ast.Name)}
    shapes = [tuple(spec.shapes[name]) for name in names if name in spec.shapes]
    if not shapes:
        return set()
    widest = max(shapes, key=lambda shape: (math.prod(shape), len(shape)))
    return {name for name in names if tuple(spec.shapes.get(name, ())) == widest}


def _strip_reduction(node: ast.AST) -> ast.AST | None:
    """The body under constant factors and one full sum or mean; the node itself if there is none."""
    while True:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)) and _constant(node.right):
            node = node.left
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _constant(node.left):
            node = node.right
        else:
            break
    name = _call_name(node)
    if name in _REDUCTIONS:
        if node.keywords or len(_operands(node)) != 1:
            return None
        return _operands(node)[0]
    return node


def _elementwise(node: ast.AST) -> bool:
    """Whether every operation under `node` is elementwise (no reduction, product or index)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.UnaryOp):
        return _elementwise(node.operand)
    if isinstance(node, ast.BinOp):
        return not isinstance(node.op, ast.MatMult) and _elementwise(node.left) and _elementwise(node.right)
    if isinstance(node, ast.Compare):
        return _elementwise(node.left) and all(_elementwise(c) for c in node.comparators)
    if isinstance(node, ast.Call) and _call_name(node) in _ELEMENTWISE_CALLS:
        return all(_elementwise(arg) for arg in _operands(node)) and all(
            _constant(keyword.value) for keyword in node.keywords
        )
    return False


def _call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _operands(call: ast.Call) -> list[ast.AST]:
    """A call's tensor arguments: a method's receiver first (`x.sum()`), then its arguments."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Name) and receiver.id == "torch":
        receiver = None
    return ([receiver] if receiver is not None else []) + list(call.args)


def _constant(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    return isinstance(node, ast.Constant)
