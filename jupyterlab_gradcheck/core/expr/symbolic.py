"""A third opinion from SymPy: differentiate the expression symbolically and evaluate it.

Only expression checks get one (a Python callable has no formula). The conversion covers
elementwise expressions and a top-level `sum`/`mean` of one; anything else (matmul, dot,
prod, subscripts, reductions over a dimension) is skipped with the reason. Derivatives are
cached per expression because SymPy is the costly part of a check.
"""

from __future__ import annotations

import ast
import functools
import math
import operator

from ..i18n import Message
from .parser import FUNCTIONS, call_parts, constant_value, literal_argument, parse_expression

# -------------------- sympy values
# What the SymPy opinions share: the elementwise functions as SymPy sees them, and a SymPy
# expression evaluated in floats.
#
# symbolic.py (one symbol per input, for elementwise bodies) and symbolic.py (one symbol
# per input element, for everything that mixes elements) both convert with `ELEMENTWISE` and
# evaluate with `float_value`, so the two paths cannot drift apart.


class Unsupported(Exception):
    """A construct a SymPy opinion does not convert or evaluate; its argument (a Message, or a
    node's name) names the construct."""

    @property
    def construct(self):
        """What is not handled, as raised: a Message is translated where it is shown."""
        return self.args[0] if self.args else str(self)


def elementwise_table() -> dict:
    """The elementwise functions of the language (and pow, maximum, minimum, where) in SymPy."""
    import sympy as sp

    return {
        "sin": sp.sin,
        "cos": sp.cos,
        "tan": sp.tan,
        "exp": sp.exp,
        "log": sp.log,
        "sqrt": sp.sqrt,
        "tanh": sp.tanh,
        "abs": sp.Abs,
        "log1p": lambda x: sp.log(1 + x),
        "sigmoid": lambda x: 1 / (1 + sp.exp(-x)),
        "logsigmoid": lambda x: -sp.log(1 + sp.exp(-x)),
        "relu": lambda x: sp.Max(0, x),
        "softplus": lambda x: sp.log(1 + sp.exp(x)),
        "pow": lambda x, y: x**y,
        "maximum": sp.Max,
        "minimum": sp.Min,
        "where": lambda c, x, y: sp.Piecewise((x, c), (y, True)),
    }


def clamped(value, lower, upper):
    """clamp(value, lower, upper) in SymPy; either bound may be None."""
    import sympy as sp

    if lower is not None:
        value = sp.Max(value, lower)
    if upper is not None:
        value = sp.Min(value, upper)
    return value


def _float_call(function, *args) -> float:
    try:
        value = function(*args)
    except OverflowError:
        return math.inf
    except (ValueError, ZeroDivisionError):
        return math.nan
    return value.real if isinstance(value, complex) else value


def float_value(expr, env: dict) -> float:
    """A SymPy expression evaluated in float64 with Python's math module.

    Never `evalf`: exact evaluation of something like e^(e^(e^(e^3))) does not finish, while
    in floats it overflows to inf at once, which is what the other observations see too.
    """
    import sympy as sp

    if expr.is_Symbol:
        return env[expr.name]
    if expr.is_Number or expr in (sp.pi, sp.E):
        return float(expr)
    if expr is sp.true or expr is sp.false:
        return float(bool(expr))
    args = expr.args
    if isinstance(expr, sp.Add):
        return sum(float_value(a, env) for a in args)  # inf - inf is nan, as in torch
    if isinstance(expr, sp.Mul):
        return _float_call(lambda *xs: math.prod(xs), *(float_value(a, env) for a in args))
    if isinstance(expr, sp.Pow):
        return _float_call(pow, float_value(args[0], env), float_value(args[1], env))
    if isinstance(expr, sp.Piecewise):
        for value, condition in args:
            if float_value(condition, env):
                return float_value(value, env)
        return math.nan
    if isinstance(expr, sp.core.relational.Relational):
        left, right = float_value(args[0], env), float_value(args[1], env)
        return float(
            {
                "<": left < right,
                "<=": left <= right,
                ">": left > right,
                ">=": left >= right,
                "==": left == right,
                "!=": left != right,
            }[expr.rel_op]
        )
    unary = {
        sp.exp: math.exp,
        sp.log: math.log,
        sp.sin: math.sin,
        sp.cos: math.cos,
        sp.tan: math.tan,
        sp.tanh: math.tanh,
        sp.sinh: math.sinh,
        sp.cosh: math.cosh,
        sp.Abs: abs,
        sp.sign: lambda v: float((v > 0) - (v < 0)),
    }
    for kind, function in unary.items():
        if isinstance(expr, kind):
            return _float_call(function, float_value(args[0], env))
    if isinstance(expr, sp.Heaviside):
        value = float_value(args[0], env)
        at_zero = float_value(args[1], env) if len(args) > 1 else 0.5
        return 1.0 if value > 0 else 0.0 if value < 0 else at_zero
    if isinstance(expr, (sp.Max, sp.Min)):
        values = [float_value(a, env) for a in args]
        return max(values) if isinstance(expr, sp.Max) else min(values)
    raise Unsupported(Message("{kind} in the derivative", kind=type(expr).__name__))


