"""The projected mode (core/check/fd/finite_difference.py): one random direction compared, a failure localised.

These stories pin what the mode promises: a correct dense function passes in two evaluations, a
one-element error in a custom backward fails and is named with its index after O(log n) more
evaluations, the engine records which mode ran and why (asked for, or chosen because the
exhaustive comparison was predicted over its budget), and a bad mode is refused in one line.
"""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.bench_structure import wrong_at
from jupyterlab_gradcheck.core.check.engine import check_callable, run_check
from jupyterlab_gradcheck.core.check.fd import finite_difference
from jupyterlab_gradcheck.core.check.fd import finite_difference as time_budget
from jupyterlab_gradcheck.core.check.fd.finite_difference import projected_verdict
from jupyterlab_gradcheck.core.errors import SpecError

N = 500
MATRIX = torch.randn(N, N, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) / math.sqrt(N)


def dense(x):
    return torch.tanh(MATRIX @ x)


def dense_gradient(x):
    """v^T J for v = ones: the true gradient of sum(tanh(A x)), by hand."""
    return MATRIX.T @ (1 - torch.tanh(MATRIX @ x) ** 2)


#: tanh(A x) whose Jacobian is 1e-3 too high at diagonal entry 321: v^T J is off at that element only.
dense_wrong_at_321 = wrong_at(dense, lambda x, grad: MATRIX.T @ (grad * (1 - torch.tanh(MATRIX @ x) ** 2)), 321, 1e-3)


def _check(function, **options):
    """The engine's record for `function` at _x() against the true gradient, without the step sweep."""
    return run_check(
        {"function": function, "inputs": {"x": _x().tolist()}, "analytical_gradient": dense_gradient, **options},
        sweep=False,
    )


def _x():
    return torch.randn(N, dtype=torch.float64, generator=torch.Generator().manual_seed(6))


def test_a_correct_dense_function_passes_in_two_evaluations():
    """Given tanh(A x) over 500 elements with a correct backward,
    when the projected verdict runs,
    then it passes from two evaluations, whatever n, and names no element."""
    verdict = projected_verdict(dense, {"x": _x()})
    assert verdict["passed"] is True
    assert verdict["finite_difference"]["inputs"]["x"]["forward_evaluations"] == 2
    assert verdict["worst"]["index"] is None


def test_one_wrong_element_is_caught_and_named_in_logarithmic_evaluations():
    """Given the same function whose backward is 1e-3 too high at element 321 only,
    when the projected verdict runs,
    then it fails, names index [321] with that element's own central difference and autograd
    value, and localising took one split per halving of 500 elements (9), each two directions
    of two evaluations plus a truncation check where a half fails: at most 4 + 6 * 9 + 2 in all."""
    verdict = projected_verdict(dense_wrong_at_321, {"x": _x()})
    assert verdict["passed"] is False
    assert verdict["worst"]["index"] == [321]
    row = verdict["comparisons"][0]
    assert row["projection"]["localisation"]["splits"] == math.ceil(math.log2(N))
    evaluations = verdict["finite_difference"]["inputs"]["x"]["forward_evaluations"]
    assert evaluations <= 4 + 6 * math.ceil(math.log2(N)) + 2
    # the element's own central difference is the true gradient to ~1e-9; autograd is 1e-3 higher
    true = float(dense_gradient(_x())[321])
    assert verdict["worst"]["left"] == pytest.approx(true, abs=1e-7)
    assert verdict["worst"]["right"] - verdict["worst"]["left"] == pytest.approx(1e-3, rel=1e-3)


def test_the_engine_records_the_projected_mode_asked_for_and_names_the_element():
    """Given the wrong backward checked through the engine with finite_difference.mode projected,
    when the check runs,
    then the finite_difference observation says projected and why, and the failure of
    autograd_vs_finite_difference names index [321]."""
    record = _check(dense_wrong_at_321, finite_difference={"mode": "projected"})
    observation = record["observations"]["finite_difference"]
    assert observation["mode"] == "projected"
    assert "requested" in observation["mode_reason"]
    assert record["finite_difference"]["mode"] == "projected"
    failure = next(f for f in record["failures"] if f["comparison"] == "autograd_vs_finite_difference")
    assert failure["index"] == [321]


