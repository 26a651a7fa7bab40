"""`nbgrader autograde`, first step: verify the submission as the student handed it in.

It runs first in the sanitizing pass, before nbgrader clears the outputs (which carry the
attestations) and before anything is re-executed, on the files in `submitted/`: the chain, the
binding, the attestations and, unless switched off, the replay of every observation
(`core.ledger.verify.verify_item`). It also keeps the student's ledger in `autograded/` byte for
byte: nbgrader copies the source's files over the submission ("Overwriting files with master
versions") unless `c.Autograde.exclude_overwriting` names the ledger, and a copy it made is put
back (or removed where the student had none), with a warning in the log. The blob folder beside
the ledger (tensors above 256 elements) is kept the student's own the same way, blob by blob.
"""

from __future__ import annotations

import glob
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Unicode

from ..core.ledger.binding import METADATA_KEY, MIME_TYPE
from ..core.ledger.copies import shared_pairs
from ..core.ledger.store import LEDGER_SUFFIX, ledger_path_for
from ..core.ledger.verify import verify_item, witness_for
from ..core.report.submissions import load
from ..witness.verify import DEFAULT_MAX_DELAY

# -------------------- config names
# Names the nbgrader pieces share, kept apart so that none imports another for them.

#: The nbgrader grade_id of the grade cell that receives the ledger's verdict and score.
GRADE_CELL_ID = "gradcheck_ledger"

#: The end of the name of a ledger's blob folder (`ps1.gradcheck.blobs` beside `ps1.gradcheck.jsonl`,
#: core/values/blobs.py).
STORE_SUFFIX = ".gradcheck.blobs"


# -------------------- course paths
# Where a preprocessor finds the course's folders: nbgrader's own CourseDirectory, configured
# from the same config the running nbgrader command read (its root and directory structure).


def course_folder(preprocessor, step: str, student: str, assignment: str) -> Path:
    """The folder of `assignment` for `student` at `step` ("release", "submitted", "autograded")."""
    coursedir = CourseDirectory(config=preprocessor.config)
    return Path(coursedir.format_path(getattr(coursedir, f"{step}_directory"), student, assignment))


# -------------------- release
# `nbgrader generate_assignment`: a release with the gradcheck cells and nothing of the
# instructor's ledger.
#
# nbgrader copies every file of `source/<assignment>/` into the release, the instructor's ledger
# included, so every student would start with the instructor's entries (and failures) counted as
# theirs. This preprocessor deletes every ledger from the release folder and the notebook's
# binding (`metadata.gradcheck`) and attestation outputs from the notebook; the cells themselves,
# the checks and the grade cell, are kept as written.


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


# -------------------- rerun
# `nbgrader autograde`, just before Execute: the re-execution writes a ledger of its own.
#
# A notebook's checks write the ledger beside the notebook, in the kernel's working folder. This
# preprocessor copies the autograded folder, without its ledgers, into a scratch folder and points
# the execution there, so the student's ledger is never appended to; `score.ScoreLedger` then
# reads what the re-run recorded, compares it with the student's, and removes the scratch folder.

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


# -------------------- class copies
# `nbgrader autograde`: the other students' submissions that share this one's ledger.
#
# Autograde sees one student at a time, so copying (a classmate's notebook and ledger handed in
# as one's own) is found here by reading every other student's submission of the same assignment
# and notebook in `submitted/` (without verifying them: only their entries and attestations) and
# holding them against this one (`core.ledger.copies`).


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


# -------------------- submitted

#: The notebook metadata key that carries the autograder's state from one pass to the next.
AUTOGRADE_KEY = "gradcheck_autograde"


def file_sha256(path: Path) -> str | None:
    """SHA-256 of a file's bytes, or None when it does not exist."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def json_safe(value):
    """`value` as plain JSON (messages as their English text), for the notebook's metadata."""
    return json.loads(json.dumps(value, default=str))


def keep_students_ledgers(submitted: Path, autograded: Path, log) -> list[str]:
    """Make every ledger in `autograded` the student's own: the bytes in `submitted`, or none.
    Returns the names that had to be put back or removed."""
    names = {p.name for p in submitted.glob("*" + LEDGER_SUFFIX)} | {
        p.name for p in autograded.glob("*" + LEDGER_SUFFIX)
    }
    fixed = []
    for name in sorted(names):
        theirs, copy = submitted / name, autograded / name
        if theirs.is_file() and file_sha256(theirs) != file_sha256(copy):
            shutil.copyfile(theirs, copy)
        elif not theirs.is_file() and copy.is_file():
            copy.unlink()
        else:
            continue
        fixed.append(name)
        log.warning(
            "%s in autograded/ was not the student's (nbgrader copies the source's files over a "
            "submission): put back as submitted. Name it in c.Autograde.exclude_overwriting "
            "(jupyterlab_gradcheck.nbgrader.configure does)",
            name,
        )
    return fixed


