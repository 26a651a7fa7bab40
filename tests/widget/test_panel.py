"""The inline panel, driven as a student drives it: type into the fields, click Run.

The kernel runs for `lab1.ipynb` as Jupyter Server would start it (JPY_SESSION_NAME), so the
ledger lands beside the notebook. No browser: `run_button.click()` runs the same handler.
"""

from __future__ import annotations

import html
import json
import re

import pytest
import torch

from jupyterlab_gradcheck.core.check.environment import available_devices
from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.widget import GradcheckPanel
from support.html_tables import column, tables_in
from support.ledger import check_entries


def kinds(notebook) -> list[str]:
    return [entry["kind"] for entry in check_entries(Ledger.for_notebook(notebook))]


def seed_panel() -> GradcheckPanel:
    """A panel with the seed record typed in: x*x, x=3, analytical 6."""
    panel = GradcheckPanel()
    panel.function.value = "x*x"
    panel.inputs.value = '{"x": 3}'
    panel.analytical_gradient.value = "6"
    return panel


def test_seed_check_shows_6_expected_beside_6_0_observed_and_ledger_order(notebook):
    """Given a panel with the seed record typed in,
    when Run is clicked,
    then the table holds 6 under Expectation and 6.0 under Observation with shape [], dtype
    float64 and device cpu; and lab1.gradcheck.jsonl holds the expectation (not yet executed)
    before the observation that refers to it."""
    panel = seed_panel()
    panel.run_button.click()

    table = tables_in(panel.result.value)["jp-gradcheck-expectation-observation"]
    assert column(table, "Expectation")["code"] == ["6"]
    observed = column(table, "Observation")
    assert observed["code"] == ["6.0"]
    assert observed["meta"] == "shape [] · dtype float64 · device cpu"
    assert "passed" in panel.message.value

    entries = check_entries(Ledger(notebook.with_name("lab1.gradcheck.jsonl")))
    assert [e["kind"] for e in entries] == ["expectation", "observation"]
    expectation, observation = entries
    assert expectation["data"]["analytical_gradient"] == 6
    assert (expectation["data"]["executed"], expectation["data"]["observed_gradient"]) == (False, None)
    assert observation["data"]["expectation_seq"] == expectation["seq"]
    assert observation["data"]["record"]["observed_gradient"] == 6.0


def test_seed_record_fills_the_panel_verbatim(notebook, seed_text):
    """Given the seed record exactly as the course writes it,
    when a panel is built from it and run,
    then the fields show it and the record comes back executed with observed_gradient 6.0."""
    panel = GradcheckPanel(json.loads(seed_text))
    assert (panel.function.value, json.loads(panel.inputs.value), panel.analytical_gradient.value) == (
        "x*x",
        {"x": 3},
        "6",
    )
    record = panel.run()
    assert (record["executed"], record["observed_gradient"], record["passed"]) == (True, 6.0, True)
    assert panel.record is record


def test_tolerance_change_after_a_run_needs_a_justification(notebook):
    """Given a run of the seed check at the default float64 tolerance,
    when rtol is changed, the justification box appears; Run is refused with a message and
    nothing is appended; with a justification, a tolerance_change entry (old, new, the text)
    is appended before the next run's expectation, and the history in the panel shows it."""
    panel = seed_panel()
    panel.run_button.click()
    assert panel.rtol.value == "1e-07"  # the tolerance the run used, now explicit
    assert panel.justification.layout.display == "none"

    panel.rtol.value = "1e-5"
    assert panel.justification.layout.display == "flex"
    panel.run_button.click()
    assert "refused" in panel.message.value and "rtol 1e-07 -> 1e-05" in html.unescape(panel.message.value)
    assert kinds(notebook) == ["expectation", "observation"]

    panel.justification.value = "the same check will run in float32 next"
    panel.run_button.click()
    entries = check_entries(Ledger.for_notebook(notebook))
    assert [e["kind"] for e in entries] == [
        "expectation",
        "observation",
        "tolerance_change",
        "expectation",
        "observation",
    ]
    change = entries[2]["data"]
    assert (change["old"]["rtol"], change["new"]["rtol"]) == (1e-7, 1e-5)
    assert change["justification"] == "the same check will run in float32 next"
    assert entries[3]["data"]["tolerance"]["rtol"] == 1e-5
    assert panel.justification.layout.display == "none"
    history = tables_in(panel.result.value)["jp-gradcheck-history-table"]
    assert ["3", "the same check will run in float32 next"] in [
        [row[0]["text"], row[4]["text"]] for row in history["rows"]
    ]


def test_widening_after_a_failure_is_flagged(notebook):
    """Given a hand derivation that is wrong (7 for d(x*x)/dx at 3),
    when it runs, the failure is shown and kept; widening the tolerance afterwards with a
    justification is recorded with after_failure true."""
    panel = seed_panel()
    panel.analytical_gradient.value = "7"
    panel.run_button.click()
    assert "failed" in panel.message.value
    assert 'data-status="probable_bug"' in panel.result.value
    panel.rtol.value = "0.5"
    panel.justification.value = "testing what a wide tolerance hides"
    panel.run_button.click()
    change = check_entries(Ledger.for_notebook(notebook))[2]
    assert change["kind"] == "tolerance_change"
    assert (change["data"]["widened"], change["data"]["after_failure"]) == (True, True)
    assert panel.record["passed"] is True  # |7 - 6| <= 0.5 * 6: the widening hides the bug