#: Operations above which SymPy's simplify is not attempted (it can take unbounded time).
SIMPLIFY_MAX_OPS = 40


@functools.lru_cache(maxsize=512)
def identical(formula, derivative):
    """Whether two formulas are identical, or None when they are too large to simplify."""
    import sympy as sp

    difference = formula - derivative
    if sp.count_ops(difference) > SIMPLIFY_MAX_OPS:
        return None
    return sp.simplify(difference) == 0


#: Largest integer power of a sum that is expanded when formulas are compared: (a + b + ...)**n
#: of k terms expands into about k**n / n! terms.
EXPAND_MAX_POWER = 4


def tame(expr) -> bool:
    """Whether comparing `expr` with zero by expanding or simplifying it is bounded: no sum
    raised to an integer power above EXPAND_MAX_POWER (which expansion would multiply out)."""
    import sympy as sp

    return not any(
        isinstance(p.base, sp.Add) and p.exp.is_Integer and abs(p.exp) > EXPAND_MAX_POWER for p in expr.atoms(sp.Pow)
    )


# -------------------- symbolic tensor
# SymPy's opinion element by element: every input element a symbol of its own.
#
# The conversion in symbolic.py gives each input one scalar symbol, which is right for an
# elementwise body and a full sum or mean of one. softmax, matmul, reductions along a dimension,
# norms, reshapes and the losses mix elements, so here each element `z[i,j]` is its own Symbol,
# the expression is built as a NumPy array of SymPy expressions (torch's broadcasting, indexing,
# matmul and row-major reshape rules are NumPy's), and phi = sum(v * f) (v the grad_output, ones
# by default) is differentiated by every element symbol. SymPy's derivative of `max` is a
# Heaviside step, 1/2 at a tie, where torch picks one element: only ties tell them apart.
# This costs far more than one symbol per input, so it is tried on at most ELEMENT_MAX_ELEMENTS.

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


# -------------------- symbolic

#: Elements above which evaluating the symbolic derivative element by element is skipped.
MAX_ELEMENTS = 200


def _to_sympy(node, symbols):
    import sympy as sp

    if isinstance(node, ast.Constant):
        return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value)
    if isinstance(node, ast.Name):
        return symbols[node.id]
    if isinstance(node, ast.UnaryOp):
        operand = _to_sympy(node.operand, symbols)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left, right = _to_sympy(node.left, symbols), _to_sympy(node.right, symbols)
        ops = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b,
            ast.Div: lambda a, b: a / b,
            ast.Pow: lambda a, b: a**b,
        }
        if type(node.op) not in ops:
            raise Unsupported(Message("the @ operator"))
        return ops[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        import operator

        left, right = _to_sympy(node.left, symbols), _to_sympy(node.comparators[0], symbols)
        ops = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le}
        return ops[type(node.ops[0])](left, right)
    if isinstance(node, ast.Call):
        return _call(node, symbols)
    raise Unsupported(type(node).__name__.lower())


def _call(node: ast.Call, symbols):
    name, args = call_parts(node)
    if node.keywords and name != "clamp":
        raise Unsupported(Message("{name} with keywords", name=name))
    a = [_to_sympy(arg, symbols) for arg in args]
    kw = {k.arg: _to_sympy(k.value, symbols) for k in node.keywords}
    table = elementwise_table()
    if name == "clamp":
        return clamped(a[0], kw.get("min", a[1] if len(a) > 1 else None), kw.get("max", a[2] if len(a) > 2 else None))
    if name not in table:
        raise Unsupported(f"{name}()")
    return table[name](*a)


@functools.lru_cache(maxsize=512)
def symbolic_derivatives(source: str, names: tuple[str, ...]):
    """(reduction, {name: derivative}, {name: Symbol}) for `source`; or a skip reason (a Message)."""
    import sympy as sp

    from .parser import parse_expression

    expression = parse_expression(source, names)
    symbols = {n: sp.Symbol(n, real=True) for n in names}
    body = expression.tree.body
    reduction = None
    if isinstance(body, ast.Call):
        func = body.func
        name = func.id if isinstance(func, ast.Name) else func.attr
        if name in ("sum", "mean") and not body.keywords:
            reduction = name
            is_method = isinstance(func, ast.Attribute) and not (
                isinstance(func.value, ast.Name) and func.value.id == "torch"
            )
            body = func.value if is_method else body.args[0]
    try:
        formula = _to_sympy(body, symbols)
    except Unsupported as exc:
        return Message("SymPy opinion skipped: {construct} is not handled symbolically", construct=exc.construct)
    return reduction, {n: sp.diff(formula, symbols[n]) for n in names}, symbols


