"""The reader's language: chosen explicitly, else from the locale as gettext reads it, else
English; errors keep their English text (the contract) and are translated when shown."""

from __future__ import annotations

import json
import pickle

import pytest

from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.i18n import (
    Message,
    _,
    active_language,
    environment_language,
    language,
    localize,
    ngettext,
    set_language,
)
from jupyterlab_gradcheck.core.jsonio import loads_records


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, "en"),
        ({"LANG": "es_ES.UTF-8"}, "es"),
        ({"LC_MESSAGES": "es_MX"}, "es"),
        ({"LANGUAGE": "fr:es", "LANG": "en_US.UTF-8"}, "es"),  # LANGUAGE is a list of preferences
        ({"LANGUAGE": "fr", "LANG": "es_ES.UTF-8"}, "en"),  # the first variable set decides, as in gettext
        ({"LC_ALL": "C", "LANG": "es_ES.UTF-8"}, "en"),
        ({"LANGUAGE": "", "LC_ALL": "es_AR.UTF-8"}, "es"),  # an empty variable counts as unset
    ],
)
def test_the_locale_environment_is_read_as_gettext_reads_it(environ, expected):
    """Given the locale variables of a machine, when the language is taken from them, then
    it is the first one set, Spanish for any es_*, English for C and anything we lack."""
    assert environment_language(environ) == expected


def test_an_explicit_language_wins_over_the_setting_and_the_locale(monkeypatch):
    """Given LANG=es_ES.UTF-8, then messages are Spanish; set_language("en") makes them
    English, and `with language("es")` makes them Spanish again inside the block only."""
    monkeypatch.delenv("LANGUAGE", raising=False)
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "es_ES.UTF-8")
    assert _("Expectation") == "Expectativa"
    set_language("en")
    try:
        assert _("Expectation") == "Expectation"
        with language("es-MX") as chosen:
            assert chosen == "es" and _("Observation") == "Observación"
        assert active_language() == "en"
    finally:
        set_language(None)
    assert active_language() == "es"


def test_an_unknown_language_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="'klingon' is not one of en, es"):
        with language("klingon"):
            pass


def test_plural_forms_follow_the_count():
    """Given one run and three runs, then Spanish says «1 ejecución» and «3 ejecuciones»."""
    with language("es"):
        assert ngettext("{count} run", "{count} runs", 1).format(count=1) == "1 ejecución"
        assert ngettext("{count} run", "{count} runs", 3).format(count=3) == "3 ejecuciones"


def test_a_spec_error_keeps_english_and_is_shown_in_spanish():
    """Given a record without its expectation, when it is parsed, then the error's message,
    its JSON and its str are the English contract, and `localized()` under Spanish is the
    Spanish sentence; outside a Spanish block it is English again."""
    with pytest.raises(SpecError) as caught:
        parse_spec({"function": "x*x", "x": 3})
    error = caught.value
    english = "analytical_gradient is missing: write the expectation before running the check"
    assert error.message == english and str(error) == english
    assert error.to_json() == {"code": "bad_input", "message": english, "field": "analytical_gradient"}
    with language("es"):
        assert error.localized() == (
            "falta analytical_gradient: escriba la expectativa antes de ejecutar la comprobación"
        )
        assert json.dumps(error.to_json()["message"]) == json.dumps(english)  # REST and ledgers stay English
    assert error.localized() == english


def test_parameters_fill_both_languages_and_a_nested_message_is_translated_with_its_parent():
    """Given the second line of JSON Lines input holding NaN, then the English message names
    line 2 and the constant, and the Spanish one translates both the outer and the inner
    sentence."""
    with pytest.raises(SpecError) as caught:
        loads_records('{"function": "x*x", "x": 3}\n{"x": NaN}\n')
    error = caught.value
    assert error.message == "line 2: JSON constant NaN is not allowed: write a finite number"
    assert error.localized("es") == "línea 2: la constante JSON NaN no está permitida: escriba un número finito"


def test_a_message_is_english_text_wherever_it_travels():
    """Given a Message with a parameter, then JSON, pickling (a worker process) and string
    comparison see the English text, and the template survives the pickle."""
    message = Message("no ledger at {path}", path="lab1.gradcheck.jsonl")
    assert message == "no ledger at lab1.gradcheck.jsonl"
    assert json.loads(json.dumps({"reason": message})) == {"reason": "no ledger at lab1.gradcheck.jsonl"}
    copy = pickle.loads(pickle.dumps(message))
    assert copy == message and copy.localized("es") == "no hay ningún registro en lab1.gradcheck.jsonl"
    error = pickle.loads(pickle.dumps(SpecError("no ledger at {path}", path="a.jsonl", field="ledger")))
    assert (error.message, error.field, error.localized("es")) == (
        "no ledger at a.jsonl",
        "ledger",
        "no hay ningún registro en a.jsonl",
    )


def test_plain_text_is_looked_up_as_written_and_unknown_text_passes_through():
    assert localize("Failure kept", "es") == "Fallo conservado"
    assert localize("a sentence the catalog does not hold", "es") == "a sentence the catalog does not hold"


def test_the_interface_language_comes_before_the_locale_and_after_set_language(monkeypatch):
    """Given a kernel whose locale is English, when JupyterLab tells it its interface is
    Spanish (`follow_interface("es-ES")`), then messages are Spanish; `set_language("en")`
    still wins, and `follow_interface(None)` gives the locale back."""
    from jupyterlab_gradcheck.core.i18n import _, active_language, follow_interface, set_language

    monkeypatch.setenv("LANGUAGE", "en")
    try:
        follow_interface("es-ES")
        assert active_language() == "es"
        assert _("passed") == "correcto"
        set_language("en")
        assert active_language() == "en"
        set_language(None)
        follow_interface("fr-FR")  # a language we do not have: English, as the interface shows
        assert active_language() == "en"
    finally:
        follow_interface(None)
        set_language(None)
    assert active_language() == "en"


def test_an_english_text_that_crossed_a_process_is_recognised_and_translated():
    """Given English texts a worker sent as plain strings (an error with a field prefix, a
    nested reason), when translated to Spanish, then each is the catalog's Spanish with its
    values kept; a text no message wrote is unchanged."""
    from jupyterlab_gradcheck.core.i18n import accepted_language, translate_text

    assert translate_text("function 'foo' is not in the allowed list", "es") == (
        "la función 'foo' no está en la lista de funciones permitidas"
    )
    assert translate_text("analytical_gradient: unknown name 'y'; declared inputs: x", "es") == (
        "analytical_gradient: nombre desconocido 'y'; entradas declaradas: x"
    )
    assert translate_text("hello world", "es") == "hello world"
    assert translate_text("function 'foo' is not in the allowed list", "en").startswith("function")
    assert accepted_language("es-ES,es;q=0.9,en;q=0.8") == "es"
    assert accepted_language("fr, en;q=0.5") == "en"
    assert accepted_language("en;q=0.9, es") == "es"
    assert accepted_language(None) == "en"
