"""`nbgrader autograde`, just before Execute: the re-execution writes a ledger of its own.

A notebook's checks write the ledger beside the notebook, in the kernel's working folder. This
preprocessor copies the autograded folder, without its ledgers, into a scratch folder and points
the execution there, so the student's ledger is never appended to; `score.ScoreLedger` then
reads what the re-run recorded, compares it with the student's, and removes the scratch folder.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

from ..core.ledger.store import LEDGER_SUFFIX

#: The resources key that tells ScoreLedger where the re-run happened.
RERUN_KEY = "gradcheck_rerun"


class IsolateRerun(NbGraderPreprocessor):
    """Points the re-execution at a scratch copy of the submission without its ledgers."""

    def preprocess(self, nb, resources):
        folder = Path(resources["metadata"]["path"])
        scratch = Path(tempfile.mkdtemp(prefix="gradcheck-rerun-"))
        shutil.copytree(folder, scratch / "run", ignore=shutil.ignore_patterns("*" + LEDGER_SUFFIX))
        resources["metadata"]["path"] = str(scratch / "run")
        resources[RERUN_KEY] = {"folder": str(folder), "scratch": str(scratch)}
        self.log.info("gradcheck: re-executing in a scratch copy; the student's ledger stays as submitted")
        return nb, resources
