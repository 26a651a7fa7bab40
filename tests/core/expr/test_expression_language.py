"""The safe expression language: what it accepts, and how it refuses everything else."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.expr.evaluator import compile_expression
from jupyterlab_gradcheck.core.expr.parser import Limits, parse_expression

X = torch.tensor([0.5, 2.0], dtype=torch.float64)
Y = torch.tensor(3.0, dtype=torch.float64)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x*x", X * X),
        ("(x**2).sum()", (X**2).sum()),
        ("torch.sin(x)*y", torch.sin(X) * Y),
        ("1 - torch.tanh(x)**2", 1 - torch.tanh(X) ** 2),
        ("sigmoid(x) + softplus(x)", torch.sigmoid(X) + torch.nn.functional.softplus(X)),
        ("x.pow(2).mean()", X.pow(2).mean()),
        ("clamp(x, 0, 1)", X.clamp(0, 1)),
        ("torch.clamp(x, min=1)", X.clamp(min=1)),
        ("where(x > 1, x, -x)", torch.where(X > 1, X, -X)),
        ("maximum(x, y) - minimum(x, y)", torch.maximum(X, Y) - torch.minimum(X, Y)),
        ("dot(x, x) / prod(x)", torch.dot(X, X) / X.prod()),
        ("x @ x", X @ X),
        ("x[0] * y + x[1:].sum()", X[0] * Y + X[1:].sum()),
        (
            "log1p(abs(x)) + sqrt(exp(x)) + relu(-x) + tan(cos(x))",
            torch.log1p(X.abs()) + torch.sqrt(torch.exp(X)) + torch.relu(-X) + torch.tan(torch.cos(X)),
        ),
    ],
)
def test_allowed_expressions_evaluate_like_torch(text, expected):
    """Given an expression in the documented language, when parsed and evaluated on tensors,
    then it equals the same computation written directly in torch."""
    value = compile_expression(parse_expression(text, {"x", "y"}))(x=X, y=Y)
    assert torch.equal(value, expected)


@pytest.mark.parametrize(
    "text, message",
    [
        ("__import__('os')", "dunder name '__import__'"),
        ("x.__class__", "dunder name '__class__'"),
        ("(lambda: 1)()", "only named functions can be called"),
        ("[v for v in x]", "list comprehension is not allowed"),
        ("import os", "syntax error"),
        ("'x' * 3", "string constant"),
        ("f'{x}'", "f-string is not allowed"),
        ("(y := x)", "assignment expression (:=) is not allowed"),
        ("sum(*x)", "starred argument is not allowed"),
        ("sum(x, **{'dim': 0})", "** keyword unpacking is not allowed"),
        ("sum(x, start=1)", "keyword 'start' is not allowed for sum"),
        ("x.real", "attribute 'real' is not allowed"),
        ("torch.zeros(3)", "function 'zeros' is not in the allowed list"),
        ("torch.nn.functional.relu(x)", "attribute 'functional' is not allowed"),
        ("open('f')", "function 'open' is not in the allowed list"),
        ("z * x", "unknown name 'z'"),
        ("x[y]", "subscript must be an integer constant"),
        ("x ** 1000", "exponent 1000 exceeds the limit"),
        ("x ** 2 ** 8", "tower"),
        ("x if x else y", "conditional expression is not allowed"),
        ("x and y", "boolean operator is not allowed"),
        ("x\u200b*x", "ZERO WIDTH SPACE"),
        ("\u0445*x", "CYRILLIC SMALL LETTER HA"),
        ("True * x", "bool constant"),
        ("1e300 * x", "exceeds the limit"),
        ("x.softplus()", "cannot be called as a tensor method"),
    ],
)
def test_refused_constructs_name_themselves(text, message):
    """Given a construct outside the language, when parsed, then a one-line SpecError names
    the construct (and the field) without evaluating anything."""
    with pytest.raises(SpecError) as raised:
        parse_expression(text, {"x", "y"})
    assert message in raised.value.message
    assert "\n" not in raised.value.message
    assert raised.value.field == "function"


def test_refusal_names_the_column():
    """Given a forbidden call deep in an expression, when parsed, then the column is named."""
    with pytest.raises(SpecError, match="column 9"):
        parse_expression("x + y * open(x)", {"x", "y"})


def test_length_and_depth_limits():
    """Given expressions past the documented limits, when parsed, then each limit is named."""
    limits = Limits()
    with pytest.raises(SpecError, match="characters; the limit is 2000"):
        parse_expression("x+" * 1000 + "x", {"x"})
    with pytest.raises(SpecError, match="nests deeper than 32"):
        parse_expression("sin(" * 40 + "x" + ")" * 40, {"x"}, limits=limits)
    balanced = "x"
    for _ in range(9):  # 512 leaves, 1023 nodes, only 9 levels deep
        balanced = f"({balanced}+{balanced})"
    with pytest.raises(SpecError, match="more than 400 nodes"):
        parse_expression(balanced, {"x"}, limits=Limits(max_expression_length=10_000))
