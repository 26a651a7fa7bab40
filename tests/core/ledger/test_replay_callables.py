"""Replay of a check whose function was a Python callable: said plainly, never executed.

A check made with the Python API, `check(lambda x: ..., ...)`, used to be skipped by replay
with "function: syntax error at column 1: invalid syntax", which read as a bug. The record now
keeps the callable's source and its SHA-256 (`function_source`), and replay says that the
function was a Python callable, shows that source, and says why it is not re-run: replay runs
only the expression language, which is parsed and never eval'd. Records made before
`function_source` existed are recognised too.
"""

from __future__ import annotations

import hashlib

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.replay import replay_lines
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.run import run_and_record
from support.ledger import rechain

SKIPPED_AS_CALLABLE = "cannot be re-run here: the function was a Python callable, "


class Tanh(torch.autograd.Function):
    """tanh with its derivative written by hand from the output: 1 - tanh(x)^2."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * (1 - ctx.saved_tensors[0] ** 2)


def cube(x):
    return x**3


def _records(ledger: Ledger, kind: str) -> list[dict]:
    entries = [e for e in ledger.entries() if e["kind"] == kind]
    return [e["data"]["record"] if kind == "observation" else e["data"] for e in entries]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_lambda_checked_through_the_api_records_its_source_and_its_hash(tmp_path):
    """Given a lambda checked through the Python API into a ledger, when the ledger is read,
    then its expectation and its observation both hold the lambda's source line and the
    SHA-256 of that text, and the function is still named by its qualified name."""
    ledger_path = tmp_path / "lab.gradcheck.jsonl"
    result = check(lambda x: x * x, grad=6.0, x=3.0, ledger=str(ledger_path))
    assert result.passed

    ledger = Ledger(ledger_path)
    [expectation], [observation] = _records(ledger, "expectation"), _records(ledger, "observation")
    for record in (expectation, observation):
        assert record["function"].endswith(".<locals>.<lambda>")  # its qualified name, inside this test
        source = record["function_source"]
        assert "check(lambda x: x * x, grad=6.0, x=3.0" in source["text"]
        assert source["sha256"] == _sha256(source["text"])


def test_replay_of_a_lambda_says_it_was_a_python_callable_and_shows_its_source(tmp_path):
    """Given a lambda and a named function checked through the API, when the ledger is
    replayed, then both are skipped as Python callables (not as a syntax error or an unknown
    name), each with why it is not re-run and its recorded source and hash, the reason is
    not repeated as a note, and the replay still passes."""
    ledger_path = tmp_path / "lab.gradcheck.jsonl"
    check(lambda x: x * x, grad=6.0, x=3.0, ledger=str(ledger_path))
    check(cube, grad=27.0, x=3.0, ledger=str(ledger_path))

    result = replay_lines(Ledger(ledger_path).iter_raw_lines())
    assert (result["ok"], result["observations"], result["reproduced"], result["notes"]) == (True, 2, 0, [])
    lam, named = result["skipped"]
    lambda_name = "test_replay_of_a_lambda_says_it_was_a_python_callable_and_shows_its_source.<locals>.<lambda>"
    assert lam["reason"].startswith(SKIPPED_AS_CALLABLE + f"{lambda_name}, which exists only in the kernel that ran it")
    assert named["reason"].startswith(SKIPPED_AS_CALLABLE + "cube, ")
    for item in (lam, named):
        assert "which is parsed, never eval'd: recorded Python is never executed" in item["reason"]
        assert "syntax error" not in item["reason"] and "unknown name" not in item["reason"]
        assert item["source"]["sha256"] == _sha256(item["source"]["text"])
    assert named["source"]["text"] == "def cube(x):\n    return x**3"


def test_a_custom_autograd_function_records_its_class_source(tmp_path):
    """Given a custom torch.autograd.Function checked through the API, when replayed, then the
    record names `Tanh.apply` and its recorded source is the class, backward included."""
    ledger_path = tmp_path / "fn.gradcheck.jsonl"
    x = torch.tensor([0.5, -1.0], dtype=torch.float64)
    assert check(Tanh, grad=1 - torch.tanh(x) ** 2, x=x, ledger=str(ledger_path)).passed

    [skipped] = replay_lines(Ledger(ledger_path).iter_raw_lines())["skipped"]
    assert skipped["reason"].startswith(SKIPPED_AS_CALLABLE + "Tanh.apply, ")
    text = skipped["source"]["text"]
    assert text.startswith("class Tanh(torch.autograd.Function):")
    assert "return grad_output * (1 - ctx.saved_tensors[0] ** 2)" in text


def test_a_record_made_before_function_source_is_still_named_a_python_callable(tmp_path):
    """Given the ledger of a lambda and of a named function as an older version wrote it (no
    `function_source` in any record, the chain intact), when replayed, then each is skipped as a
    Python callable whose record holds no source, and nothing calls it a syntax error."""
    ledger_path = tmp_path / "old.gradcheck.jsonl"
    check(lambda x: x * x, grad=6.0, x=3.0, ledger=str(ledger_path))
    check(cube, grad=27.0, x=3.0, ledger=str(ledger_path))

    def as_before(entry):
        data = entry["data"]
        for record in (data, data.get("record") if isinstance(data, dict) else None):
            if isinstance(record, dict):
                record.pop("function_source", None)

    rechain(ledger_path, as_before)
    assert '"function_source":' not in ledger_path.read_text()

    result = replay_lines(Ledger(ledger_path).iter_raw_lines())
    assert result["ok"] and [s.get("source") for s in result["skipped"]] == [None, None]
    lambda_name = "test_a_record_made_before_function_source_is_still_named_a_python_callable.<locals>.<lambda>"
    for item, name in zip(result["skipped"], (lambda_name, "cube")):
        assert item["reason"] == (
            SKIPPED_AS_CALLABLE + f"{name}, which exists only in the kernel that ran it; this record names it but "
            "holds no source (it predates function_source), and replay runs only the expression language, which is "
            "parsed, never eval'd: recorded Python is never executed"
        )


def test_a_source_edited_after_it_was_recorded_fails_replay(tmp_path):
    """Given a callable's recorded source edited afterwards (its text changed, its recorded
    SHA-256 kept, the chain recomputed), when replayed, then the replay fails and says the text
    no longer hashes to the recorded SHA-256."""
    ledger_path = tmp_path / "edited.gradcheck.jsonl"
    check(cube, grad=27.0, x=3.0, ledger=str(ledger_path))
    original = "def cube(x):\n    return x**3"
    edited = "def cube(x):\n    return x**2"

    def edit(entry):
        if entry["kind"] == "observation":
            entry["data"]["record"]["function_source"]["text"] = edited

    rechain(ledger_path, edit)
    result = replay_lines(Ledger(ledger_path).iter_raw_lines())
    assert not result["ok"] and result["skipped"] == []
    [differs] = result["differs"]
    assert differs["differences"] == [
        f"function_source: the recorded text hashes to {_sha256(edited)}, not to its recorded sha256 "
        f"{_sha256(original)}: the source was edited after it was recorded"
    ]


def test_an_expression_record_given_a_source_is_still_re_run(tmp_path):
    """Given an expression check whose observation was forged (observed gradient 6 -> 7) and
    given a `function_source` so that it would pass for a callable's, when replayed, then it is
    still re-run (an expression always is) and the forged value is caught."""
    ledger_path = tmp_path / "expr.gradcheck.jsonl"
    run_and_record(
        {"id": "square", "function": "x*x", "x": 3.0, "analytical_gradient": 6.0}, Ledger(ledger_path), sweep=False
    )

    def forge(entry):
        if entry["kind"] == "observation":
            entry["data"]["record"].update(
                observed_gradient=7.0, function_source={"text": "lambda x: x*x", "sha256": _sha256("lambda x: x*x")}
            )

    rechain(ledger_path, forge)
    result = replay_lines(Ledger(ledger_path).iter_raw_lines())
    assert result["skipped"] == [] and not result["ok"]
    assert result["differs"][0]["differences"] == [
        "observed_gradient: recorded 7.0, replayed 6.0 (rtol=1e-07, atol=1e-10)"
    ]
