"""`nbgrader autograde`, just after Execute: the verdict, in the notebook and in the grade cell.

It holds what the re-run recorded against the student's ledger (`core.report.submissions`),
checks that the student's ledger is still the bytes that were submitted, and turns the
submission's verify report and those findings into a verdict with the rubric
(`core.report.grading`). The verdict goes into `metadata.gradcheck_autograde` and into the
outputs of the grade cell (nbgrader metadata `grade_id`, default `gradcheck_ledger`): an HTML and
text verdict, then the score as the cell's result, which nbgrader's SaveAutoGrades reads as the
cell's partial credit. The re-run's attestation outputs are removed: they name the re-run's
ledger, which is discarded, so the autograded notebook goes with the student's ledger again.
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Unicode

from ..core.i18n import Message, checked, localize
from ..core.ledger.binding import calls_the_checker, notebook_attestations
from ..core.ledger.store import Ledger
from ..core.report.grading import WIDENED, Rubric, score_line, score_of, verdict, verdict_lines
from ..core.report.submissions import compare_rerun, load
from .submitted import AUTOGRADE_KEY, GRADE_CELL_ID, RERUN_KEY, course_folder, drop_attestations, file_sha256, json_safe

# -------------------- comments
# `nbgrader autograde`, after SaveAutoGrades: the ledger's flags as nbgrader comments.
#
# nbgrader keeps a comment per solution cell in its gradebook and prints it under the cell in the
# feedback (`nbgrader generate_feedback`) and in the formgrader. Each flag that names a check goes
# to the solution cell that ran the check (found by ScoreLedger in the attestations the re-run
# left in the outputs); the verdict's summary, its errors and the flags of no cell go to the first
# solution cell. They are added to nbgrader's own automatic comment, which SaveAutoGrades has just reset,
# so autograding again does not repeat them; a grader's manual comment still takes precedence.


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


# -------------------- grade cell
# The gradcheck grade cell: a locked, autograded code cell that autograde scores with the
# ledger's verdict (`score.ScoreLedger`); `ledger_cell.AddLedgerCell` adds it at release.

#: The source of the grade cell: run by the student it scores nothing; autograde replaces its output.
GRADE_CELL_SOURCE = (
    "# The ledger's integrity. nbgrader's autograder verifies the ledger you submit and\n"
    "# replaces this cell's output with its verdict and score (jupyterlab_gradcheck).\n"
    "# Run here, it scores nothing.\n"
    "0.0"
)


def grade_cell(points: float = 2, grade_id: str = GRADE_CELL_ID):
    """The gradcheck grade cell for a source notebook: a locked, autograded code cell."""
    return nbformat.v4.new_code_cell(
        GRADE_CELL_SOURCE,
        metadata={
            "nbgrader": {
                "grade": True,
                "grade_id": grade_id,
                "locked": True,
                "points": points,
                "schema_version": 3,
                "solution": False,
                "task": False,
            }
        },
    )


# -------------------- ledger cell
# `nbgrader generate_assignment`: every notebook that calls the checker gets the ledger's grade cell.
#
# Without a grade cell for the ledger, autograde has nowhere to put the ledger's verdict and it
# never reaches the grade. So this preprocessor, which `configure(c)` places before nbgrader locks,
# checksums and saves the cells, appends `config.grade_cell` to every source notebook that calls
# the checker (`core.ledger.binding.calls_the_checker`) and has no cell with that grade_id.
# Its points: `points`, or by default as many as the notebook's other autograded cells together
# (at least 1), so that hiding the ledger costs as much as the tests could earn.


def other_points(nb, grade_id: str) -> float:
    """The points of the notebook's autograded cells other than `grade_id`'s."""
    return sum(
        float(cell.metadata["nbgrader"].get("points") or 0)
        for cell in nb.cells
        if cell.metadata.get("nbgrader", {}).get("grade") and cell.metadata["nbgrader"].get("grade_id") != grade_id
    )


class AddLedgerCell(NbGraderPreprocessor):
    """Appends the locked, autograded ledger cell to a notebook that calls the checker and has none."""

    grade_id = Unicode(
        GRADE_CELL_ID, help="The grade_id of the ledger's grade cell (ScoreLedger.grade_id must name the same)."
    ).tag(config=True)
    points = Float(
        0.0,
        help="Points of the ledger cell that generate_assignment adds. 0 (the default): as many points as the "
        "notebook's other autograded cells together, at least 1, so hiding a failure costs more than the failure.",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        if not calls_the_checker(nb):
            return nb, resources
        if any(cell.metadata.get("nbgrader", {}).get("grade_id") == self.grade_id for cell in nb.cells):
            return nb, resources
        points = self.points if self.points > 0 else max(1.0, other_points(nb, self.grade_id))
        nb.cells.append(grade_cell(points=points, grade_id=self.grade_id))
        self.log.info("gradcheck: added the ledger's grade cell %r (%g points)", self.grade_id, points)
        return nb, resources


# -------------------- score

#: The resources key that carries the verdict to CommentLedgerFlags in the same pass.
VERDICT_KEY = "gradcheck_verdict"
_DEFAULTS = Rubric()


def _share(name: str, text: str) -> Float:
    return Float(getattr(_DEFAULTS, name), help=text).tag(config=True)


class ScoreLedger(NbGraderPreprocessor):
    """Writes the ledger's verdict into the notebook and scores the gradcheck grade cell."""

    grade_id = Unicode(
        GRADE_CELL_ID, help="The nbgrader grade_id of the grade cell that receives the ledger's verdict and score."
    ).tag(config=True)
    language = Unicode("en", help="Language of the verdict and the comments: 'en' or 'es'.").tag(config=True)
    widened_after_failure = _share(
        "widened_after_failure",
        "Share of the grade cell's points lost per check whose tolerance was widened right after it failed.",
    )
    expectation_revised_after_observation = _share(
        "expectation_revised_after_observation",
        "Share of the points lost per check whose expectation was revised after it had run.",
    )
    witness_gap = _share(
        "witness_gap", "Share of the points lost per witness flag (entries the witness never saw, private runs)."
    )
    rerun_mismatch = _share(
        "rerun_mismatch",
        "Share of the points lost per disagreement between the autograder's re-run and the submitted ledger.",
    )
    unverified = _share(
        "unverified",
        "Share of the points for a ledger that does not verify (broken chain or "
        "binding, attested entries missing, an observation that does not replay, ledger "
        "deleted).",
    )
    no_checks = _share("no_checks", "Share of the points for a notebook that recorded no checks at all.")
    revision_justified = _share(
        "revision_justified",
        "Share of the points lost per check whose expectation was revised, with a justification, after it ran "
        "(the cost of a second try; an unjustified revision costs expectation_revised_after_observation).",
    )
    shared_with = _share(
        "shared_with",
        "Share of the points lost per other student's submission that shares this ledger (unless the witness "
        "saw this student write it).",
    )
    fail_tests_of_widened = Bool(
        True,
        help="Score as failed the autograder test cells that follow a check whose tolerance was widened right "
        "after it failed (up to the next solution cell): `assert check.passed` does not win the point back.",
    ).tag(config=True)

    def rubric(self) -> Rubric:
        return Rubric(**{name: getattr(self, name) for name in Rubric.__dataclass_fields__})

    def preprocess(self, nb, resources):
        rerun = resources.pop(RERUN_KEY, None)
        if rerun is not None:
            resources["metadata"]["path"] = rerun["folder"]
        state = nb.metadata.get(AUTOGRADE_KEY)
        if state is None:
            return nb, self.unscored(
                nb,
                resources,
                Message(
                    "gradcheck: the ledger was not scored: no verify report in the notebook; put "
                    "VerifySubmittedLedger first in c.Autograde.sanitize_preprocessors (configure(c) does)"
                ),
            )
        info = resources["nbgrader"]
        submitted = course_folder(self, "submitted", info["student"], info["assignment"])
        autograded = course_folder(self, "autograded", info["student"], info["assignment"])
        submission = load("notebook", submitted / f"{info['notebook']}.ipynb", state["report"])
        submission["shared_with"] = state.get("shared_with") or []
        if file_sha256(autograded / state["ledger"]) != state["ledger_sha256"]:
            submission["verify"]["errors"].append(
                {
                    "line": None,
                    "scope": "autograde",
                    "reason": Message(
                        "{name} in autograded/ changed during autograding; put back as submitted", name=state["ledger"]
                    ),
                }
            )
            if state["ledger_sha256"] is not None:
                shutil.copyfile(submitted / state["ledger"], autograded / state["ledger"])
        findings = []
        if rerun is not None:
            again = Path(rerun["scratch"]) / "run" / state["ledger"]
            findings = compare_rerun(submission["checks"], Ledger(again).checks() if again.is_file() else {})
            shutil.rmtree(rerun["scratch"], ignore_errors=True)
        result = verdict(submission, self.rubric(), findings)
        language = checked(self.language)
        lines = [localize(line, language) for line in verdict_lines(result)]
        cell = next((c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == self.grade_id), None)
        score = None
        if cell is None:
            missing = Message(
                "gradcheck: the ledger was not scored: {notebook} has no grade cell {grade_id!r}; its verdict is "
                "in the feedback and the metadata only",
                notebook=info["notebook"],
                grade_id=self.grade_id,
            )
            self.log.error("%s", missing)
            lines.insert(0, localize(missing, language))
        else:
            points = float(cell.metadata["nbgrader"].get("points", 0))
            score = score_of(result, points)
            lines.append(localize(score_line(score, points), language))
            cell.outputs = _outputs(lines, score, cell.get("execution_count"))
        nb.metadata[AUTOGRADE_KEY] = {
            **state,
            "verdict": json_safe(result),
            "rerun": json_safe(findings),
            "score": score,
        }
        cells = {item["check_id"]: item["cell"] for item in reversed(notebook_attestations(nb))}  # first cell wins
        if self.fail_tests_of_widened:
            fail_widened_tests(nb, cells, [f["check_id"] for f in result["flags"] if f["flag"] == WIDENED], language)
        resources[VERDICT_KEY] = {"result": result, "lines": lines, "language": language, "cells": cells}
        drop_attestations(nb)  # they name the re-run's discarded ledger: autograded/ keeps the student's
        return nb, resources

    def unscored(self, nb, resources, reason: Message):
        """Say loudly, in the log and in the feedback, that this notebook's ledger was not scored."""
        self.log.error("%s", reason)
        language = checked(self.language)
        result = {"flags": [], "status": "unscored"}
        resources[VERDICT_KEY] = {
            "result": result,
            "lines": [localize(reason, language)],
            "language": language,
            "cells": {},
        }
        return resources


