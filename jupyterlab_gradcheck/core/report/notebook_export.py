"""Notebook export: a copy of the notebook that carries its whole ledger, for single-file
submission.

The ledger lines are embedded in `metadata.gradcheck.embedded.lines` exactly as written
(each line's text, without its newline), beside the usual binding, so `verify` checks the
same hashes over the same bytes as it would on the ledger file. The blobs its lines name (tensors
above 256 elements) are copied into `<ledger name>.blobs` beside the copy, which
`embedded.blob_store` names; verify checks them there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import LedgerError, SpecError
from ..ledger.binding import METADATA_KEY, binding_for, read_notebook, write_notebook
from ..ledger.blob_checks import line_shas
from ..ledger.blob_store import blob_path, store_dir_for
from ..ledger.store import Ledger


def export_notebook(notebook_path: str | os.PathLike, out_path: str | os.PathLike) -> dict:
    """Write the copy with the embedded ledger; return its `metadata.gradcheck`."""
    source = Path(notebook_path)
    if source.suffix != ".ipynb":
        raise SpecError("--format notebook needs a notebook (.ipynb), got {name}", name=source.name, field="path")
    out = Path(out_path)
    if out.resolve() == source.resolve():
        raise SpecError("the notebook export must not overwrite the notebook itself: choose another -o", field="output")
    notebook = read_notebook(source)
    meta = notebook.metadata.get(METADATA_KEY)
    ledger_name = meta.get("ledger") if isinstance(meta, dict) and meta.get("ledger") else None
    ledger = Ledger(source.parent / ledger_name) if ledger_name else Ledger.for_notebook(source)
    if not ledger.path.is_file():
        raise LedgerError(
            "{name} has no ledger ({ledger_name} is missing)", name=source.name, ledger_name=ledger.path.name
        )
    complete, torn = ledger.raw_lines()
    try:
        lines = [raw.decode("utf-8") for raw in complete]
        torn_text = torn.decode("utf-8", errors="replace") if torn else None
    except UnicodeDecodeError as exc:
        raise LedgerError("{name} is not UTF-8 text: {exc}", name=ledger.path.name, exc=exc) from None
    recorded = dict(meta) if isinstance(meta, dict) else binding_for(ledger, source)
    recorded["embedded"] = {"ledger": ledger.path.name, "lines": lines, "torn_tail": torn_text}
    out.parent.mkdir(parents=True, exist_ok=True)
    store = copy_store(ledger.path, out.parent, lines)
    if store is not None:
        recorded["embedded"]["blob_store"] = store
    notebook.metadata[METADATA_KEY] = recorded
    write_notebook(notebook, out)
    return recorded


def copy_store(ledger_path: Path, folder: Path, lines: list[str]) -> str | None:
    """Copy the blobs the ledger's lines name into the blob folder the embedded ledger has beside the
    copy (`<ledger name>.blobs` in `folder`, as verify looks for it); its name, or None when the lines
    name no blob. A blob already there is kept: it is named by its hash."""
    shas = list(dict.fromkeys(sha for text in lines for sha in line_shas(text.encode("utf-8"))))
    if not shas:
        return None
    source, target = store_dir_for(ledger_path), store_dir_for(folder / ledger_path.name)
    if source.resolve() != target.resolve():
        target.mkdir(parents=True, exist_ok=True)
        for sha in shas:
            if blob_path(source, sha).is_file() and not blob_path(target, sha).exists():
                shutil.copyfile(blob_path(source, sha), blob_path(target, sha))
    return target.name
