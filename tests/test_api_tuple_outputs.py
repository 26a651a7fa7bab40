"""A function returning a tuple or list of tensors is checked output by output, as
torch.autograd.gradcheck does: each output's gradient against its own expectation, every
comparison and failure naming its output, in one record of the ledger."""

from __future__ import annotations

import json

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.ledger.replay import replay_lines
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from jupyterlab_gradcheck.core.report.html_export import record_html

X = torch.tensor([0.1, 0.5, 1.0, 2.0], dtype=torch.float64)
Y = torch.tensor([2.0, 3.0, 4.0, 5.0], dtype=torch.float64)


class SinAndProduct(torch.autograd.Function):
    """(sin x, x * y) with a hand-written backward; `wrong_at` plants x1.01 in d(x*y)/dy at one element."""

    wrong_at: int | None = None

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return torch.sin(x), x * y

    @staticmethod
    def backward(ctx, grad_sin, grad_product):
        x, y = ctx.saved_tensors
        dy = grad_product * x
        if SinAndProduct.wrong_at is not None:
            dy = dy.clone()
            dy[SinAndProduct.wrong_at] = dy[SinAndProduct.wrong_at] * 1.01
        return grad_sin * torch.cos(x) + grad_product * y, dy


@pytest.fixture
def planted(monkeypatch):
    """SinAndProduct with output 1's backward wrong at y[2] (x = 1.0 there, so dy = 1.0, made 1.01)."""
    monkeypatch.setattr(SinAndProduct, "wrong_at", 2)


def test_a_function_of_two_outputs_with_a_right_backward_passes_with_no_grad():
    """Given a Function returning (sin x, x*y) with a correct backward,
    when it is checked with no grad=,
    then both outputs are checked against its own backward and pass, each with its own observations
    (output 1's finite differences of x*y along y are x), every comparison row names its output,
    and the top level keeps output 0's observations and one gradcheck on the whole function."""
    result = check(SinAndProduct, x=X, y=Y, ledger=False)
    record = result.record
    assert result.passed, result.summary()
    assert record["origin"].startswith("the backward of test_api_tuple_outputs.SinAndProduct [sha256 ")
    assert [(o["index"], o["shape"], o["dtype"], o["differentiable"]) for o in record["outputs"]] == [
        (0, [4], "float64", True),
        (1, [4], "float64", True),
    ]
    fd_y = record["outputs"][1]["observations"]["finite_difference"]["gradients"]["y"]["value"]
    assert fd_y == pytest.approx(X.tolist(), abs=1e-8)  # central differences of the linear x*y: exact to rounding
    assert sorted({row["output"] for row in record["comparisons"]}) == [0, 1]
    assert len(record["comparisons"]) == 2 * 2 * 5  # two outputs, two inputs, five comparisons each
    assert record["observations"]["backward_pass_1"] == record["outputs"][0]["observations"]["backward_pass_1"]
    assert record["observations"]["torch_gradcheck"]["status"] == "passed"
    assert record["function_modes"]["undefined_grad"]["status"] == "observed"
    assert record["step_sweep"]["output"] == 0


def test_output_1_wrong_at_one_element_fails_naming_output_1_and_the_element(planted):
    """Given the same Function with output 1's backward 1.01 times too large at y[2],
    when it is checked, the check fails at output 1, y[2], output 0 still passes, and the summary
    and the inline panel say so."""
    result = check(SinAndProduct, x=X, y=Y, ledger=False)
    failure = result.failure
    assert not result.passed
    assert (failure["output"], failure["input"], failure["index"]) == (1, "y", [2])
    assert failure["comparison"] == "autograd_vs_finite_difference"
    assert failure["right"] == pytest.approx(1.01, abs=1e-12)  # the planted value, exact up to one rounding
    assert {f["output"] for f in result.record["failures"]} == {1}
    assert [o["passed"] for o in result.record["outputs"]] == [True, False]
    assert "output 1, y[2]" in result.summary()
    assert result.record["step_sweep"]["output"] == 1
    html = record_html(result.record)
    assert 'data-output="1"' in html and "Output 1" in html and "d f[1] / d" in html


def test_an_expectation_count_that_does_not_match_the_outputs_is_refused_before_anything_is_written(tmp_path):
    """Given the two-output function and grad= a tuple of one expectation,
    when it is checked into a notebook's ledger, it is refused in one line naming both counts,
    and no ledger is written."""
    with pytest.raises(SpecError) as refused:
        check(
            lambda x, y: SinAndProduct.apply(x, y),
            grad=({"x": lambda x, y: torch.cos(x), "y": 0.0},),
            x=X,
            y=Y,
            notebook=tmp_path / "lab.ipynb",
        )
    assert (
        str(refused.value) == "analytical_gradient.outputs gives 1 entries but the function returns 2 outputs: "
        "give one per output"
    )
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "lab.gradcheck.jsonl").exists()


def test_a_grad_output_list_of_the_wrong_length_is_refused_before_anything_is_written(tmp_path):
    """Given grad_output with three entries for two outputs, the check is refused in one line, nothing written."""
    with pytest.raises(SpecError, match="grad_output gives 3 entries but the function returns 2 outputs"):
        check(SinAndProduct, x=X, y=Y, grad_output=[1.0, 1.0, 1.0], notebook=tmp_path / "lab.ipynb")
    assert not (tmp_path / "lab.gradcheck.jsonl").exists()


