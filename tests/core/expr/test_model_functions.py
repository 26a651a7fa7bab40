"""The model-exercise functions of the expression language: their values are torch's, their
shapes are inferred (and refused) before anything runs, and the complex-step column is honest."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.expr.evaluator import compile_expression
from jupyterlab_gradcheck.core.expr.parser import parse_expression
from jupyterlab_gradcheck.core.expr.shapes import output_shape

Z = torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]], dtype=torch.float64)  # a batch of 2, 3 classes
V = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
P = torch.softmax(-Z, dim=1)  # class probabilities, rows summing to 1
VALUES = {"z": Z, "v": V, "p": P}
SHAPES = {name: tuple(t.shape) for name, t in VALUES.items()}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("softmax(z, dim=1)", torch.softmax(Z, dim=1)),
        ("torch.softmax(z, dim=0)", torch.softmax(Z, dim=0)),
        ("z.log_softmax(dim=-1)", torch.log_softmax(Z, dim=-1)),
        ("logsumexp(z, dim=1)", torch.logsumexp(Z, dim=1)),
        ("z.logsumexp(dim=0, keepdim=True)", torch.logsumexp(Z, dim=0, keepdim=True)),
        ("max(z)", Z.max()),
        ("max(z, dim=1)", Z.max(dim=1).values),
        ("z.min(dim=0, keepdim=True)", Z.min(dim=0, keepdim=True).values),
        ("norm(v)", torch.linalg.vector_norm(V)),
        ("z.norm(dim=1, keepdim=True)", torch.linalg.vector_norm(Z, dim=1, keepdim=True)),
        ("outer(v, v)", torch.outer(V, V)),
        ("transpose(z, 0, 1)", Z.transpose(0, 1)),
        ("z.transpose(-1, 0)", Z.transpose(-1, 0)),
        ("z.T", Z.T),
        ("(z.T @ z).T", (Z.T @ Z).T),
        ("reshape(z, (3, 2))", Z.reshape(3, 2)),
        ("reshape(z, [-1])", Z.reshape(-1)),
        ("z.reshape(3, -1)", Z.reshape(3, -1)),
        ("logsigmoid(z)", F.logsigmoid(Z)),
        ("cross_entropy(z, [2, 1])", F.cross_entropy(Z, torch.tensor([2, 1]))),
        ("cross_entropy(v, 0)", F.cross_entropy(V, torch.tensor(0))),
        ("cross_entropy(z, p)", F.cross_entropy(Z, P)),
        ("cross_entropy(v, p[0])", F.cross_entropy(V, P[0])),
        ("softmax(z, dim=1) - one_hot([2, 1], 3)", torch.softmax(Z, dim=1) - F.one_hot(torch.tensor([2, 1]), 3)),
        (
            "-(p*log(sigmoid(z)) + (1-p)*log(1-sigmoid(z))).mean()",
            -(P * torch.log(torch.sigmoid(Z)) + (1 - P) * torch.log(1 - torch.sigmoid(Z))).mean(),
        ),
    ],
)
def test_a_model_function_evaluates_like_torch(text, expected):
    """Given a model-exercise function written in the language, when evaluated, then it is
    exactly what torch computes (the same kernels, so no tolerance), and the inferred shape is
    the shape torch gives."""
    expression = parse_expression(text, VALUES)

    value = compile_expression(expression)(**VALUES)

    assert torch.equal(value, expected)
    assert output_shape(expression, SHAPES) == tuple(expected.shape)


def test_max_with_dim_means_the_values_and_gives_torchs_gradient():
    """Given max(z, dim=1) (torch returns values and indices), when evaluated and
    differentiated, then it is the values only, and the gradient goes to each row's largest
    element, as torch.max's does."""
    z = Z.clone().requires_grad_(True)
    value = compile_expression(parse_expression("max(z, dim=1).sum()", {"z"}))(z=z)
    value.backward()
    assert value.item() == 3.0 + 1.0
    assert z.grad.tolist() == [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]


