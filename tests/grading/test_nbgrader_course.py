"""nbgrader end to end: a real course graded by real nbgrader with the gradcheck preprocessors.

Given a course in a temporary folder whose `nbgrader_config.py` calls
`jupyterlab_gradcheck.nbgrader.configure(c)`, an instructor who has run the source notebook
(so `source/ps1/` holds the instructor's ledger), and three students who filled in the release
and executed it with nbclient (honest; hid a failure by widening a tolerance; deleted the
ledger before submitting),
when the instructor runs `nbgrader generate_assignment`, `autograde`, `generate_feedback` and
`export`, and `jupyter gradcheck export submitted --format submission-csv`,
then the release holds no ledger, the gradebook scores the ledger cell 2, 1 and 0 of 2, the
feedback shows the flags as comments, the two CSVs join on (assignment, student_id), and every
student's own ledger is in `autograded/` byte for byte.

One course is built for the module (about a minute and a half on two cores): every test reads it.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import course_builder as cb
import nbformat
import pytest

from jupyterlab_gradcheck.nbgrader import grade_cell

pytestmark = pytest.mark.slow
CONFIG = """c = get_config()
c.CourseDirectory.course_id = "grad101"
from jupyterlab_gradcheck.nbgrader import configure
configure(c)
"""
POINTS = 2


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("course")
    (root / "nbgrader_config.py").write_text(CONFIG)
    source = root / "source" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.ipynb"
    source.parent.mkdir(parents=True)
    nbformat.write(cb.source_notebook(grade_cell(points=POINTS)), str(source))
    cb.execute(source)  # the instructor tries the solutions: source/ps1 now holds the instructor's ledger
    assert (source.parent / cb.LEDGER).is_file()
    cb.run("generate_assignment", cb.ASSIGNMENT, cwd=root)
    for student in cb.STUDENTS:
        cb.submit(root, student)
    # What each student handed in, before nbgrader touches anything.
    (root / "handed_in").mkdir()
    for student in cb.STUDENTS:
        ledger = root / "submitted" / student / cb.ASSIGNMENT / cb.LEDGER
        if ledger.exists():
            (root / "handed_in" / student).write_bytes(ledger.read_bytes())
    cb.grade(root)
    return root


def _rows(path: Path) -> dict[str, dict]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(path.read_text()))}


def test_the_release_keeps_the_cells_and_drops_the_instructors_ledger(course):
    """Given the instructor's ledger in source/, when generate_assignment runs, then the release
    has no ledger and no binding, and still has the three check cells and the ledger's grade cell."""
    release = course / "release" / cb.ASSIGNMENT
    assert sorted(p.name for p in release.iterdir()) == [f"{cb.NOTEBOOK}.ipynb"]
    document = nbformat.read(str(release / f"{cb.NOTEBOOK}.ipynb"), as_version=4)
    assert "gradcheck" not in document.metadata
    grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in document.cells if "nbgrader" in c.metadata]
    assert grade_ids == ["setup", "square", "vector_sum", "sine", "gradcheck_ledger"]
    assert all("check(" in c.source for c in document.cells if c.metadata.get("nbgrader", {}).get("solution"))


def test_the_gradebook_scores_the_ledger(course):
    """Given the three submissions, then nbgrader's own export gives the honest student 2 of 2,
    the widener 1 of 2 (the default rubric takes half the points for a widening after a failure)
    and the deleter 0 of 2."""
    grades = _rows(course / "grades.csv")
    assert {s: (float(r["score"]), float(r["max_score"])) for s, r in grades.items()} == {
        "honest": (2.0, 2.0),
        "widener": (1.0, 2.0),
        "deleter": (0.0, 2.0),
    }


def test_each_students_own_ledger_is_intact_in_autograded(course):
    """Given autograde copied the source's files and re-executed every notebook, then the honest
    and the widening students' ledgers in autograded/ are the bytes they handed in, and the
    deleter has none (the instructor's was not copied in, and the re-run wrote elsewhere)."""
    for student in ("honest", "widener"):
        kept = (course / "autograded" / student / cb.ASSIGNMENT / cb.LEDGER).read_bytes()
        assert kept == (course / "handed_in" / student).read_bytes(), student
        assert kept == (course / "submitted" / student / cb.ASSIGNMENT / cb.LEDGER).read_bytes(), student
    assert not (course / "autograded" / "deleter" / cb.ASSIGNMENT / cb.LEDGER).exists()
    # configure() named the ledger in exclude_overwriting: nbgrader never copied the source's
    # ledger, so the preprocessor's safety net had nothing to put back.
    log = (course / "autograde.log").read_text()
    assert "Overwriting files with master versions" in log
    copied = [line for line in log.splitlines() if "Copying" in line and f"{cb.LEDGER} ->" in line]
    assert len(copied) == 2 and all("/submitted/" in line.split(" -> ")[0] for line in copied), copied
    assert "put back as submitted" not in log


