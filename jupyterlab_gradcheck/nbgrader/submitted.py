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

import hashlib
import json
import shutil
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Unicode

from ..core.ledger.store import LEDGER_SUFFIX, ledger_path_for
from ..core.ledger.verify import verify_item, witness_for
from ..core.ledger.witness_check import DEFAULT_MAX_DELAY
from .class_copies import class_shared
from .config_names import STORE_SUFFIX
from .course_paths import course_folder

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
