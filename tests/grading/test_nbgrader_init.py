"""`jupyter gradcheck nbgrader init COURSE_DIR`: a course ready to grade from one command.

Given an empty course folder, when the instructor runs `jupyter gradcheck nbgrader init` and
puts a notebook that calls the checker in `source/ps1/`, then `nbgrader generate_assignment`
reads the written config (its course id, the gradcheck preprocessors) and releases the notebook
with the ledger cell added; a second init refuses to overwrite the file (exit 2, file unchanged).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import course_builder as cb
import nbformat
import pytest
import seven_kinds as sk

pytestmark = pytest.mark.slow
SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")


def init(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), "nbgrader", "init", str(folder), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=cb.environment(),
    )


def test_init_writes_a_config_nbgrader_runs(tmp_path):
    """Given an empty folder, when init writes the config and generate_assignment runs on a
    notebook with three checks and three 1-point tests, then the release ends with the 3-point
    ledger cell and the gradebook knows the course id given."""
    course = tmp_path / "grad101"
    done = init(course, "--course-id", "grad101")
    assert done.returncode == 0, done.stderr
    source = course / "source" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.ipynb"
    source.parent.mkdir(parents=True)
    nbformat.write(sk.source_notebook(), str(source))
    cb.run("generate_assignment", cb.ASSIGNMENT, cwd=course)
    release = nbformat.read(str(course / "release" / cb.ASSIGNMENT / source.name), as_version=4)
    meta = release.cells[-1].metadata["nbgrader"]
    assert (meta["grade_id"], meta["points"], "c.CourseDirectory.course_id = 'grad101'") == (
        "gradcheck_ledger",
        3.0,
        (course / "nbgrader_config.py").read_text().splitlines()[3],
    )


def test_init_refuses_to_overwrite(tmp_path):
    """Given a course folder with an nbgrader_config.py, when init runs again without --force,
    then it exits 2 naming the file, and the file keeps its bytes."""
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    done = init(tmp_path)
    assert (done.returncode, "exists; pass --force" in done.stderr) == (2, True)
    assert (tmp_path / "nbgrader_config.py").read_text() == "c = get_config()\n"


def test_an_autograde_that_cannot_score_the_ledger_says_so(tmp_path):
    """Given a course from init whose ledger cell was given another grade_id than ScoreLedger
    looks for (a misconfiguration), when one honest student is autograded and given feedback,
    then nbgrader's log shows an error that the ledger was not scored, and so does the student's
    feedback: never silent."""
    course = tmp_path / "grad101"
    assert init(course).returncode == 0
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write('c.AddLedgerCell.grade_id = "ledger_points"\n')
    source = course / "source" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.ipynb"
    source.parent.mkdir(parents=True)
    nbformat.write(sk.source_notebook(), str(source))
    cb.run("generate_assignment", cb.ASSIGNMENT, cwd=course)
    folder = course / "submitted" / "honest" / cb.ASSIGNMENT
    folder.mkdir(parents=True)
    notebook = folder / source.name
    nbformat.write(sk.student_notebook(course / "release" / cb.ASSIGNMENT / source.name, "honest"), str(notebook))
    sk.execute(notebook)
    autograde = cb.run("autograde", cb.ASSIGNMENT, cwd=course)
    cb.run("generate_feedback", cb.ASSIGNMENT, cwd=course)
    said = "gradcheck: the ledger was not scored: ps1 has no grade cell 'gradcheck_ledger'"
    feedback = (course / "feedback" / "honest" / cb.ASSIGNMENT / f"{cb.NOTEBOOK}.html").read_text()
    logged = [line for line in (autograde.stdout + autograde.stderr).splitlines() if said in line]
    assert [("ERROR" in line) for line in logged] == [True]
    assert said in feedback
