"""A float32 record says what it could not see: its detection floor, and that the floor is honest."""

from __future__ import annotations

import pytest

from jupyterlab_gradcheck.api import check
from support.functions import planted

X = [0.5, 1.0, 2.0, 3.0]


def test_a_float32_pass_states_its_floor_and_a_float64_one_has_none():
    """Given x*sin(x) checked in float32 and in float64,
    when both pass,
    then the float32 record's detection_floor gives a relative error between 1e-4 and 1e-2 (float32's
    finite differences resolve about 1e-3 of a value), its input and element, and a reason naming
    float32; the float64 record has no detection_floor."""
    record32 = check(planted(0.0, 0), x=X, dtype="float32", ledger=False).record
    record64 = check(planted(0.0, 0), x=X, dtype="float64", ledger=False).record
    assert record32["passed"] and record64["passed"]
    floor = record32["detection_floor"]
    assert 1e-4 < floor["relative"] < 1e-2
    assert floor["input"] == "x" and len(floor["index"]) == 1
    assert "float32" in floor["reason"]
    assert "detection_floor" not in record64


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_floor_is_honest_an_error_twice_it_is_caught_and_half_of_it_is_not(dtype):
    """Given the floor a correct x*sin(x) reports in a low precision, and the element it names,
    when an error of twice the floor is planted in the backward at that element, and then one of half,
    then, in the low precision alone (no float64 shadow, which sees further: test_float64_shadow.py), the first
    fails at that element and the second passes: the floor is where the low precision's detection begins."""
    floor = check(planted(0.0, 0), x=X, dtype=dtype, ledger=False, shadow=False).record["detection_floor"]
    at = floor["index"][0]
    caught = check(planted(2 * floor["relative"], at), x=X, dtype=dtype, ledger=False, shadow=False).record
    missed = check(planted(0.5 * floor["relative"], at), x=X, dtype=dtype, ledger=False, shadow=False).record
    assert caught["passed"] is False
    assert caught["failure"]["index"] == [at]
    assert missed["passed"] is True


def test_the_cli_shows_the_floor_beside_pass(gradcheck_cli):
    """Given a float32 record of x*x run by the CLI,
    when it passes,
    then its PASS line on stderr says what relative error it was blind below, in float32."""
    import json

    record = {"function": "x*x", "x": [1.0, 2.0], "analytical_gradient": "2*x", "dtype": "float32"}
    code, _out, err = gradcheck_cli("run", "-", stdin=json.dumps(record))
    assert code == 0, err
    assert "PASS" in err and "relative error at one element, in float32" in err
