"""The hostile-input corpus through the inline panel and the Python API, in this process.

The panel and `check_record` share one validation path (`kernel.kernel_run.run_in_kernel`,
then the core). Expressions are typed into the panel's fields, inputs-field bodies into its
inputs box, and records go through `check_record`: each must show (or raise) the core's
one-line error, never enter the engine, and leave the notebook's ledger as it was.
"""

from __future__ import annotations

import html
import json
import re

import corpus
import pytest
from figures import record

from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.ledger.store import Ledger

_MESSAGE = re.compile(r'<div class="jp-gradcheck-message"[^>]*>(.*)</div>', re.S)


@pytest.fixture
def engine_entries(monkeypatch):
    """Count every entry into the engine: a refused case must never reach it."""
    return corpus.count_engine_entries(monkeypatch.setattr)


@pytest.fixture(scope="module")
def honest_ledger(tmp_path_factory) -> bytes:
    """The bytes of a ledger holding one honest check, run through the Python API."""
    from jupyterlab_gradcheck.api import check_record

    path = tmp_path_factory.mktemp("honest") / "lab1.gradcheck.jsonl"
    result = check_record({"function": "x*x", "x": 3, "analytical_gradient": 6}, ledger=str(path))
    assert result.passed
    return path.read_bytes()


@pytest.fixture
def ledger_path(tmp_path, honest_ledger):
    path = tmp_path / "lab1.gradcheck.jsonl"
    path.write_bytes(honest_ledger)
    return path


def _shown(panel) -> str:
    match = _MESSAGE.search(panel.message.value)
    return html.unescape(match.group(1)) if match else ""


def _panel_problems(case, panel, ledger_path, honest, counts) -> list[str]:
    problems = []
    result = panel.run()
    message = _shown(panel)
    if result is not None:
        problems.append("the panel ran the check")
    if not message:
        problems.append("no message shown")
    elif "\n" in message:
        problems.append("the message has more than one line")
    elif not case.matches("widget", message):
        problems.append(f"message {message[:200]!r} lacks {case.expected('widget')}")
    if counts["run_check"] or counts["compile_expression"]:
        problems.append("the engine was entered")
    if ledger_path.read_bytes() != honest:
        problems.append("the ledger changed")
        ledger_path.write_bytes(honest)
    counts.update(run_check=0, compile_expression=0)
    return problems


def test_expressions_typed_into_the_panel_are_refused(ledger_path, honest_ledger, engine_entries):
    """Given the inline panel on a ledger with one honest check, when each hostile expression
    is typed as the function (and as x's analytical gradient) and Run is pressed, then the
    panel shows the core's one-line error, the engine is never entered and the ledger is
    unchanged."""
    from jupyterlab_gradcheck.widget.panel import GradcheckPanel

    panel = GradcheckPanel(ledger=str(ledger_path))
    cases = corpus.expression_cases() + corpus.expression_cases("shapes.txt")
    failures = {}
    for case in cases:
        written = json.loads(case.body)
        panel.function.value = written["function"]
        panel.inputs.value = json.dumps(written["inputs"])
        panel.analytical_gradient.value = json.dumps(written["analytical_gradient"])
        problems = _panel_problems(case, panel, ledger_path, honest_ledger, engine_entries)
        if problems:
            failures[case.name] = problems
    record(
        "expression cases through the inline panel (records, all refused)",
        f"{len(cases) - len(failures)} of {len(cases)}",
    )
    assert not failures, f"{len(failures)} of {len(cases)} not refused properly:\n" + "\n".join(
        f"{name}: {'; '.join(problems)}" for name, problems in failures.items()
    )


def test_bodies_typed_into_the_inputs_field_are_refused(ledger_path, honest_ledger, engine_entries):
    """Given the panel with the seed's function and expectation, when text that is not an
    acceptable inputs object (duplicate keys, NaN, malformed JSON, 10 MB) is typed into the
    inputs field and Run is pressed, then the core's one-line error is shown and nothing is
    run or written: a duplicated key is not silently dropped."""
    from jupyterlab_gradcheck.widget.panel import GradcheckPanel

    panel = GradcheckPanel(ledger=str(ledger_path))
    panel.function.value, panel.analytical_gradient.value = "x*x", "6"
    cases = [case for case in corpus.body_cases() if case.widget_inputs is not None]
    assert len(cases) >= 8
    failures = {}
    for case in cases:
        panel.inputs.value = case.widget_inputs.decode("utf-8")
        problems = _panel_problems(case, panel, ledger_path, honest_ledger, engine_entries)
        if problems:
            failures[case.name] = problems
    record(
        "inputs-field bodies through the inline panel (all refused)", f"{len(cases) - len(failures)} of {len(cases)}"
    )
    assert not failures, "\n".join(f"{name}: {'; '.join(problems)}" for name, problems in failures.items())


def test_records_given_to_check_record_are_refused(ledger_path, honest_ledger, engine_entries):
    """Given every record case of the corpus, when passed to `check_record` (the Python API the
    panel's run shares), then each raises SpecError with a one-line message carrying the
    expected fragment, the engine is never entered and the ledger is unchanged."""
    from jupyterlab_gradcheck.api import check_record

    cases = corpus.record_cases()
    failures = {}
    for case in cases:
        problems = []
        try:
            check_record(case.record, ledger=str(ledger_path))
            problems.append("the check ran")
        except SpecError as exc:
            if "\n" in exc.message:
                problems.append("the message has more than one line")
            elif not case.matches("widget", exc.message):
                problems.append(f"message {exc.message[:200]!r} lacks {case.expected('widget')}")
        except Exception as exc:  # noqa: BLE001 - any other exception is the finding
            problems.append(f"{type(exc).__name__} instead of SpecError: {exc}")
        if engine_entries["run_check"] or engine_entries["compile_expression"]:
            problems.append("the engine was entered")
        engine_entries.update(run_check=0, compile_expression=0)
        if ledger_path.read_bytes() != honest_ledger:
            problems.append("the ledger changed")
            ledger_path.write_bytes(honest_ledger)
        if problems:
            failures[case.name] = problems
    record("record cases through check_record (all refused)", f"{len(cases) - len(failures)} of {len(cases)}")
    assert not failures, "\n".join(f"{name}: {'; '.join(problems)}" for name, problems in failures.items())
    assert Ledger(ledger_path).head()["entries"] == 2