@pytest.mark.parametrize(
    "text, message",
    [
        ("softmax(z, dim=2)", "dimension out of range (expected to be in range of [-2, 1], but got 2)"),
        ("log_softmax(v, dim=1)", "dimension out of range (expected to be in range of [-1, 0], but got 1)"),
        ("softmax(z, dim=0.5)", "but got 0.5"),
        ("logsumexp(z, dim=-3)", "dimension out of range"),
        ("max(z, keepdim=True)", "max: keepdim needs dim"),
        ("min(z[0:0])", "min of a tensor with no elements has no value"),
        ("norm(z, dim=2)", "dimension out of range"),
        ("outer(z, v)", "outer: 1D tensors expected, but got 2D and 1D tensors"),
        ("transpose(z, 0, 2)", "dimension out of range (expected to be in range of [-2, 1], but got 2)"),
        ("z.reshape(1, 2, 3).T", ".T needs a tensor of at most 2 dimensions, got 3D"),
        ("reshape(z, (4, 2))", "shape [4, 2] is invalid for input of size 6"),
        ("reshape(z, (-1, -1))", "only one dimension can be inferred"),
        ("reshape(z, (-1, 4))", "shape [-1, 4] is invalid for input of size 6"),
        ("reshape(z, (1000000000000, 1000000000000))", "is invalid for input of size 6"),
        ("reshape(z, (-2, 3))", "invalid shape dimension -2"),
        ("reshape(z, (1, 1, 1, 1, 1, 1, 1, 1, 6))", "reshape to 9 dimensions; the limit is 8"),
        ("cross_entropy(z, [2, 3])", "class index 3 is out of range for 3 classes"),
        ("cross_entropy(z, [2])", "1 class index for a batch of 2"),
        ("cross_entropy(z, 1)", "a batch of 2 needs a list of 2 class indices"),
        ("cross_entropy(v, [1])", "for 1-D logits (one sample) the class index is one integer"),
        ("cross_entropy(v, -1)", "class index -1 is out of range"),
        ("cross_entropy(v, 1.5)", "a constant target must be an integer class index, got 1.5"),
        ("cross_entropy(z, v)", "a tensor target gives class probabilities and must have the logits' shape [2, 3]"),
        ("cross_entropy(z.reshape(1, 2, 3), p)", "logits of 1 (classes) or 2 (batch x classes) dimensions expected"),
        ("one_hot([0, 3], 3)", "one_hot: class index 3 is out of range for 3 classes"),
        ("one_hot(0, 0)", "the number of classes must be positive"),
        ("one_hot([0], 1000000000000).sum() * v", "elements; the limit is"),
    ],
)
def test_a_shape_that_cannot_work_is_refused_before_anything_runs(text, message):
    """Given a model function whose dimension, shape or class indices cannot work with the
    declared inputs, when its shapes are inferred (as parse_spec does), then a one-line
    SpecError names the problem and the column, and nothing is evaluated."""
    expression = parse_expression(text, VALUES)

    with pytest.raises(SpecError) as raised:
        output_shape(expression, SHAPES)

    assert message in raised.value.message
    assert "\n" not in raised.value.message and "at column" in raised.value.message