def test_bad_input_that_comes_with_a_justified_tolerance_change_writes_not_even_the_change(tmp_path):
    """Given a notebook whose ledger holds a passing check of the two-output Function,
    when the same check is asked again with a widened, justified tolerance but a grad_output of three
    entries for two outputs (bad input),
    then it is refused in one line and the ledger's bytes are unchanged: the tolerance change it came
    with is not written either."""
    notebook = tmp_path / "lab.ipynb"
    assert check(SinAndProduct, x=X, y=Y, notebook=notebook).passed
    ledger = tmp_path / "lab.gradcheck.jsonl"
    before = ledger.read_bytes()
    with pytest.raises(SpecError, match="grad_output gives 3 entries but the function returns 2 outputs"):
        check(
            SinAndProduct,
            x=X,
            y=Y,
            grad_output=[1.0, 1.0, 1.0],
            notebook=notebook,
            tolerance={"rtol": 1e-3, "atol": 1e-3},
            justification="a wider tolerance for a test",
        )
    assert ledger.read_bytes() == before


def test_list_outputs_with_written_expectations_and_grad_outputs():
    """Given a plain function returning a list [x**2, x*y] and its expectations written per output,
    with grad_output [2, v] (v an element-wise weight),
    when it is checked, each output is held against its own expectation under its own grad_output
    and the check passes; a wrong expectation for output 0 fails naming output 0. (Each expectation
    is d sum(v_k * f_k) / d input, grad_output included, as for one output.)"""
    v = torch.tensor([1.0, -1.0, 0.5, 2.0], dtype=torch.float64)
    right = ({"x": lambda x, y: 2 * 2 * x, "y": 0.0}, {"x": lambda x, y: v * y, "y": lambda x, y: v * x})
    result = check(lambda x, y: [x**2, x * y], grad=right, grad_output=[2.0, v], x=X, y=Y, ledger=False)
    assert result.passed, result.summary()
    used = [o["grad_output_used"]["value"] for o in result.record["outputs"]]
    assert used == [[2.0] * 4, v.tolist()]
    # the expectation is d sum(v * f)/dx = v * df/dx: output 0's backward_pass_1 is 2 * 2x
    pass_1 = result.record["outputs"][0]["observations"]["backward_pass_1"]["gradients"]["x"]["value"]
    assert pass_1 == pytest.approx((4 * X).tolist(), abs=0)  # 2 * (2x): exact in binary floating point
    wrong = ({"x": lambda x, y: 2 * 3 * x, "y": 0.0}, right[1])
    failed = check(lambda x, y: [x**2, x * y], grad=wrong, grad_output=[2.0, v], x=X, y=Y, ledger=False)
    assert not failed.passed and failed.failure["output"] == 0 and failed.failure["input"] == "x"


def test_a_non_differentiable_output_is_listed_and_not_checked():
    """Given a function returning (sin x, an int64 tensor of counts),
    when it is checked with the expectation of output 0 and None for output 1,
    then output 1 is listed (shape, dtype int64, not differentiable) with no observations, no
    comparison names it, and the check passes."""
    result = check(lambda x: (torch.sin(x), (x > 0.4).long()), grad=(lambda x: torch.cos(x), None), x=X, ledger=False)
    counts = result.record["outputs"][1]
    assert result.passed, result.summary()
    assert counts == {"index": 1, "shape": [4], "dtype": "int64", "device": "cpu", "differentiable": False}
    assert {row["output"] for row in result.record["comparisons"]} == {0}
    assert "not differentiable" in record_html(result.record)


def test_an_expectation_for_a_non_differentiable_output_is_refused():
    """Given an expectation written for the int64 output, the check is refused saying to write None."""
    with pytest.raises(SpecError, match=r"output 1 \(int64\) is not differentiated: write None for it"):
        check(lambda x: (torch.sin(x), (x > 0.4).long()), grad=(lambda x: torch.cos(x), 0.0), x=X, ledger=False)


def test_a_one_output_record_is_unchanged():
    """Given a one-output function, when it is checked, its record has no `outputs` and its rows and
    failures no `output`: old records and their readers keep their meaning."""
    record = check(lambda x: (x**3).sum(), grad=lambda x: 3 * x**2, x=X, ledger=False).record
    assert "outputs" not in record
    assert all("output" not in row for row in record["comparisons"])


def test_a_ledger_with_a_tuple_check_still_verifies_and_its_replay_skips_the_callable(tmp_path):
    """Given a two-output check recorded in a ledger,
    when the ledger is verified deeply and replayed, it verifies, and the replay lists the observation
    as a Python callable's, skipped with its source kept, not as an unreadable record."""
    notebook = tmp_path / "lab.ipynb"
    check(SinAndProduct, x=X, y=Y, notebook=notebook)
    ledger = tmp_path / "lab.gradcheck.jsonl"
    observation = [e for e in Ledger(ledger).entries() if e["kind"] == "observation"][0]
    assert len(observation["data"]["record"]["outputs"]) == 2
    json.dumps(observation)  # the record went through the ledger's JSON
    report = verify_ledger_file(ledger, deep=True, with_notebook=False)
    assert report["ok"], report
    replayed = replay_lines(Ledger(ledger).iter_raw_lines())
    assert replayed["ok"] and replayed["observations"] == 1 and not replayed["differs"]
    [skipped] = replayed["skipped"]
    assert "the function was a Python callable, SinAndProduct.apply" in skipped["reason"]
