"""Helpers for stories that run a check on a Python callable with autograd's own gradient as the
expectation, so that only the finite differences (and what is recorded about them) are under test."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check


def autograd_gradient(function, inputs: dict) -> dict:
    """d function / d input for every input (zeros where an input is unused), in float64."""
    leaves = {n: torch.as_tensor(v, dtype=torch.float64).clone().requires_grad_(True) for n, v in inputs.items()}
    grads = torch.autograd.grad(function(**leaves), list(leaves.values()), allow_unused=True)
    # None (unused) and autograd's zero placeholder (which has no storage to read) become zeros
    return {
        n: torch.zeros(leaves[n].shape, dtype=torch.float64) if g is None or g._is_zerotensor() else g.detach()
        for n, g in zip(leaves, grads)
    }


def check_against_autograd(function, inputs: dict, expectation: dict | None = None, *, sweep=None, **options) -> dict:
    """The full record of a check whose expectation is autograd's gradient (or `expectation`);
    `sweep` is run_check's (None: its default)."""
    expected = autograd_gradient(function, inputs) if expectation is None else expectation
    record = {
        "function": function,
        "inputs": {n: torch.as_tensor(v, dtype=torch.float64) for n, v in inputs.items()},
        "analytical_gradient": {n: g.tolist() for n, g in expected.items()},
        **options,
    }
    return run_check(record, sweep=sweep)


def fd_comparison(record: dict, input_name: str = "x") -> dict:
    """The record's autograd_vs_finite_difference comparison of one input."""
    return next(
        row
        for row in record["comparisons"]
        if row["name"] == "autograd_vs_finite_difference" and row["input"] == input_name
    )


class WrongAtOneElement(torch.autograd.Function):
    """phi(x) = f(x) for a scalar f set on the class, whose backward returns a fixed (wrong) gradient.

    Set `function` and `gradient` before use; the backward returns grad_output * gradient.
    """

    function = None
    gradient = None

    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            return WrongAtOneElement.function(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * WrongAtOneElement.gradient
