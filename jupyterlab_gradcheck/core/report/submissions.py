"""Submissions to grade: each notebook or ledger found under the given paths, with its
student and assignment, its decoded entries, its check histories and its verify report.

A folder in nbgrader's layout (`submitted/<student>/<assignment>/*.ipynb`, or
`autograded/...`) gives the student and assignment from the path. Every export reads
submissions through `collect`, so CSV, JSON and HTML agree on what they show.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..ledger.blob_store import store_dir_for
from ..ledger.copies import mark_shared
from ..ledger.history import build_history
from ..ledger.line_format import LineError, read_entry
from ..ledger.verify import discover, ledger_lines, refused_report, verify_items, witness_for
from ..ledger.witness_check import DEFAULT_MAX_DELAY

NBGRADER_FOLDERS = ("submitted", "autograded")


def nbgrader_identity(path: str | os.PathLike, root: str | os.PathLike | None = None) -> tuple[str, str]:
    """(student, assignment) from `.../submitted/<student>/<assignment>/<file>`, else from
    `<root>/<student>/<assignment>/<file>`, else ("", "")."""
    parts = Path(path).resolve().parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in NBGRADER_FOLDERS and len(parts) - index == 4:
            return parts[index + 1], parts[index + 2]
    if root is not None:
        try:
            relative = Path(path).resolve().relative_to(Path(root).resolve()).parts
        except ValueError:
            relative = ()
        if len(relative) == 3:
            return relative[0], relative[1]
    return "", ""


def _decode(lines) -> list[dict]:
    entries = []
    for _number, raw, complete in lines:
        if not complete:
            continue
        try:
            entries.append(read_entry(raw))
        except LineError:
            continue
    return entries


def _blob_store(kind: str, path: Path, report: dict) -> str | None:
    """The path of the blob folder that holds the submission's stored values, when there is one."""
    if not report.get("ledger"):
        return None
    ledger = Path(str(report["ledger"]))
    if kind == "notebook" and report.get("embedded") or not ledger.is_absolute():
        ledger = path.parent / ledger.name  # an embedded ledger's blobs lie beside the notebook
    store = store_dir_for(ledger)
    return str(store) if store.is_dir() else None


def load(kind: str, path: Path, report: dict, root: str | os.PathLike | None = None) -> dict:
    """One submission: identity, entries, histories, and its verify report (from verify_items)."""
    student, assignment = nbgrader_identity(path, root)
    if kind == "notebook":
        notebook_name = path.name
    else:
        notebook_name = Path(report["notebook"]).name if report.get("notebook") else ""
    entries = [] if report.get("refused") else _decode(ledger_lines(kind, path))
    replay = report.get("replay")
    return {
        "student": student,
        "assignment": assignment,
        "notebook": notebook_name,
        "ledger": Path(str(report.get("ledger") or "")).name,
        "blob_store": _blob_store(kind, path, report),
        "path": str(path),
        "entries": entries,
        "checks": build_history(entries),
        "verify": report,
        "chain_ok": report["chain_ok"],
        "binding_ok": report["binding_ok"],
        "replay_ok": replay["ok"] if replay is not None and (replay["reproduced"] or replay["differs"]) else None,
    }


def collect(
    paths,
    *,
    replay: bool = False,
    jobs: int | None = 1,
    witness: str | None = None,
    witness_key: str | None = None,
    student: str | None = None,
    max_delay: float = DEFAULT_MAX_DELAY,
    refused: dict[str, str] | None = None,
    progress=None,
) -> list[dict]:
    """Every submission under `paths` (files or folders), in a stable order; with `replay`,
    each one's observations are re-run too (in `jobs` worker processes); with `witness` (a URL
    or a log file, its key pinned by `witness_key`) each is held against what the witness saw,
    as `student`'s or the student the path names, each entry due within `max_delay` seconds.
    The files named in `refused` are not read: each is a submission with no entries and the
    reason as its error. Each submission gets `shared_with`: the other students' submissions it
    shares a ledger with (core.ledger.copies); `progress(done, total)` hears of each one verified."""
    refused = refused or {}
    found = []
    for given in paths:
        root = given if Path(given).is_dir() else None
        found += [(kind, item, root) for kind, item in discover(given)]
    readable = [(kind, item) for kind, item, _root in found if str(item) not in refused]
    seen = witness_for(witness, witness_key, student, max_delay)
    if seen is not None and len(paths) == 1 and Path(paths[0]).is_dir():
        seen["root"] = str(paths[0])
    reports = iter(verify_items(readable, replay=replay, jobs=jobs, witness=seen, progress=progress))
    submissions = [
        load(
            kind, item, refused_report(kind, item, refused[str(item)]) if str(item) in refused else next(reports), root
        )
        for kind, item, root in found
    ]
    mark_shared(submissions)
    return submissions
