"""`replay_ok` in the per-submission CSV says what the replay found, and nothing where nothing ran.

Given a class folder where ana handed in a real ledger (one check, run by the ledgered run) and
bob a notebook with no ledger and no checker call, when the folder is collected with the replay
and written as the per-submission CSV, then ana's row says replay_ok true (her observation was
re-run and reproduced) and bob's row leaves it empty: there was nothing to replay, which is not
a success.
"""

from __future__ import annotations

import csv
import io

import class_folder as cf
import nbformat

from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.report.grading import to_submission_csv
from jupyterlab_gradcheck.core.report.submissions import collect
from jupyterlab_gradcheck.core.run import run_and_record


def test_replay_ok_is_empty_where_nothing_was_replayed(tmp_path):
    """Given ana's ledger and bob's checkless notebook, when collected with replay, then
    replay_ok is true for ana and empty for bob, whose status is ledger_missing."""
    ana = tmp_path / "ana" / cf.ASSIGNMENT / cf.LEDGER
    ana.parent.mkdir(parents=True)
    run_and_record(cf.spec(2.0), Ledger(ana))
    bob = tmp_path / "bob" / cf.ASSIGNMENT / "lab.ipynb"
    bob.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("nothing to check")]), str(bob))
    rows = {
        row["student_id"]: (row["replay_ok"], row["status"])
        for row in csv.DictReader(io.StringIO(to_submission_csv(collect([str(tmp_path)], replay=True, jobs=1))))
    }
    assert rows == {"ana": ("true", "ok"), "bob": ("", "ledger_missing")}
