"""Submissions to grade: each notebook or ledger found under the given paths, with its
student and assignment, its decoded entries, its check histories and its verify report.

A folder in nbgrader's layout (`submitted/<student>/<assignment>/*.ipynb`, or
`autograded/...`) gives the student and assignment from the path. Every export reads
submissions through `collect`, so CSV, JSON and HTML agree on what they show.
"""

from __future__ import annotations

import os
from pathlib import Path

from .history import build_history
from .binding import read_binding
from .ledger import Ledger
from .ledger_format import LineError, read_entry
from .verify import discover, embedded_lines, verify_ledger_file, verify_notebook

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


def load(kind: str, path: Path, root: str | os.PathLike | None = None) -> dict:
    """One submission: identity, entries, histories and the verify report (no replay)."""
    student, assignment = nbgrader_identity(path, root)
    if kind == "notebook":
        report = verify_notebook(path)
        embedded = embedded_lines(read_binding(path))
        if embedded is not None:
            lines = embedded[1]
        else:
            ledger_path = Path(report["ledger"])
            lines = Ledger(ledger_path).iter_raw_lines() if ledger_path.is_file() else []
        notebook_name = path.name
    else:
        report = verify_ledger_file(path)
        lines = Ledger(path).iter_raw_lines()
        notebook_name = Path(report["notebook"]).name if report.get("notebook") else ""
    report.pop("_hashes", None)
    entries = _decode(lines)
    return {
        "student": student,
        "assignment": assignment,
        "notebook": notebook_name,
        "ledger": Path(str(report.get("ledger") or "")).name,
        "path": str(path),
        "entries": entries,
        "checks": build_history(entries),
        "verify": report,
        "chain_ok": report["chain_ok"],
        "binding_ok": report["binding_ok"],
    }


def collect(paths) -> list[dict]:
    """Every submission under `paths` (files or folders), in a stable order."""
    submissions = []
    for given in paths:
        root = given if Path(given).is_dir() else None
        for kind, item in discover(given):
            submissions.append(load(kind, item, root))
    return submissions

