"""Stories of the in-flight journal: what a server that starts notes for checks a dead one left.

The journal's first line for a check is written before the check's expectation reaches the
ledger, so a server killed between the two writes still leaves a trace the next one can read.
"""

import json
import os
import subprocess
import sys

from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from jupyterlab_gradcheck.core.run import LedgeredRun
from jupyterlab_gradcheck.server.service import INTERRUPTED_EVENT, InFlightJournal, journal_folder

RECORD = {"id": "cube", "function": "x*x*x", "x": 2.0, "analytical_gradient": 12.0}


def _dead_pid() -> int:
    """A pid that was alive a moment ago and is not now."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _journal_of_dead_server(runtime, root, lines) -> None:
    """Write the journal a server that has died would have left."""
    probe = InFlightJournal(runtime, root)
    path = journal_folder(runtime) / f"{probe.prefix}-{_dead_pid()}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _interrupted_notes(ledger_path) -> list[dict]:
    entries = [json.loads(line) for line in ledger_path.read_text().splitlines()]
    return [e for e in entries if e["kind"] == "note" and e["data"].get("event") == INTERRUPTED_EVENT]


def test_a_server_killed_before_the_seq_line_still_has_its_check_noted(tmp_path):
    """Given a dead server's journal that says a check was starting on a ledger of 0 bytes, and
    that ledger holding the check's expectation with no outcome (the kill came after the ledger
    write and before the journal's seq line), when a new server's journal recovers, then it notes
    that expectation as interrupted, once, and verify then still names it."""
    root, runtime = tmp_path / "root", tmp_path / "runtime"
    root.mkdir()
    ledger_path = root / "lab.gradcheck.jsonl"
    _journal_of_dead_server(
        runtime, root, [{"op": "start", "token": "t1", "ledger": str(ledger_path), "check_id": "cube", "size": 0}]
    )
    LedgeredRun.declare(Ledger(ledger_path, bind=False), parse_spec(RECORD))

    noted = InFlightJournal(runtime, root).recover()

    assert [(n["check_id"], n["data"]["expectation_seq"]) for n in noted] == [("cube", 1)]
    assert len(_interrupted_notes(ledger_path)) == 1
    assert verify_ledger_file(ledger_path, with_notebook=False)["interrupted"][0]["seq"] == 1
    assert list(journal_folder(runtime).glob("*.jsonl")) == []  # the dead server's journal was read once


def test_an_expectation_older_than_the_journal_line_is_not_taken_for_the_started_check(tmp_path):
    """Given a ledger whose check was declared earlier and never run (its expectation predates the
    dead server's journal line, which recorded the ledger's size after it), when the journal
    recovers, then nothing is noted: the dead server never wrote its own expectation."""
    root, runtime = tmp_path / "root", tmp_path / "runtime"
    root.mkdir()
    ledger_path = root / "lab.gradcheck.jsonl"
    LedgeredRun.declare(Ledger(ledger_path, bind=False), parse_spec(RECORD))
    size = os.stat(ledger_path).st_size
    _journal_of_dead_server(
        runtime, root, [{"op": "start", "token": "t1", "ledger": str(ledger_path), "check_id": "cube", "size": size}]
    )

    assert InFlightJournal(runtime, root).recover() == []
    assert _interrupted_notes(ledger_path) == []


def test_a_check_with_its_seq_and_its_end_written_is_not_noted(tmp_path):
    """Given a dead server's journal where one check has start, seq and end lines and another has
    start and seq only, when the journal recovers, then only the second one's expectation is noted."""
    root, runtime = tmp_path / "root", tmp_path / "runtime"
    root.mkdir()
    ledger_path = root / "lab.gradcheck.jsonl"
    ledger = Ledger(ledger_path, bind=False)
    first = LedgeredRun.declare(ledger, parse_spec(RECORD))
    first.observed({**first.spec_dict, "passed": True})
    second = LedgeredRun.declare(ledger, parse_spec({**RECORD, "id": "cube2"}))
    _journal_of_dead_server(
        runtime,
        root,
        [
            {"op": "start", "token": "a", "ledger": str(ledger_path), "check_id": "cube", "size": 0},
            {"op": "seq", "token": "a", "seq": first.expectation["seq"]},
            {"op": "end", "token": "a"},
            {"op": "start", "token": "b", "ledger": str(ledger_path), "check_id": "cube2", "size": 0},
            {"op": "seq", "token": "b", "seq": second.expectation["seq"]},
        ],
    )

    noted = InFlightJournal(runtime, root).recover()

    assert [(n["check_id"], n["data"]["expectation_seq"]) for n in noted] == [("cube2", second.expectation["seq"])]
