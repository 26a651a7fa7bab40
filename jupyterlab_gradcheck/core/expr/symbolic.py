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

#: Elements above which evaluating the symbolic derivative element by element is skipped.
MAX_ELEMENTS = 200


class _Unsupported(Exception):
    pass


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
        ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
               ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
               ast.Pow: lambda a, b: a ** b}
        if type(node.op) not in ops:
            raise _Unsupported("the @ operator")
        return ops[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        import operator
        left, right = _to_sympy(node.left, symbols), _to_sympy(node.comparators[0], symbols)
        ops = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le}
        return ops[type(node.ops[0])](left, right)
    if isinstance(node, ast.Call):
        return _call(node, symbols)
    raise _Unsupported(type(node).__name__.lower())


def _call(node: ast.Call, symbols):
    import sympy as sp

    func = node.func
    args = list(node.args)
    if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id == "torch"):
        args.insert(0, func.value)
    name = func.id if isinstance(func, ast.Name) else func.attr
    if node.keywords and name != "clamp":
        raise _Unsupported(f"{name} with keywords")
    a = [_to_sympy(arg, symbols) for arg in args]
    kw = {k.arg: _to_sympy(k.value, symbols) for k in node.keywords}
    table = {
        "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "exp": sp.exp, "log": sp.log,
        "sqrt": sp.sqrt, "tanh": sp.tanh, "abs": sp.Abs,
        "log1p": lambda x: sp.log(1 + x),
        "sigmoid": lambda x: 1 / (1 + sp.exp(-x)),
        "relu": lambda x: sp.Max(0, x),
        "softplus": lambda x: sp.log(1 + sp.exp(x)),
        "pow": lambda x, y: x ** y,
        "maximum": sp.Max, "minimum": sp.Min,
        "where": lambda c, x, y: sp.Piecewise((x, c), (y, True)),
    }
    if name == "clamp":
        lower = kw.get("min", a[1] if len(a) > 1 else None)
        upper = kw.get("max", a[2] if len(a) > 2 else None)
        value = a[0]
        if lower is not None:
            value = sp.Max(value, lower)
        if upper is not None:
            value = sp.Min(value, upper)
        return value
    if name not in table:
        raise _Unsupported(f"{name}()")
    return table[name](*a)


@functools.lru_cache(maxsize=512)
def symbolic_derivatives(source: str, names: tuple[str, ...]):
    """(reduction, {name: derivative}, {name: Symbol}) for `source`; or a skip reason string."""
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
                isinstance(func.value, ast.Name) and func.value.id == "torch")
            body = func.value if is_method else body.args[0]
    try:
        formula = _to_sympy(body, symbols)
    except _Unsupported as exc:
        return f"SymPy opinion skipped: {exc} is not handled symbolically"
    return reduction, {n: sp.diff(formula, symbols[n]) for n in names}, symbols


@functools.lru_cache(maxsize=512)
def _hand_formula(source: str, names: tuple[str, ...]):
    import sympy as sp

    from .parser import parse_expression

    symbols = {n: sp.Symbol(n, real=True) for n in names}
    try:
        return _to_sympy(parse_expression(source, names, field_name="analytical_gradient").tree.body, symbols)
    except _Unsupported:
        return None


def _float_call(function, *args) -> float:
    try:
        value = function(*args)
    except OverflowError:
        return math.inf
    except (ValueError, ZeroDivisionError):
        return math.nan
    return value.real if isinstance(value, complex) else value


def _numeric(expr, env: dict) -> float:
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
        return sum(_numeric(a, env) for a in args)  # inf - inf is nan, as in torch
    if isinstance(expr, sp.Mul):
        return _float_call(lambda *xs: math.prod(xs), *(_numeric(a, env) for a in args))
    if isinstance(expr, sp.Pow):
        return _float_call(pow, _numeric(args[0], env), _numeric(args[1], env))
    if isinstance(expr, sp.Piecewise):
        for value, condition in args:
            if _numeric(condition, env):
                return _numeric(value, env)
        return math.nan
    if isinstance(expr, sp.core.relational.Relational):
        left, right = _numeric(args[0], env), _numeric(args[1], env)
        return float({"<": left < right, "<=": left <= right, ">": left > right,
                      ">=": left >= right, "==": left == right, "!=": left != right}[expr.rel_op])
    unary = {sp.exp: math.exp, sp.log: math.log, sp.sin: math.sin, sp.cos: math.cos,
             sp.tan: math.tan, sp.tanh: math.tanh, sp.sinh: math.sinh, sp.cosh: math.cosh,
             sp.Abs: abs, sp.sign: lambda v: float((v > 0) - (v < 0))}
    for kind, function in unary.items():
        if isinstance(expr, kind):
            return _float_call(function, _numeric(args[0], env))
    if isinstance(expr, sp.Heaviside):
        value = _numeric(args[0], env)
        at_zero = _numeric(args[1], env) if len(args) > 1 else 0.5
        return 1.0 if value > 0 else 0.0 if value < 0 else at_zero
    if isinstance(expr, (sp.Max, sp.Min)):
        values = [_numeric(a, env) for a in args]
        return max(values) if isinstance(expr, sp.Max) else min(values)
    raise _Unsupported(f"{type(expr).__name__} in the derivative")


