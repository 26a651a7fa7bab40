"""`jupyter gradcheck` in Spanish and English: the messages follow LANGUAGE (or --language),
the records and their fields do not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

JUPYTER = Path(sys.executable).with_name("jupyter")
SEED = '{"function":"x*x","x":3,"analytical_gradient":6,"observed_gradient":null,"executed":false}'
NO_EXPECTATION = '{"function": "x*x", "x": 3}'
UNKNOWN_DEVICE = '{"function": "x*x", "x": 3, "analytical_gradient": 6, "device": "tpu"}'


def gradcheck(*args: str, stdin: str, language: str, cwd=None) -> tuple[int, str, str]:
    """`LANGUAGE=<language> jupyter gradcheck ARGS` as a user types it, with the other locale
    variables cleared so only LANGUAGE speaks."""
    env = {k: v for k, v in os.environ.items() if k not in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")}
    env["LANGUAGE"] = language
    done = subprocess.run(
        [str(JUPYTER), "gradcheck", *args], input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=240
    )
    return done.returncode, done.stdout, done.stderr


def key_paths(value, prefix: str = "") -> list[str]:
    """Every key of a JSON value, at every depth, as a path (`observations.autograd_grad.gradients`)."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in [f"{prefix}{key}", *key_paths(item, f"{prefix}{key}.")]]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in key_paths(item, f"{prefix}{index}.")]
    return []


@pytest.mark.parametrize(
    "record, language, expected",
    [
        (
            NO_EXPECTATION,
            "es",
            "error: falta analytical_gradient: escriba la expectativa antes de ejecutar la comprobación",
        ),
        (NO_EXPECTATION, "en", "error: analytical_gradient is missing: write the expectation before running the check"),
        (UNKNOWN_DEVICE, "es", "error: el dispositivo 'tpu' no es cpu, cuda, cuda:N, mps ni auto"),
        (UNKNOWN_DEVICE, "en", "error: device 'tpu' is not cpu, cuda, cuda:N, mps or auto"),
    ],
)
def test_bad_input_is_one_line_in_the_readers_language_and_exits_2(record, language, expected):
    """Given a record without its expectation, or naming a device that does not exist,
    when `LANGUAGE=<language> jupyter gradcheck run -` reads it,
    then it exits 2, prints nothing on standard output, and says what is wrong in one line of
    the reader's language."""
    code, out, err = gradcheck("run", "-", stdin=record, language=language)
    assert code == 2
    assert out == ""
    assert err == expected + "\n"


def test_the_seed_record_in_spanish_comes_back_with_the_same_fields(tmp_path):
    """Given the course's seed record, when it runs under LANGUAGE=es and under LANGUAGE=en,
    then both exit 0 with the same record fields (the same keys, in the same order, at every depth),
    observed 6.0, and only the summary line on standard error changes language."""
    runs = {lang: gradcheck("run", "--no-sweep", "-", stdin=SEED, language=lang, cwd=tmp_path) for lang in ("es", "en")}
    records = {}
    for lang, (code, out, err) in runs.items():
        assert code == 0, err
        records[lang] = json.loads(out)
    spanish, english = records["es"], records["en"]
    assert list(spanish) == list(english)
    assert key_paths(spanish) == key_paths(english) and len(key_paths(spanish)) > 100
    assert (spanish["observed_gradient"], spanish["executed"], spanish["passed"]) == (6.0, True, True)
    assert spanish["observations"]["torch_gradcheck"]["status"] == "passed"  # codes stay English
    assert runs["es"][2].startswith(f"CORRECTO {spanish['id']}: observado 6.0")
    assert runs["en"][2].startswith(f"PASS {english['id']}: observed 6.0")


def test_the_language_option_wins_over_the_locale():
    """Given LANGUAGE=en, when `--language es` is given after the subcommand, then the error
    is Spanish; an unknown language is refused with exit 2 before anything runs."""
    code, _out, err = gradcheck("run", "-", "--language", "es", stdin=NO_EXPECTATION, language="en")
    assert (code, err.startswith("error: falta analytical_gradient")) == (2, True)
    code, _out, err = gradcheck("--language", "xx", "run", "-", stdin=SEED, language="en")
    assert code == 2 and "language 'xx' is not one of en, es" in err


def test_the_help_follows_the_language():
    """Given LANGUAGE=es, when `jupyter gradcheck run --help` is asked for, then the help
    describes the subcommand and the language option in Spanish."""
    code, out, _err = gradcheck("run", "--help", stdin="", language="es")
    assert code == 0
    flat = " ".join(out.split())
    assert "Ejecutar un registro de comprobación" in flat
    assert "idioma de los mensajes: en o es" in flat


def test_verify_and_export_speak_spanish(tmp_path):
    """Given a ledger written by `run --ledger`, when it is verified and exported as HTML
    under LANGUAGE=es, then the verify line counts «entradas», export says «escrito» and the
    page's heading is Spanish."""
    ledger = tmp_path / "lab1.gradcheck.jsonl"
    code, _out, err = gradcheck("run", "--no-sweep", "--ledger", str(ledger), "-", stdin=SEED, language="es")
    assert code == 0, err
    code, out, err = gradcheck("verify", "--ledger-only", str(ledger), stdin="", language="es")
    assert code == 0, err
    assert out.startswith(f"OK   {ledger}: 2 entradas, cabeza ")
    report = tmp_path / "report.html"
    code, _out, err = gradcheck("export", str(ledger), "--format", "html", "-o", str(report), stdin="", language="es")
    assert code == 0, err
    assert err == f"escrito {report} (1 entrega)\n"
    page = report.read_text(encoding="utf-8")
    assert '<html lang="es">' in page and "<h1>Informe de comprobación de gradientes</h1>" in page


def test_a_failure_is_diagnosed_in_spanish_on_screen_and_in_english_in_the_record():
    """Given x*x at x=2 declared with the derivative 3*x (2x is 4), when it runs under
    LANGUAGE=es, then it exits 1, the summary line gives the diagnosis's reason in Spanish,
    and the printed record keeps the code and the English reason (what the ledger keeps)."""
    code, out, err = gradcheck(
        "run", "--no-sweep", "-", language="es", stdin='{"function":"x*x","x":2,"analytical_gradient":"3*x"}'
    )
    assert code == 1
    record = json.loads(out)
    assert err == (
        f"FALLO (probable_bug) {record['id']}: la derivación a mano da 6 en x, pero autograd da 4 y las "
        "diferencias finitas coinciden con autograd (4): la expectativa es errónea\n"
    )
    assert record["failure"]["diagnosis"] == "probable_bug"
    assert record["failure"]["reason"] == (
        "the hand derivation gives 6 at x, but autograd gives 4 and finite "
        "differences agree with autograd (4): the expectation is wrong"
    )