def keep_students_stores(submitted: Path, autograded: Path, log) -> list[str]:
    """Make every blob folder in `autograded` the student's own, as `keep_students_ledgers` does for
    the ledgers: a blob nbgrader copied from the source is removed where the student had none and put
    back where the student's bytes differ. Returns the blob paths fixed (folder/name)."""
    folders = {p.name for p in submitted.glob("*" + STORE_SUFFIX) if p.is_dir()}
    folders |= {p.name for p in autograded.glob("*" + STORE_SUFFIX) if p.is_dir()}
    fixed = []
    for folder in sorted(folders):
        theirs, copy = submitted / folder, autograded / folder
        names = {p.name for p in theirs.glob("*") if p.is_file()} | {p.name for p in copy.glob("*") if p.is_file()}
        for name in sorted(names):
            if (theirs / name).is_file() and file_sha256(theirs / name) != file_sha256(copy / name):
                copy.mkdir(exist_ok=True)
                shutil.copyfile(theirs / name, copy / name)
            elif not (theirs / name).is_file() and (copy / name).is_file():
                (copy / name).unlink()
            else:
                continue
            fixed.append(f"{folder}/{name}")
    if fixed:
        log.warning(
            "%d blob(s) in autograded/ were not the student's (nbgrader copies the source's files over a "
            "submission): put back as submitted. Name them in c.Autograde.exclude_overwriting "
            "(jupyterlab_gradcheck.nbgrader.configure does)",
            len(fixed),
        )
    return fixed


class VerifySubmittedLedger(NbGraderPreprocessor):
    """Verifies the submitted notebook's ledger before nbgrader clears outputs or re-executes."""

    replay = Bool(
        True,
        help="Re-run every recorded observation while verifying (as `jupyter gradcheck "
        "verify --replay`): catches a value edited with its hashes recomputed. "
        "Costs one check's run time per observation.",
    ).tag(config=True)
    witness = Unicode(
        None,
        allow_none=True,
        help="A witness URL or witness log file (`jupyter gradcheck witness`) to hold each "
        "submission against; its gaps become the witness_gap flag. None: no "
        "witness.",
    ).tag(config=True)
    witness_key = Unicode(
        None,
        allow_none=True,
        help="With a witness log file: the witness's public key (base64) or its fingerprint (sha256:<hex>) "
        "recorded when the course started; the key file beside the log is never read. A URL gives its own key "
        "(this pins it when set).",
    ).tag(config=True)
    max_delay = Float(
        DEFAULT_MAX_DELAY,
        help="Seconds an entry may take to reach the witness and still count as on time; later ones are "
        "flagged 'witnessed late'.",
    ).tag(config=True)
    compare_class = Bool(
        True,
        help="Compare each submission with the other students' submissions of the assignment: a shared "
        "ledger id, entry, attestation or identical run is flagged shared_with.",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        submitted = course_folder(self, "submitted", info["student"], info["assignment"])
        autograded = course_folder(self, "autograded", info["student"], info["assignment"])
        notebook = submitted / f"{info['notebook']}.ipynb"
        restored = keep_students_ledgers(submitted, autograded, self.log)
        restored += keep_students_stores(submitted, autograded, self.log)
        witness = witness_for(self.witness, self.witness_key, info["student"] if self.witness else None, self.max_delay)
        report = verify_item("notebook", notebook, replay=self.replay, witness=witness)
        ledger = Path(str(report.get("ledger") or ledger_path_for(notebook))).name
        self.log.info(
            "gradcheck: %s verified before re-execution: ok=%s, %d errors",
            notebook.name,
            report["ok"],
            len(report["errors"]),
        )
        nb.metadata[AUTOGRADE_KEY] = {
            "report": json_safe(report),
            "ledger": ledger,
            "ledger_sha256": file_sha256(submitted / ledger),
            "restored": restored,
            "shared_with": json_safe(class_shared(self, info, report)) if self.compare_class else [],
        }
        return nb, resources
