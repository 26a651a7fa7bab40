"""SymPy's opinion on the model-exercise functions: each input element a symbol of its own, the
derivative evaluated and held against the hand derivation and autograd, or a stated reason."""

from __future__ import annotations

import pytest

from jupyterlab_gradcheck.core.check.engine import run_check

Z = [[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]]
A = [0.5, -1.0, 2.0]
W = [[1.0, -1.0], [0.5, 2.0], [0.0, 3.0]]

#: (function, inputs, the derivative a student writes) for every model function.
EXERCISES = {
    "softmax": (
        "(a * softmax(z, dim=0)).sum()",
        {"z": [1.0, 2.0, 3.0], "a": A},
        {"z": "softmax(z, dim=0) * (a - (a * softmax(z, dim=0)).sum())", "a": "softmax(z, dim=0)"},
    ),
    "log_softmax": (
        "(a * log_softmax(z, dim=0)).sum()",
        {"z": [1.0, 2.0, 3.0], "a": A},
        {"z": "a - softmax(z, dim=0) * a.sum()", "a": "log_softmax(z, dim=0)"},
    ),
    "logsumexp": ("logsumexp(z, dim=1).sum()", {"z": Z}, {"z": "softmax(z, dim=1)"}),
    "max": ("max(z, dim=1).sum()", {"z": Z}, {"z": [[0, 0, 1], [0, 1, 0]]}),
    "max overall": ("max(z)", {"z": Z}, {"z": [[0, 0, 1], [0, 0, 0]]}),
    "min": ("min(z, dim=0, keepdim=True).sum()", {"z": Z}, {"z": [[0, 0, 0], [1, 1, 1]]}),
    "norm": ("norm(z)", {"z": Z}, {"z": "z / norm(z)"}),
    "norm along a dimension": ("norm(z, dim=1).sum()", {"z": Z}, {"z": "z / norm(z, dim=1, keepdim=True)"}),
    "outer": (
        "(outer(a, b) * outer(a, b)).sum()",
        {"a": A, "b": [1.0, -2.0]},
        {"a": "2 * a * (b @ b)", "b": "2 * b * (a @ a)"},
    ),
    "transpose": (
        "(transpose(z, 0, 1) * w).sum()",
        {"z": Z, "w": W},
        {"z": "transpose(w, 0, 1)", "w": "transpose(z, 0, 1)"},
    ),
    ".T": ("(z.T @ z).sum()", {"z": Z}, {"z": "2 * sum(z, dim=1, keepdim=True)"}),
    "reshape": ("(reshape(z, (3, 2)) * w).sum()", {"z": Z, "w": W}, {"z": "w.reshape(2, 3)", "w": "z.reshape(-1, 2)"}),
    "logsigmoid": ("logsigmoid(z).sum()", {"z": Z}, {"z": "1 - sigmoid(z)"}),
    "cross_entropy indices": (
        "cross_entropy(z, [2, 1])",
        {"z": Z},
        {"z": "(softmax(z, dim=1) - one_hot([2, 1], 3)) / 2"},
    ),
    "cross_entropy one sample": (
        "cross_entropy(z, 2)",
        {"z": [1.0, 2.0, 3.0]},
        {"z": "softmax(z, dim=0) - one_hot(2, 3)"},
    ),
    "cross_entropy probabilities": (
        "cross_entropy(z, p)",
        {"z": Z, "p": [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]]},
        {"z": "(softmax(z, dim=1) - p) / 2", "p": "-log_softmax(z, dim=1) / 2"},
    ),
    "logistic loss": (
        "-(y*log(sigmoid(z)) + (1-y)*log(1-sigmoid(z))).mean()",
        {"z": [0.5, -1.0, 2.0], "y": [1.0, 0.0, 1.0]},
        {"z": "(sigmoid(z) - y) / 3", "y": "-z / 3"},
    ),
    "mean squared error": (
        "mean((X @ w + b - y) ** 2)",
        {"X": [[1.0, 2.0], [3.0, -1.0]], "w": [0.3, -0.2], "b": 0.1, "y": [1.0, 0.0]},
        {
            "X": "outer(X @ w + b - y, w)",
            "w": "X.T @ (X @ w + b - y)",
            "b": "sum(X @ w + b - y)",
            "y": "-(X @ w + b - y)",
        },
    ),
}


