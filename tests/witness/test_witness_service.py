"""The witness as a real service on loopback, with real `jupyter gradcheck` processes reporting to it."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from jupyterlab_gradcheck.core.ledger.binding import update_binding
from jupyterlab_gradcheck.core.ledger.ledgered_run import run_and_record
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.witness_log import read_log
from support.witness import JUPYTER, TOKEN, Witness

SQUARE = {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6}
CUBE = {"id": "cube", "function": "x*x*x", "x": 2, "analytical_gradient": 12}


@pytest.fixture
def witness(tmp_path):
    running = Witness(tmp_path / "witness" / "w.jsonl")
    running.log.parent.mkdir()
    yield running.start()
    if running.process.poll() is None:
        running.kill()


def _student_env(witness: Witness) -> dict:
    return {
        **os.environ,
        "GRADCHECK_WITNESS_URL": witness.url,
        "GRADCHECK_WITNESS_TOKEN": TOKEN,
        "JUPYTERHUB_USER": "ana",
    }


def _run(record: dict, folder: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(JUPYTER), "gradcheck", "run", "-", "--notebook", "lab1.ipynb"],
        cwd=folder,
        env=env,
        input=json.dumps(record),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _verify(folder: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(JUPYTER), "gradcheck", "verify", "lab1.ipynb", *args],
        cwd=folder,
        env={**os.environ, "GRADCHECK_WITNESS_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def course(tmp_path):
    folder = tmp_path / "ana"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(), str(folder / "lab1.ipynb"))
    return folder


def test_a_rewrite_from_scratch_with_a_rebound_notebook_is_caught_by_the_witness(witness, course):
    """Given a live witness and two checks run by the CLI with the witness configured,
    when verified with --witness, then it exits 0 and the witness saw both heads; when the student
    then rewrites the ledger from scratch (passing checks only) and rebinds the notebook, plain
    verify still exits 0, but verify --witness (by URL or by log file) exits 1 naming the head the
    witness saw and the ledger lacks."""
    env = _student_env(witness)
    assert _run(SQUARE, course, env).returncode == 0
    assert _run(CUBE, course, env).returncode == 0
    receipts = read_log(witness.log)
    assert [(r["user"], r["notebook"], r["seq"]) for r in receipts] == [("ana", "lab1.ipynb", s) for s in (1, 2, 3, 4)]
    done = _verify(course, "--witness", witness.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "witness: saw this ledger (4 heads)" in done.stdout

    (course / "lab1.gradcheck.jsonl").unlink()
    fresh = Ledger.for_notebook(course / "lab1.ipynb")
    run_and_record(SQUARE, fresh, sweep=False)  # no witness configured here: the student is offline
    update_binding(course / "lab1.ipynb", fresh)
    assert _verify(course).returncode == 0
    for source in (witness.url, str(witness.log)):
        done = _verify(course, "--witness", source)
        assert done.returncode == 1, done.stdout
        assert f"it saw {receipts[0]['ledger_id'][:12]} up to seq 4 (witnessed {receipts[-1]['time']})" in done.stdout
        assert "a fresh or swapped ledger" in done.stdout


def test_a_witness_that_is_down_loses_no_check_and_catches_up(witness, course):
    """Given a live witness that saw one check, when it is killed and a check runs, then the
    check completes (exit 0) and the ledger notes the pending report; when the witness is back,
    the next check's head reaches it, and verify --witness exits 0: the heads made while it was
    down are covered by the newest one (the chain binds them), never an error."""
    env = _student_env(witness)
    assert _run(SQUARE, course, env).returncode == 0
    witness.kill()
    started = time.monotonic()
    done = _run(CUBE, course, env)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60  # a generous bound for a loaded machine; never the retry loop
    entries = Ledger(course / "lab1.gradcheck.jsonl").entries()
    assert any(e["kind"] == "note" and e["data"].get("event") == "witness_pending" for e in entries)
    witness.start()
    assert _run(SQUARE, course, env).returncode == 0
    heads = [r["seq"] for r in read_log(witness.log)]
    last = Ledger(course / "lab1.gradcheck.jsonl").head()["entries"]
    assert heads[:2] == [1, 2] and heads[-1] == last
    done = _verify(course, "--witness", witness.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"witness: saw this ledger ({len(heads)} heads)" in done.stdout
    assert "witness flag" not in done.stdout  # the newest head covers those made while it was down


def test_a_report_without_the_token_is_refused_and_changes_nothing(witness):
    """Given a live witness, when a head is posted without a token or with a wrong one, then it
    answers 403 with a one-line message and its log stays empty."""
    report = {"ledger_id": "L", "notebook": "lab1.ipynb", "user": "ana", "seq": 1, "head": "a" * 64}
    for headers in ({}, {"Authorization": "token wrong"}):
        request = urllib.request.Request(
            witness.url + "/heads",
            data=json.dumps(report).encode(),
            method="POST",
            headers={"Content-Type": "application/json", **headers},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        assert json.loads(refused.value.read())["message"].startswith("a witness token")
    assert read_log(witness.log) == []
