"""The binding between a notebook and its ledger: `metadata.gradcheck` in the .ipynb.

The notebook records its ledger's file name, entry count and head hash. A ledger that was
swapped for another, truncated or rewritten no longer matches what the notebook says, and
`verify` names the difference. The side panel keeps the same metadata through the notebook
model; this module does it through nbformat for the command line.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from ..errors import LedgerError
from ..i18n import Message
from .store import LEDGER_SUFFIX, Ledger

METADATA_KEY = "gradcheck"


def read_notebook(notebook_path: str | os.PathLike):
    """The notebook node, read without conversion; LedgerError when it cannot be read."""
    import nbformat  # imported here: it takes about a second, and most ledger work needs none

    try:
        return nbformat.read(str(notebook_path), as_version=nbformat.NO_CONVERT)
    except FileNotFoundError:
        raise LedgerError("no notebook at {notebook_path}", notebook_path=notebook_path) from None
    except Exception as exc:  # nbformat raises several unrelated types for bad files
        raise LedgerError(
            "cannot read the notebook {notebook_path}: {exc}", notebook_path=notebook_path, exc=exc
        ) from None


def write_notebook(notebook, notebook_path: str | os.PathLike) -> None:
    """Write a notebook atomically (a temporary file renamed over the old one)."""
    import nbformat

    path = Path(notebook_path)
    fd, temporary = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            nbformat.write(notebook, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def binding_for(ledger: Ledger, notebook_path: str | os.PathLike) -> dict:
    """The binding a notebook should hold for `ledger` as it is now."""
    head = ledger.head()
    try:
        name = os.path.relpath(ledger.path, Path(notebook_path).parent)
    except ValueError:  # another drive on Windows
        name = str(ledger.path)
    return {
        "ledger": Path(name).as_posix(),
        "ledger_id": ledger.ledger_id(),
        "entries": head["entries"],
        "head": head["head"],
    }


def read_document(notebook_path: str | os.PathLike) -> dict:
    """A notebook as plain JSON (no nbformat: verifying a folder reads many); LedgerError when
    it cannot be read."""
    try:
        with open(notebook_path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise LedgerError("no notebook at {notebook_path}", notebook_path=notebook_path) from None
    except (OSError, ValueError) as exc:
        raise LedgerError(
            "cannot read the notebook {notebook_path}: {exc}", notebook_path=notebook_path, exc=exc
        ) from None
    return document if isinstance(document, dict) else {}


def binding_of(document: dict) -> dict | None:
    """`metadata.gradcheck` of a notebook document, or None when it has none."""
    metadata = document.get("metadata") if isinstance(document, dict) else None
    value = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return dict(value) if isinstance(value, dict) else None


def read_binding(notebook_path: str | os.PathLike) -> dict | None:
    """`metadata.gradcheck` of a notebook, or None when it has none."""
    document = read_document(notebook_path)
    metadata = document.get("metadata") if isinstance(document, dict) else None
    value = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return dict(value) if isinstance(value, dict) else None


def update_binding(notebook_path: str | os.PathLike, ledger: Ledger) -> dict:
    """Write the ledger's current count and head into the notebook's metadata; return it."""
    notebook = read_notebook(notebook_path)
    binding = binding_for(ledger, notebook_path)
    current = dict(notebook.metadata.get(METADATA_KEY) or {})
    current.pop("embedded", None)  # a working notebook refers to its ledger; it never embeds one
    current.update(binding)
    notebook.metadata[METADATA_KEY] = current
    write_notebook(notebook, notebook_path)
    return binding


def notebook_beside(ledger_path: str | os.PathLike) -> Path | None:
    """The notebook `lab1.ipynb` beside `lab1.gradcheck.jsonl`, if it exists."""
    path = Path(ledger_path)
    if not path.name.endswith(LEDGER_SUFFIX):
        return None
    notebook = path.with_name(path.name[: -len(LEDGER_SUFFIX)] + ".ipynb")
    return notebook if notebook.is_file() else None


def refresh_binding(ledger: Ledger) -> dict | None:
    """After a write: update the binding of the ledger's notebook when the ledger binds one.

    The notebook is the one the ledger was opened for, else the one beside it that already
    names this ledger. Returns the binding written, or None when there is none to keep.
    """
    if not ledger.bind:
        return None
    notebook = ledger.notebook
    if notebook is None:
        beside = notebook_beside(ledger.path)
        if beside is None:
            return None
        existing = read_binding(beside)
        if not existing or Path(existing.get("ledger", "")).name != ledger.path.name:
            return None
        notebook = beside
    if not Path(notebook).is_file():
        return None
    return update_binding(notebook, ledger)


def compare_binding(binding: dict, hashes_by_seq: dict[int, str], entries: int, head: str) -> tuple[list, list]:
    """(errors, warnings) from comparing a notebook's binding with the ledger as verified.

    `hashes_by_seq` maps each entry's seq to its stored hash, so a binding that is behind
    the ledger can be told apart from one that names a different ledger.
    """
    errors, warnings = [], []
    bound_entries, bound_head = binding.get("entries"), binding.get("head")
    if not isinstance(bound_entries, int) or not isinstance(bound_head, str):
        return [f"the notebook binding is malformed: {binding!r}"], []
    short = bound_head[:12]
    if bound_entries == entries and bound_head == head:
        return [], []
    if bound_entries > entries:
        errors.append(
            Message(
                "the ledger was truncated: the notebook binding records {bound_entries} entries "
                "ending at {short}, the ledger has {entries} ending at {head}",
                bound_entries=bound_entries,
                short=short,
                entries=entries,
                head=head[:12],
            )
        )
    elif hashes_by_seq.get(bound_entries, "0" * 64 if bound_entries == 0 else None) == bound_head:
        warnings.append(
            Message(
                "the notebook binding is {behind} entries behind the ledger (entries made after the "
                "notebook's metadata was last written)",
                behind=entries - bound_entries,
            )
        )
    else:
        errors.append(
            Message(
                "the ledger does not match the notebook binding: entry {bound_entries} should have "
                "hash {short} but has {found}: the ledger was swapped or rewritten",
                bound_entries=bound_entries,
                short=short,
                found=str(hashes_by_seq.get(bound_entries, "none"))[:12],
            )
        )
    return errors, warnings