@pytest.mark.parametrize(
    "text, message",
    [
        ("softmax(z)", "softmax needs the keyword dim, e.g. softmax(z, dim=0)"),
        ("logsumexp(z)", "logsumexp needs the keyword dim"),
        ("softmax(z, dim=v)", "keyword 'dim' must be a number constant"),
        ("softmax(z, 1)", "softmax takes 1 to 1 arguments, got 2 (give the dimension as a keyword, dim=...)"),
        ("max(z, keepdim=1)", "keepdim must be True or False"),
        ("max(z, v)", "the elementwise max of two is maximum(a, b)"),
        ("transpose(z, 0, v)", "transpose: argument 3 must be an integer constant"),
        ("z.transpose(0, 1.0)", "transpose: argument 3 must be an integer constant"),
        ("reshape(z, v)", "reshape: argument 2 must be a tuple or list of integer constants"),
        ("reshape(z, (v, 2))", "reshape: argument 2 must be a tuple or list of integer constants"),
        ("z.reshape(3, (2,))", "reshape: argument 3 must be an integer constant"),
        ("cross_entropy(z, [v, 0])", "cross_entropy: a list of class indices must be a tuple or list of integer"),
        ("z.cross_entropy([0, 1])", "'cross_entropy' cannot be called as a tensor method"),
        ("one_hot(v, 3)", "one_hot: argument 1 must be a tuple or list of integer constants"),
        ("z.T.__class__", "dunder name '__class__'"),
        ("z.T.real", "attribute 'real' is not allowed (only .T and calls of listed functions)"),
        ("z.T()", "function 'T' is not in the allowed list"),
        ("z.mT", "attribute 'mT' is not allowed"),
        ("sum([1, 2])", "list literal is not allowed"),
    ],
)
def test_a_model_function_outside_the_language_is_refused_by_the_parser(text, message):
    """Given a model function called with a missing or non-constant dimension, a shape or class
    index that is not a constant, or an attribute other than .T, when parsed, then a one-line
    SpecError names it."""
    with pytest.raises(SpecError) as raised:
        parse_expression(text, VALUES)

    assert message in raised.value.message
    assert "\n" not in raised.value.message


@pytest.mark.parametrize(
    "function",
    [
        "logsumexp(z, dim=1).sum()",
        "outer(v, v).sum()",
        "(transpose(z, 0, 1) @ v[0:2]).sum()",
        "(z.T * z.T).sum()",
        "reshape(z, (3, 2)).sum() ** 2",
        "(one_hot([2, 1], 3) * z).sum()",
    ],
)
def test_complex_step_runs_through_the_analytic_model_functions(function):
    """Given a function through logsumexp, outer, transpose, .T, reshape or one_hot (each
    complex-analytic, and torch evaluates each in complex), when declared with the complex step,
    then the record is accepted."""
    spec = parse_spec(
        {
            "function": function,
            "inputs": {"z": Z.tolist(), "v": V.tolist()},
            "analytical_gradient": {"z": 0, "v": 0},
            "finite_difference": {"scheme": "complex_step"},
        }
    )
    assert spec.expression.complex_analytic


@pytest.mark.parametrize(
    "function, reason",
    [
        ("softmax(z, dim=1).sum()", "softmax (torch has no complex kernel for it)"),
        ("log_softmax(z, dim=1).sum()", "log_softmax (torch has no complex kernel for it)"),
        ("logsigmoid(z).sum()", "logsigmoid (torch has no complex kernel for it)"),
        ("cross_entropy(z, [0, 1])", "cross_entropy (torch has no complex kernel for it)"),
        ("norm(z)", "norm (it takes the modulus, |z|, which is not complex-analytic)"),
        ("max(z, dim=0).sum()", "max (a maximum is not complex-analytic)"),
        ("min(z)", "min (a minimum is not complex-analytic)"),
    ],
)
def test_complex_step_through_a_model_function_that_cannot_take_it_is_refused(function, reason):
    """Given a function through softmax, log_softmax, logsigmoid, cross_entropy, norm, max or
    min, when declared with the complex step, then the record is refused before it runs, with
    the reason for that function."""
    with pytest.raises(SpecError) as raised:
        parse_spec(
            {
                "function": function,
                "inputs": {"z": Z.tolist()},
                "analytical_gradient": 0,
                "finite_difference": {"scheme": "complex_step"},
            }
        )
    assert reason in raised.value.message
    assert raised.value.field == "finite_difference.scheme"


def test_the_complex_step_agrees_with_autograd_through_logsumexp():
    """Given logsumexp (whose complex torch kernel is analytic) checked with the complex step,
    when run, then it passes: softmax is its gradient and the complex step agrees with autograd."""
    from jupyterlab_gradcheck.core.check.engine import run_check

    record = run_check(
        {
            "function": "logsumexp(z, dim=0)",
            "z": [1.0, 2.0, 3.0],
            "analytical_gradient": "softmax(z, dim=0)",
            "finite_difference": {"scheme": "complex_step"},
        },
        sweep=False,
    )
    assert record["passed"] is True, record["failures"]
