"""The per-submission CSV: one row per student and assignment, keyed as nbgrader keys its own.

`nbgrader export` writes one row per student and assignment with the columns `assignment` and
`student_id`; this file uses the same two names and the same grain, so a spreadsheet or
`pandas.merge(grades, ledgers, on=["assignment", "student_id"])` joins them with no renaming and
no aggregation. The rows come from `core.report.grading.submission_rows`.
"""

from __future__ import annotations

import csv
import io

from .csv_export import cell_text
from .grading import SUBMISSION_COLUMNS, Rubric, submission_rows


def to_submission_csv(submissions: list[dict], rubric: Rubric = Rubric()) -> str:
    """The CSV text: a header, then one row per (student, assignment)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=SUBMISSION_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in submission_rows(submissions, rubric):
        writer.writerow({key: cell_text(value) for key, value in row.items()})
    return buffer.getvalue()
