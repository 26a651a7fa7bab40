"""`nbgrader autograde`: the other students' submissions that share this one's ledger.

Autograde sees one student at a time, so copying (a classmate's notebook and ledger handed in
as one's own) is found here by reading every other student's submission of the same assignment
and notebook in `submitted/` (without verifying them: only their entries and attestations) and
holding them against this one (`core.ledger.copies`).
"""

from __future__ import annotations

import glob
from pathlib import Path

from nbgrader.coursedir import CourseDirectory

from ..core.ledger.copies import shared_pairs
from ..core.report.submissions import load


def _light_report(path: Path) -> dict:
    """The fields `submissions.load` reads, for a submission that is only compared, not verified."""
    ledger = path.with_name(path.stem + ".gradcheck.jsonl")
    return {"ok": True, "errors": [], "chain_ok": None, "binding_ok": None, "ledger": str(ledger), "path": str(path)}


def class_shared(preprocessor, info: dict, report: dict) -> list[dict]:
    """`{"student", "notebook", "path", "how"}` for each other student's submission of
    `info["assignment"]` whose `info["notebook"]` shares a ledger with this student's (`report`)."""
    coursedir = CourseDirectory(config=preprocessor.config)
    pattern = coursedir.format_path(coursedir.submitted_directory, "*", info["assignment"])
    own = Path(str(report["path"]))
    mine = load("notebook", own, report)
    mine.update(student=info["student"], assignment=info["assignment"])
    others = []
    for folder in sorted(Path(found) for found in glob.glob(pattern)):
        student = folder.parent.name
        notebook = folder / f"{info['notebook']}.ipynb"
        if student == info["student"] or not notebook.is_file():
            continue
        other = load("notebook", notebook, _light_report(notebook))
        other.update(student=student, assignment=info["assignment"])
        others.append(other)
    submissions = [mine, *others]
    return [
        {
            "student": submissions[pair["b"]]["student"],
            "notebook": submissions[pair["b"]]["notebook"],
            "path": submissions[pair["b"]]["path"],
            "how": pair["how"],
        }
        for pair in shared_pairs(submissions)
        if pair["a"] == 0
    ]
