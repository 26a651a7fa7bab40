"""The machinery of B10 (PyTorch's custom-Function database) and of B5's float32 family, on one case each.

`make test` runs both benchmarks' quick subsets; these tests pin real values on one entry: the
entry as written is accepted by both tools, the one-element x(1+1e-4) mutant is found by ours at
the element that was changed and missed by gradcheck, an entry PyTorch's file gets wrong is
listed apart, and a float32 twin of an accepted float64 sample passes while its x1.01 mutant is
found.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # torch.testing._internal imports it

from benchmarks import bench_function_db, opinfo_float32  # noqa: E402
from benchmarks.function_db_cases import entries  # noqa: E402
from benchmarks.function_db_mutants import build  # noqa: E402
from benchmarks.function_db_runs import run_entry  # noqa: E402


@pytest.fixture(scope="module")
def numpy_mul():
    torch.set_num_threads(1)
    (entry,) = entries(dtype="float64", device="cpu", names=["NumpyMul"])
    return entry


def test_numpy_mul_as_written_is_accepted_by_both_tools(numpy_mul):
    """Given NumpyMul from PyTorch's custom-Function database in float64, with its two inputs (4 and 3x4),
    when ours and gradcheck + gradgradcheck run on it as PyTorch's tests call them,
    then both accept it and ours does not crash."""
    assert list(numpy_mul.inputs) == ["x0", "x1"]
    assert numpy_mul.inputs["x1"].shape == (3, 4)
    result = run_entry(numpy_mul)
    assert result["ours"]["verdict"] == "accept", result["ours"]
    assert result["gradcheck"]["gradcheck"] == "accept"
    assert result["gradcheck"]["gradgradcheck"] == "accept"
    assert result["apart"] == ""


def test_one_element_wrong_by_1e4_is_found_by_ours_at_that_element(numpy_mul):
    """Given NumpyMul's backward wrong by a factor 1 + 1e-4 at one element of x0's gradient,
    when ours and gradcheck run on the mutant,
    then ours rejects it and names x0 at exactly that element, where gradcheck (atol 1e-5, rtol 1e-3) passes it."""
    mutant = build(numpy_mul, "x(1+1e-4)")
    assert mutant.target == "x0" and mutant.element is not None
    found = bench_function_db.run_mutant(numpy_mul, mutant)
    assert found["detected"] == {"ours": True, "gradcheck": False}
    assert found["ours"]["failure"]["input"] == "x0"
    assert found["right_element"] is True


def test_a_mutant_kind_that_needs_two_inputs_is_not_built_for_one():
    """Given NumpyCube, whose Function takes one tensor,
    when the wrong-input mutant is asked for,
    then none is built (there is no other input to return the gradient for)."""
    (cube,) = entries(dtype="float64", device="cpu", names=["NumpyCube"])
    assert build(cube, "wrong input") is None
    assert build(cube, "permutation") is None  # one element: nothing to permute


def test_an_entry_pytorch_gets_wrong_is_listed_apart_with_its_reason():
    """Given CubeGenVmap, whose backward PyTorch's file writes as grad_output * 3x^2 + 6 * 3x^2,
    when the entry runs,
    then it is flagged apart with that reason, and both tools reject it."""
    (entry,) = entries(dtype="float64", device="cpu", names=["CubeGenVmap"])
    result = run_entry(entry)
    assert "6 * grad_saved * x" in result["apart"]
    assert result["ours"]["verdict"] == "reject"
    assert result["gradcheck"]["verdict"] == "reject"


def test_a_float32_twin_of_an_accepted_sample_passes_and_its_x101_mutant_is_found():
    """Given the float64 verdicts of sin's first sample, accepted by both gradcheck and ours,
    when the float32 family runs on its twin,
    then the twin passes in float32 and the x1.01 mutant of its gradient is found."""
    accepted = [
        {"case": "sin#0", "op": "sin", "marked_wrong": "", "slow": {"accepts": True}, "ours": {"accepts": True}}
    ]
    data = opinfo_float32.sweep(accepted, quick=True)
    summary = opinfo_float32.summarise(data)
    assert [r["case"] for r in data["results"]] == ["sin#0"]
    assert summary["counts"] == {"pass": 1}
    assert summary["mutations"] == 1 and summary["detected"] == 1