def test_mode_auto_projects_when_the_exhaustive_comparison_is_over_budget(monkeypatch):
    """Given a budget of a microsecond (as if the exhaustive comparison were slow), timed however
    little work the general path has,
    when the correct dense function is checked with the default mode,
    then the record says projected, with the predicted time that chose it, and the check passes;
    with mode exhaustive the same check compares every element."""
    monkeypatch.setattr(time_budget, "AUTO_BUDGET_S", 1e-6)
    monkeypatch.setattr(finite_difference, "BUDGET_WORK_FROM", 0)
    record = _check(dense)
    observation = record["observations"]["finite_difference"]
    assert observation["mode"] == "projected"
    assert "would take about" in observation["mode_reason"]
    assert record["passed"] is True
    exhaustive = _check(dense, finite_difference={"mode": "exhaustive"})
    assert exhaustive["observations"]["finite_difference"]["mode"] == "exhaustive"
    assert exhaustive["observations"]["finite_difference"]["inputs"]["x"]["forward_evaluations"] == 2 * N
    assert exhaustive["observations"]["finite_difference"]["mode_reason"] == (
        f"requested: finite_difference.mode is exhaustive; every element compared in {2 * N} forward "
        "evaluations (x general)"
    )


def test_the_default_stays_exhaustive_under_a_second():
    """Given the correct dense function at 500 elements (well under a second exhaustively),
    when it is checked with the default mode,
    then every element is compared (the exhaustive mode, 2n evaluations), the spec keeps no mode, and the
    record says why auto chose it: its evaluations, no more than gradcheck's slow mode would make, and the
    budget that would have made it project."""
    record = _check(dense)
    assert record["observations"]["finite_difference"]["mode"] == "exhaustive"
    assert "mode" not in record["finite_difference"]
    assert record["observations"]["finite_difference"]["mode_reason"] == (
        f"auto: every element compared in {2 * N} forward evaluations (x general), where gradcheck's slow mode "
        f"makes {2 * N}; auto projects only when the general path's first part predicts more than 1 s"
    )


def test_auto_on_a_structured_input_says_how_few_evaluations_it_took():
    """Given an elementwise function summed, at 1,000 elements,
    when it is checked in mode auto, then the record says every element was compared in 3 forward evaluations
    on the elementwise path, against the 2,000 of gradcheck's slow mode."""
    record = run_check(
        {"function": "sum(sin(x)*x)", "x": [i / 500 - 1 for i in range(1000)], "analytical_gradient": "sin(x)+x*cos(x)"}
    )
    assert record["observations"]["finite_difference"]["mode_reason"].startswith(
        "auto: every element compared in 3 forward evaluations (x elementwise then sum), where gradcheck's slow "
        "mode makes 2000;"
    )


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fast", "finite_difference.mode 'fast' is not one of auto, exhaustive, projected"),
        (3, "finite_difference.mode 3 is not one of auto, exhaustive, projected"),
    ],
)
def test_a_bad_mode_is_refused_in_one_line_before_anything_runs(mode, message):
    """Given a finite_difference.mode that names no mode,
    when the check is declared,
    then a one-line SpecError names the field and the allowed modes, and the function never runs."""
    calls = []

    def function(x):
        calls.append(1)
        return x * x

    with pytest.raises(SpecError) as refused:
        check_callable(function, {"x": 3.0}, grad=6.0, finite_difference={"mode": mode})
    assert str(refused.value) == message
    assert "\n" not in str(refused.value)
    assert calls == []


def test_projected_mode_with_another_scheme_is_refused():
    """Given mode projected with forward differences,
    when the check is declared,
    then it is refused in one line: the projected mode takes central differences at the default step."""
    with pytest.raises(SpecError, match="^finite_difference.mode projected takes central differences"):
        check_callable(
            dense, {"x": [0.0] * 4}, grad=[0.0] * 4, finite_difference={"mode": "projected", "scheme": "forward"}
        )