def test_the_autograded_folders_verify_as_submitted(course):
    """Given autograde re-executed each notebook into a scratch ledger, then no autograded
    notebook attests that discarded ledger: the honest and the widening students' autograded
    folders verify against their own ledgers, and the deleter's does not (no ledger)."""
    from jupyterlab_gradcheck.core.ledger.binding import notebook_attestations
    from jupyterlab_gradcheck.core.ledger.verify import verify_path

    for student in cb.STUDENTS:
        folder = course / "autograded" / student / cb.ASSIGNMENT
        assert notebook_attestations(nbformat.read(str(folder / f"{cb.NOTEBOOK}.ipynb"), as_version=4)) == []
        assert verify_path(folder)["ok"] is (student != "deleter"), student


def test_the_autograded_notebook_holds_the_verdict(course):
    """Given autograde ran, then each autograded notebook's grade cell shows the verdict and its
    score, and the metadata keeps the verdict: the honest ledger verifies with no flag and no
    failure; the deleter's ledger does not verify, because it was deleted."""
    verdicts = {}
    for student in cb.STUDENTS:
        document = nbformat.read(
            str(course / "autograded" / student / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.ipynb"), as_version=4
        )
        cell = next(c for c in document.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "gradcheck_ledger")
        assert cell.outputs[-1]["output_type"] == "execute_result"
        verdicts[student] = (
            document.metadata["gradcheck_autograde"]["verdict"],
            cell.outputs[0]["data"]["text/plain"],
            float(cell.outputs[-1]["data"]["text/plain"]),
        )
    honest, text, score = verdicts["honest"]
    assert (honest["verified"], honest["flags"], honest["failures_kept"], honest["checks"], score) == (
        True,
        [],
        0,
        3,
        2.0,
    )
    assert "gradcheck: the ledger verifies: checks 3, runs 3, failures kept 0" in text
    widener, text, score = verdicts["widener"]
    assert [(f["flag"], f["check_id"]) for f in widener["flags"]] == [("widened_after_failure", "square")]
    assert (widener["verified"], widener["failures_kept"], score) == (True, 1, 1.0)
    deleter, text, score = verdicts["deleter"]
    assert (deleter["verified"], deleter["status"], score) == (False, "ledger_missing", 0.0)
    assert "the ledger was deleted" in text


def _comments(html_text: str) -> list[str]:
    """The text of each nbgrader comment box in a feedback page."""
    return [
        re.sub(r"<[^>]+>", "", block) for block in re.findall(r"<b>Comments:</b>(.*?)</div>", html_text, flags=re.S)
    ]


def test_the_feedback_shows_the_flags_as_comments(course):
    """Given generate_feedback ran, then the widener's feedback has a comment under the cell of
    check 'square' naming widened_after_failure, the deleter's a comment saying the ledger was
    deleted, and the honest student's comment only says the ledger verifies."""
    pages = {s: (course / "feedback" / s / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.html").read_text() for s in cb.STUDENTS}
    widener = _comments(pages["widener"])
    assert any(
        "widened_after_failure: check &#39;square&#39;" in c or "widened_after_failure: check 'square'" in c
        for c in widener
    ), widener
    deleter = _comments(pages["deleter"])
    assert any("the ledger was deleted" in c for c in deleter), deleter
    honest = _comments(pages["honest"])
    assert len(honest) == 1 and "the ledger verifies: checks 3" in honest[0], honest
    assert not any(flag in pages["honest"] for flag in ("widened_after_failure", "replay_mismatch", "rerun_mismatch"))


def test_the_submission_csv_joins_nbgraders_export(course):
    """Given nbgrader's grades.csv and our per-submission CSV, when they are joined on
    (assignment, student_id) with no renaming, then every student has one row in each, and the
    ledger's share of the points is what the gradebook scored."""
    grades, ledgers = _rows(course / "grades.csv"), _rows(course / "ledgers.csv")
    assert set(grades) == set(ledgers) == set(cb.STUDENTS)
    joined = {s: {**grades[s], **ledgers[s]} for s in grades if grades[s]["assignment"] == ledgers[s]["assignment"]}
    assert set(joined) == set(cb.STUDENTS)
    assert {s: float(r["ledger_fraction"]) * POINTS for s, r in joined.items()} == {
        s: float(r["score"]) for s, r in joined.items()
    }
    assert (joined["widener"]["widened_after_failure"], joined["widener"]["failures_kept"]) == ("1", "1")
    assert (joined["deleter"]["status"], joined["deleter"]["verified"]) == ("ledger_missing", "false")
    assert (joined["honest"]["status"], joined["honest"]["verified"], joined["honest"]["checks"]) == ("ok", "true", "3")


def test_the_rubric_is_set_by_nbgrader_config(course, tmp_path):
    """Given a copy of the graded course, when the widener is autograded again with the rubric's
    widening penalty raised to the whole cell (`--ScoreLedger.widened_after_failure=1.0`, as a
    config line would set it), then nbgrader's export gives the widener 0 of 2 instead of 1."""
    import shutil

    copy = tmp_path / "course"
    shutil.copytree(course, copy)
    cb.run(
        "autograde",
        cb.ASSIGNMENT,
        "--force",
        "--student",
        "widener",
        "--ScoreLedger.widened_after_failure=1.0",
        cwd=copy,
    )
    cb.run("export", cwd=copy)
    grades = _rows(copy / "grades.csv")
    assert (float(grades["widener"]["score"]), float(grades["honest"]["score"])) == (0.0, 2.0)
