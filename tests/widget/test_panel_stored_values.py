"""The inline panel with a check of more than 256 elements per value: the result shows stored
values by summary and hash, and a record loaded into the fields keeps its stored input short."""

from __future__ import annotations

import json

from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.widget import GradcheckPanel
from support.html_tables import column, tables_in
from support.stored_records import big_check, ledger_with_stored_check


def test_the_panel_shows_a_big_checks_result_by_summary(notebook):
    """Given the panel with sin(x) over 10^5 points typed in, its derivative written cos(x),
    when Run is clicked,
    then the Observation cell holds the stored gradient's summary (min cos(1) = 0.5403...)
    and its short sha256 with the whole hash in the title, and the result stays under 64 KB."""
    panel = GradcheckPanel()
    panel.function.value = "sum(sin(x))"
    panel.inputs.value = json.dumps({"x": big_check(10**5)["x"]})
    panel.analytical_gradient.value = "cos(x)"
    record = panel.run()
    assert record is not None and record["passed"], panel.message.value
    assert panel.ledger.path == Ledger.for_notebook(notebook).path
    html = panel.result.value
    sha = record["observations"]["backward_pass_1"]["gradients"]["x"]["value"]["stored"]["sha256"]
    observed = column(tables_in(html)["jp-gradcheck-expectation-observation"], "Observation")
    assert observed["code"][0].startswith("float64 [100000], stored: min 0.54030230586")  # cos(1)
    assert f'title="sha256 {sha}"' in html and f"sha256 {sha[:12]}…" in html
    assert len(html) < 64 * 1024  # inline it would hold 10^5 numbers per observation


def test_a_record_with_a_stored_input_fills_the_fields_with_its_stored_form(notebook):
    """Given the stored expectation of a 10^5-element check,
    when the panel is filled from it,
    then the inputs field holds the stored form (hash, shape, summary) in under 1 KB."""
    _, record = ledger_with_stored_check(notebook, big_check(10**5))
    panel = GradcheckPanel(record={key: record[key] for key in ("id", "function", "inputs", "analytical_gradient")})
    inputs = json.loads(panel.inputs.value)
    assert inputs["x"]["stored"] == record["inputs"]["x"]["stored"]
    assert len(panel.inputs.value) < 1024
