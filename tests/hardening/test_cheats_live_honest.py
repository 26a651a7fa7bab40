"""The honest controls against a live witness: nothing honest is called a cheat.

A real `jupyter gradcheck witness --students S.json` on loopback; each student reports with
their own token. An honest run, a notebook executed twice, and an outage mid-run that comes
back raise no error (the outage is flagged "witnessed late", nothing else). A student who
reports a head in a classmate's name (framing) is refused with 403 and nothing is appended.
"""

from __future__ import annotations

import time

import pytest
from live_witness import OTHER, RIGHT, LiveWitness, errors, flags, grade_row, notebook_of, verify

from jupyterlab_gradcheck.witness import client as witness_client

STUDENTS = ("ann", "bob", "cy", "dee", "mallory")


@pytest.fixture(scope="module")
def witness(tmp_path_factory):
    live = LiveWitness(tmp_path_factory.mktemp("honest-witness"), STUDENTS).start()
    yield live
    live.stop()


def test_an_honest_run_is_witnessed_clean(witness, tmp_path):
    """Given ann's notebook with two checks run with the witness on, when the grader verifies it
    and exports the grade, then verify exits 0, witnessed by ann, every entry received, no flag,
    no error, and the grade is the full share."""
    book = notebook_of(tmp_path, "ann")
    with witness.student("ann"):
        book.run(RIGHT), book.run(OTHER)
    book.save()
    status, report = verify(book.path, witness)
    assert (status, errors(report), flags(report)) == (0, [], {})
    assert (report["witness"]["witnessed"], report["witness"]["student"], report["witness"]["seen"]) == (
        True,
        "ann",
        report["entries"],
    )
    row = grade_row(tmp_path / "submitted" / "ann", witness)
    assert (row["ledger_fraction"], row["witnessed"], row["unwitnessed"], row["witnessed_late"]) == (
        "1.0",
        "true",
        "0",
        "0",
    )


def test_a_notebook_executed_twice_is_witnessed_clean(witness, tmp_path):
    """Given bob's notebook executed twice over (the same two checks, the same ledger), when it
    is verified, then it exits 0 with no error and no flag: re-running is not cheating."""
    book = notebook_of(tmp_path, "bob")
    with witness.student("bob"):
        for _ in range(2):
            book.run(RIGHT), book.run(OTHER)
    book.save()
    status, report = verify(book.path, witness)
    assert (status, errors(report), flags(report), report["entries"]) == (0, [], {}, 8)


def test_an_outage_mid_run_is_flagged_witnessed_late_and_nothing_else(witness, tmp_path):
    """Given cy's first check witnessed, the witness then down for 3 s while cy runs a second
    check, then back (the client's queue delivers the rest in order, with their own times),
    when verified with --max-delay 1 (a short outage stands for a long one), then it exits 0,
    witnessed, with the one flag witnessed_late and no error; its grade keeps the full share.
    With the default 60 s, the same ledger is witnessed on time."""
    book = notebook_of(tmp_path, "cy")
    with witness.student("cy"):
        book.run(RIGHT)
        assert witness_client.client().drain(30)  # seq 1 and 2 on time
        witness.stop()
        book.run(OTHER)
        time.sleep(3)  # the outage: the queue keeps the reports and retries
        witness.start()
    book.save()
    status, report = verify(book.path, witness, "--max-delay", "1")
    late = [f for f in report["witness"]["flags"] if f["flag"] == "witnessed_late"]
    assert (status, errors(report), list(flags(report)), report["witness"]["witnessed"]) == (
        0,
        [],
        ["witnessed_late"],
        True,
    )
    assert late[0]["first_seq"] == 3 and late[0]["largest_delay"] > 1
    row = grade_row(tmp_path / "submitted" / "cy", witness, "--max-delay", "1")
    assert (row["ledger_fraction"], row["witnessed_late"], row["unwitnessed"]) == ("1.0", "1", "0")
    assert verify(book.path, witness)[1]["witness"]["flags"] == []


def test_framing_a_classmate_is_refused_with_403(witness, tmp_path):
    """Given dee's honest ledger, when mallory posts a head in dee's name with her own token
    (seq 34, head fff...), then the witness answers 403 forbidden, appends nothing, and dee's
    submission still verifies clean."""
    book = notebook_of(tmp_path, "dee")
    with witness.student("dee"):
        book.run(RIGHT)
    book.save()
    before = len(witness.receipts())
    ledger_id = verify(book.path, witness)[1]["ledger_id"]
    status, body = witness.post_heads(
        witness.tokens["mallory"],
        {"ledger_id": ledger_id, "notebook": "lab1.ipynb", "user": "dee", "seq": 34, "head": "f" * 64},
    )
    assert (status, body["code"]) == (403, "forbidden")
    assert len(witness.receipts()) == before
    status, report = verify(book.path, witness)
    assert (status, errors(report), flags(report)) == (0, [], {})
