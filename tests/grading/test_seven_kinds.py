"""The seven kinds of student, graded by real nbgrader with the documented set-up alone.

Given a course whose `nbgrader_config.py` calls `configure(c)` and names the class's witness
log with its pinned key (docs/grading.md, "Set-up"), a source notebook with three checks and
their test cells and no ledger cell, and seven students (tests/grading/seven_kinds.py) who
executed the release with nbclient while their kernels reported to a live witness,
when the instructor runs `nbgrader generate_assignment`, `autograde`, `generate_feedback` and
`export`, and `jupyter gradcheck export submitted --format submission-csv`,
then the release carries the ledger cell generate_assignment added, the scores come in the order
honest > fixer >= honest_wrong > widener > deleter and copier, the copier is flagged with the
honest student as its pair, and the feedback shows the fixer's old and new derivation.

One course for the module (about three minutes on two busy cores): every test reads it.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import course_builder as cb
import nbformat
import pytest
import seven_kinds as sk

from jupyterlab_gradcheck.witness.log import public_key_fingerprint, read_public_key_file
from support.witness import Witness

pytestmark = pytest.mark.slow
#: The scores with the default rubric: three 1-point tests, and the ledger cell that
#: generate_assignment adds with as many points as the tests (3).
EXPECTED = {
    "honest": 6.0,  # 3 tests + 3
    "fixer": 5.7,  # 3 tests + 3 x (1 - 0.1): one justified revision, the second try
    "honest_wrong": 5.0,  # 2 tests + 3: the failure kept costs its test only
    "widener": 3.5,  # 2 tests (the widened one counts as failed) + 3 x (1 - 0.5)
    "deleter": 3.0,  # 3 tests + 0: no ledger
    "copier": 3.0,  # 3 tests + 0: the witness saw honest write this ledger
    "all_wrong": 3.0,  # 0 tests + 3: every failure kept, honestly
}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("seven")
    witness = Witness(root / "W.jsonl", students=sk.STUDENTS).start()
    try:
        fingerprint = public_key_fingerprint(read_public_key_file(witness.log))
        (root / "nbgrader_config.py").write_text(sk.course_config(fingerprint))
        source = root / "source" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.ipynb"
        source.parent.mkdir(parents=True)
        nbformat.write(sk.source_notebook(), str(source))
        cb.run("generate_assignment", cb.ASSIGNMENT, cwd=root)
        for student in sk.STUDENTS:
            sk.submit(root, student, witness.url, witness.tokens[student])
    finally:
        witness.kill()
    cb.grade(root)
    return root


def _rows(path: Path) -> dict[str, dict]:
    with open(path, newline="") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def test_generate_assignment_adds_the_ledger_cell(course):
    """Given a source notebook that calls the checker and has no ledger cell, when it is released,
    then the release ends with the locked, autograded ledger cell worth as much as the tests (3)."""
    release = nbformat.read(str(course / "release" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.ipynb"), as_version=4)
    meta = release.cells[-1].metadata["nbgrader"]
    assert (meta["grade_id"], meta["grade"], meta["locked"], meta["points"]) == ("gradcheck_ledger", True, True, 3.0)


def test_scores_come_in_the_order_an_instructor_expects(course):
    """Given the seven students, when nbgrader exports the grades, then each scores as the table
    in docs/grading.md says, so honest > fixer >= honest_wrong > widener > deleter and copier."""
    scores = {student: float(row["score"]) for student, row in _rows(course / "grades.csv").items()}
    assert scores == EXPECTED
    assert scores["honest"] > scores["fixer"] >= scores["honest_wrong"] > scores["widener"]
    assert scores["widener"] > max(scores["deleter"], scores["copier"])


def test_the_copier_is_flagged_with_its_pair(course):
    """Given the copier handed in honest's notebook and ledger, when the ledger CSV is exported,
    then the two name each other in shared_with, and no other student is named."""
    shared = {student: row["shared_with"] for student, row in _rows(course / "ledgers.csv").items()}
    assert shared == {student: "" for student in sk.STUDENTS} | {"honest": "copier", "copier": "honest"}


def test_the_feedback_shows_the_revision_and_the_copy(course):
    """Given the fixer's justified revision and the copier's shared ledger, when the feedback is
    generated, then the fixer's shows the old and the new derivation with the justification, the
    widener's shows the reason given for the widening, and the copier's names the honest student
    and the witness's verdict."""
    fixer = (course / "feedback" / "fixer" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.html").read_text()
    assert "expectation revised from 'x' to '2*x' (ledger seq 3)" in fixer
    assert sk.FIXER_JUSTIFICATION in fixer
    widener = (course / "feedback" / "widener" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.html").read_text()
    assert "justification: check 'square': tolerance atol 1e-10, rtol 1e-07 -" in widener
    assert "atol 0, rtol 0.9 (ledger seq 3): float rounding" in widener
    copier = (course / "feedback" / "copier" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.html").read_text()
    assert "shared_with: honest" in copier
    assert "this ledger was witnessed for honest; it is submitted as copier's" in copier


def test_the_pages_join_runs_as_written(course):
    """Given the course's grades.csv and ledgers.csv, when the join example of docs/grading.md
    runs as written in the course folder, then it joins all seven students' rows, each with its
    score and its ledger columns."""
    code = (
        sk.page_block('rows("grades.csv")')
        + "print(sorted((k[1], v['score'], v['status']) for k, v in joined.items()))"
    )
    completed = subprocess.run([sys.executable, "-c", code], cwd=course, capture_output=True, text=True, timeout=60)
    statuses = {student: "ok" for student in sk.STUDENTS} | {"deleter": "ledger_missing"}
    expected = sorted((student, str(EXPECTED[student]), statuses[student]) for student in sk.STUDENTS)
    assert completed.stdout.strip() == str(expected), completed.stderr
