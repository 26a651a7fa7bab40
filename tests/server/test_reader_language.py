"""Every REST answer a person reads comes in the language of its `Accept-Language` header (the
side panel sends JupyterLab's); records and ledgers stay English whatever the reader's language."""

from __future__ import annotations

import pytest

#: A check whose function calls a name the expression language refuses.
FORBIDDEN = {"function": "foo(x)", "x": 2.0, "analytical_gradient": 1}


@pytest.mark.parametrize(
    "header, expected",
    [
        ("es", "la función 'foo' no está en la lista de funciones permitidas"),
        ("es-ES,es;q=0.9,en;q=0.8", "la función 'foo' no está en la lista de funciones permitidas"),
        ("en", "function 'foo' is not in the allowed list"),
        (None, "function 'foo' is not in the allowed list"),
    ],
)
async def test_the_same_bad_check_is_refused_in_the_reader_language(api, lab1, ledger_lines, header, expected):
    """Given a check calling a function outside the allowed list, when it is POSTed with
    `Accept-Language` `header`, then the 400 names the function in that language, its code and
    field stay the contract's English, and nothing is written."""
    headers = {"Accept-Language": header} if header else None
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": FORBIDDEN}, headers=headers)
    assert (status, body["code"]) == (400, "bad_input"), body
    assert expected in body["message"], body["message"]
    assert ledger_lines() == []


async def test_a_body_that_is_no_object_is_refused_in_the_reader_language(api):
    """Given a POST verify whose body is a JSON list, not an object, when it is sent with
    `Accept-Language: es` and `en`, then both are 400 bad_input, each message in its language."""
    answers = {}
    for header in ("es", "en"):
        status, _, body = await api("POST", "verify", [1], headers={"Accept-Language": header})
        answers[header] = (status, body["code"], body["message"])
    assert answers["es"] == (400, "bad_input", "el cuerpo de la petición debe ser un objeto JSON, no list")
    assert answers["en"] == (400, "bad_input", "the request body must be a JSON object, got list")


async def test_a_path_leaving_the_root_is_refused_in_the_reader_language(api):
    """Given an export of `../x`, when it is asked with `Accept-Language: es` and `en`, then
    both are 400 bad_path naming the path, each in its language."""
    answers = {}
    for header in ("es", "en"):
        status, _, body = await api("GET", "export", headers={"Accept-Language": header}, path="../x", format="html")
        answers[header] = (status, body["code"], body["message"])
    assert answers["es"] == (
        400,
        "bad_path",
        "path '../x' contiene '..': las rutas no pueden salir de la raíz del servidor",
    )
    assert answers["en"] == (400, "bad_path", "path '../x' contains '..': paths may not leave the server root")


async def test_a_failing_check_keeps_its_record_english_and_shows_its_reason_in_spanish(api, lab1, ledger_lines):
    """Given a wrong hand derivative (3*x for x*x), when it runs with `Accept-Language: es`, then
    the record in the answer and the ledger keep the English reason, and the answer's `shown`
    gives that reason's Spanish for the panel."""
    check = {"function": "x*x", "x": 2.0, "analytical_gradient": "3*x"}
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": check}, headers={"Accept-Language": "es"})
    assert status == 200, body
    assert body["record"]["passed"] is False
    reasons = [f.get("reason") for f in body["record"].get("failures", []) if f.get("reason")]
    assert reasons, body["record"]
    assert reasons[0] in body["shown"]
    assert body["shown"][reasons[0]] != reasons[0]
    assert reasons[0] in str(ledger_lines())


async def test_the_html_export_is_in_the_reader_language(api, lab1):
    """Given a notebook with one check, when its HTML export is asked in Spanish and in English,
    then the Spanish document says `lang="es"` and the Spanish heading, the English one the English."""
    check = {"function": "x*x", "x": 2.0, "analytical_gradient": "2*x"}
    assert (await api("POST", "checks", {"notebook": lab1, "check": check}))[0] == 200
    _, _, spanish = await api("GET", "export", headers={"Accept-Language": "es"}, path=lab1, format="html")
    _, _, english = await api("GET", "export", headers={"Accept-Language": "en"}, path=lab1, format="html")
    assert '<html lang="es">' in spanish and "Informe de comprobación de gradientes" in spanish
    assert '<html lang="en">' in english and "Gradient check report" in english
