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
from ..values.blobs import fsync_folder, store_dir_for
from .chain import add_error, settle_ok
from .store import LEDGER_SUFFIX, Ledger, ledger_path_for

# -------------------- attestation
# Attestations: what a check's displayed output says about the ledger entry it wrote.
#
# Each check run in a kernel displays, beside its table, a small JSON object of its own MIME
# type naming the ledger (its id and file name), the check, and the seq and hash of the
# observation it appended. Whoever saves the notebook saves the outputs with it: JupyterLab,
# nbconvert, nbclient, nbgrader's autograde. So a notebook executed headless, which no front end
# ever binds through `metadata.gradcheck`, still binds its ledger: every attested entry must be in
# the ledger at that seq with that hash, and the newest attestation is a binding in its own right.
# A kernel never writes the `.ipynb` an editor or nbconvert holds; the attestations travel in
# the outputs instead.

MIME_TYPE = "application/vnd.jupyterlab-gradcheck.attestation+json"
#: Markers of a cell that calls the checker, for a notebook whose ledger is missing.
CHECKER_CALLS = ("check(", "check_record(", "GradcheckPanel(")


def attestation_for(ledger, entry: dict) -> dict:
    """The attestation of an observation `entry` appended to `ledger`."""
    return {
        "ledger_id": ledger.ledger_id(),
        "ledger": Path(ledger.path).name,
        "check_id": entry.get("check_id"),
        "seq": entry["seq"],
        "hash": entry["hash"],
    }


def notebook_attestations(document: dict) -> list[dict]:
    """`{"cell", "execution_count", **attestation}` for every attestation in a notebook's
    saved outputs, in cell order (cell numbers count from 1)."""
    found = []
    cells = document.get("cells") if isinstance(document, dict) else None
    for number, cell in enumerate(cells if isinstance(cells, list) else [], start=1):
        if not isinstance(cell, dict):
            continue
        for output in cell.get("outputs") or []:
            data = output.get("data") if isinstance(output, dict) else None
            item = data.get(MIME_TYPE) if isinstance(data, dict) else None
            if isinstance(item, dict) and isinstance(item.get("seq"), int) and isinstance(item.get("hash"), str):
                found.append({"cell": number, "execution_count": cell.get("execution_count"), **item})
    return found


def calls_the_checker(document: dict) -> bool:
    """Whether the notebook's code imports the checker and calls it (a check, a record, the panel)."""
    cells = document.get("cells") if isinstance(document, dict) else None
    code = "\n".join(
        "".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source") or "")
        for c in cells or []
        if isinstance(c, dict) and c.get("cell_type") == "code"
    )
    return "jupyterlab_gradcheck" in code and any(call in code for call in CHECKER_CALLS)


def _where(item: dict) -> str:
    count = item.get("execution_count")
    if count is None:
        return Message("cell {cell}", cell=item["cell"])
    return Message("cell {cell} [{count}]", cell=item["cell"], count=count)


def compare_attestations(
    attestations: list[dict], *, ledger_name: str, ledger_id: str | None, hashes: dict[int, str], last_seq: int
) -> dict:
    """Hold a ledger against the attestations a notebook's outputs carry for it.

    Returns `{"errors", "newest", "earlier_epoch"}`: an error for each attested
    entry that is missing (truncated) or different (rewritten) in the ledger, naming the cell;
    `earlier_epoch` counts attested entries of another ledger id of this notebook (a ledger
    replaced by a fresh one), which the ledger cannot hold.
    """
    errors = []
    mine = [a for a in attestations if a.get("ledger") in (None, ledger_name)]
    other_epoch = [a for a in mine if ledger_id is not None and a.get("ledger_id") not in (None, ledger_id)]
    current = [a for a in mine if a not in other_epoch]
    for item in current:
        seq, digest = item["seq"], item["hash"]
        if seq > last_seq or seq not in hashes:
            errors.append(
                Message(
                    "{where} attests entry seq {seq} (hash {hash}), which the ledger lacks (it ends at "
                    "seq {last_seq}): the ledger was truncated",
                    where=_where(item),
                    seq=seq,
                    hash=digest[:12],
                    last_seq=last_seq,
                )
            )
        elif hashes[seq] != digest:
            errors.append(
                Message(
                    "{where} attests entry seq {seq} with hash {hash}, but the ledger has {found}: the "
                    "ledger was swapped or rewritten",
                    where=_where(item),
                    seq=seq,
                    hash=digest[:12],
                    found=hashes[seq][:12],
                )
            )
    if other_epoch:
        ids = sorted({str(a.get("ledger_id"))[:12] for a in other_epoch})
        found = {"count": len(other_epoch), "ids": ", ".join(ids), "ledger_id": str(ledger_id)[:12]}
        errors.append(
            Message(
                "the notebook's outputs attest {count} entry of ledger {ids}, which this ledger "
                "({ledger_id}) lacks: the ledger was replaced by another",
                **found,
            )
            if len(other_epoch) == 1
            else Message(
                "the notebook's outputs attest {count} entries of ledger {ids}, which this ledger "
                "({ledger_id}) lacks: the ledger was replaced by another",
                **found,
            )
        )
    newest = max(current, key=lambda a: a["seq"], default=None)
    return {"errors": errors, "newest": newest, "earlier_epoch": len(other_epoch)}


