"""check() in Spanish: the summary and the expectation/observation table follow `language=`;
the record it returns is the same English contract."""

from __future__ import annotations

import pytest

from jupyterlab_gradcheck.api import check
from support.html_tables import tables_in


def test_a_failing_check_summarised_and_tabled_in_spanish():
    """Given x*x at x=2 declared with the derivative 3 (2x is 4),
    when check() runs it with language="es", then the summary says «falló» and «diagnóstico»,
    the table heads read Expectativa / Observación, and the record keeps its English codes."""
    result = check("x*x", grad=3, x=2.0, ledger=False, language="es")
    assert result.passed is False
    summary = result.summary()
    assert summary.startswith(f"{result.record['id']}: falló analytical_vs_")
    assert "frente a" in summary and "diagnóstico probable_bug" in summary
    page = result._repr_html_()
    assert tables_in(page)["jp-gradcheck-expectation-observation"]["header"] == ["", "Expectativa", "Observación"]
    assert "<b>Diagnóstico</b>" in page and "FALLIDO" in page
    assert result.record["failure"]["diagnosis"] == "probable_bug"


def test_the_same_check_in_english_by_default():
    result = check("x*x", grad=6, x=3.0, ledger=False)
    assert result.summary() == f"{result.record['id']}: passed"
    assert tables_in(result._repr_html_())["jp-gradcheck-expectation-observation"]["header"] == [
        "",
        "Expectation",
        "Observation",
    ]


def test_an_unknown_language_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="language 'fr' is not one of en, es"):
        check("x*x", grad=6, x=3.0, ledger=False, language="fr")