def symbolic_opinion(spec, inputs: dict, analytical: dict, autograd: dict) -> dict:
    """Whether SymPy's derivative agrees with the hand derivation and with autograd."""
    import torch

    names = tuple(spec.inputs)
    if spec.expression is None:
        return {"status": "skipped", "reason": "a Python callable has no formula for SymPy"}
    total = sum(t.numel() for t in inputs.values())
    if total > MAX_ELEMENTS:
        return {"status": "skipped", "reason": f"more than {MAX_ELEMENTS} input elements"}
    derived = symbolic_derivatives(spec.expression.source, names)
    if isinstance(derived, str):
        return {"status": "skipped", "reason": derived}
    reduction, derivatives, symbols = derived
    shapes = {n: tuple(t.shape) for n, t in inputs.items()}
    try:
        full = torch.broadcast_shapes(*shapes.values())
    except RuntimeError:
        return {"status": "skipped", "reason": "inputs do not broadcast elementwise"}
    if reduction is None and full != ():
        if any(shape != full for shape in shapes.values()):
            return {"status": "skipped", "reason": "non-scalar output with broadcast inputs"}
    expanded = {n: t.detach().to("cpu", torch.float64).broadcast_to(full).reshape(-1) for n, t in inputs.items()}
    count = max(1, int(torch.tensor(full).prod()) if full else 1)
    scale = 1.0 / count if reduction == "mean" else 1.0
    result_values = {}
    try:
        for n in names:
            per_element = torch.tensor([
                _numeric(derivatives[n], {m: float(expanded[m][k]) for m in names})
                for k in range(count)
            ], dtype=torch.float64) * scale
            if shapes[n] == full:
                result_values[n] = per_element.reshape(full)
            else:
                result_values[n] = per_element.sum().reshape(shapes[n]) if shapes[n] == () else None
                if result_values[n] is None:
                    return {"status": "skipped", "reason": "partially broadcast input"}
    except _Unsupported as exc:
        return {"status": "skipped", "reason": f"SymPy opinion skipped: {exc} is not evaluated numerically"}
    rtol, atol = spec.tolerance["rtol"], spec.tolerance["atol"]

    def agrees(other: dict) -> bool:
        return all(
            torch.allclose(other[n].detach().to("cpu", torch.float64).broadcast_to(result_values[n].shape),
                           result_values[n], rtol=rtol, atol=atol, equal_nan=False)
            for n in names
        )

    hand_ok, autograd_ok = agrees(analytical), agrees(autograd)
    symbolic_equal = _symbolic_equal(spec, derivatives, names)
    parts = [f"SymPy differentiates {spec.expression.source} to "
             + ", ".join(f"d/d{n} = {derivatives[n]}" for n in names)]
    parts.append("the hand derivation " + ("agrees" if hand_ok else "disagrees"))
    parts.append("autograd " + ("agrees" if autograd_ok else "disagrees"))
    return {
        "status": "agrees" if hand_ok and autograd_ok else "disagrees",
        "derivative": {n: str(derivatives[n]) for n in names},
        "values": {n: result_values[n].tolist() for n in names},
        "analytical_agrees": hand_ok,
        "autograd_agrees": autograd_ok,
        "symbolically_equal": symbolic_equal,
        "reason": "; ".join(parts),
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
        verdicts.append(_identical(formula, derivatives[n]))
    if None in verdicts:
        return None
    return all(verdicts)


#: Operations above which SymPy's simplify is not attempted (it can take unbounded time).
SIMPLIFY_MAX_OPS = 40


@functools.lru_cache(maxsize=512)
def _identical(formula, derivative):
    """Whether two formulas are identical, or None when they are too large to simplify."""
    import sympy as sp

    difference = formula - derivative
    if sp.count_ops(difference) > SIMPLIFY_MAX_OPS:
        return None
    return sp.simplify(difference) == 0
