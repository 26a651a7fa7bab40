"""`nbgrader generate_assignment`: a release with the gradcheck cells and nothing of the
instructor's ledger.

nbgrader copies every file of `source/<assignment>/` into the release, the instructor's ledger
included, so every student would start with the instructor's entries (and failures) counted as
theirs. This preprocessor deletes every ledger from the release folder and the notebook's
binding (`metadata.gradcheck`) and attestation outputs from the notebook; the cells themselves,
the checks and the grade cell, are kept as written.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from ..core.ledger.attestation import MIME_TYPE
from ..core.ledger.binding import METADATA_KEY
from ..core.ledger.store import LEDGER_SUFFIX
from .course_paths import course_folder


def drop_attestations(nb) -> None:
    """Remove every attestation output (each names an entry of a ledger that is not the one this
    copy of the notebook goes with); the cells' other outputs stay."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [output for output in cell.get("outputs", []) if MIME_TYPE not in (output.get("data") or {})]


class StripReleaseLedger(NbGraderPreprocessor):
    """Removes the instructor's ledger, binding and attestations from the release."""

    def preprocess(self, nb, resources):
        nb.metadata.pop(METADATA_KEY, None)
        drop_attestations(nb)
        folder = course_folder(self, "release", ".", resources["nbgrader"]["assignment"])
        for ledger in sorted(folder.rglob("*" + LEDGER_SUFFIX)):
            self.log.info("Removing the instructor's ledger from the release: %s", ledger)
            ledger.unlink()
        return nb, resources
