"""The step sweep is a side chart: each cause that crashed it is fixed, and any failure left is a note.

Every story runs a correct operator through the full check (the sweep runs by default) with
autograd's gradient as the expectation: before these fixes each raised out of the check.
"""

from __future__ import annotations

import torch

from support.checks import check_against_autograd


def _series(record: dict) -> dict:
    return {s["dtype"]: s for s in record["step_sweep"]["series"]}


def test_a_function_holding_float64_tensors_gets_a_float32_series():
    """Given prelu with a float64 weight held by the function (prelu refuses mixed dtypes, so
    casting the input alone to float32 raised),
    when the full check runs,
    then it passes and the sweep has both series; the float32 one says its operands were cast
    at every operation, and its best error is a float32 one (above 1e-9: float64's best is ~1e-11)."""
    weight = torch.tensor([0.25], dtype=torch.float64)

    def function(x):
        return (torch.nn.functional.prelu(x, weight) * torch.linspace(1.0, 2.0, 6, dtype=x.dtype)).sum()

    record = check_against_autograd(function, {"x": torch.linspace(-1.1, 1.4, 6, dtype=torch.float64)})  # no 0: a kink
    assert record["passed"] is True
    series = _series(record)
    assert set(series) == {"float32", "float64"}
    assert "cast to float32" in record["step_sweep"]["note"]
    assert series["float32"]["best_error"] > 1e-9 > series["float64"]["best_error"]


def test_steps_outside_the_domain_are_left_out_and_listed():
    """Given binary_cross_entropy of an input near 0.5 (a shift of 1.0 leaves [0, 1], where it raises),
    when the full check runs,
    then it passes; the float64 series lacks the step 1.0 but keeps the 16 smaller decades, and
    the note lists the step left out."""
    target = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)

    def function(x):
        return torch.nn.functional.binary_cross_entropy(x, target)

    record = check_against_autograd(function, {"x": torch.tensor([0.4, 0.5, 0.6], dtype=torch.float64)})
    assert record["passed"] is True
    float64 = _series(record)["float64"]
    assert 1.0 not in float64["steps"] and len(float64["steps"]) == 16
    assert "1e+00" in record["step_sweep"]["note"] and "left out" in record["step_sweep"]["note"]


def test_an_input_the_output_does_not_reach_has_a_zero_reference():
    """Given the 0-"norm" (a count of non-zero elements: its gradient is zero and autograd leaves
    the input out of the graph),
    when the full check runs,
    then it passes and the sweep's reference gradient is 0 (errors then absolute)."""

    def function(x):
        return torch.linalg.vector_norm(x, ord=0)

    record = check_against_autograd(function, {"x": torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)})
    assert record["passed"] is True
    assert record["step_sweep"]["reference"] == 0.0
    assert record["step_sweep"]["error_kind"] == "absolute"


def test_sgn_zero_gradient_placeholder_is_read_as_zeros():
    """Given sgn of a real input, whose backward returns autograd's immutable zero placeholder,
    when the full check runs (pass 2 accumulates into .grad, the record reads every gradient),
    then it passes and every recorded gradient is zeros."""

    def function(x):
        return (torch.sgn(x) * torch.linspace(1.0, 2.0, 4, dtype=x.dtype)).sum()

    record = check_against_autograd(function, {"x": torch.tensor([-1.0, 0.5, 2.0, -3.0], dtype=torch.float64)})
    assert record["passed"] is True
    for name in ("backward_pass_1", "backward_pass_2_accumulated", "after_clear_none", "autograd_grad"):
        assert record["observations"][name]["gradients"]["x"]["value"] == [0.0, 0.0, 0.0, 0.0]


def test_a_sweep_that_cannot_run_is_a_note_not_a_crash():
    """Given a function that runs in float64 but raises for any other dtype,
    when the full check runs,
    then the check passes on its own evidence, and the float32 series is left out with the
    function's message in the sweep's note."""

    def function(x):
        if x.dtype != torch.float64:
            raise TypeError("this function only takes float64")
        return (x * x).sum()

    record = check_against_autograd(function, {"x": torch.tensor([1.0, 2.0], dtype=torch.float64)})
    assert record["passed"] is True
    assert set(_series(record)) == {"float64"}
    assert "only takes float64" in record["step_sweep"]["note"]
