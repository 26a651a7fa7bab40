"""Cheats that keep heads from the witness, against a live witness: each is flagged unwitnessed.

The witness counted only the heads it happened to be sent. A student pointed the kernel at a
dead port, at a witness of their own, or popped the variable mid-run; rewrote the ledger
offline (the failed check deleted, the chain recomputed, the outputs cleared, the metadata
rebound); then ran one more check with the real witness. Now every entry must reach the witness
from genesis on: the rest are unwitnessed, and the grade is that of a ledger that does not verify.
The one limit: failing runs made entirely outside the witnessed server (another machine, a
terminal) followed by a clean witnessed run leave nothing any ledger could see, and the test
says exactly what the grader sees then.
"""

from __future__ import annotations

import os
import time

import nbformat
import pytest
from live_server import free_port
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
)
from live_witness import verify as verify_with

from jupyterlab_gradcheck.api import check_record
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.witness import client as witness_client
from support.course import Notebook, rebind, rewrite

STUDENTS = ("dora", "eve", "finn", "gus", "hana", "ivo")


@pytest.fixture(scope="module")
def witness(tmp_path_factory):
    live = LiveWitness(tmp_path_factory.mktemp("unseen-witness"), STUDENTS).start()
    yield live
    live.stop()


def _failed_ids(ledger) -> set[str]:
    return {
        e["check_id"] for e in Ledger(ledger).entries() if e["kind"] == "observation" and e["data"]["passed"] is False
    }


def _rewrite_offline(book) -> None:
    """The cheater's offline edits: the failed check deleted, the chain recomputed, the outputs
    cleared and the binding rewritten to the forged head."""
    failed = _failed_ids(ledger_of(book))
    assert failed, "the run had a failure to hide"
    rewrite(ledger_of(book), keep=lambda e: e["check_id"] not in failed)
    book.clear_outputs()
    rebind(book.path)
    book.document = nbformat.read(str(book.path), as_version=4)  # the cheater's notebook, reopened


@pytest.mark.parametrize("where", ["dead port", "own witness"])
def test_checks_reported_elsewhere_then_rewritten_and_reconnected_are_witnessed_late(witness, tmp_path, where):
    """Given a student whose kernel reported to a dead port (or to a witness of their own), who
    rewrote the ledger offline without its failed check and then, a while later, ran one check
    with the real witness (whose client sends every earlier entry the witness lacks, as after an
    outage), when the grader verifies with --max-delay 1 (the 2 s here stand for the hours a
    rewrite takes), then every entry from seq 1 but the last check is flagged witnessed_late,
    with its delay: the grader sees that the witness learnt of them only after the fact."""
    student = "dora" if where == "dead port" else "eve"
    own = LiveWitness(tmp_path / "own", (student,)).start() if where == "own witness" else None
    book = notebook_of(tmp_path, student)
    try:
        url = own.url if own else f"http://127.0.0.1:{free_port()}"
        with witness.student(student, url, token=own.tokens[student] if own else None, drain=own is not None):
            book.run(RIGHT), book.run(CUBE_WRONG), book.run(OTHER)
    finally:
        if own:
            own.stop()
    _rewrite_offline(book)
    time.sleep(2)
    with witness.student(student):
        book.run(CUBE_RIGHT)  # one check with the real witness
    book.save()
    status, report = verify_with(book.path, witness, "--max-delay", "1")
    [late] = [f for f in report["witness"]["flags"] if f["flag"] == "witnessed_late"]
    assert (status, errors(report), list(flags(report))) == (0, [], ["witnessed_late"]), report
    assert (late["first_seq"], late["largest_delay"] > 2) == (1, True)
    assert late["count"] == report["last_seq"] - 2  # every entry before the last check's two
    row = grade_row(tmp_path / "submitted" / student, witness, "--max-delay", "1")
    assert (row["witnessed_late"], row["unwitnessed"]) == ("1", "0")