def fail_widened_tests(nb, cells: dict, widened: list, language: str) -> None:
    """Give an error output to every test cell (autograded, not a solution) that follows the cell
    of a widened check, up to the next solution cell: nbgrader scores it 0."""
    for check_id in widened:
        start = cells.get(check_id)
        if start is None:
            continue
        for cell in nb.cells[start:]:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution"):
                break
            if meta.get("grade") and cell.cell_type == "code" and meta.get("grade_id") != GRADE_CELL_ID:
                text = localize(
                    Message(
                        "gradcheck: check {check_id!r} was widened right after it failed: this test counts as failed",
                        check_id=check_id,
                    ),
                    language,
                )
                cell.outputs = [
                    nbformat.v4.new_output("error", ename="WidenedAfterFailure", evalue=text, traceback=[text])
                ]


def _outputs(lines: list[str], score: float, execution_count) -> list:
    """The verdict (HTML and text), then the score as the cell's result: nbgrader reads a
    result between 0 and the cell's points as its partial credit."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines[1:])
    markup = f'<div class="gradcheck-verdict"><p><b>{html.escape(lines[0])}</b></p><ul>{items}</ul></div>'
    return [
        nbformat.v4.new_output("display_data", data={"text/html": markup, "text/plain": "\n".join(lines)}),
        nbformat.v4.new_output("execute_result", data={"text/plain": repr(score)}, execution_count=execution_count),
    ]
