"""`nbgrader generate_assignment`: every notebook that calls the checker gets the ledger's grade cell.

Without a grade cell for the ledger, autograde has nowhere to put the ledger's verdict and it
never reaches the grade. So this preprocessor, which `configure(c)` places before nbgrader locks,
checksums and saves the cells, appends `config.grade_cell` to every source notebook that calls
the checker (`core.ledger.attestation.calls_the_checker`) and has no cell with that grade_id.
Its points: `points`, or by default as many as the notebook's other autograded cells together
(at least 1), so that hiding the ledger costs as much as the tests could earn.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, Unicode

from ..core.ledger.attestation import calls_the_checker
from .config_names import GRADE_CELL_ID
from .grade_cell import grade_cell


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
