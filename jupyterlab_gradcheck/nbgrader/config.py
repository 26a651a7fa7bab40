"""The configuration that turns the gradcheck preprocessors on, and the grade cell they score.

In the course's `nbgrader_config.py`:

    from jupyterlab_gradcheck.nbgrader import configure
    c = get_config()
    configure(c)

`configure` puts each preprocessor at its place in nbgrader's default lists (docs/grading.md
lists the resulting lines), among them `AddLedgerCell`, which gives every notebook that calls the
checker the ledger's grade cell, and names every ledger of `source/` and every blob beside it in
`c.Autograde.exclude_overwriting`, so autograde never copies the instructor's ledger or blobs over
a student's. Call it after setting `c.CourseDirectory.root`, if you set it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.ledger.store import LEDGER_SUFFIX
from .submitted import STORE_SUFFIX

PACKAGE = "jupyterlab_gradcheck.nbgrader"


def ledgers_in_source(course_root: str | os.PathLike) -> dict[str, list[str]]:
    """{assignment: [file names]} for `c.Autograde.exclude_overwriting`: the ledger of every
    source notebook (whether or not the instructor has run it yet), every ledger in source/, and
    every blob in the blob folders beside them (`<name>.gradcheck.blobs/<sha256>.safetensors`).

    nbgrader 0.9 compares these names with the source's files one by one (paths relative to the
    assignment, no globs, no folders), so each blob is named: a source blob copied over the
    student's store would replace a blob the student changed with the genuine one, hiding it."""
    found: dict[str, list[str]] = {}
    for folder in sorted(p for p in (Path(course_root) / "source").glob("*") if p.is_dir()):
        names = {p.stem + LEDGER_SUFFIX for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts}
        names |= {str(p.relative_to(folder)) for p in folder.rglob("*" + LEDGER_SUFFIX)}
        names |= {str(p.relative_to(folder)) for p in folder.rglob(f"*{STORE_SUFFIX}/*") if p.is_file()}
        if names:
            found[folder.name] = sorted(names)
    return found


def _with(defaults: list, inserts: dict) -> list:
    """`defaults` with each class of `inserts` placed before (`"before"`) or after its anchor."""
    result = list(defaults)
    for (where, anchor), added in inserts.items():
        index = next(i for i, item in enumerate(result) if getattr(item, "__name__", item) == anchor)
        result.insert(index if where == "before" else index + 1, added)
    return result


def configure(c, course_root: str | os.PathLike | None = None) -> None:
    """Enable the gradcheck preprocessors in nbgrader's config object `c` (see the module)."""
    from nbgrader.converters import Autograde, GenerateAssignment

    from .score import AddLedgerCell, CommentLedgerFlags, ScoreLedger
    from .submitted import IsolateRerun, StripReleaseLedger, VerifySubmittedLedger

    def default(cls, name):
        return list(cls.class_traits()[name].make_dynamic_default())

    c.GenerateAssignment.preprocessors = _with(
        default(GenerateAssignment, "preprocessors"), {("before", "LockCells"): AddLedgerCell}
    ) + [StripReleaseLedger]
    c.Autograde.sanitize_preprocessors = [VerifySubmittedLedger] + default(Autograde, "sanitize_preprocessors")
    c.Autograde.autograde_preprocessors = _with(
        default(Autograde, "autograde_preprocessors"),
        {
            ("before", "Execute"): IsolateRerun,
            ("after", "Execute"): ScoreLedger,
            ("after", "SaveAutoGrades"): CommentLedgerFlags,
        },
    )
    root = course_root if course_root is not None else (c.CourseDirectory.get("root") or os.getcwd())
    c.Autograde.exclude_overwriting = ledgers_in_source(root)
