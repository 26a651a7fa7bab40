"""What the SymPy opinions share: the elementwise functions as SymPy sees them, and a SymPy
expression evaluated in floats.

symbolic.py (one symbol per input, for elementwise bodies) and symbolic_tensor.py (one symbol
per input element, for everything that mixes elements) both convert with `ELEMENTWISE` and
evaluate with `float_value`, so the two paths cannot drift apart.
"""

from __future__ import annotations

import functools
import math

from ..i18n import Message


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