@pytest.mark.parametrize("name", list(EXERCISES))
def test_sympy_agrees_with_the_hand_derivation_and_autograd(name):
    """Given a model function and the derivative a student is expected to write, when the
    check runs, then it passes and SymPy, differentiating element by element, agrees with both
    the hand derivation and autograd (within the check's own float64 tolerance)."""
    function, inputs, expected = EXERCISES[name]

    record = run_check({"function": function, "inputs": inputs, "analytical_gradient": expected}, sweep=False)

    assert record["passed"] is True, record["failures"]
    symbolic = record["symbolic"]
    assert symbolic["status"] == "agrees", symbolic["reason"]
    assert (symbolic["analytical_agrees"], symbolic["autograd_agrees"]) == (True, True)


def test_sympy_shows_why_softmax_minus_y_needs_a_target_that_sums_to_one():
    """Given -(y*log_softmax(z, dim=0)).sum() with the expectation softmax(z, dim=0) - y, when
    run at a one-hot y, then the values agree but SymPy says the formulas are not identical:
    its derivative is softmax(z) * sum(y) - y, equal only where y sums to 1."""
    record = run_check(
        {
            "function": "-(y*log_softmax(z, dim=0)).sum()",
            "inputs": {"z": [1.0, 2.0, 3.0], "y": [0.0, 1.0, 0.0]},
            "analytical_gradient": {"z": "softmax(z, dim=0) - y", "y": "-log_softmax(z, dim=0)"},
        },
        sweep=False,
    )
    symbolic = record["symbolic"]
    assert symbolic["status"] == "agrees"
    assert symbolic["symbolically_equal"] is False
    assert symbolic["derivative"]["z"].startswith("z[0]: ")


def test_sympy_finds_a_wrong_hand_derivation_through_cross_entropy():
    """Given cross_entropy over a batch of 2 with the expectation that forgets the mean's 1/2,
    when run, then the check fails and SymPy sides with autograd."""
    record = run_check(
        {
            "function": "cross_entropy(z, [2, 1])",
            "z": Z,
            "analytical_gradient": "softmax(z, dim=1) - one_hot([2, 1], 3)",
        },
        sweep=False,
    )
    assert record["passed"] is False
    assert (record["symbolic"]["analytical_agrees"], record["symbolic"]["autograd_agrees"]) == (False, True)


@pytest.mark.parametrize(
    "function, inputs, reason",
    [
        ("max(x)", {"x": [float(i) for i in range(9)]}, "max() over more than 8 elements"),
        (
            "(x.reshape(36, 1, 1) * x.reshape(1, 36, 1) * x.reshape(1, 1, 36)).sum()",
            {"x": [0.01 * i for i in range(36)]},
            "an intermediate result of 46656 elements (more than 2000)",
        ),
        (
            "softmax(x, dim=0).sum()",
            {"x": [0.01 * i for i in range(37)]},
            "the element-by-element opinion takes at most 36 input elements",
        ),
    ],
)
def test_sympy_states_why_it_has_no_opinion(function, inputs, reason):
    """Given a max over more than 8 elements (SymPy's Max differentiates in cubic time), an
    intermediate array past 2000 SymPy expressions, or more than 36 input elements for a
    function that mixes elements, when run, then SymPy's opinion is skipped with that reason."""
    record = run_check({"function": function, "inputs": inputs, "analytical_gradient": 0}, sweep=False)
    assert record["symbolic"]["status"] == "skipped"
    assert reason in record["symbolic"]["reason"]