# -------------------- notebook binding
# The notebook's side of a verify: its metadata binding and its outputs' attestations together.
#
# A notebook binds its ledger in two ways. The front end writes `metadata.gradcheck` through the
# notebook model (ledger name and id, entry count, head hash). Every check run in a kernel also
# leaves an attestation in its cell's output (core.ledger.binding), which any saver keeps,
# nbconvert and nbgrader included. Either binds; both are held against the ledger:
#
# - an attested entry missing from the ledger, or different in it, is an error naming the cell;
# - the metadata binding is compared as before (truncated, swapped or rewritten, or behind);
# - when the metadata names an earlier ledger of the notebook (another ledger id, or none) while
#   the outputs attest this one, the notebook was re-executed against a fresh ledger (nbconvert
#   saves its outputs, never the front end's metadata): that is a new epoch, reported as a
#   warning, and the binding is the attestations'.


def judge_binding(report: dict, document: dict | None, ledger_name: str, where: str) -> dict:
    """Fill `report["binding"]` (and its errors and warnings) from the notebook `document`,
    which is None when no notebook binds this ledger; return the settled report."""
    meta = binding_of(document) if document is not None else None
    if meta is not None and "embedded" not in meta and str(meta.get("ledger", "")).split("/")[-1] != ledger_name:
        meta = None  # the metadata binds another ledger file: it says nothing about this one
    attestations = notebook_attestations(document) if document is not None else []
    found = {"entries": report["last_seq"], "head": report["head"], "ledger_id": report.get("ledger_id")}
    attested = compare_attestations(
        attestations,
        ledger_name=ledger_name,
        ledger_id=report.get("ledger_id"),
        hashes=report["_hashes"],
        last_seq=report["last_seq"],
    )
    errors, warnings = list(attested["errors"]), []
    newest = attested["newest"]
    source = []
    if meta is not None:
        meta_errors, meta_warnings = compare_binding(meta, report["_hashes"], report["last_seq"], report["head"])
        earlier = meta.get("ledger_id") != report.get("ledger_id")
        if meta_errors and newest is not None and earlier:
            warnings.append(
                Message(
                    "new epoch: the notebook's metadata binds an earlier ledger ({entries} entries, head "
                    "{head}); its outputs attest this one (id {ledger_id}) up to seq {seq}, and "
                    "{earlier_epoch} attested entries of an earlier ledger are missing",
                    entries=meta.get("entries"),
                    head=str(meta.get("head"))[:12],
                    ledger_id=str(report.get("ledger_id"))[:12],
                    seq=newest["seq"],
                    earlier_epoch=attested["earlier_epoch"],
                )
            )
        else:
            errors += meta_errors
            warnings += meta_warnings
            source.append("metadata")
    if newest is not None:
        source.append("attestations")
        if meta is None and newest["seq"] < report["last_seq"]:
            warnings.append(
                Message(
                    "the newest attestation in the notebook's outputs is seq {seq}; the ledger has "
                    "{after} entries after it (made outside this notebook's outputs, or not yet saved)",
                    seq=newest["seq"],
                    after=report["last_seq"] - newest["seq"],
                )
            )
    if not source:
        if document is not None and calls_the_checker(document) and report["last_seq"] == 0:
            errors.append(Message("{where}: the notebook calls the checker but binds no entry", where=where))
        report["binding"] = None
        report["warnings"].append(Message("{where}: no notebook binding to compare the head with", where=where))
    else:
        recorded = (
            meta
            if "metadata" in source
            else {
                "ledger": ledger_name,
                "ledger_id": newest.get("ledger_id"),
                "entries": newest["seq"],
                "head": newest["hash"],
            }
        )
        report["binding"] = {
            "ok": not errors,
            "source": "+".join(source),
            "recorded": recorded,
            "found": found,
            "attested": len(attestations),
        }
    for reason in errors:
        add_error(report, None, reason, scope="binding")
    report["warnings"].extend(warnings)
    settle_ok(report)
    return report


# -------------------- notebook moves
# A notebook renamed keeps its one ledger: the ledger moves with it, and its kernel follows.
#
# JupyterLab renames a notebook through the server (the first save's rename dialog, File ->
# Rename, the file browser). The ledger beside it, `old.gradcheck.jsonl`, then moves to
# `new.gradcheck.jsonl`: the same file (same inode, same ledger id, same chain), so no entry is
# lost and none is written under the old name.
#
# A kernel started for the notebook still has the old path in `JPY_SESSION_NAME`, which Jupyter
# Server refreshes only at a restart. So the server leaves a forwarding record beside the
# kernel's connection file (in the server's runtime folder, never beside the notebook, so
# nothing is collected with a submission): `kernel-<id>.gradcheck-notebook.json`, holding the
# notebook's new path. The kernel reads it before each check (`forwarded_notebook`).
#
# Torch-free and jupyter-free: the server extension and the kernel both call it.

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
    """Move a ledger's blob folder (core/values/blobs.py) to the new ledger's name; where a folder
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


# -------------------- binding

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
