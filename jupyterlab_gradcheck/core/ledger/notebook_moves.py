"""A notebook renamed keeps its one ledger: the ledger moves with it, and its kernel follows.

JupyterLab renames a notebook through the server (the first save's rename dialog, File ->
Rename, the file browser). The ledger beside it, `old.gradcheck.jsonl`, then moves to
`new.gradcheck.jsonl`: the same file (same inode, same ledger id, same chain), so no entry is
lost and none is written under the old name.

A kernel started for the notebook still has the old path in `JPY_SESSION_NAME`, which Jupyter
Server refreshes only at a restart. So the server leaves a forwarding record beside the
kernel's connection file (in the server's runtime folder, never beside the notebook, so
nothing is collected with a submission): `kernel-<id>.gradcheck-notebook.json`, holding the
notebook's new path. The kernel reads it before each check (`forwarded_notebook`).

Torch-free and jupyter-free: the server extension and the kernel both call it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .blob_store import fsync_folder, store_dir_for
from .store import LEDGER_SUFFIX, ledger_path_for

#: Suffix of the forwarding record beside a kernel's connection file `kernel-<id>.json`.
FORWARDING_SUFFIX = ".gradcheck-notebook.json"


def forwarding_path(connection_file: str | os.PathLike) -> Path:
    """`kernel-<id>.json` -> `kernel-<id>.gradcheck-notebook.json`, in the same folder."""
    path = Path(connection_file)
    return path.with_name(path.stem + FORWARDING_SUFFIX)


def write_forwarding(connection_file: str | os.PathLike, notebook: str | os.PathLike) -> Path:
    """Tell the kernel of `connection_file` that its notebook is now `notebook` (an OS path).

    Written to a temporary file and renamed over the record, so a kernel never reads half of it.
    """
    record = forwarding_path(connection_file)
    temporary = record.with_name(record.name + ".tmp")
    temporary.write_text(json.dumps({"notebook": str(notebook)}), encoding="utf-8")
    os.replace(temporary, record)
    return record


def forwarded_notebook(connection_file: str | os.PathLike | None) -> Path | None:
    """The notebook the server last told this kernel about, or None when it told it nothing
    (no rename since the kernel started, no connection file, or an unreadable record)."""
    if not connection_file:
        return None
    try:
        record = json.loads(forwarding_path(connection_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    notebook = record.get("notebook") if isinstance(record, dict) else None
    return Path(notebook) if isinstance(notebook, str) and notebook.endswith(".ipynb") else None


def remove_forwarding(connection_file: str | os.PathLike) -> None:
    """Forget the record when the kernel is gone."""
    try:
        forwarding_path(connection_file).unlink()
    except FileNotFoundError:
        pass


def move_ledger(old_notebook: str | os.PathLike, new_notebook: str | os.PathLike) -> Path | None:
    """Move `old.gradcheck.jsonl` to `new.gradcheck.jsonl` beside a renamed notebook.

    Returns the new ledger path, or None when the old notebook had no ledger. Raises
    FileExistsError, moving nothing, when a ledger already sits under the new name: two
    ledgers are never merged, and none is overwritten. The ledger's blob folder moves with it
    (`move_store`).
    """
    old_ledger, new_ledger = ledger_path_for(old_notebook), ledger_path_for(new_notebook)
    if not old_ledger.is_file() or old_ledger == new_ledger:
        return None
    # A hard link refuses an existing target atomically (a rename would replace it); the old
    # name goes only once the new one holds the file.
    os.link(old_ledger, new_ledger)
    move_store(store_dir_for(old_ledger), store_dir_for(new_ledger))
    os.unlink(old_ledger)
    fsync_folder(new_ledger.parent)
    if old_ledger.parent != new_ledger.parent:
        fsync_folder(old_ledger.parent)
    return new_ledger


def move_store(old_store: Path, new_store: Path) -> None:
    """Move a ledger's blob folder (core/ledger/blob_store.py) to the new ledger's name; where a folder
    is already there, merge into it. Blobs are named by their hash, so a file already there under the
    same name is kept and the moved copy dropped; the old folder goes once it is empty."""
    if not old_store.is_dir() or old_store == new_store:
        return
    try:
        os.rename(old_store, new_store)  # fails on a non-empty folder already there: then merge
    except OSError:
        new_store.mkdir(parents=True, exist_ok=True)
        for blob in old_store.iterdir():
            target = new_store / blob.name
            if target.exists():
                blob.unlink()
            else:
                os.replace(blob, target)
        fsync_folder(new_store)
        old_store.rmdir()
    fsync_folder(new_store.parent)


def moved_path(path: str, old: str, new: str) -> str | None:
    """Where `path` is after `old` was renamed to `new` (API paths, `/`-separated): `new` for
    `old` itself, `new/rest` for `old/rest` (a folder renamed), else None."""
    if path == old:
        return new
    if old and path.startswith(old.rstrip("/") + "/"):
        return new.rstrip("/") + path[len(old.rstrip("/")) :]
    return None


def rebind_ledger_name(notebook: str | os.PathLike, old_name: str, new_name: str) -> bool:
    """In a renamed notebook's saved binding, name the moved ledger instead of the old one.

    Only `metadata.gradcheck.ledger` changes, and only when it names `old_name`; the file keeps
    its modification time, so an editor that holds the notebook open sees no change on disk
    (it writes the same binding through its own model). Returns whether it wrote.
    """
    path = Path(notebook)
    try:
        stat = path.stat()
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    metadata = document.get("metadata") if isinstance(document, dict) else None
    binding = metadata.get("gradcheck") if isinstance(metadata, dict) else None
    if not isinstance(binding, dict) or binding.get("ledger") != old_name or not new_name.endswith(LEDGER_SUFFIX):
        return False
    binding["ledger"] = new_name
    temporary = path.with_name(f".{path.name}.gradcheck-rebind.tmp")
    temporary.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.utime(temporary, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(temporary, path)
    return True
