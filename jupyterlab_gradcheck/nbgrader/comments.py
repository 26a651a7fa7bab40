"""`nbgrader autograde`, after SaveAutoGrades: the ledger's flags as nbgrader comments.

nbgrader keeps a comment per solution cell in its gradebook and prints it under the cell in the
feedback (`nbgrader generate_feedback`) and in the formgrader. Each flag that names a check goes
to the solution cell that ran the check (found by ScoreLedger in the attestations the re-run
left in the outputs); the verdict's summary, its errors and the flags of no cell go to the first
solution cell. They are added to nbgrader's own automatic comment, which SaveAutoGrades has just reset,
so autograding again does not repeat them; a grader's manual comment still takes precedence.
"""

from __future__ import annotations

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from ..core.i18n import localize
from .score import VERDICT_KEY


def comments_by_cell(nb, verdict: dict) -> dict[str, list[str]]:
    """{solution cell grade_id: comment lines} for one notebook's verdict."""
    solutions = {
        number: cell.metadata["nbgrader"]["grade_id"]
        for number, cell in enumerate(nb.cells, start=1)
        if cell.metadata.get("nbgrader", {}).get("solution")
    }
    if not solutions:
        return {}
    first = solutions[min(solutions)]
    cell_of_check = {
        check_id: solutions[number] for check_id, number in verdict["cells"].items() if number in solutions
    }
    lines = verdict["lines"]
    flag_texts = {localize(flag["text"], verdict["language"]) for flag in verdict["result"]["flags"]}
    comments: dict[str, list[str]] = {first: [line for line in lines if line not in flag_texts]}
    for flag in verdict["result"]["flags"]:
        where = cell_of_check.get(flag["check_id"], first)
        comments.setdefault(where, []).append(localize(flag["text"], verdict["language"]))
    return comments


class CommentLedgerFlags(NbGraderPreprocessor):
    """Adds the ledger's verdict and flags to the gradebook's comments of the solution cells."""

    def preprocess(self, nb, resources):
        verdict = resources.get(VERDICT_KEY)
        if verdict is None:
            return nb, resources
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            for grade_id, lines in comments_by_cell(nb, verdict).items():
                comment = gradebook.find_comment(grade_id, info["notebook"], info["assignment"], info["student"])
                comment.auto_comment = "\n\n".join(([comment.auto_comment] if comment.auto_comment else []) + lines)
            gradebook.db.commit()
        return nb, resources
