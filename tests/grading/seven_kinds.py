"""The seven kinds of student an instructor meets, in a real nbgrader course with a witness.

The source notebook has three checks, each in a solution cell followed by an autograder test
cell (`assert square.passed`, 1 point), and no ledger cell: `configure(c)` adds it at
`generate_assignment`. Each student executes the release with nbclient, their kernel reporting
to a live witness with their own token; the course's config names the witness log and pins its
key (docs/grading.md, "Set-up").

- `honest`: three correct derivations.
- `fixer`: writes d(x*x)/dx = x, sees it fail, writes 2*x and re-runs with a justification.
- `honest_wrong`: leaves d(x*x)/dx = x, failing.
- `widener`: writes x, sees it fail, re-runs with rtol 0.9 ("float rounding").
- `deleter`: correct, then deletes the ledger before submitting.
- `copier`: hands in honest's notebook and ledger as their own.
- `all_wrong`: three wrong derivations, kept.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import course_builder as cb
import nbformat
from nbclient import NotebookClient

from jupyterlab_gradcheck.witness import client as witness_client

GRADING_PAGE = Path(__file__).resolve().parents[2] / "docs" / "grading.md"

STUDENTS = ("honest", "fixer", "honest_wrong", "widener", "deleter", "copier", "all_wrong")
RIGHT = {grade_id: answer for grade_id, (answer, _call) in cb.CHECKS.items()}
WRONG_SQUARE = 'square_grad = "x"\ncheck("x*x", grad=square_grad, x=3.0, id="square", notebook=NOTEBOOK)\n'
#: The fixer's justification for the revised derivation, carried by the check call that revises it.
FIXER_JUSTIFICATION = "the product rule gives x + x, not x"
ANSWERS = {
    "honest": RIGHT,
    "deleter": RIGHT,
    "copier": RIGHT,
    "honest_wrong": {**RIGHT, "square": 'square_grad = "x"'},
    "fixer": {
        **RIGHT,
        "square": WRONG_SQUARE + 'square_grad = "2*x"\n'
        'check("x*x", grad=square_grad, x=3.0, id="square", notebook=NOTEBOOK,\n'
        f'      justification="{FIXER_JUSTIFICATION}")',
    },
    "widener": {
        **RIGHT,
        "square": WRONG_SQUARE + 'check("x*x", grad=square_grad, x=3.0, id="square", notebook=NOTEBOOK,\n'
        '      tolerance={"rtol": 0.9, "atol": 0.0}, justification="float rounding")',
    },
    "all_wrong": {
        "square": 'square_grad = "x"',
        "vector_sum": "vector_sum_grad = [0.0, 1.0, 2.0]",
        "sine": 'sine_grad = "-cos(x)"',
    },
}


def test_cell(grade_id: str):
    """An autograder test cell worth 1 point: the check passed."""
    return nbformat.v4.new_code_cell(
        f"assert {grade_id}.passed",
        metadata={
            "nbgrader": {
                "grade": True,
                "grade_id": f"test_{grade_id}",
                "locked": True,
                "points": 1,
                "schema_version": 3,
                "solution": False,
                "task": False,
            }
        },
    )


def source_notebook() -> nbformat.NotebookNode:
    """The instructor's notebook: setup, three check cells each with its test cell, no ledger cell."""
    document = cb.source_notebook(nbformat.v4.new_markdown_cell("The end."))
    cells = []
    for cell in document.cells:
        cells.append(cell)
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in cb.CHECKS:
            cells.append(test_cell(grade_id))
    document.cells = cells
    return document


def student_notebook(release: Path, student: str) -> nbformat.NotebookNode:
    """The released notebook with `student`'s answers in place of each stub."""
    document = nbformat.read(str(release), as_version=4)
    for cell in document.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in ANSWERS[student]:
            assert cb.STUB in cell.source, f"the release's cell {grade_id} lacks the solution stub"
            cell.source = cell.source.replace(cb.STUB, ANSWERS[student][grade_id])
    return document


def execute(path: Path) -> None:
    """Execute a notebook in its folder with nbclient, every cell even after a failing test (a
    student's "Run all" with a wrong answer), and save it."""
    document = nbformat.read(str(path), as_version=4)
    NotebookClient(
        document,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    nbformat.write(document, str(path))


def submit(course: Path, student: str, url: str, token: str) -> Path:
    """Fill in, execute (the kernel reporting to the witness at `url` with `token`) and submit
    `student`'s notebook; the copier hands in the honest student's files instead."""
    folder = course / "submitted" / student / cb.ASSIGNMENT
    folder.mkdir(parents=True)
    notebook = folder / f"{cb.NOTEBOOK}.ipynb"
    if student == "copier":
        for name in (notebook.name, cb.LEDGER):
            shutil.copyfile(course / "submitted" / "honest" / cb.ASSIGNMENT / name, folder / name)
    else:
        nbformat.write(student_notebook(course / "release" / cb.ASSIGNMENT / notebook.name, student), str(notebook))
        saved = {key: os.environ.get(key) for key in (witness_client.URL_VARIABLE, witness_client.TOKEN_VARIABLE)}
        os.environ.update({witness_client.URL_VARIABLE: url, witness_client.TOKEN_VARIABLE: token})
        try:
            execute(notebook)
        finally:
            for key, value in saved.items():
                os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    (folder / "timestamp.txt").write_text("2026-12-03 10:00:00.000000 UTC\n")
    if student == "deleter":
        (folder / cb.LEDGER).unlink()
    return folder


def page_block(marker: str) -> str:
    """The first ```python block of docs/grading.md that contains `marker`, as written."""
    blocks = re.findall(r"```python\n(.*?)```", GRADING_PAGE.read_text(encoding="utf-8"), flags=re.S)
    return next(block for block in blocks if marker in block)


def course_config(fingerprint: str) -> str:
    """The course's nbgrader_config.py: the page's set-up block, then its witness block with the
    course's fingerprint in place of the page's `sha256:...`."""
    witness = page_block("c.VerifySubmittedLedger.witness_key").replace('"sha256:..."', repr(fingerprint))
    return page_block("configure(c)") + witness
