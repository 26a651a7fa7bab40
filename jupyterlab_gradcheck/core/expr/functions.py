"""The allow-list of functions an expression may call, and what each one is.

This table is the whole vocabulary of the expression language. A name that is not here is
refused by the parser before anything runs. `complex_analytic` says whether the complex-step
finite difference is valid through the function (it is not for abs, relu, clamp, maximum,
minimum, where or softplus, whose complex extensions either do not exist or are not the
derivative of the real function), nor for the softmax family, logsigmoid and cross_entropy,
whose torch kernels have no complex version, nor for norm, max and min).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..i18n import Message


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
    #: Keywords that must be given (torch's implicit softmax dimension is deprecated).
    required: tuple[str, ...] = ()
    #: Argument positions (the tensor a method hangs on is position 0) that are not tensors
    #: but integer constants, or a constant tuple or list of them: dimensions and shapes.
    constant_args: tuple[int, ...] = ()
    #: Argument positions where a constant list of integers may stand for a tensor of integers
    #: (class indices), besides an ordinary tensor argument.
    index_list_args: tuple[int, ...] = ()
    #: Positions among `constant_args` where a tuple or list of integer constants is allowed.
    sequence_args: tuple[int, ...] = ()
    #: Why complex step is refused through this function, when `complex_analytic` is False
    #: (a Message: shown in the reader's language).
    complex_reason: str = ""


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

FUNCTIONS: dict[str, Function] = {name: Function(name, 1, 1, doc=doc) for name, doc in _ELEMENTWISE.items()}
FUNCTIONS.update(
    {
        "abs": Function("abs", 1, 1, complex_analytic=False, doc="absolute value (kink at 0)"),
        "relu": Function("relu", 1, 1, complex_analytic=False, doc="max(x, 0) (kink at 0)"),
        "softplus": Function("softplus", 1, 1, complex_analytic=False, method=False, doc="log(1 + exp(x))"),
        "sum": Function("sum", 1, 1, ("dim", "keepdim"), doc="sum of elements"),
        "mean": Function("mean", 1, 1, ("dim", "keepdim"), doc="mean of elements"),
        "prod": Function("prod", 1, 1, ("dim", "keepdim"), doc="product of elements"),
        "dot": Function("dot", 2, 2, doc="dot product of two vectors"),
        "matmul": Function("matmul", 2, 2, doc="matrix product, also written a @ b"),
        "pow": Function("pow", 2, 2, doc="power, also written a ** b"),
        "clamp": Function("clamp", 1, 3, ("min", "max"), complex_analytic=False, doc="clip to [min, max]"),
        "where": Function("where", 3, 3, complex_analytic=False, method=False, doc="where(cond, a, b)"),
        "maximum": Function("maximum", 2, 2, complex_analytic=False, doc="elementwise maximum"),
        "minimum": Function("minimum", 2, 2, complex_analytic=False, doc="elementwise minimum"),
    }
)

_NO_COMPLEX_KERNEL = Message("torch has no complex kernel for it")
#: The functions of the model exercises: softmax and its logarithm, the losses, reductions by
#: dimension, and the linear reshapings a linear or logistic model needs.
FUNCTIONS.update(
    {
        "logsigmoid": Function(
            "logsigmoid",
            1,
            1,
            complex_analytic=False,
            method=False,
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="log(sigmoid(x)), stable",
        ),
        "softmax": Function(
            "softmax",
            1,
            1,
            ("dim",),
            complex_analytic=False,
            required=("dim",),
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="exp(z) / sum(exp(z)) along dim",
        ),
        "log_softmax": Function(
            "log_softmax",
            1,
            1,
            ("dim",),
            complex_analytic=False,
            required=("dim",),
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="z - logsumexp(z) along dim",
        ),
        "logsumexp": Function(
            "logsumexp", 1, 1, ("dim", "keepdim"), required=("dim",), doc="log(sum(exp(z))) along dim, stable"
        ),
        "max": Function(
            "max",
            1,
            1,
            ("dim", "keepdim"),
            complex_analytic=False,
            complex_reason=Message("a maximum is not complex-analytic"),
            doc="largest element; with dim, the values along dim (not the indices)",
        ),
        "min": Function(
            "min",
            1,
            1,
            ("dim", "keepdim"),
            complex_analytic=False,
            complex_reason=Message("a minimum is not complex-analytic"),
            doc="smallest element; with dim, the values along dim (not the indices)",
        ),
        "norm": Function(
            "norm",
            1,
            1,
            ("dim", "keepdim"),
            complex_analytic=False,
            complex_reason=Message("it takes the modulus, |z|, which is not complex-analytic"),
            doc="2-norm of all elements, or along dim",
        ),
        "outer": Function("outer", 2, 2, doc="outer product of two vectors"),
        "transpose": Function("transpose", 3, 3, constant_args=(1, 2), doc="swap dimensions d0 and d1"),
        "reshape": Function(
            "reshape",
            2,
            9,
            constant_args=tuple(range(1, 9)),
            sequence_args=(1,),
            doc="the same elements in a constant shape (one -1 allowed)",
        ),
        "cross_entropy": Function(
            "cross_entropy",
            2,
            2,
            complex_analytic=False,
            method=False,
            index_list_args=(1,),
            complex_reason=_NO_COMPLEX_KERNEL,
            doc="mean cross entropy of logits against class indices or probabilities",
        ),
        "one_hot": Function(
            "one_hot",
            2,
            2,
            constant_args=(0, 1),
            sequence_args=(0,),
            method=False,
            doc="one_hot(indices, classes): constant rows of 0 and 1, as torch's (integers)",
        ),
    }
)

#: Names an expression may not use for an input, because they name something else.
RESERVED_NAMES = frozenset(FUNCTIONS) | {"torch"}


def literal_argument(function: Function, position: int, node: ast.AST) -> bool:
    """Whether argument `position` of a call (a method's tensor is 0) is a constant taken as
    written (a dimension, a shape, class indices) rather than a tensor to evaluate."""
    if position in function.constant_args:
        return True
    if position not in function.index_list_args:
        return False
    inner = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) else node
    return isinstance(inner, (ast.List, ast.Tuple, ast.Constant))
