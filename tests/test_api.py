"""The Python API: check() on real callables and custom autograd Functions, check_record()."""

from __future__ import annotations

import re

import pytest
import torch

from jupyterlab_gradcheck.api import check, check_record
from jupyterlab_gradcheck.core.errors import JustificationRequired, SpecError
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.kernel.kernel_run import LedgerLocationMissing
from support.functions import Cube
from support.html_tables import column, tables_in
from support.ledger import check_entries


class CubeWrongBackward(Cube):
    """x^3 with a classic slip in backward: 3 x instead of 3 x^2 (right only at x = 0 and 1)."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x * grad_output


class ScaledBy(torch.autograd.Function):
    """w * x with forward(ctx, w, x): the argument order differs from the keyword order used."""

    @staticmethod
    def forward(ctx, w, x):
        ctx.save_for_backward(w, x)
        return w * x

    @staticmethod
    def backward(ctx, grad_output):
        w, x = ctx.saved_tensors
        return x * grad_output, w * grad_output


X = [1.0, 2.0, 3.0]
EXPECTED = [3.0, 12.0, 27.0]  # 3 x^2 at X


@pytest.fixture
def ledger_path(tmp_path):
    return tmp_path / "lab1.gradcheck.jsonl"


def test_wrong_backward_fails_and_names_the_worst_element(ledger_path):
    """Given a custom Function whose backward returns 3x instead of 3x^2, and the hand
    derivative 3x^2 at x = [1, 2, 3],
    when check() runs it,
    then it fails; the failure's worst element is x[2] (27 expected, 9 from backward), the
    diagnosis is a probable bug, and the summary and the HTML name x[2]; the failure is kept
    in the ledger."""
    result = check(CubeWrongBackward, grad=EXPECTED, x=X, ledger=ledger_path)
    assert result.passed is False
    failure = result.failure
    assert (failure["comparison"], failure["input"], failure["index"]) == ("analytical_vs_backward_pass_1", "x", [2])
    assert (failure["left"], failure["right"]) == (27.0, 9.0)
    assert failure["diagnosis"] == "probable_bug"
    assert "at x[2]: analytical 27.0 vs backward_pass_1 9.0" in repr(result)
    fd_failure = next(f for f in result.record["failures"] if f["comparison"] == "autograd_vs_finite_difference")
    assert fd_failure["index"] == [2]  # finite differences point at the same element
    assert "x[2]: analytical 27.0 vs backward_pass_1 9.0" in re.sub(r"<[^>]+>", "", result._repr_html_())
    entries = check_entries(Ledger(ledger_path))
    assert [e["kind"] for e in entries] == ["expectation", "observation"]
    assert entries[1]["data"]["passed"] is False
    assert result.history["failures_kept"][0]["seq"] == 2


@pytest.mark.parametrize("function", [Cube, Cube.apply], ids=["class", "apply"])
def test_correct_function_passes_and_is_named(function, ledger_path):
    """Given the correct Function (as a class or its apply) and the hand derivative,
    when check() runs it, it passes; the record names it Cube.apply and the table shows the
    expectation beside the observation with shape, dtype and device."""
    result = check(function, grad=EXPECTED, x=X, ledger=ledger_path)
    assert result.passed is True, result.summary()
    assert result.record["function"] == "Cube.apply"
    assert result.record["observed_gradient"] == EXPECTED
    table = tables_in(result._repr_html_())["jp-gradcheck-expectation-observation"]
    assert column(table, "Expectation")["code"] == ["[3.0, 12.0, 27.0]"]
    assert column(table, "Observation")["meta"] == "shape [3] · dtype float64 · device cpu"


def test_python_callables_and_callable_expectations(ledger_path):
    """Given a plain Python function and its derivative as a Python callable,
    when checked, it passes and the ledger names the callable expectation."""

    def softplus_sum(x):
        return torch.nn.functional.softplus(x).sum()

    def d_softplus(x):
        return torch.sigmoid(x)

    result = check(softplus_sum, grad=d_softplus, x=[-2.0, 0.0, 2.0], ledger=ledger_path)
    assert result.passed is True, result.summary()
    expectation = check_entries(Ledger(ledger_path))[0]["data"]
    assert expectation["function"].endswith("softplus_sum")
    assert re.fullmatch(r"<callable .*\bd_softplus>", expectation["analytical_gradient"])


def test_arguments_follow_the_forward_signature():
    """Given forward(ctx, w, x) and inputs written x=..., w=...,
    when checked, each gradient lands on its own input (d/dx = w, d/dw = x)."""
    result = check(ScaledBy, grad={"x": [5.0, 7.0], "w": [1.0, 2.0]}, x=[1.0, 2.0], w=[5.0, 7.0], ledger=False)
    assert result.passed is True, result.summary()
    assert result.record["observed_gradient"] == {"x": [5.0, 7.0], "w": [1.0, 2.0]}


def test_tensor_inputs_give_the_dtype_and_device():
    """Given a float32 CPU tensor input, when checked, the record runs in float32 on cpu."""
    result = check(Cube, grad=torch.tensor(EXPECTED), x=torch.tensor(X, dtype=torch.float32), ledger=False)
    assert (result.record["dtype"], result.record["device"]) == ("float32", "cpu")
    assert result.record["observations"]["backward_pass_1"]["gradients"]["x"]["dtype"] == "float32"
    assert result.passed is True, result.summary()


def test_check_record_runs_the_seed_record_into_the_notebook_ledger(tmp_path, seed_text):
    """Given the seed record and notebook='lab1.ipynb',
    when check_record() runs it, it comes back executed with 6.0, recorded beside the notebook."""
    import json

    result = check_record(json.loads(seed_text), notebook=tmp_path / "lab1.ipynb")
    assert (result.record["executed"], result.record["observed_gradient"], result.passed) == (True, 6.0, True)
    kinds = [e["kind"] for e in check_entries(Ledger(tmp_path / "lab1.gradcheck.jsonl"))]
    assert kinds == ["expectation", "observation"]


def test_a_changed_tolerance_needs_a_justification(ledger_path):
    """Given a recorded run of Cube at the default tolerance,
    when it is re-run with rtol=1e-3 and no justification, it is refused and nothing is written;
    with justification=, a tolerance_change entry precedes the new run."""
    check(Cube, grad=EXPECTED, x=X, ledger=ledger_path)
    with pytest.raises(JustificationRequired, match=r"tolerance rtol 1e-07 -> 0.001"):
        check(Cube, grad=EXPECTED, x=X, tolerance={"rtol": 1e-3}, ledger=ledger_path)
    assert len(check_entries(Ledger(ledger_path))) == 2
    check(Cube, grad=EXPECTED, x=X, tolerance={"rtol": 1e-3}, justification="float32 next", ledger=ledger_path)
    entries = check_entries(Ledger(ledger_path))
    assert [e["kind"] for e in entries][2:] == ["tolerance_change", "expectation", "observation"]
    assert entries[2]["data"]["justification"] == "float32 next"


def test_bad_input_and_missing_location_write_nothing(tmp_path, monkeypatch):
    """Given no expectation for a function that goes through no custom Function, or no ledger
    location, when check() is called, it raises the one-line reason before running or writing
    anything."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match="analytical_gradient is missing"):
        check(lambda x: (x**3).sum(), x=X, ledger=tmp_path / "a.gradcheck.jsonl")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with pytest.raises(LedgerLocationMissing, match="pass notebook="):
        check(Cube, grad=EXPECTED, x=X)
    assert list(tmp_path.iterdir()) == []
