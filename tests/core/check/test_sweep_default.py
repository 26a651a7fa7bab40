"""Which records get a step sweep by default (core/check/engine.py SWEEP_MAX_ELEMENTS).

The sweep costs 68 evaluations of the function wherever it cannot ride along with the finite
differences: a passing check draws it up to SWEEP_MAX_ELEMENTS input elements, a failing one, whose
sweep at the worst element explains the failure, up to SWEEP_FAILED_MAX_ELEMENTS.
"""

from __future__ import annotations

from jupyterlab_gradcheck.core.check.engine import SWEEP_FAILED_MAX_ELEMENTS, SWEEP_MAX_ELEMENTS, run_check


def _values(n: int) -> list:
    return [0.5 + (k % 7) / 10 for k in range(n)]


def _record(n: int, expectation, **options) -> dict:
    values = _values(n)
    return run_check({"function": "(x * x).sum()", "x": values, "analytical_gradient": expectation}, **options)


def test_a_passing_check_is_swept_up_to_the_limit_and_not_above():
    """Given (x * x).sum() declared 2*x (right),
    when it runs at SWEEP_MAX_ELEMENTS elements and at one more,
    then both pass, the first record has a step sweep with both dtypes' series and the second none."""
    at_limit, above = _record(SWEEP_MAX_ELEMENTS, "2*x"), _record(SWEEP_MAX_ELEMENTS + 1, "2*x")
    assert at_limit["passed"] is True and above["passed"] is True
    assert [s["dtype"] for s in at_limit["step_sweep"]["series"]] == ["float32", "float64"]
    assert "step_sweep" not in above


def test_a_failing_check_above_the_passing_limit_is_swept_at_its_worst_element():
    """Given (x * x).sum() declared as the list of 2x, but 0.002 too high at x[1500] (one wrong element),
    when it runs at 2,000 elements (above SWEEP_MAX_ELEMENTS, within SWEEP_FAILED_MAX_ELEMENTS),
    then it fails at x[1500], and its step sweep is drawn there."""
    assert SWEEP_MAX_ELEMENTS < 2000 <= SWEEP_FAILED_MAX_ELEMENTS
    expectation = [2 * v + (0.002 if k == 1500 else 0.0) for k, v in enumerate(_values(2000))]
    record = _record(2000, expectation)
    assert record["passed"] is False
    assert record["step_sweep"]["flat_index"] == 1500
    assert record["step_sweep"]["series"]


def test_an_explicit_sweep_is_drawn_at_any_size():
    """Given a passing check above SWEEP_MAX_ELEMENTS, when the sweep is asked for, then it is drawn."""
    record = _record(SWEEP_MAX_ELEMENTS + 1, "2*x", sweep=True)
    assert record["step_sweep"]["series"]