@pytest.mark.parametrize(
    "field, text",
    [
        ("function", "x*"),
        ("function", "y*y"),
        ("function", "__import__('os').system('true')"),
        ("analytical_gradient", "[1, [2]]"),
        ("rtol", "loose"),
    ],
)
def test_bad_input_shows_the_core_error_and_appends_nothing(notebook, field, text):
    """Given bad input in one field,
    when Run is clicked,
    then the panel shows the core's one-line error for that record, and no ledger is written."""
    panel = seed_panel()
    getattr(panel, field).value = text
    with pytest.raises(SpecError) as raised:
        parse_spec(panel.spec_from_fields())
    panel.run_button.click()
    shown = html.unescape(re.sub(r"<[^>]+>", "", panel.message.value))
    assert shown == raised.value.message
    assert "\n" not in raised.value.message
    assert not notebook.with_name("lab1.gradcheck.jsonl").exists()
    assert panel.result.value == ""


def test_inputs_that_are_not_json_are_refused(notebook):
    """Given inputs typed as `x = 3`, when Run is clicked, the message says it is not JSON."""
    panel = seed_panel()
    panel.inputs.value = "x = 3"
    panel.run_button.click()
    assert "inputs is not valid JSON" in panel.message.value
    assert not notebook.with_name("lab1.gradcheck.jsonl").exists()


def test_device_options_match_what_torch_reports(notebook):
    """Given this machine's torch,
    when a panel is built,
    then the device choices are cpu, each CUDA device when torch.cuda.is_available(), and mps
    when MPS is available; absent kinds are listed as unavailable with the reason."""
    panel = GradcheckPanel()
    expected = ["cpu"]
    if torch.cuda.is_available():
        expected += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        expected.append("mps")
    assert [value for _label, value in panel.device.options] == expected
    note = panel.unavailable_devices.value
    if not torch.cuda.is_available():
        reason = next(d["reason"] for d in available_devices() if d["id"] == "cuda")
        assert f"cuda: unavailable ({reason})" in note
        assert reason.startswith(("this torch build has no CUDA", "torch.cuda.is_available() is False"))
    else:
        assert "cuda:" not in note


@pytest.mark.cuda
def test_the_seed_check_runs_on_the_gpu(notebook):
    """Given a CUDA device, when the seed check runs on cuda:0, every observation is on it."""
    panel = seed_panel()
    panel.device.value = "cuda:0"
    panel.run_button.click()
    observed = column(tables_in(panel.result.value)["jp-gradcheck-expectation-observation"], "Observation")
    assert observed["code"] == ["6.0"]
    assert observed["meta"] == "shape [] · dtype float64 · device cuda:0"
    assert panel.record["environment"]["cuda"] == torch.version.cuda


def test_without_a_ledger_location_the_panel_says_how_to_give_one(tmp_path, monkeypatch):
    """Given a kernel not started for a notebook (no JPY_SESSION_NAME),
    when a panel is built and Run clicked,
    then it says how to name a notebook or a ledger, and writes nothing."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    panel = seed_panel()
    assert "notebook=" in panel.ledger_note.value and "ledger=" in panel.ledger_note.value
    panel.run_button.click()
    assert "JPY_SESSION_NAME is unset" in panel.message.value
    assert list(tmp_path.iterdir()) == []

    named = GradcheckPanel({"function": "x*x", "x": 3, "analytical_gradient": 6}, notebook=tmp_path / "hw.ipynb")
    named.run_button.click()
    assert [e["kind"] for e in check_entries(Ledger(tmp_path / "hw.gradcheck.jsonl"))] == ["expectation", "observation"]


def test_a_record_the_core_refuses_is_filled_in_with_the_reason_shown(notebook):
    """Given a record asking for dtype float8 and a device this machine may lack,
    when a panel is built from it,
    then the fields hold what can be shown, the core's reasons are in the message, and the
    device falls back to cpu only when the one asked for is absent."""
    record = {"function": "x*x", "x": 3, "analytical_gradient": 6, "dtype": "float8", "device": "cuda"}
    panel = GradcheckPanel(record)
    with pytest.raises(SpecError) as raised:
        parse_spec(record)
    shown = html.unescape(panel.message.value)
    assert raised.value.message in shown and "float8" in shown
    assert panel.dtype.value == "float64"
    if torch.cuda.is_available():
        assert panel.device.value == "cuda:0"
    else:
        assert panel.device.value == "cpu"
        assert "device 'cuda:0' is not available" in shown and "the panel shows cpu" in shown
    assert panel.run_button.disabled is False


@pytest.mark.parametrize(
    "function, reason",
    [
        ("x > 1", "a comparison is only allowed as the condition of where(...)"),
        ("x[5]", "invalid index of a 0-dim tensor"),
    ],
)
def test_shapes_that_cannot_work_are_bad_input(notebook, function, reason):
    """Given a function that parses but cannot be differentiated or indexed on the inputs,
    when Run is clicked,
    then the panel shows the core's one-line reason and no ledger line is written: the
    core infers the shapes from the record before the expectation is recorded."""
    panel = seed_panel()
    panel.function.value = function
    panel.run_button.click()
    shown = html.unescape(re.sub(r"<[^>]+>", "", panel.message.value))
    assert reason in shown and "\n" not in shown
    assert not notebook.with_name("lab1.gradcheck.jsonl").exists()
    assert panel.record is None