def test_the_witness_variable_popped_mid_run_leaves_the_rest_unwitnessed(witness, tmp_path):
    """Given finn's first check witnessed, then GRADCHECK_WITNESS_URL popped in a cell, a failing
    check, the ledger rewritten offline without it, and one check with the witness again, when
    verified, then the entries after the pop are unwitnessed (from seq 3): exit 1, grade 0."""
    book = notebook_of(tmp_path, "finn")
    with witness.student("finn"):
        book.run(RIGHT)
        assert witness_client.client().drain(30)
        os.environ.pop(witness_client.URL_VARIABLE)
        book.run(CUBE_WRONG), book.run(OTHER)
    _rewrite_offline(book)
    with witness.student("finn"):
        book.run(CUBE_RIGHT)
    book.save()
    status, report = verify_with(book.path, witness)
    unwitnessed = next(f for f in report["witness"]["flags"] if f["flag"] == "unwitnessed")
    assert (status, errors(report), unwitnessed["first_seq"], unwitnessed["count"]) == (1, [], 3, 2)
    assert grade_row(tmp_path / "submitted" / "finn", witness)["ledger_fraction"] == "0.0"


def test_a_ledger_the_witness_never_heard_of_is_unwitnessed_never_clean(witness, tmp_path):
    """Given gus's ledger made with no witness at all (passing checks only), when verified
    against the witness, then every entry is unwitnessed: exit 1 (never a warning and exit 0),
    and the grade is 0, not 1."""
    book = notebook_of(tmp_path, "gus")
    with witness.student("gus", None):
        book.run(RIGHT), book.run(OTHER)
    book.save()
    status, report = verify_with(book.path, witness)
    assert (status, report["witness"]["seen"], flags(report)) == (1, 0, {"unwitnessed": 4})
    assert grade_row(tmp_path / "submitted" / "gus", witness)["ledger_fraction"] == "0.0"


def test_ledger_false_runs_under_nbconvert_are_flagged_for_the_student(witness, tmp_path):
    """Given hana's two trial runs with ledger=False outside any notebook (nbconvert, reported as
    "(no notebook)") and then her witnessed lab1, when verified, then the private runs are
    flagged with their count (2, both in no notebook) and cost the witness_gap share."""
    book = notebook_of(tmp_path, "hana")
    with witness.student("hana"):
        for _ in range(2):
            assert not check_record(CUBE_WRONG, ledger=False).passed
        book.run(CUBE_RIGHT)
    book.save()
    status, report = verify_with(book.path, witness)
    [private] = [f for f in report["witness"]["flags"] if f["flag"] == "private_runs_witnessed"]
    assert (status, private["count"], private["without_notebook"], list(flags(report))) == (
        0,
        2,
        2,
        ["private_runs_witnessed"],
    )
    row = grade_row(tmp_path / "submitted" / "hana", witness)
    assert (row["witness_gap"], row["ledger_fraction"]) == ("1", "0.5")


def test_failing_runs_outside_the_witnessed_server_then_a_clean_run_is_the_stated_limit(witness, tmp_path):
    """Given ivo's failing check run entirely outside the witnessed server (another machine: its
    own ledger, no witness, never submitted), then the corrected check run cleanly with the
    witness, when the grader verifies and grades lab1, then the grader sees exactly a clean,
    witnessed ledger: exit 0, no error, no flag, full grade. No ledger can see work done where
    nothing records it (docs/ledger.md, the threat model's limit)."""
    elsewhere = Notebook(tmp_path / "laptop" / "lab1.ipynb")
    with witness.student("ivo", None):
        assert not elsewhere.run(CUBE_WRONG).passed
    book = notebook_of(tmp_path, "ivo")
    with witness.student("ivo"):
        book.run(CUBE_RIGHT)
    book.save()
    status, report = verify_with(book.path, witness)
    assert (status, errors(report), flags(report), report["witness"]["witnessed"]) == (0, [], {}, True)
    row = grade_row(tmp_path / "submitted" / "ivo", witness)
    assert (row["ledger_fraction"], row["failures_kept"], row["witness_gap"], row["unwitnessed"]) == (
        "1.0",
        "0",
        "0",
        "0",
    )
