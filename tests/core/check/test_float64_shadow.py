"""A low-precision check also runs in float64 where its code does, and says so where it cannot.

float32's finite differences resolve about 1e-3 of a value (test_detection_floor.py): below that, a
wrong custom backward passes. The float64 shadow runs the same code at the same point in float64 and
fails the record where float64 sees the error, naming the element.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.float32_functions import FUNCTIONS
from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.ledger.verify import verify_path
from support.functions import planted

X = [0.5, 1.0, 2.0, 3.0]
CUDA = pytest.mark.cuda  # skipped where torch sees no CUDA device (tests/conftest.py)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_an_error_below_the_float32_floor_is_caught_by_the_shadow_at_its_element(device):
    """Given x*sin(x) whose backward is off by 1e-4 of its value at x[1], a tenth of what float32 can see,
    when it is checked in float32 without and with the float64 shadow,
    then without it the record passes (the floor hides it), and with it the record fails at x[1], its
    failure is the shadow's (comparison float64_shadow, the float64 comparison it came from named) and its
    reason says float64 saw it; the float32 comparisons themselves still pass."""
    alone = check(planted(1e-4, 1), x=X, dtype="float32", device=device, ledger=False, shadow=False).record
    shadowed = check(planted(1e-4, 1), x=X, dtype="float32", device=device, ledger=False).record

    assert alone["passed"] is True and alone["detection_floor"]["relative"] > 1e-3
    assert shadowed["passed"] is False
    failure = shadowed["failure"]
    assert (failure["comparison"], failure["input"], failure["index"]) == ("float64_shadow", "x", [1])
    assert failure["shadowed"] == "autograd_vs_finite_difference"
    assert failure["reason"].startswith("in float64, the same code at the same point fails: ")
    # the planted 1e-4, seen in float64 at its own size (rounding there is ~1e-10 of the value)
    assert failure["rel_err"] == pytest.approx(1e-4, rel=1e-3)
    assert all(row["passed"] for row in shadowed["comparisons"])
    block = shadowed["float64_shadow"]
    assert (block["status"], block["dtype"], block["passed"]) == ("observed", "float64", False)


def test_a_correct_float32_check_passes_its_shadow_and_says_so():
    """Given a correct x*sin(x), when it is checked in float32, then it passes, and its float64_shadow
    block says the same check in float64 was observed and passed, beside the detection floor."""
    record = check(planted(0.0, 0), x=X, dtype="float32", ledger=False).record
    assert record["passed"] is True
    block = record["float64_shadow"]
    assert (block["status"], block["passed"], block["failure"]) == ("observed", True, None)
    assert block["reason"].endswith("passed")
    assert "detection_floor" in record


def test_the_shadow_checks_the_point_float32_holds():
    """Given an input not representable in float32 (0.1), when x*x is checked in float32, then the first
    float64 point the shadow evaluates is float32's 0.1 cast to float64, not the declared decimal: it checks
    the point the low precision holds."""
    seen = []

    def f(x):
        if x.dtype == torch.float64:
            seen.append(float(x.detach()[0]))
        return x * x

    record = check(f, "2*x", x=[0.1, 0.2], dtype="float32", ledger=False).record
    assert record["float64_shadow"]["status"] == "observed"
    assert seen[0] == float(torch.tensor(0.1, dtype=torch.float32).double()) != 0.1


def test_code_fixed_to_float32_says_the_shadow_cannot_run_and_keeps_its_floor():
    """Given a function that casts its input to float32 whatever it is given, when it is checked in float32,
    then it passes, its float64_shadow block is not_run with the reason that the code fixes its own
    precision, naming float32, and the record still states its detection floor."""
    record = check(lambda x: x.float() * torch.sin(x.float()), "sin(x)+x*cos(x)", x=X, dtype="float32", ledger=False)
    record = record.record
    assert record["passed"] is True
    block = record["float64_shadow"]
    assert block["status"] == "not_run"
    assert "output is float32: it fixes its own precision" in block["reason"]
    assert record["detection_floor"]["relative"] > 0


def test_code_that_runs_in_float32_only_says_why_the_shadow_did_not_run():
    """Given a function that raises on anything but float32 (a kernel for one dtype), when it is checked in
    float32, then it passes there, and its float64_shadow block is not_run, quoting the error."""

    def only_float32(x):
        if x.dtype != torch.float32:
            raise TypeError(f"kernel for float32 only, got {x.dtype}")
        return x * x

    record = check(only_float32, "2*x", x=X, dtype="float32", ledger=False).record
    assert record["passed"] is True
    block = record["float64_shadow"]
    assert block["status"] == "not_run"
    assert block["reason"] == "the code does not run in float64: TypeError: kernel for float32 only, got torch.float64"


@pytest.mark.parametrize(
    "written",
    [[2.46913], lambda x: torch.tensor([2.46913])],
    ids=["numbers", "code returning float32 numbers"],
)
def test_a_derivative_written_in_float32_numbers_is_compared_in_float32_only(written):
    """Given x*x at 1.234567 with its derivative written to six digits (2.46913, off by 1.6e-6 of its value:
    inside float32's 1e-4, outside float64's 1e-7), as numbers or by code that returns a float32 tensor whatever
    it is given, when it is checked in float32, then it passes: the shadow leaves that derivative to float32 and
    says so, while its autograd and finite differences agree."""
    record = check(lambda x: x * x, written, x=[1.234567], dtype="float32", ledger=False).record
    assert record["passed"] is True, record["failure"]
    block = record["float64_shadow"]
    assert block["passed"] is True
    assert block["note"] == "the derivative of x, written in float32's numbers, is compared in float32 only"


def test_a_float32_failure_the_shadow_does_not_see_is_still_a_failure():
    """Given a hand derivation off by 2e-4 of its value (seen in float32) at every element, when checked in
    float32, then the record fails on float32's own comparison (never turned into a pass by float64), and
    the shadow block, which also sees it, says failed."""
    record = check(planted(0.0, 0), "(sin(x)+x*cos(x))*1.0002", x=X, dtype="float32", ledger=False).record
    assert record["passed"] is False
    assert record["failure"]["comparison"] != "float64_shadow"
    assert record["float64_shadow"]["passed"] is False


def test_shadow_false_leaves_it_out_and_the_record_says_so():
    """Given shadow=False, when a float32 check runs, then the record has no float64_shadow block and keeps
    `"shadow": false`, so its replay runs the same check; a float64 check has no shadow at all."""
    record = check(planted(0.0, 0), x=X, dtype="float32", ledger=False, shadow=False).record
    assert "float64_shadow" not in record and record["shadow"] is False
    wide = check(planted(0.0, 0), x=X, dtype="float64", ledger=False).record
    assert "float64_shadow" not in wide and "shadow" not in wide


def test_a_shadow_that_is_not_true_or_false_is_refused():
    """Given "shadow": "yes" in a record, when it is checked, then it is refused in one line naming the field."""
    with pytest.raises(SpecError, match="shadow must be true or false"):
        parse_spec({"function": "x*x", "x": X, "analytical_gradient": "2*x", "dtype": "float32", "shadow": "yes"})


def test_a_shadow_failure_lands_in_the_ledger_and_replays(tmp_path):
    """Given an expression check in float32 whose hand derivation is off by 2e-5 of its value (under float32's
    1e-4 tolerance), when it is checked with a ledger, then it fails on the shadow, and the ledger verifies and
    replays it: the same failing verdict."""
    path = tmp_path / "lab.gradcheck.jsonl"
    result = check("x*x", "2*x*1.00002", x=X, dtype="float32", ledger=str(path))
    assert result.passed is False
    assert result.record["failure"]["comparison"] == "float64_shadow"
    report = verify_path(path, replay=True, ledger_only=True)
    assert report["ok"], report
    replay = report["reports"][0]["replay"]
    assert (replay["observations"], replay["reproduced"], replay["differs"]) == (1, 1, [])


def test_the_cli_names_the_shadow_beside_pass(gradcheck_cli):
    """Given a float32 record of x*x run by the CLI, when it passes, then its PASS line says what float32
    alone was blind below and that the float64 shadow passed."""
    import json

    record = {"function": "x*x", "x": [1.0, 2.0], "analytical_gradient": "2*x", "dtype": "float32"}
    code, _out, err = gradcheck_cli("run", "-", stdin=json.dumps(record))
    assert code == 0, err
    assert "in float32; the float64 shadow passed)" in err


@pytest.mark.parametrize("entry", FUNCTIONS, ids=[entry.name for entry in FUNCTIONS])
def test_each_hand_written_function_passes_correct_and_fails_a_1e4_error_at_its_element(entry):
    """Given one of eight hand-written float32 Functions (layer norm ... RMSNorm), correct and with its first
    input's gradient off by 1e-4 of its value at the largest element, when each is checked in float32, then the
    correct one passes with its shadow observed, and the wrong one fails on the shadow at that element; without
    the shadow float32 alone passes the wrong one (its floor is above 1e-3)."""
    inputs = entry.inputs(torch.float32)
    first = next(iter(inputs))
    correct = check(entry.make(0.0), dtype="float32", ledger=False, **inputs).record
    wrong = check(entry.make(1e-4), dtype="float32", ledger=False, **inputs).record
    alone = check(entry.make(1e-4), dtype="float32", ledger=False, shadow=False, **inputs).record

    gradient = torch.tensor(correct["observations"]["autograd_grad"]["gradients"][first]["value"])
    planted = [int(i) for i in torch.unravel_index(gradient.abs().argmax(), gradient.shape)]
    assert correct["passed"] is True and correct["float64_shadow"]["passed"] is True
    assert wrong["passed"] is False
    assert (wrong["failure"]["comparison"], wrong["failure"]["input"]) == ("float64_shadow", first)
    assert wrong["failure"]["index"] == planted
    assert alone["passed"] is True and alone["detection_floor"]["relative"] > 1e-3
