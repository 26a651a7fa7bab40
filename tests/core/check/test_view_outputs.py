"""A function whose output is a view of its input (the OpInfo sweep's meshgrid and atleast_*).

The backward of a view hands the leaf a gradient that shares grad_output's storage, and autograd
keeps that tensor as the leaf's .grad instead of copying it. The second backward pass adds into
.grad in place, so grad_output itself was doubled, and every observation after it (a cleared
pass, autograd.grad, the finite differences) was made with 2v: a correct function failed with
"the expectation is wrong". Each backward pass now gets a grad_output of its own.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check

W = [[1.0, 1.5, 2.0]]


def _gradients(record: dict) -> dict:
    return {
        name: observation["gradients"]["x"]["value"]
        for name, observation in record["observations"].items()
        if "gradients" in observation and "x" in observation["gradients"]
    }


def test_a_view_of_the_input_is_checked_with_the_grad_output_given():
    """Given f(x) = x.view(1, 3), whose gradient at grad_output w is w itself,
    when the full check runs with w as grad_output and as the expectation,
    then it passes, pass 2 holds 2w (it accumulates), and every other observation holds w: the
    grad_output was not changed by the passes before them."""
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    record = run_check(
        {
            "function": lambda x: x.view(1, 3),
            "inputs": {"x": x},
            "dtype": "float64",
            "grad_output": W,
            "analytical_gradient": {"x": lambda **_: torch.tensor(W[0], dtype=torch.float64)},
        }
    )
    gradients = _gradients(record)
    assert record["failures"] == []
    assert gradients["backward_pass_2_accumulated"] == [2.0, 3.0, 4.0]
    for name in ("backward_pass_1", "after_clear_none", "autograd_grad"):
        assert gradients[name] == W[0], name
    # 1e-9: central differences of a linear function round at ~1e-10 for O(1) values
    assert all(abs(a - b) < 1e-9 for a, b in zip(gradients["finite_difference"], W[0]))


def test_outputs_that_are_views_are_checked_output_by_output():
    """Given meshgrid of x (3 elements) and y (one), two outputs that are expanded views of the inputs,
    when the full check runs with autograd's gradient of each output as the expectation,
    then it passes (it failed at x with twice the weight before)."""
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    y = torch.tensor([0.7], dtype=torch.float64)
    weights = [
        torch.tensor([[1.0, 1.5, 2.0]], dtype=torch.float64),
        torch.tensor([[0.5, 0.25, 0.125]], dtype=torch.float64),
    ]

    def function(x, y):
        return tuple(torch.meshgrid([x, y], indexing="xy"))

    expectations = [
        {"x": lambda **_: weights[0][0], "y": lambda **_: torch.zeros(1, dtype=torch.float64)},
        {"x": lambda **_: torch.zeros(3, dtype=torch.float64), "y": lambda **_: weights[1].sum().reshape(1)},
    ]
    record = run_check(
        {
            "function": function,
            "inputs": {"x": x, "y": y},
            "dtype": "float64",
            "grad_output": [w.tolist() for w in weights],
            "analytical_gradient": {"outputs": expectations},
        }
    )
    assert record["failures"] == []
    assert record["passed"] is True