@functools.lru_cache(maxsize=512)
def _hand_formula(source: str, names: tuple[str, ...]):
    import sympy as sp

    from .parser import parse_expression

    symbols = {n: sp.Symbol(n, real=True) for n in names}
    try:
        return _to_sympy(parse_expression(source, names, field_name="analytical_gradient").tree.body, symbols)
    except Unsupported:
        return None


def _per_input(spec, inputs: dict):
    """(values, derivative text, symbolically equal) from one symbol per input; or why not."""
    import torch

    names = tuple(spec.inputs)
    derived = symbolic_derivatives(spec.expression.source, names)
    if isinstance(derived, str):
        return derived
    reduction, derivatives, symbols = derived
    if spec.grad_output is not None:
        return Message("a grad_output weights the output's elements, which one symbol per input cannot")
    shapes = {n: tuple(t.shape) for n, t in inputs.items()}
    try:
        full = torch.broadcast_shapes(*shapes.values())
    except RuntimeError:
        return Message("inputs do not broadcast elementwise")
    if reduction is None and full != ():
        if any(shape != full for shape in shapes.values()):
            return Message("non-scalar output with broadcast inputs")
    expanded = {n: t.detach().to("cpu", torch.float64).broadcast_to(full).reshape(-1) for n, t in inputs.items()}
    count = max(1, int(torch.tensor(full).prod()) if full else 1)
    scale = 1.0 / count if reduction == "mean" else 1.0
    result_values = {}
    try:
        for n in names:
            per_element = (
                torch.tensor(
                    [float_value(derivatives[n], {m: float(expanded[m][k]) for m in names}) for k in range(count)],
                    dtype=torch.float64,
                )
                * scale
            )
            if shapes[n] == full:
                result_values[n] = per_element.reshape(full)
            elif shapes[n] == ():
                result_values[n] = per_element.sum().reshape(())
            else:
                return Message("partially broadcast input")
    except Unsupported as exc:
        return Message("SymPy opinion skipped: {construct} is not evaluated numerically", construct=exc.construct)
    text = {n: str(derivatives[n]) for n in names}
    return result_values, text, _symbolic_equal(spec, derivatives, names)


def symbolic_opinion(spec, inputs: dict, analytical: dict, autograd: dict) -> dict:
    """Whether SymPy's derivative agrees with the hand derivation and with autograd.

    One symbol per input first (a formula a student can read); where that cannot convert or
    evaluate the expression, one symbol per input element (symbolic.py) on few elements."""
    import torch

    names = tuple(spec.inputs)
    if spec.expression is None:
        return {"status": "skipped", "reason": Message("a Python callable has no formula for SymPy")}
    total = sum(t.numel() for t in inputs.values())
    if total > MAX_ELEMENTS:
        return {"status": "skipped", "reason": Message("more than {count} input elements", count=MAX_ELEMENTS)}
    found = _per_input(spec, inputs)
    if isinstance(found, str):
        if total > ELEMENT_MAX_ELEMENTS:
            return {
                "status": "skipped",
                "reason": Message(
                    "{reason}; the element-by-element opinion takes at most {count} input elements",
                    reason=found,
                    count=ELEMENT_MAX_ELEMENTS,
                ),
            }
        found = element_opinion(spec, inputs)
        if isinstance(found, str):
            return {"status": "skipped", "reason": found}
    result_values, derivatives, symbolic_equal = found
    rtol, atol = spec.tolerance["rtol"], spec.tolerance["atol"]

    def agrees(other: dict) -> bool:
        return all(
            torch.allclose(
                other[n].detach().to("cpu", torch.float64).broadcast_to(result_values[n].shape),
                result_values[n],
                rtol=rtol,
                atol=atol,
                equal_nan=False,
            )
            for n in names
        )

    hand_ok, autograd_ok = agrees(analytical), agrees(autograd)
    verdicts = {True: Message("agrees"), False: Message("disagrees")}
    reason = Message(
        "SymPy differentiates {source} to {derivatives}; the hand derivation {hand}; autograd {autograd}",
        source=spec.expression.source,
        derivatives=", ".join(f"d/d{n} = {derivatives[n]}" for n in names),
        hand=verdicts[hand_ok],
        autograd=verdicts[autograd_ok],
    )
    return {
        "status": "agrees" if hand_ok and autograd_ok else "disagrees",
        "derivative": derivatives,
        "values": {n: result_values[n].tolist() for n in names},
        "analytical_agrees": hand_ok,
        "autograd_agrees": autograd_ok,
        "symbolically_equal": symbolic_equal,
        "reason": reason,
    }


def _symbolic_equal(spec, derivatives, names):
    """Whether each hand-written formula equals SymPy's derivative identically (None if unknown)."""

    verdicts = []
    for n in names:
        written = spec.analytical.get(n)
        if not hasattr(written, "source"):
            return None
        formula = _hand_formula(written.source, names)
        if formula is None:
            return None
        verdicts.append(identical(formula, derivatives[n]))
    if None in verdicts:
        return None
    return all(verdicts)
