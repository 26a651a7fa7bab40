"""The HTML export in Spanish and in English: the headings and words follow the language,
the check ids, codes and recorded values do not."""

from __future__ import annotations

import pytest

from jupyterlab_gradcheck.core.i18n import language
from jupyterlab_gradcheck.core.report.html_export import to_html
from jupyterlab_gradcheck.core.report.submissions import collect
from support.html_tables import tables_in
from support.ledger import notebook_with_three_checks


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """One student's notebook: three checks, cube_wrong failing, its tolerance widened with a
    justification after the failure."""
    folder = tmp_path_factory.mktemp("lang") / "submitted" / "dana" / "ps1"
    notebook_with_three_checks(folder)
    return collect([folder.parent.parent])


HEADINGS = {
    "es": (
        '<html lang="es">',
        "<h1>Informe de comprobación de gradientes</h1>",
        "<b>Fallo conservado</b>",
        "<b>Señales</b>",
        "tolerancia ampliada tras un fallo",
        "<b>Historial</b>",
        "<b>Diagnóstico</b>",
    ),
    "en": (
        '<html lang="en">',
        "<h1>Gradient check report</h1>",
        "<b>Failure kept</b>",
        "<b>Flags</b>",
        "tolerance widened after a failure",
        "<b>History</b>",
        "<b>Diagnosis</b>",
    ),
}


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_report_has_the_headings_of_its_language(submissions, lang):
    """Given the three-check submission, when it is exported with language=<lang>, then the
    page, its headings, the kept failure, the flag and the tables are in that language, and
    the other language's headings are absent."""
    page = to_html(submissions, language=lang)
    for heading in HEADINGS[lang]:
        assert heading in page, heading
    other = HEADINGS["en" if lang == "es" else "es"]
    assert not [heading for heading in other if heading in page]
    table = tables_in(page)["jp-gradcheck-expectation-observation"]
    assert table["header"] == (
        ["", "Expectativa", "Observación"] if lang == "es" else ["", "Expectation", "Observation"]
    )


def test_the_language_changes_words_never_the_evidence(submissions):
    """Given the same submission in both languages, then the check ids, the diagnosis codes,
    the flag codes and every value in the observations table are the same."""
    pages = {lang: to_html(submissions, language=lang) for lang in ("es", "en")}
    for code in ('data-check-id="cube_wrong"', 'data-status="probable_bug"', 'data-flag="widened_after_failure"'):
        assert code in pages["es"] and code in pages["en"], code
    rows = {
        lang: [
            [cell["text"] for cell in row[:6]]
            for row in tables_in(page)["jp-gradcheck-observations"]["rows"]
            if row[0]["text"] != "torch_gradcheck"
        ]  # its verdict badge is a word: CORRECTO / PASSED
        for lang, page in pages.items()
    }
    assert rows["es"] == rows["en"] and len(rows["es"]) == 5


def test_without_a_language_the_report_follows_the_active_one(submissions):
    """Given no language argument, then the page is English by default and Spanish inside
    `with language("es")`."""
    assert "<h1>Gradient check report</h1>" in to_html(submissions)
    with language("es"):
        assert "<h1>Informe de comprobación de gradientes</h1>" in to_html(submissions)
