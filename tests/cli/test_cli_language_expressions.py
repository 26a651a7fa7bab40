"""The expression language's refusals in the reader's language: `jupyter gradcheck run` on a
bad expression says what is wrong in Spanish under LANGUAGE=es, in English under LANGUAGE=en,
exits 2 and writes nothing; the record and the ledger would keep the English text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hardening.corpus import expression_cases

from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.expr.symbolic import symbolic_derivatives
from jupyterlab_gradcheck.core.i18n import Message, language

JUPYTER = Path(sys.executable).with_name("jupyter")

FORBIDDEN = '{"function": "__import__(\'os\')", "x": 3, "analytical_gradient": 6}'
UNKNOWN_NAME = '{"function": "sin(w)", "x": 3, "analytical_gradient": 6}'
DOT_OF_A_SCALAR = '{"function": "dot(x, y)", "x": [1.0, 2.0], "y": 3.0, "analytical_gradient": {"x": [3, 3], "y": 3}}'
SOFTMAX_DIM = '{"function": "softmax(z, dim=3)", "z": [1.0, 2.0], "analytical_gradient": [0, 0]}'


@pytest.fixture
def run_in(monkeypatch):
    """`LANGUAGE=<lang> jupyter gradcheck run --ledger L -` as a user types it: the other locale
    variables are cleared, so only LANGUAGE speaks. Returns (exit code, stdout, stderr)."""

    def run(lang: str, record: str, ledger: Path) -> tuple[int, str, str]:
        for variable in ("LC_ALL", "LC_MESSAGES", "LANG"):
            monkeypatch.delenv(variable, raising=False)
        monkeypatch.setenv("LANGUAGE", lang)
        command = [str(JUPYTER), "gradcheck", "run", "--ledger", str(ledger), "-"]
        done = subprocess.run(command, input=record, capture_output=True, text=True, cwd=ledger.parent, timeout=240)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.mark.parametrize(
    "record, spanish, english",
    [
        (
            FORBIDDEN,
            "error: function, columna 1: el nombre dunder '__import__' no está permitido",
            "error: function: dunder name '__import__' is not allowed at column 1",
        ),
        (
            UNKNOWN_NAME,
            "error: function, columna 5: nombre desconocido 'w'; entradas declaradas: x",
            "error: function: unknown name 'w'; declared inputs: x at column 5",
        ),
        (
            DOT_OF_A_SCALAR,
            "error: function, columna 1: dot: se esperaban tensores 1D, pero se recibieron tensores 1D y 0D",
            "error: function: dot: 1D tensors expected, but got 1D and 0D tensors at column 1",
        ),
        (
            SOFTMAX_DIM,
            "error: function, columna 1: dimensión fuera de rango (se esperaba en el rango [-1, 0], pero se recibió 3)",
            "error: function: dimension out of range (expected to be in range of [-1, 0], but got 3) at column 1",
        ),
    ],
    ids=["forbidden-construct", "unknown-name", "dot-of-a-scalar", "softmax-dim"],
)
def test_a_bad_expression_is_refused_in_one_line_of_the_readers_language(run_in, tmp_path, record, spanish, english):
    """Given a record whose expression calls __import__, names an input it did not declare, takes
    the dot product of a vector and a scalar, or asks softmax for dimension 3 of a vector,
    when `jupyter gradcheck run --ledger L -` reads it under LANGUAGE=es and under LANGUAGE=en,
    then each run exits 2, prints nothing on standard output, says in one line of the reader's
    language what is wrong and where (the English line is today's), and no ledger is written."""
    for lang, expected in (("es", spanish), ("en", english)):
        ledger = tmp_path / f"{lang}.gradcheck.jsonl"

        code, out, err = run_in(lang, record, ledger)

        assert (code, out, err) == (2, "", expected + "\n")
        assert not ledger.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _refusals() -> list:
    """(case, SpecError) for every expression case of the corpus, refused by parse_spec."""
    found = []
    for case in expression_cases() + expression_cases("shapes.txt"):
        with pytest.raises(SpecError) as refused:
            parse_spec(case.record)
        found.append((case, refused.value))
    return found


def test_every_expression_refusal_of_the_corpus_has_its_own_spanish_line():
    """Given every hostile expression and impossible shape of the corpus (tests/corpus/), each as
    a function and as an analytical gradient,
    when the refusal is shown under language("es"),
    then it renders without error as one line that differs from the English one, the English
    text is still the one the corpus expects, and a problem passed into the line (the unknown
    name, the bad shape) is itself shown in Spanish, not left in English inside it."""
    refusals = _refusals()
    assert len(refusals) > 250
    untranslated, inner_english = [], []
    for case, error in refusals:
        english = str(error)
        with language("es"):
            spanish = error.localized()
        assert "\n" not in spanish and spanish.strip() == spanish, case.name
        assert case.matches("cli", english), (case.name, english)
        if spanish == english:
            untranslated.append(f"{case.name}: {english}")
        problem = error.message.params.get("problem")
        if isinstance(problem, Message) and str(problem) in spanish:
            inner_english.append(f"{case.name}: {problem}")
    assert untranslated == []
    assert inner_english == []


def test_a_shown_refusal_keeps_the_english_text_for_the_record():
    """Given an unknown name refused while Spanish is the language shown,
    then the error's message (what REST answers, JSON and the ledger carry) is still the English
    text, and its JSON form names the field; only localized() speaks Spanish."""
    with language("es"):
        with pytest.raises(SpecError) as refused:
            parse_spec({"function": "sin(w)", "x": 3, "analytical_gradient": 6})
        error = refused.value
        assert error.localized() == "function, columna 5: nombre desconocido 'w'; entradas declaradas: x"
    assert error.to_json() == {
        "code": "bad_input",
        "field": "function",
        "message": "function: unknown name 'w'; declared inputs: x at column 5",
    }


def test_the_sympy_skip_reason_is_shown_in_spanish_and_kept_in_english():
    """Given x @ x, which the one-symbol-per-input SymPy opinion does not convert,
    then its skip reason is the English text, and shown in Spanish names the @ operator."""
    reason = symbolic_derivatives("x@x", ("x",))

    assert reason == "SymPy opinion skipped: the @ operator is not handled symbolically"
    assert reason.localized("es") == "se omite la opinión de SymPy: el operador @ no se trata simbólicamente"
