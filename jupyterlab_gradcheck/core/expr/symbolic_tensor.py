"""SymPy's opinion element by element: every input element a symbol of its own.

The conversion in symbolic.py gives each input one scalar symbol, which is right for an
elementwise body and a full sum or mean of one. softmax, matmul, reductions along a dimension,
norms, reshapes and the losses mix elements, so here each element `z[i,j]` is its own Symbol,
the expression is built as a NumPy array of SymPy expressions (torch's broadcasting, indexing,
matmul and row-major reshape rules are NumPy's), and phi = sum(v * f) (v the grad_output, ones
by default) is differentiated by every element symbol. SymPy's derivative of `max` is a
Heaviside step, 1/2 at a tie, where torch picks one element: only ties tell them apart.
This costs far more than one symbol per input, so it is tried on at most ELEMENT_MAX_ELEMENTS.
"""

from __future__ import annotations

import ast
import functools
import operator

from ..i18n import Message
from .functions import FUNCTIONS, literal_argument
from .parser import call_parts, constant_value, parse_expression
from .sympy_values import Unsupported, clamped, elementwise_table, float_value, identical, tame

#: Input elements above which the element-by-element opinion is skipped (SymPy's cost grows
#: with the square of the elements for softmax and matmul).
ELEMENT_MAX_ELEMENTS = 36

#: Elements of any array of SymPy expressions built on the way (broadcasting can multiply them).
MAX_INTERMEDIATE = 2000
#: Elements among which a max or min is taken symbolically (SymPy's Max is slow to build and
#: to differentiate: 16 elements take seconds).
EXTREMUM_MAX_ELEMENTS = 8
#: Operations (over all of an input's elements) above which the hand formula is not compared
#: with SymPy's by expanding: expansion can take minutes past a few hundred, e.g. a product of
#: 16 elements times a cube of their sum; a linear model's gradients take about 150.
EXPAND_MAX_OPS = 400

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_COMPARE = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le}


def element_symbols(name: str, shape: tuple):
    """An array of real Symbols named like the elements they stand for: `z[0,2]`, or `b`."""
    import numpy as np
    import sympy as sp

    if not shape:
        return np.asarray(sp.Symbol(name, real=True), dtype=object)
    cells = np.empty(shape, dtype=object)
    for index in np.ndindex(*shape):
        cells[index] = sp.Symbol(f"{name}[{','.join(map(str, index))}]", real=True)
    return cells


