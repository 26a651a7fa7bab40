"""The allow-list of functions an expression may call, and what each one is.

This table is the whole vocabulary of the expression language. A name that is not here is
refused by the parser before anything runs. `complex_analytic` says whether the complex-step
finite difference is valid through the function (it is not for abs, relu, clamp, maximum,
minimum, where or softplus, whose complex extensions either do not exist or are not the
derivative of the real function).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Function:
    """One callable of the expression language."""

    name: str
    min_args: int
    max_args: int
    keywords: tuple[str, ...] = ()
    complex_analytic: bool = True
    method: bool = True  #: also callable as a tensor method, `x.name(...)`
    doc: str = ""


_ELEMENTWISE = {
    "sin": "sine",
    "cos": "cosine",
    "tan": "tangent",
    "exp": "exponential",
    "log": "natural logarithm",
    "log1p": "log(1 + x), accurate near 0",
    "sqrt": "square root",
    "tanh": "hyperbolic tangent",
    "sigmoid": "logistic function 1 / (1 + exp(-x))",
}

FUNCTIONS: dict[str, Function] = {
    name: Function(name, 1, 1, doc=doc) for name, doc in _ELEMENTWISE.items()
}
FUNCTIONS.update(
    {
        "abs": Function("abs", 1, 1, complex_analytic=False, doc="absolute value (kink at 0)"),
        "relu": Function("relu", 1, 1, complex_analytic=False, doc="max(x, 0) (kink at 0)"),
        "softplus": Function(
            "softplus", 1, 1, complex_analytic=False, method=False, doc="log(1 + exp(x))"
        ),
        "sum": Function("sum", 1, 1, ("dim", "keepdim"), doc="sum of elements"),
        "mean": Function("mean", 1, 1, ("dim", "keepdim"), doc="mean of elements"),
        "prod": Function("prod", 1, 1, ("dim", "keepdim"), doc="product of elements"),
        "dot": Function("dot", 2, 2, doc="dot product of two vectors"),
        "matmul": Function("matmul", 2, 2, doc="matrix product, also written a @ b"),
        "pow": Function("pow", 2, 2, doc="power, also written a ** b"),
        "clamp": Function(
            "clamp", 1, 3, ("min", "max"), complex_analytic=False, doc="clip to [min, max]"
        ),
        "where": Function(
            "where", 3, 3, complex_analytic=False, method=False, doc="where(cond, a, b)"
        ),
        "maximum": Function("maximum", 2, 2, complex_analytic=False, doc="elementwise maximum"),
        "minimum": Function("minimum", 2, 2, complex_analytic=False, doc="elementwise minimum"),
    }
)

#: Names an expression may not use for an input, because they name something else.
RESERVED_NAMES = frozenset(FUNCTIONS) | {"torch"}
