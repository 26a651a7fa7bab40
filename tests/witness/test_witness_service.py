"""The witness as a real service on loopback, with real `jupyter gradcheck` processes reporting to it."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from jupyterlab_gradcheck.core.ledger.binding import update_binding
from jupyterlab_gradcheck.core.ledger.store import Ledger, now_utc
from jupyterlab_gradcheck.core.run import run_and_record
from jupyterlab_gradcheck.witness.log import read_log
from support.witness import JUPYTER, TOKEN, Witness, call

SQUARE = {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6}
CUBE = {"id": "cube", "function": "x*x*x", "x": 2, "analytical_gradient": 12}


def _student_env(witness: Witness) -> dict:
    """Ana's environment standalone: the witness's URL and her own token."""
    return {
        **os.environ,
        "GRADCHECK_WITNESS_URL": witness.url,
        "GRADCHECK_WITNESS_TOKEN": witness.tokens["ana"],
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
    when verified with --witness, then it exits 0 and the witness saw every entry's head, as ana's;
    when the student then rewrites the ledger from scratch (passing checks only) and rebinds the
    notebook, plain verify still exits 0, but verify --witness (by URL, or by log file with the
    key's fingerprint) flags the fresh ledger as unwitnessed."""
    env = _student_env(witness)
    assert _run(SQUARE, course, env).returncode == 0
    assert _run(CUBE, course, env).returncode == 0
    receipts = read_log(witness.log)
    assert [(r["user"], r["notebook"], r["seq"]) for r in receipts] == [("ana", "lab1.ipynb", s) for s in (1, 2, 3, 4)]
    done = _verify(course, "--witness", witness.url)
    assert done.returncode == 0, done.stdout + done.stderr

    (course / "lab1.gradcheck.jsonl").unlink()
    fresh = Ledger.for_notebook(course / "lab1.ipynb")
    run_and_record(SQUARE, fresh, sweep=False)  # no witness configured here: the student is offline
    update_binding(course / "lab1.ipynb", fresh)
    assert _verify(course).returncode == 0
    fingerprint = call(witness.url + "/public-key")[1]["fingerprint"]
    for source in ([witness.url], [str(witness.log), "--witness-key", fingerprint]):
        done = _verify(course, "--witness", *source)
        assert "unwitnessed" in done.stdout, done.stdout + done.stderr  # the fresh ledger: never witnessed


def test_entries_of_a_run_that_exited_during_an_outage_reach_the_witness_with_the_next_run(witness, course):
    """Given a live witness that saw ana's first CLI check, when it is killed, a second check runs
    (its process exits with its reports unsent) and the witness comes back, then the third run
    first sends what the witness lacks of the ledger: the log then holds every entry of ana's
    ledger exactly once, seq 1..N in order, with the entries' own times, those written during the
    outage received after the witness was back."""
    env = _student_env(witness)
    assert _run(SQUARE, course, env).returncode == 0
    witness.kill()
    started = time.monotonic()
    assert _run(CUBE, course, env).returncode == 0
    assert time.monotonic() - started < 60  # a generous bound for a loaded machine; never the retry loop
    outage = Ledger(course / "lab1.gradcheck.jsonl").head()["entries"]
    back = now_utc()
    witness.start()
    assert _run(SQUARE, course, env).returncode == 0
    entries = [e for e in Ledger(course / "lab1.gradcheck.jsonl").entries() if e["seq"] >= 1]
    receipts = read_log(witness.log)
    assert [(r["seq"], r["head"], r["entry_time"]) for r in receipts] == [
        (e["seq"], e["hash"], e["time"]) for e in entries
    ]
    assert {r["user"] for r in receipts} == {"ana"}
    late = [r for r in receipts if 2 < r["seq"] <= outage]
    assert late and all(r["time"] >= back > r["entry_time"] for r in late)


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
        assert json.loads(refused.value.read())["message"].startswith("a student's witness token")
    assert read_log(witness.log) == []
