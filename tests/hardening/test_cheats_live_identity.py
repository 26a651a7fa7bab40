"""Cheats on whose ledger it is, which ledger, and whose key, against a live witness.

- A classmate's notebook and ledger handed in as one's own: the receipts name the classmate.
- The same after running one's own (failing) notebook: both are shown.
- "The witness prefers the newest ledger": run, fail, fix, delete the ledger, run again; every
  other ledger of the notebook the witness saw from the student is reported with its failures,
  whether or not the rerun was witnessed.
- A witness log rewritten and re-signed with a key of the forger's own: the key pinned at the
  start of the course (`--witness-key`, a fingerprint) refuses it.
"""

from __future__ import annotations

import json
import shutil

import pytest
from live_witness import (
    CUBE_RIGHT,
    CUBE_WRONG,
    OTHER,
    RIGHT,
    LiveWitness,
    errors,
    flags,
    grade_row,
    ledger_of,
    notebook_of,
    verify_log,
)
from live_witness import verify as verify_with

from jupyterlab_gradcheck.witness.log import WitnessLog

STUDENTS = ("ana", "carol", "hal", "ines", "kai")


@pytest.fixture(scope="module")
def witness(tmp_path_factory):
    live = LiveWitness(tmp_path_factory.mktemp("identity-witness"), STUDENTS).start()
    yield live
    live.stop()


def _work(witness, book, student, *records):
    with witness.student(student):
        for record in records:
            book.run(record)
    book.save()


def test_a_classmates_ledger_handed_in_as_ones_own_names_both(witness, tmp_path):
    """Given ana's witnessed lab1 copied into carol's submission folder, when the grader verifies
    it (the student from nbgrader's layout, or --student), then the error names both: "this
    ledger was witnessed for ana; it is submitted as carol's", and nothing of it counts as carol's."""
    book = notebook_of(tmp_path, "ana")
    _work(witness, book, "ana", RIGHT, OTHER)
    copied = tmp_path / "submitted" / "carol" / "lab1"
    shutil.copytree(book.path.parent, copied)
    status, report = verify_with(copied / "lab1.ipynb", witness)
    assert (status, errors(report)) == (1, ["this ledger was witnessed for ana; it is submitted as carol's"])
    assert (report["witness"]["witnessed"], report["witness"]["seen"]) == (False, 0)
    loose = tmp_path / "handed-in" / "lab1.ipynb"
    shutil.copytree(book.path.parent, loose.parent)
    assert errors(verify_with(loose, witness, "--student", "carol")[1]) == [
        "this ledger was witnessed for ana; it is submitted as carol's"
    ]
    assert grade_row(tmp_path / "submitted" / "carol", witness)["ledger_fraction"] == "0.0"


def test_a_copier_who_ran_their_own_notebook_is_shown_both(witness, tmp_path):
    """Given kai's own witnessed lab1 with a failure, then ana's ledger and notebook copied over
    it, when verified, then the error names ana and kai, and kai's own ledger is reported with
    its failure."""
    ana = notebook_of(tmp_path / "ana-side", "ana")
    _work(witness, ana, "ana", RIGHT)
    book = notebook_of(tmp_path, "kai")
    with witness.student("kai"):
        assert not book.run(CUBE_WRONG).passed
    book.save()
    for name in ("lab1.ipynb", "lab1.gradcheck.jsonl"):
        shutil.copyfile(ana.path.with_name(name), book.path.with_name(name))
    status, report = verify_with(book.path, witness)
    assert "this ledger was witnessed for ana; it is submitted as kai's" in errors(report)
    [other] = [f for f in report["witness"]["flags"] if f["flag"] == "other_ledgers_witnessed"]
    assert (status, [(o["entries"], o["failures"]) for o in other["ledgers"]]) == (1, [(2, 1)])


@pytest.mark.parametrize("rerun_witnessed", [True, False])
def test_a_fresh_ledger_after_a_failed_one_reports_the_failed_one(witness, tmp_path, rerun_witnessed):
    """Given a student who ran lab1 with a failure (witnessed), fixed the derivation, deleted the
    ledger and ran lab1 again (with the witness on, or off), when the fresh ledger is verified,
    then the earlier ledger is reported with its 2 entries and 1 failure; the witnessed rerun
    verifies and loses the witness_gap share (0.5); the unwitnessed one is also a fresh ledger
    (an error) with every entry unwitnessed."""
    student = "hal" if rerun_witnessed else "ines"
    book = notebook_of(tmp_path, student)
    with witness.student(student):
        assert not book.run(CUBE_WRONG).passed
    book.save()
    ledger_of(book).unlink()
    fresh = notebook_of(tmp_path, student)
    if rerun_witnessed:
        _work(witness, fresh, student, CUBE_RIGHT)
    else:
        with witness.student(student, None):
            fresh.run(CUBE_RIGHT)
        fresh.save()
    status, report = verify_with(fresh.path, witness)
    [other] = [f for f in report["witness"]["flags"] if f["flag"] == "other_ledgers_witnessed"]
    assert [(o["entries"], o["failures"]) for o in other["ledgers"]] == [(2, 1)]
    row = grade_row(tmp_path / "submitted" / student, witness)
    if rerun_witnessed:
        assert (status, errors(report), report["witness"]["witnessed"]) == (0, [], True)
        assert (row["ledger_fraction"], row["witness_gap"]) == ("0.5", "1")
    else:
        assert status == 1 and "a fresh or swapped ledger" in errors(report)[0]
        assert (flags(report)["unwitnessed"], row["ledger_fraction"]) == (2, "0.0")


def test_a_log_re_signed_with_another_key_fails_against_the_pinned_fingerprint(witness, tmp_path):
    """Given the fingerprint recorded when the course started (from GET public-key), and a copy
    of the witness's log in which a forger rewrote the heads of a ledger and re-signed every
    receipt with a key of their own (replacing the .pub beside it: the witness's private key is
    readable by its own user alone), when the grader verifies against that log file with
    --witness-key FINGERPRINT, then verify exits 1 saying the log was re-signed; without
    --witness-key it refuses the log file (exit 2) and never reads W.jsonl.key."""
    book = notebook_of(tmp_path, "ana")
    _work(witness, book, "ana", RIGHT)
    (tmp_path / "copy").mkdir()
    forged = WitnessLog(tmp_path / "copy" / "w.jsonl")
    for receipt in witness.receipts():
        forged.append({k: v for k, v in receipt.items() if k in ("ledger_id", "notebook", "user", "seq", "head")})
    status, report = verify_with(book.path, witness, "--witness-key", witness.fingerprint)
    assert status == 0, report
    done = verify_log(book.path, forged.path, "--witness-key", witness.fingerprint)
    assert done.returncode == 1, done.stderr
    reasons = [e["reason"] for e in json.loads(done.stdout)["reports"][0]["errors"]]
    assert any("re-signed with another key" in r for r in reasons), reasons
    refused = verify_log(book.path, forged.path)
    assert refused.returncode == 2 and "--witness-key" in refused.stderr