class _Builder:
    """Walks a checked tree over arrays of SymPy expressions, as the evaluator walks it over tensors."""

    def __init__(self, arrays: dict):
        import numpy as np
        import sympy as sp

        self.np, self.sp, self.arrays = np, sp, arrays
        self.table = elementwise_table()

    def array(self, value):
        return self.np.asarray(value, dtype=object)

    def bounded(self, shape: tuple) -> None:
        """Refuse to build an array of SymPy expressions past MAX_INTERMEDIATE elements."""
        size = int(self.np.prod(shape)) if shape else 1
        if size > MAX_INTERMEDIATE:
            raise Unsupported(
                Message(
                    "an intermediate result of {size} elements (more than {limit})", size=size, limit=MAX_INTERMEDIATE
                )
            )

    def map(self, function, *arrays):
        count = len(arrays)
        self.bounded(self.np.broadcast_shapes(*(self.np.shape(a) for a in arrays)))
        return self.array(self.np.frompyfunc(function, count, 1)(*arrays))

    def build(self, node: ast.AST):
        np, sp = self.np, self.sp
        if isinstance(node, ast.Constant):
            return self.array(sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value))
        if isinstance(node, ast.Name):
            return self.arrays[node.id]
        if isinstance(node, ast.UnaryOp):
            operand = self.build(node.operand)
            return self.array(-operand) if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp):
            left, right = self.build(node.left), self.build(node.right)
            if isinstance(node.op, ast.MatMult):
                return self.array(np.matmul(left, right))
            return self.map(_BINARY[type(node.op)], left, right)
        if isinstance(node, ast.Compare):
            return self.map(_COMPARE[type(node.ops[0])], self.build(node.left), self.build(node.comparators[0]))
        if isinstance(node, ast.Subscript):
            index = node.slice
            key = (
                tuple(constant_value(p) for p in index.elts) if isinstance(index, ast.Tuple) else constant_value(index)
            )
            return self.array(self.build(node.value)[key])
        if isinstance(node, ast.Attribute):  # .T
            return self.build(node.value).T
        if isinstance(node, ast.Call):
            return self.call(node)
        raise Unsupported(type(node).__name__.lower())

    def call(self, node: ast.Call):
        name, nodes = call_parts(node)
        spec = FUNCTIONS[name]
        args = [
            constant_value(a) if literal_argument(spec, position, a) else self.build(a)
            for position, a in enumerate(nodes)
        ]
        keywords = {k.arg: constant_value(k.value) for k in node.keywords}
        if name == "clamp":
            bounds = args[1:] + [None] * (3 - len(args))
            return self.map(
                lambda v, lo, hi: clamped(v, lo, hi),
                args[0],
                self.array(keywords.get("min", bounds[0])),
                self.array(keywords.get("max", bounds[1])),
            )
        if name in self.table:
            return self.map(self.table[name], *args)
        return self.array(self.mixing(name, args, keywords))

    def total(self, x, dim, keepdim=False):
        return self.np.sum(x, axis=dim, keepdims=bool(keepdim))

    def mixing(self, name: str, args: list, keywords: dict):
        """The functions that mix elements, in SymPy over NumPy's rules."""
        np, sp = self.np, self.sp
        x = args[0]  # one_hot's indices are a constant list or integer, not an array
        dim, keepdim = keywords.get("dim"), keywords.get("keepdim", False)
        if dim is not None and x.ndim == 0:
            dim = None  # a scalar's only dimension, 0 or -1, is the whole of it
        exp, log = functools.partial(self.map, sp.exp), functools.partial(self.map, sp.log)
        if name in ("sum", "prod"):
            reduce = np.sum if name == "sum" else np.prod
            return reduce(x, axis=dim, keepdims=bool(keepdim))
        if name == "mean":
            count = x.size if dim is None else x.shape[dim]
            return self.total(x, dim, keepdim) / sp.Integer(count)
        if name in ("dot", "matmul"):
            return np.matmul(x, args[1])
        if name == "outer":
            self.bounded((x.size, args[1].size))
            return np.multiply.outer(x, args[1])
        if name == "softmax":
            e = exp(x)
            return e / self.total(e, dim, True)
        if name == "log_softmax":
            return x - log(self.total(exp(x), dim, True))
        if name == "logsumexp":
            return log(self.total(exp(x), dim, keepdim))
        if name in ("max", "min"):
            among = x.size if dim is None else x.shape[dim]
            if among > EXTREMUM_MAX_ELEMENTS:  # SymPy's Max of n arguments differentiates in O(n^3)
                raise Unsupported(
                    Message("{name}() over more than {count} elements", name=name, count=EXTREMUM_MAX_ELEMENTS)
                )
            pick = sp.Max if name == "max" else sp.Min
            return pick(*x.flat) if dim is None else np.frompyfunc(pick, 2, 1).reduce(x, axis=dim, keepdims=keepdim)
        if name == "norm":
            return self.map(sp.sqrt, self.array(self.total(self.array(x * x), dim, keepdim)))
        if name == "transpose":
            return x if x.ndim == 0 else np.swapaxes(x, args[1], args[2])
        if name == "reshape":
            shape = args[1] if len(args) == 2 and isinstance(args[1], list) else args[1:]
            return x.reshape(shape)
        if name == "cross_entropy":
            return self.cross_entropy(x, args[1])
        if name == "one_hot":
            self.bounded((len(x) if isinstance(x, list) else 1, args[1]))
            return np.eye(args[1], dtype=int)[x].astype(object) * sp.Integer(1)
        raise Unsupported(f"{name}()")

    def cross_entropy(self, z, target):
        """torch's mean cross entropy, for class indices (a list or one integer) or probabilities."""
        np, sp = self.np, self.sp
        log_p = self.array(z - self.map(sp.log, self.array(self.total(self.map(sp.exp, z), -1, True))))
        batch = z.shape[0] if z.ndim == 2 else 1
        if isinstance(target, (int, list)):
            picked = log_p[np.arange(batch), target] if z.ndim == 2 else log_p[target]
        else:
            picked = self.total(self.array(target * log_p), -1)
        return -self.total(self.array(picked), None) / sp.Integer(batch)


