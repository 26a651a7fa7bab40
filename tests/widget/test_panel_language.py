"""The inline panel in Spanish: its labels, its messages and the result table follow
`language=`, and the ledger it writes is the same as in English."""

from __future__ import annotations

from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.widget import GradcheckPanel
from support.html_tables import tables_in
from support.ledger import check_entries

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}


def test_the_seed_check_in_spanish(notebook):
    """Given a Spanish panel filled with the seed record, when Run is clicked, then the
    labels, the button, the verdict message and the result table are Spanish, while the
    ledger holds the same English kinds and the record its English fields."""
    panel = GradcheckPanel(SEED, language="es")
    assert (panel.function.description, panel.run_button.description) == ("función", "Ejecutar la comprobación")
    assert "<b>Expectativa</b> (escrita primero)" in panel.children[0].value
    record = panel.run()
    assert record["observed_gradient"] == 6.0 and record["passed"] is True
    assert f"{record['id']}: correcto" in panel.message.value
    table = tables_in(panel.result.value)["jp-gradcheck-expectation-observation"]
    assert table["header"] == ["", "Expectativa", "Observación"]
    assert table["rows"][0][1]["text"] == "6"
    assert "forma [] · dtype float64 · dispositivo cpu" in table["rows"][0][2]["meta"]
    assert "CORRECTO" in panel.result.value and "<b>Historial</b>" in panel.result.value
    kinds = [entry["kind"] for entry in check_entries(Ledger.for_notebook(notebook))]
    assert kinds == ["expectation", "observation"]


def test_bad_input_is_explained_in_spanish_and_nothing_is_written(notebook):
    """Given a Spanish panel whose inputs are not JSON, when Run is clicked, then the message
    names the problem in Spanish and the ledger holds no entry."""
    panel = GradcheckPanel(language="es")
    panel.inputs.value = "{x: 3"
    panel.analytical_gradient.value = "6"
    assert panel.run() is None
    assert "las entradas no son JSON válido: JSON mal formado" in panel.message.value
    assert Ledger.for_notebook(notebook).entries() == []


def test_the_default_panel_is_english(notebook):
    """Given no language (the suite runs with LANGUAGE=en), then the panel is English."""
    panel = GradcheckPanel(SEED)
    assert (panel.function.description, panel.run_button.description) == ("function", "Run check")
    record = panel.run()
    assert f"{record['id']}: passed" in panel.message.value
