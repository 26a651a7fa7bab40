"""The per-check HTML (core.report.html_export) that the inline panel, check() and the HTML export show."""

from __future__ import annotations

import re

import pytest

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.ledger.store import build_history
from jupyterlab_gradcheck.core.report.html_export import MAX_SHOWN_ELEMENTS, format_value, record_html
from support.html_tables import column, tables_in


@pytest.fixture(scope="module")
def failed_record():
    """x*x over a vector at float64 with a hand derivation wrong only at x[2]."""
    return run_check(
        {
            "function": "sum(x*x)",
            "x": [1.0, 2.0, 3.0],
            "analytical_gradient": [2, 4, 7],
            "origin": "d/dx of sum(x^2) <by hand>",
            "destination": "x.grad",
        }
    )


def test_expectation_and_observation_sit_in_separate_columns(failed_record):
    """Given a completed record,
    when it is rendered,
    then the central table has an Expectation and an Observation column; the expectation is the
    list as written (ints stay ints), the observation is backward_pass_1's value with its shape,
    dtype and device."""
    table = tables_in(record_html(failed_record))["jp-gradcheck-expectation-observation"]
    assert table["header"] == ["", "Expectation", "Observation"]
    assert column(table, "Expectation")["code"] == ["[2, 4, 7]"]
    observed = column(table, "Observation")
    assert observed["code"] == ["[2.0, 4.0, 6.0]"]
    assert observed["meta"] == "shape [3] · dtype float64 · device cpu"


def test_failure_is_named_with_its_worst_element_and_diagnosis(failed_record):
    """Given a hand derivation wrong at x[2] (7 instead of 6),
    when it is rendered,
    then the heading badge says FAILED, the diagnosis names x[2] with both values, and the
    comparison table marks analytical_vs_backward_pass_1 failed and the pass-2 check passed."""
    page = record_html(failed_record)
    assert 'data-status="failed"' in page.split("</div>", 1)[0]
    text = re.sub(r"<[^>]+>", "", page)
    assert "x[2]: analytical 7.0 vs backward_pass_1 6.0 (abs err 1.0" in text
    comparisons = tables_in(page)["jp-gradcheck-comparisons"]
    verdicts = {row[0]["text"]: row[-1]["text"] for row in comparisons["rows"]}
    assert verdicts["analytical_vs_backward_pass_1"] == "FAILED"
    assert verdicts["pass_2_vs_twice_pass_1"] == "PASSED"


def test_every_observed_value_carries_shape_dtype_and_device(failed_record):
    """Given the record's five gradient observations,
    when they are rendered,
    then each row of the observations table names its shape, dtype and device."""
    table = tables_in(record_html(failed_record))["jp-gradcheck-observations"]
    rows = {row[0]["text"]: row for row in table["rows"]}
    for name in (
        "backward_pass_1",
        "backward_pass_2_accumulated",
        "after_clear_none",
        "autograd_grad",
        "finite_difference",
    ):
        row = rows[name]
        assert [row[i]["text"] for i in (3, 4, 5)] == ["[3]", "float64", "cpu"], name
    assert rows["backward_pass_2_accumulated"][2]["text"] == "[4.0, 8.0, 12.0]"


def test_sympy_opinion_and_step_sweep_are_shown(failed_record):
    """Given an expression check, SymPy gives an opinion and the engine a step sweep;
    when rendered, SymPy's derivative and its disagreement with the hand derivation are shown,
    and the core's sweep SVG is embedded."""
    page = record_html(failed_record)
    symbolic = page.split('class="jp-gradcheck-symbolic"', 1)[1].split("</div>", 1)[0]
    assert "2*x" in symbolic and "expectation disagrees" in symbolic and 'data-status="disagrees"' in symbolic
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="jp-gradcheck-sweep"' in page


def test_user_text_is_escaped(failed_record):
    """Given an origin note holding markup, when rendered, the markup is shown as text."""
    page = record_html(failed_record)
    assert "&lt;by hand&gt;" in page and "<by hand>" not in page


def test_colours_come_from_jupyterlab_theme_variables(failed_record):
    """Given the rendered record and a history with a tolerance edit,
    when every colour in it is collected,
    then each one is a JupyterLab CSS variable (with a fallback for pages outside JupyterLab),
    so the dark theme recolours all of it."""
    history = {
        "check_id": "c",
        "runs": 1,
        "observation_seqs": [2],
        "failures_kept": [{"seq": 2, "failures": []}],
        "tolerance_history": [
            {
                "seq": 3,
                "target": "tolerance",
                "old": {"rtol": 1, "atol": 1},
                "new": {"rtol": 2, "atol": 1},
                "justification": "j",
                "widened": True,
            }
        ],
    }
    page = record_html(failed_record, history=history)
    colours = re.findall(r'(?:color|background|fill|stroke)\s*[:=]\s*"?([^;"]+)', page)
    assert len(colours) > 20
    offenders = [c for c in colours if not c.strip().startswith("var(--jp-") and c.strip() not in ("none",)]
    assert offenders == []


def test_long_values_are_shortened_with_their_count():
    """Given a 100-element gradient, when formatted, the first elements and the count show."""
    text = format_value([[float(i) for i in range(10)] for _ in range(10)])
    assert MAX_SHOWN_ELEMENTS == 12
    assert text == ("[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 0.0, 1.0, ...] (100 elements, flattened)")


def test_history_lists_runs_failures_and_justified_tolerance_edits_in_ledger_order():
    """Given a ledger history: a failed run, a justified widening after it, then a passing run,
    when rendered, the history table lists them by seq with the justification and the flags."""
    entries = [
        {"seq": 1, "kind": "expectation", "check_id": "c", "data": {"tolerance": {"rtol": 1e-7, "atol": 1e-10}}},
        {
            "seq": 2,
            "kind": "observation",
            "check_id": "c",
            "time": "t2",
            "data": {
                "passed": False,
                "record": {
                    "failures": [
                        {
                            "comparison": "a_vs_b",
                            "input": "x",
                            "index": [1],
                            "left": 1.0,
                            "right": 2.0,
                            "abs_err": 1.0,
                            "rel_err": 0.5,
                        }
                    ]
                },
            },
        },
        {
            "seq": 3,
            "kind": "tolerance_change",
            "check_id": "c",
            "time": "t3",
            "data": {
                "target": "tolerance",
                "old": {"rtol": 1e-7, "atol": 1e-10},
                "new": {"rtol": 0.6, "atol": 1e-10},
                "justification": "float32 rounding",
                "widened": True,
                "after_failure": True,
            },
        },
        {"seq": 4, "kind": "expectation", "check_id": "c", "data": {"tolerance": {"rtol": 0.6, "atol": 1e-10}}},
        {"seq": 5, "kind": "observation", "check_id": "c", "data": {"passed": True}},
    ]
    history = build_history(entries)["c"]
    page = record_html({"id": "c", "executed": True, "passed": True}, history=history)
    table = tables_in(page)["jp-gradcheck-history-table"]
    assert [row[0]["text"] for row in table["rows"]] == ["2", "3", "5"]
    assert table["rows"][0][3]["text"] == "x[1]: a 1.0 vs b 2.0 (abs err 1.0, rel err 0.5)"
    assert table["rows"][1][4]["text"] == "float32 rounding"
    assert "widened, after_failure" in table["rows"][1][3]["text"]
    assert "2 runs, 1 failure kept, 1 tolerance edit(s)" in page
