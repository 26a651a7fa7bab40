"""The gradcheck grade cell: a locked, autograded code cell that autograde scores with the
ledger's verdict (`score.ScoreLedger`); `ledger_cell.AddLedgerCell` adds it at release."""

from __future__ import annotations

import nbformat

from .config_names import GRADE_CELL_ID

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
