"""PyTorch's own gradcheck test scenarios, through `check()` as an engineer runs them.

The scenarios live in benchmarks/gradcheck_scenarios.py (the benchmark prints their agreement
table from the same list). Each says what PyTorch's test expects of gradcheck; here our verdict
must be that one, and a failure must say why in words that name the fault, and name the input
at fault where there is one. A scenario our check does not handle yet is marked xfail(strict):
it fails the run the day it starts to pass, so the mark cannot outlive the gap.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.gradcheck_scenarios import SCENARIOS, ours, theirs
from jupyterlab_gradcheck.core.errors import SpecError

#: Scenarios whose verdict our check does not give yet, and why.
NOT_YET = {
    "sparse COO input, dense semantics": "sparse inputs are not checked yet",
    "sparse COO input, masked semantics": "sparse inputs are not checked yet",
}


def _cases():
    for scenario in SCENARIOS:
        marks = [pytest.mark.xfail(strict=True, reason=NOT_YET[scenario.name])] if scenario.name in NOT_YET else []
        yield pytest.param(scenario, id=scenario.name, marks=marks)


def _reason(record: dict) -> str:
    failure = record["failure"]
    return f"{failure['comparison']}: {failure['reason']}"


@pytest.mark.parametrize("scenario", list(_cases()))
def test_each_scenario_gets_the_verdict_pytorch_expects_and_says_why(scenario):
    """Given one of PyTorch's gradcheck test scenarios, written as a small Function or callable,
    when it is checked with check(..., ledger=False),
    then the verdict is the one PyTorch's test expects; a failure is a record (never an exception)
    whose reason names the fault and whose failure names the input at fault; a refusal is one line."""
    if scenario.refused:
        with pytest.raises(SpecError) as refused:
            ours(scenario)
        assert "\n" not in str(refused.value)
        for words in scenario.reason:
            assert words in str(refused.value)
        return
    record = ours(scenario)
    if scenario.pytorch == "pass":
        assert record["passed"] is True, record.get("failure")
        return
    assert record["passed"] is False
    assert record["failures"] and record["failure"] is record["failures"][0]
    for words in scenario.reason:
        assert words in _reason(record), _reason(record)
    if scenario.input is not None:
        assert record["failure"]["input"] == scenario.input, _reason(record)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_bare_gradcheck_gives_the_verdict_the_scenario_states(scenario):
    """Given a scenario and the gradcheck call its PyTorch test makes,
    when gradcheck runs bare,
    then it gives the verdict the scenario states: the table's expectations are PyTorch's, not ours."""
    assert theirs(scenario) == scenario.pytorch


def test_a_nondeterministic_backward_names_the_largest_difference_between_repeats():
    """Given x^3 whose backward adds a random error of 1e-4 relative on every call,
    when it is checked,
    then the record's first failure is diagnosed nondeterministic (not a probable bug), and its
    nondeterminism block gives the largest difference between two identical calls, beyond the
    float64 repeat tolerance of zero."""
    scenario = next(s for s in SCENARIOS if s.name == "nondeterministic backward")
    record = ours(scenario)
    block = record["nondeterminism"]
    assert record["failure"]["diagnosis"] == "nondeterministic"
    assert block["input"] == "x" and block["beyond_tolerance"] is True
    assert block["tolerance"] == {"rtol": 0.0, "atol": 0.0}
    first, second = block["values"]
    # the noise is 1e-4 relative on gradients of 0.75 to 6.75: a difference far above 0 and below 1
    assert 0 < block["largest_difference"] < 1
    assert block["largest_difference"] == pytest.approx(abs(first - second), rel=1e-12)  # the same two floats


def test_a_jvp_only_function_is_checked_in_forward_mode_and_says_so():
    """Given x^3 as a Function with a right jvp and no backward,
    when it is checked against the hand derivation 3x^2,
    then it passes, its record says its gradient was assembled from the jvp, and the same Function
    with a jvp that forgets the 3 fails at x[2], where 3x^2 and x^2 are furthest apart."""
    right = ours(next(s for s in SCENARIOS if s.name == "jvp-only Function in forward mode"))
    assert right["passed"] is True
    assert "assembled from its jvp" in right["forward_mode_only"]
    wrong = ours(next(s for s in SCENARIOS if s.name == "jvp-only Function, wrong jvp"))
    assert wrong["passed"] is False and "forward_mode_only" in wrong
    assert (wrong["failure"]["input"], wrong["failure"]["index"]) == ("x", [2])


def test_a_deterministic_backward_has_no_nondeterminism_block():
    """Given x^3 with its right backward,
    when it is checked,
    then the record passes and holds no nondeterminism block: identical calls gave the same bits."""
    record = ours(next(s for s in SCENARIOS if s.name == "Function, right backward"))
    assert record["passed"] is True
    assert "nondeterminism" not in record


def test_an_input_modified_through_data_is_caught_by_its_values():
    """Given a function that doubles its input through .data (which autograd's version counter does not see),
    when it is checked,
    then the record fails, naming input x as modified in place."""
    from jupyterlab_gradcheck.api import check

    def doubles_through_data(x):
        x.data.mul_(2)
        return x * 1.0

    record = check(doubles_through_data, grad=lambda x: torch.ones_like(x), x=[1.0, 2.0], ledger=False).record
    assert record["passed"] is False
    assert record["failure"]["input"] == "x"
    assert "modified its input x in place" in record["failure"]["reason"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch reports no CUDA device")
@pytest.mark.parametrize(
    "name",
    [
        "input modified without mark_dirty",
        "nondeterministic backward",
        "output shape depends on the values",
        "output dtype depends on the values",
        "wrong jvp for the second input",
        "jvp-only Function, wrong jvp",
        "no differentiable output",
    ],
)
def test_the_new_findings_hold_on_cuda(name):
    """Given a scenario whose finding is new (in-place mutation, nondeterminism, a value-dependent shape or
    dtype, a tangent named alone, a jvp-only Function, a cut graph),
    when it is checked on cuda,
    then it fails there too, for the same reason."""
    scenario = next(s for s in SCENARIOS if s.name == name)
    from jupyterlab_gradcheck.api import check

    record = check(scenario.function, **scenario.options, device="cuda", ledger=False, **scenario.inputs).record
    assert record["passed"] is False
    for words in scenario.reason:
        assert words in _reason(record)


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_sparse_input_is_refused_in_one_line_naming_its_layout(layout, tmp_path):
    """Given a sparse COO or CSR input, which the check cannot perturb yet,
    when it is checked with a ledger,
    then it is refused in one line naming the input and its layout, before anything is run or written."""
    from jupyterlab_gradcheck.api import check

    dense = torch.tensor([[0.0, 1.5], [2.0, 0.0]], dtype=torch.float64)
    x = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    ledger = tmp_path / "lab.gradcheck.jsonl"
    with pytest.raises(SpecError) as refused:
        check(lambda x: x.to_dense().sum(), grad=lambda x: torch.ones(2, 2), x=x, ledger=str(ledger))
    assert f"input x is a sparse_{layout} tensor" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not ledger.exists() or ledger.read_text() == ""


def test_a_repeat_difference_beyond_tolerance_at_a_small_element_fails_though_the_largest_is_within():
    """Given, in float32, a backward of x * [1000, 0.01] that drifts on every call by 1e-3 at the first
    element (1e-6 relative, within float32's repeat tolerance) and by 1e-5 at the second (1e-3 relative, beyond it),
    when it is checked,
    then the largest difference between repeats is the first element's, yet the check fails as
    nondeterministic: every element is held to the tolerance, not only the largest difference."""
    from jupyterlab_gradcheck.api import check

    weights = torch.tensor([1000.0, 0.01])
    calls = []

    class Drifting(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * weights

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * weights + len(calls) * torch.tensor([1e-3, 1e-5])

    record = check(Drifting, grad=lambda x: weights.clone(), x=[1.0, 1.0], dtype="float32", ledger=False).record
    block = record["nondeterminism"]
    assert block["index"] == [0]  # the largest difference, within tolerance there
    assert block["beyond_tolerance"] is True
    assert record["failure"]["comparison"] == "repeats"
    assert record["failure"]["diagnosis"] == "nondeterministic"
