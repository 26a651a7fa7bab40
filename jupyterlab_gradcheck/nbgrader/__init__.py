"""Grading with nbgrader: the ledger verified, scored and commented inside `nbgrader autograde`.

Preprocessors, each one concept, enabled together by `configure(c)` in `nbgrader_config.py`
(docs/grading.md):

- `release.StripReleaseLedger` (generate_assignment): the release keeps the gradcheck cells but
  no ledger and no binding of the instructor's;
- `submitted.VerifySubmittedLedger` (autograde, first, before outputs are cleared): verifies the
  submission as the student handed it in (chain, binding, attestations, replay) and keeps the
  student's ledger in `autograded/` byte for byte;
- `rerun.IsolateRerun` (just before Execute): the re-execution writes its own ledger, elsewhere;
- `score.ScoreLedger` (just after Execute): holds the re-run against the student's ledger,
  writes the verdict into the notebook and into the grade cell nbgrader scores (the rubric is
  configurable);
- `comments.CommentLedgerFlags` (after SaveAutoGrades): the flags as nbgrader comments, which
  the feedback shows.

This package imports nbgrader; the verdict, rubric and rows live in `core.report.grading`.
"""

from .config import configure
from .score import grade_cell
from .submitted import GRADE_CELL_ID

__all__ = ["GRADE_CELL_ID", "configure", "grade_cell"]
