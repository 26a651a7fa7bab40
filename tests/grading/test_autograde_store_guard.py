"""The blob store under `nbgrader autograde`: the course config names every source blob in
`c.Autograde.exclude_overwriting` (nbgrader 0.9 matches file by file, no globs), and a blob nbgrader
copied over a submission all the same is put back or removed, so a blob the student changed stays
changed for verify to see.
"""

from __future__ import annotations

import logging

from jupyterlab_gradcheck.nbgrader.config import ledgers_in_source
from jupyterlab_gradcheck.nbgrader.submitted import keep_students_stores

STORE = "ps1.gradcheck.blobs"
GENUINE, CHANGED, EXTRA = "a" * 64 + ".safetensors", "b" * 64 + ".safetensors", "c" * 64 + ".safetensors"


def test_exclude_overwriting_names_each_source_blob(tmp_path):
    """Given source/ps1 with ps1.ipynb, its ledger and two blobs in its store, then the assignment's
    exclude_overwriting list names the ledger and each blob by its path relative to the assignment."""
    folder = tmp_path / "source" / "ps1"
    (folder / STORE).mkdir(parents=True)
    (folder / "ps1.ipynb").write_text("{}")
    (folder / "ps1.gradcheck.jsonl").write_text("")
    for name in (GENUINE, EXTRA):
        (folder / STORE / name).write_bytes(b"blob")
    assert ledgers_in_source(tmp_path) == {
        "ps1": sorted(["ps1.gradcheck.jsonl", f"{STORE}/{GENUINE}", f"{STORE}/{EXTRA}"])
    }


def test_copied_blobs_are_put_back_or_removed(tmp_path, caplog):
    """Given a student's store with a genuine blob and one they changed, and nbgrader's copy of the
    instructor's store over it (the changed one overwritten with genuine bytes, plus an extra blob), when
    the stores are kept, then the changed bytes are back, the extra blob is gone, the untouched blob is
    left alone, and the log says how many were fixed."""
    submitted, autograded = tmp_path / "submitted", tmp_path / "autograded"
    (submitted / STORE).mkdir(parents=True)
    (autograded / STORE).mkdir(parents=True)
    (submitted / STORE / GENUINE).write_bytes(b"genuine")
    (submitted / STORE / CHANGED).write_bytes(b"student's edit")
    (autograded / STORE / GENUINE).write_bytes(b"genuine")
    (autograded / STORE / CHANGED).write_bytes(b"instructor's bytes")
    (autograded / STORE / EXTRA).write_bytes(b"instructor's blob")
    with caplog.at_level(logging.WARNING):
        fixed = keep_students_stores(submitted, autograded, logging.getLogger("autograde"))
    assert fixed == [f"{STORE}/{CHANGED}", f"{STORE}/{EXTRA}"]
    assert (autograded / STORE / CHANGED).read_bytes() == b"student's edit"
    assert not (autograded / STORE / EXTRA).exists()
    assert (autograded / STORE / GENUINE).read_bytes() == b"genuine"
    assert "2 blob(s) in autograded/ were not the student's" in caplog.text
