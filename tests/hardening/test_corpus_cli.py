"""The hostile-input corpus through the command line: exit 2, one line, nothing run or written.

Every case goes through the CLI's own `main()` in one subprocess (cli_driver.py), with a ledger
that already holds an honest check: each case must exit 2 with exactly one line on standard
error that carries the expected fragment, never enter the engine, leave the ledger's bytes as
they were and create no marker file. A sample goes through the real `jupyter-gradcheck` script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import corpus
import pytest
from figures import record

DRIVER = Path(__file__).with_name("cli_driver.py")
SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")
#: Bodies whose bytes are not UTF-8: also tried with the POSIX locale's error handler.
NOT_UTF8 = ("bodies/utf16.json", "bodies/latin1.json", "bodies/binary.json", "bodies/generated: garbage")


@pytest.fixture(scope="module")
def honest_ledger(tmp_path_factory) -> bytes:
    """The bytes of a ledger holding one honest check (expectation and observation), written
    once by the real CLI."""
    folder = tmp_path_factory.mktemp("honest")
    ledger = folder / "lab1.gradcheck.jsonl"
    completed = subprocess.run(
        [str(SCRIPT), "run", "-", "--ledger", str(ledger)],
        cwd=folder,
        capture_output=True,
        text=True,
        input='{"function":"x*x","x":3,"analytical_gradient":6}',
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr
    assert len(ledger.read_bytes().splitlines()) == 3  # the genesis entry, the expectation, the observation
    return ledger.read_bytes()


@pytest.fixture
def ledger(tmp_path, honest_ledger) -> Path:
    """A copy of the honest ledger in this test's folder."""
    path = tmp_path / "lab1.gradcheck.jsonl"
    path.write_bytes(honest_ledger)
    return path


def _drive(folder: Path, ledger: Path, io_encoding: str, names=()) -> list[dict]:
    environment = {**os.environ, "PYTHONIOENCODING": io_encoding}
    completed = subprocess.run(
        [sys.executable, str(DRIVER), str(ledger), *names],
        cwd=folder,
        capture_output=True,
        env=environment,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-3000:]
    return json.loads(completed.stdout)


def _problems(result: dict) -> list[str]:
    """Everything wrong with one case's outcome (empty when it was refused as it must be)."""
    message = result["stderr"].strip()
    problems = []
    if result["crash"]:
        problems.append(f"escaped exception {result['crash']}")
    if result["code"] != 2:
        problems.append(f"exit {result['code']}, not 2")
    if len(message.splitlines()) != 1:
        problems.append(f"{len(message.splitlines())} lines on standard error, not 1")
    elif not result["matches"]:
        problems.append(f"message {message[:200]!r} lacks {result['expected']}")
    if result["entered_engine"] or result["compiled"]:
        problems.append("the engine was entered")
    if result["ledger_changed"]:
        problems.append("the ledger changed")
    if result["markers"]:
        problems.append(f"marker files appeared: {result['markers']}")
    if result["stdout"]:
        problems.append(f"standard output is not empty: {result['stdout'][:80]!r}")
    return problems


def test_every_corpus_case_is_refused_by_the_cli(tmp_path, ledger, honest_ledger):
    """Given the whole corpus and a ledger with one honest check, when each case is piped to
    `jupyter gradcheck run - --ledger L` (through main(), a strict UTF-8 standard input), then
    every case exits 2 with one line naming the problem, and nothing runs, is written or created."""
    results = _drive(tmp_path, ledger, "utf-8:strict")
    cases = corpus.all_cases()
    assert [r["name"] for r in results] == [c.name for c in cases]
    failures = {r["name"]: _problems(r) for r in results if _problems(r)}
    record("corpus cases through the CLI (records, all refused)", f"{len(results) - len(failures)} of {len(results)}")
    assert not failures, f"{len(failures)} of {len(results)} cases not refused properly:\n" + "\n".join(
        f"{name}: {'; '.join(problems)}" for name, problems in failures.items()
    )
    assert ledger.read_bytes() == honest_ledger
    assert not (tmp_path / corpus.MARKER).exists()


def test_bytes_that_are_not_utf8_are_refused_under_the_posix_locale(tmp_path, ledger):
    """Given bodies that are not UTF-8 and a standard input that decodes with surrogateescape
    (Python's choice in the POSIX locale), when piped to the CLI, then each is still refused
    with exit 2 and one line, and the ledger is untouched."""
    results = _drive(tmp_path, ledger, "utf-8:surrogateescape", NOT_UTF8)
    assert len(results) == len(NOT_UTF8)
    failures = {r["name"]: _problems(r) for r in results if _problems(r)}
    assert not failures, failures


def _expression_case(text: str, where: str) -> str:
    """The name of the case trying the expression `text` as the function or as x's gradient."""
    for case in corpus.expression_cases():
        written = json.loads(case.body)
        tried = written["function"] if where == "function" else written["analytical_gradient"]["x"]
        if case.widget_field == where and tried == text:
            return case.name
    raise LookupError(text)


SAMPLE = (
    _expression_case("__import__('os').system('touch gradcheck-pwned')", "function"),
    _expression_case("x.__class__.__mro__[1].__subclasses__()", "analytical_gradient"),
    "records.jsonl: a good record then a forbidden one",
    "records.jsonl: an input of 100001 elements",
    "bodies/duplicate-function.json",
    "bodies/nan.json",
    "bodies/generated: deep_list",
)


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_is_refused_by_the_real_script(tmp_path, ledger, honest_ledger, name):
    """Given a case from the corpus, when piped to the installed `jupyter-gradcheck run -` with
    a notebook's ledger, then it exits 2 with one line on standard error, prints nothing on
    standard output, and the ledger and the notebook's folder are as they were."""
    case = next(c for c in corpus.all_cases() if c.name == name)
    before = sorted(p.name for p in tmp_path.iterdir())
    completed = subprocess.run(
        [str(SCRIPT), "run", "-", "--ledger", str(ledger)],
        cwd=tmp_path,
        input=case.body,
        capture_output=True,
        timeout=240,
    )
    message = completed.stderr.decode("utf-8", errors="replace").strip()
    assert completed.returncode == 2, message
    assert len(message.splitlines()) == 1, message
    assert case.matches("cli", message), (message, case.expected("cli"))
    assert completed.stdout == b""
    assert ledger.read_bytes() == honest_ledger
    assert sorted(p.name for p in tmp_path.iterdir()) == before