@functools.lru_cache(maxsize=128)
def element_formula(source: str, shapes: tuple, field_name: str = "function"):
    """`source` over inputs of `shapes` ((name, shape) pairs) as an array of SymPy expressions."""
    names = tuple(name for name, _ in shapes)
    expression = parse_expression(source, names, field_name=field_name)
    arrays = {name: element_symbols(name, shape) for name, shape in shapes}
    return _Builder(arrays).build(expression.tree.body), arrays


@functools.lru_cache(maxsize=128)
def element_derivatives(source: str, shapes: tuple, v: tuple | None):
    """{name: array of d phi / d element} for phi = sum(v * f), v flat (None: ones); raises
    Unsupported for a construct it does not convert."""
    import numpy as np
    import sympy as sp

    output, arrays = element_formula(source, shapes)
    weights = (
        np.ones(output.shape, dtype=object)
        if v is None
        else np.asarray([sp.Float(w) for w in v], dtype=object).reshape(output.shape)
    )
    phi = sp.Add(*(np.asarray(weights * output, dtype=object).reshape(-1)))
    return {name: np.vectorize(lambda s: sp.diff(phi, s), otypes=[object])(symbols) for name, symbols in arrays.items()}


def _text(symbols, derivatives) -> str:
    """The derivative by the first element, e.g. `z[0]: exp(z[0])/(...) - y[0]`, kept short."""
    first = symbols.reshape(-1)[0]
    text = f"{first}: {derivatives.reshape(-1)[0]}"
    return text if len(text) <= 400 else text[:397] + "..."


#: Elements above which the hand formula is not compared with SymPy's identically.
EQUALITY_MAX_ELEMENTS = 16


def _identically(hand, derivatives):
    """Whether the hand formula's elements equal SymPy's derivatives (None when unknown)."""
    import numpy as np
    import sympy as sp

    if derivatives.size > EQUALITY_MAX_ELEMENTS:
        return None
    pairs = list(zip(np.broadcast_to(hand, derivatives.shape).reshape(-1), derivatives.reshape(-1)))
    differences = [written - derived for written, derived in pairs]
    if not all(tame(d) for d in differences) or sum(sp.count_ops(d) for d in differences) > EXPAND_MAX_OPS:
        return None
    verdicts = []
    for (written, derived), difference in zip(pairs, differences):
        verdicts.append(True if sp.expand(difference) == 0 else identical(written, derived))
        if verdicts[-1] is False:
            return False
    return None if None in verdicts else True


def element_opinion(spec, inputs: dict):
    """(values, derivative text, symbolically equal) with one symbol per input element; or why not."""
    import torch

    shapes = tuple((n, tuple(t.shape)) for n, t in inputs.items())
    v = (
        None
        if spec.grad_output is None
        else tuple(torch.as_tensor(spec.grad_output, dtype=torch.float64).reshape(-1).tolist())
    )
    try:
        derivatives = element_derivatives(spec.expression.source, shapes, v)
        env = {}
        for (name, _), symbols in zip(shapes, element_formula(spec.expression.source, shapes)[1].values()):
            values = inputs[name].detach().to("cpu", torch.float64).reshape(-1).tolist()
            env.update({str(s): value for s, value in zip(symbols.reshape(-1), values)})
        result = {
            name: torch.tensor(
                [float_value(d, env) for d in derivatives[name].reshape(-1)], dtype=torch.float64
            ).reshape(shape)
            for name, shape in shapes
        }
    except Unsupported as exc:
        return Message("SymPy opinion skipped: {construct} is not handled element by element", construct=exc.construct)
    arrays = element_formula(spec.expression.source, shapes)[1]
    text = {name: _text(arrays[name], derivatives[name]) for name, _ in shapes}
    verdicts = []
    for name, _ in shapes:
        written = spec.analytical.get(name)
        if not hasattr(written, "source"):
            return result, text, None
        try:
            hand = element_formula(written.source, shapes, "analytical_gradient")[0]
        except Unsupported:
            return result, text, None
        verdicts.append(_identically(hand, derivatives[name]))
    equal = False if False in verdicts else None if None in verdicts else True
    return result, text, equal
