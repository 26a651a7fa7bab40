"""Comparisons of tensors with the same bits, written without computing (core/check/compare/comparison.py).

A check compares pass 1 with the pass after clearing, twice pass 1 with pass 2 and the expectation with
autograd: for a deterministic backward most of them hold the same bits, every error is 0, and the record
is known. These stories hold that record to the one `compare_tensors` computes, field for field, and keep
what is not the same (a NaN, an infinity, -0.0 against 0.0, a negative tolerance) on the full path.
"""

from __future__ import annotations

import json

import pytest
import torch

from jupyterlab_gradcheck.core.check.compare import comparison
from jupyterlab_gradcheck.core.check.compare.comparison import compare, compare_tensors

LABELS = {"left_label": "after_clear_none", "right_label": "backward_pass_1"}


def _full(left, right, rtol=1e-7, atol=1e-9) -> dict:
    return compare_tensors("after_clear_none_vs_pass_1", "x", left, right, rtol=rtol, atol=atol, **LABELS)


@pytest.mark.parametrize(
    "tensor",
    [
        torch.linspace(-3, 5, 1000, dtype=torch.float64),
        torch.linspace(-3, 5, 1000, dtype=torch.float32).reshape(10, 100),
        torch.cat([torch.tensor([-0.0, 0.0, 1e300, -1e-300], dtype=torch.float64), torch.randn(500).double()]),
        torch.zeros(300, 2, dtype=torch.float64),
    ],
    ids=["float64", "float32-2d", "signed-zeros-extremes", "zeros"],
)
def test_same_bits_give_the_computed_record(tensor):
    """Given a tensor and a copy of its bits (float64, float32 in 2-D, signed zeros and extreme values, zeros),
    when compare() writes their comparison,
    then it is the record compare_tensors computes, field for field: passed, errors 0, worst element the
    first with both values."""
    found = compare("after_clear_none_vs_pass_1", "x", tensor.clone(), tensor, rtol=1e-7, atol=1e-9, **LABELS)
    assert found == _full(tensor.clone(), tensor)
    assert found["passed"] is True and found["max_abs_err"] == 0.0 and found["worst"]["flat_index"] == 0


def test_the_shortcut_is_taken_for_same_bits(monkeypatch):
    """Given two tensors of 1,000 elements with the same bits, when compared, then compare_tensors is not called."""
    called = []
    monkeypatch.setattr(comparison, "compare_tensors", lambda *a, **k: called.append(1))
    tensor = torch.linspace(0, 1, 1000, dtype=torch.float64)
    compare("after_clear_none_vs_pass_1", "x", tensor, tensor.clone(), rtol=1e-7, atol=1e-9, **LABELS)
    assert called == []


@pytest.mark.parametrize(
    ("left", "right", "rtol"),
    [
        (torch.full((300,), float("nan"), dtype=torch.float64), None, 1e-7),
        (torch.full((300,), float("inf"), dtype=torch.float64), None, 1e-7),
        (torch.zeros(300, dtype=torch.float64), -torch.zeros(300, dtype=torch.float64), 1e-7),
        (torch.ones(300, dtype=torch.float64), None, -1.0),
    ],
    ids=["nan", "inf", "signed-zero-pair", "negative-rtol"],
)
def test_what_is_not_the_same_is_computed(left, right, rtol):
    """Given a NaN or an infinity against itself (their errors are NaN: a failure), 0.0 against -0.0 (equal,
    other bits) and a negative tolerance (1 - |1| = 0 error, but a bound below 0),
    when compared,
    then the record is compare_tensors' own: the NaN and infinity fail, the signed zeros pass, the negative
    tolerance fails."""
    right = left.clone() if right is None else right
    found = compare("after_clear_none_vs_pass_1", "x", left, right, rtol=rtol, atol=1e-9, **LABELS)
    # written as JSON: a NaN value equals itself there, not as a Python float
    assert json.dumps(found) == json.dumps(_full(left.clone(), right, rtol=rtol))
    assert found["passed"] is (not (left.isnan().any() or left.isinf().any()) and rtol >= 0)
