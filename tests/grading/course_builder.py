"""A real nbgrader course in a folder: the instructor's source notebook (three gradient checks
through `check()` and the gradcheck grade cell), and students who fill in the released
notebook and execute it for real with nbclient, as a student's "Restart and run all" does.

Students:
- `honest`: writes the three derivatives correctly; every check passes.
- `widener`: writes d(x*x)/dx = x, sees the check fail, then re-runs it with rtol widened to 0.9
  (with a justification) so that it passes: the failure is kept, the widening is flagged.
- `deleter`: writes the three derivatives correctly, executes, then deletes the ledger before
  submitting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ASSIGNMENT = "ps1"
NOTEBOOK = "ps1"
LEDGER = NOTEBOOK + ".gradcheck.jsonl"
STUDENTS = ("honest", "widener", "deleter")
NBGRADER = Path(sys.executable).with_name("nbgrader")
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points=0) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _check_cell(grade_id: str, answer: str, call: str):
    """A solution cell: the student writes the hand derivative, then the check runs."""
    source = f"### BEGIN SOLUTION\n{answer}\n### END SOLUTION\n{call}"
    return nbformat.v4.new_code_cell(source, metadata=_meta(grade_id, solution=True))


CHECKS = {
    "square": (
        'square_grad = "2*x"  # f(x) = x*x, so f\'(x) = 2x',
        'square = check("x*x", grad=square_grad, x=3.0, id="square", notebook=NOTEBOOK,\n'
        '               origin="f = x*x; by hand 2x", destination="x.grad")\nsquare',
    ),
    "vector_sum": (
        "vector_sum_grad = [1.0, 1.0, 1.0]  # d(v1 + v2 + v3)/dvi = 1",
        'vector_sum = check("sum(v)", grad=vector_sum_grad, v=[1.0, 2.0, 3.0], id="vector_sum",\n'
        '                   notebook=NOTEBOOK, origin="g = sum(v); by hand 1 each", '
        'destination="v.grad")\nvector_sum',
    ),
    "sine": (
        'sine_grad = "cos(x)"  # d sin(x)/dx = cos(x)',
        'sine = check("sin(x)", grad=sine_grad, x=1.0, id="sine", notebook=NOTEBOOK,\n'
        '             origin="h = sin(x); by hand cos(x)", destination="x.grad")\nsine',
    ),
}


def source_notebook(grade_cell) -> nbformat.NotebookNode:
    """The instructor's notebook: setup, three check cells (solutions), and `grade_cell`."""
    setup = nbformat.v4.new_code_cell(
        "from jupyterlab_gradcheck.api import check\n"
        f'NOTEBOOK = "{NOTEBOOK}.ipynb"  # its ledger, {LEDGER}, is written beside it',
        metadata=_meta("setup", locked=True),
    )
    cells = [
        nbformat.v4.new_markdown_cell(
            "# Problem set 1: gradient checks\nWrite each derivative by hand first; the check records it, then runs."
        ),
        setup,
    ]
    cells += [_check_cell(grade_id, answer, call) for grade_id, (answer, call) in CHECKS.items()]
    cells.append(grade_cell)
    document = nbformat.v4.new_notebook(cells=cells)
    document.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return document


#: What each student writes in place of the stub, per solution cell.
ANSWERS = {
    "honest": {grade_id: answer for grade_id, (answer, _call) in CHECKS.items()},
    "deleter": {grade_id: answer for grade_id, (answer, _call) in CHECKS.items()},
    "widener": {
        **{grade_id: answer for grade_id, (answer, _call) in CHECKS.items()},
        # The wrong derivative fails (3 against 6); the same check re-run with rtol 0.9 passes
        # (|3 - 6| / 6 = 0.5 < 0.9), and the stub's own check call below runs it a third time.
        "square": 'square_grad = "x"\n'
        'check("x*x", grad=square_grad, x=3.0, id="square", notebook=NOTEBOOK)\n'
        'check("x*x", grad=square_grad, x=3.0, id="square", notebook=NOTEBOOK,\n'
        '      tolerance={"rtol": 0.9, "atol": 0.0}, justification="float rounding")',
    },
}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in the course folder; raises with its output when it fails."""
    completed = subprocess.run(
        [str(NBGRADER), *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=environment()
    )
    if completed.returncode != 0:
        raise AssertionError(
            f"nbgrader {' '.join(args)} exited {completed.returncode}:\n{completed.stdout}\n{completed.stderr}"
        )
    return completed


def execute(path: Path) -> None:
    """Execute a notebook in its folder with nbclient, as nbconvert --execute does, and save it."""
    document = nbformat.read(str(path), as_version=4)
    NotebookClient(
        document, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    nbformat.write(document, str(path))


def student_notebook(release: Path, student: str) -> nbformat.NotebookNode:
    """The released notebook with `student`'s answers in place of each stub."""
    document = nbformat.read(str(release), as_version=4)
    for cell in document.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in ANSWERS[student]:
            assert STUB in cell.source, f"the release's cell {grade_id} lacks the solution stub"
            cell.source = cell.source.replace(STUB, ANSWERS[student][grade_id])
    return document


def submit(course: Path, student: str) -> Path:
    """Fill in, execute and submit `student`'s notebook into `submitted/<student>/ps1/`."""
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    notebook = folder / f"{NOTEBOOK}.ipynb"
    nbformat.write(student_notebook(course / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", student), str(notebook))
    execute(notebook)
    (folder / "timestamp.txt").write_text("2026-12-03 10:00:00.000000 UTC\n")
    if student == "deleter":
        (folder / LEDGER).unlink()
    return folder


def environment() -> dict:
    """The environment the nbgrader commands run in: English, no witness of this machine, and
    this Python's scripts first on PATH (nbgrader runs `alembic` by name to open its gradebook)."""
    env = dict(os.environ, LANGUAGE="en", PATH=os.pathsep.join([str(NBGRADER.parent), os.environ.get("PATH", "")]))
    for key in ("GRADCHECK_WITNESS_URL", "GRADCHECK_WITNESS_TOKEN", "JPY_SESSION_NAME"):
        env.pop(key, None)
    return env


def grade(root: Path) -> None:
    """What the instructor runs once the class has submitted: `nbgrader autograde` (its log kept
    in autograde.log), `generate_feedback`, `export`, then our submission CSV (`ledgers.csv`)."""
    autograde = run("autograde", ASSIGNMENT, cwd=root)
    (root / "autograde.log").write_text(autograde.stdout + autograde.stderr)
    run("generate_feedback", ASSIGNMENT, cwd=root)
    run("export", cwd=root)
    export_ledgers(root)


def export_ledgers(root: Path) -> None:
    """`jupyter gradcheck export submitted --format submission-csv -o ledgers.csv` in the course."""
    completed = subprocess.run(
        [str(NBGRADER.with_name("jupyter-gradcheck")), "export", "submitted", "--format", "submission-csv"]
        + ["-o", "ledgers.csv"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env=environment(),
    )
    assert completed.returncode == 0, completed.stderr
