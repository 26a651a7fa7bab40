"""The safety net under `nbgrader autograde`: the student's ledger in autograded/ is theirs.

Given a course whose config does not name the ledger in `c.Autograde.exclude_overwriting`,
nbgrader copies the source's ledger over each submission; `keep_students_ledgers` puts the
student's bytes back, removes a copy where the student had no ledger, leaves a ledger nbgrader
did not touch alone, and says in the log what it did.
"""

from __future__ import annotations

import logging

from jupyterlab_gradcheck.nbgrader.submitted import keep_students_ledgers

LEDGER = "ps1.gradcheck.jsonl"


def _folders(tmp_path, student_bytes: bytes | None, autograded_bytes: bytes | None):
    submitted, autograded = tmp_path / "submitted", tmp_path / "autograded"
    submitted.mkdir()
    autograded.mkdir()
    if student_bytes is not None:
        (submitted / LEDGER).write_bytes(student_bytes)
    if autograded_bytes is not None:
        (autograded / LEDGER).write_bytes(autograded_bytes)
    return submitted, autograded


def test_an_overwritten_ledger_is_put_back(tmp_path, caplog):
    """Given nbgrader copied the instructor's ledger over the student's, then the student's
    bytes are back in autograded/, and the log names the ledger and the option that avoids it."""
    submitted, autograded = _folders(tmp_path, b'{"student": 1}\n', b'{"instructor": 1}\n')
    with caplog.at_level(logging.WARNING):
        fixed = keep_students_ledgers(submitted, autograded, logging.getLogger("autograde"))
    assert fixed == [LEDGER]
    assert (autograded / LEDGER).read_bytes() == b'{"student": 1}\n'
    assert LEDGER in caplog.text and "exclude_overwriting" in caplog.text


def test_a_ledger_copied_in_where_the_student_had_none_is_removed(tmp_path):
    """Given a student who deleted their ledger, and nbgrader copied the instructor's in, then
    autograded/ has no ledger, as the student handed in."""
    submitted, autograded = _folders(tmp_path, None, b'{"instructor": 1}\n')
    assert keep_students_ledgers(submitted, autograded, logging.getLogger("autograde")) == [LEDGER]
    assert not (autograded / LEDGER).exists()


def test_an_untouched_ledger_is_left_alone(tmp_path):
    """Given autograded/ already holds the student's bytes, then nothing is rewritten."""
    submitted, autograded = _folders(tmp_path, b'{"student": 1}\n', b'{"student": 1}\n')
    before = (autograded / LEDGER).stat().st_mtime_ns
    assert keep_students_ledgers(submitted, autograded, logging.getLogger("autograde")) == []
    assert (autograded / LEDGER).stat().st_mtime_ns == before
