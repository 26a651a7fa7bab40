"""Verification of ledgers, notebooks and folders: the chain, the notebook binding, replay.

`verify_path` is what `jupyter gradcheck verify` and the server's verify route call. For each
notebook (its ledger file, or the ledger the notebook export embedded) and each ledger not
beside a notebook, it runs the chain check (core.ledger.verify_chain), compares the head with the
notebook's binding (core.ledger.binding) and, with `replay`, re-runs every observation
(core.ledger.replay). A folder of submissions is verified in a pool of processes.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterator

from ..errors import LedgerError
from .binding import compare_binding, notebook_beside, read_binding
from .store import LEDGER_SUFFIX, Ledger
from .verify_chain import Lines, add_error, hash_in_child, new_report, settle_ok, verify_lines

__all__ = ["Lines", "discover", "embedded_lines", "ledger_lines", "verify_item", "verify_items", "verify_ledger_file",
           "verify_lines", "verify_notebook", "verify_path"]


def embedded_lines(meta: dict | None) -> tuple[str, list[tuple[int, bytes, bool]]] | None:
    """(ledger name, lines) of a ledger embedded in `metadata.gradcheck` by the notebook export."""
    embedded = meta.get("embedded") if isinstance(meta, dict) else None
    if not isinstance(embedded, dict) or not isinstance(embedded.get("lines"), list):
        return None
    lines = [(i, str(text).encode("utf-8"), True) for i, text in enumerate(embedded["lines"], start=1)]
    if embedded.get("torn_tail"):
        lines.append((len(lines) + 1, str(embedded["torn_tail"]).encode("utf-8"), False))
    return str(embedded.get("ledger", "")), lines


def _finish(report: dict, binding: dict | None, where: str) -> dict:
    if binding is None:
        report["warnings"].append(f"{where}: no notebook binding to compare the head with")
    else:
        errors, warnings = compare_binding(binding, report["_hashes"], report["last_seq"], report["head"])
        report["binding"] = {"ok": not errors, "recorded": binding,
                             "found": {"entries": report["last_seq"], "head": report["head"]}}
        for reason in errors:
            add_error(report, None, reason, scope="binding")
        report["warnings"].extend(warnings)
    settle_ok(report)
    return report


#: Ledgers above this size have their hashes checked in a forked process (see chain.hash_in_child).
HASH_IN_CHILD_ABOVE = 32 * 2**20


def _verify_file_lines(ledger: Ledger, deep: bool) -> dict:
    """The chain report of a ledger file; large files hash in a second process meanwhile.

    When the child finds a wrong hash, or did not see every line this process saw (an append
    in between), the file is verified again the ordinary way, so the report is the same.
    """
    if deep or ledger.path.stat().st_size <= HASH_IN_CHILD_ABOVE:
        return verify_lines(ledger.iter_raw_lines(), deep=deep)
    collect = hash_in_child(Ledger(ledger.path).iter_raw_lines)
    report = verify_lines(ledger.iter_raw_lines(), hashes_checked_elsewhere=True)
    child = collect()
    if child is None or child[1] or child[0] < report["_last_complete_line"]:
        return verify_lines(ledger.iter_raw_lines(), deep=deep)
    return report


def verify_ledger_file(path: str | os.PathLike, *, deep: bool = False) -> dict:
    """Verify a ledger file, and its binding when the notebook beside it names it."""
    ledger = Ledger(path)
    if not ledger.path.is_file():
        raise LedgerError(f"no ledger at {path}")
    report = _verify_file_lines(ledger, deep)
    report.update(path=str(ledger.path), ledger=str(ledger.path), notebook=None)
    notebook = notebook_beside(ledger.path)
    binding = None
    if notebook is not None:
        meta = read_binding(notebook)
        if isinstance(meta, dict) and Path(str(meta.get("ledger", ""))).name == ledger.path.name:
            binding, report["notebook"] = meta, str(notebook)
    return _finish(report, binding, ledger.path.name)


def verify_notebook(path: str | os.PathLike, *, deep: bool = False) -> dict:
    """Verify a notebook's ledger: the one embedded in it, else the file its binding names."""
    meta = read_binding(path)
    embedded = embedded_lines(meta)
    if embedded is not None:
        name, lines = embedded
        report = verify_lines(lines, deep=deep)
        report.update(path=str(path), notebook=str(path), ledger=name, embedded=True)
        return _finish(report, meta, Path(path).name)
    if isinstance(meta, dict) and meta.get("ledger"):
        ledger_path = Path(path).parent / str(meta["ledger"])
    else:
        ledger_path = Path(path).with_name(Path(path).stem + LEDGER_SUFFIX)
    if not ledger_path.is_file():
        report = new_report()
        report.update(path=str(path), notebook=str(path), ledger=str(ledger_path), _hashes={}, last_seq=0)
        if isinstance(meta, dict):
            add_error(report, None, f"the notebook binding names {ledger_path.name}, which is missing",
                   scope="binding")
            report["binding"] = {"ok": False, "recorded": meta, "found": None}
        else:
            report["warnings"].append(f"{Path(path).name}: no ledger and no binding (no checks recorded)")
        settle_ok(report)
        if not isinstance(meta, dict):
            report["binding_ok"] = None  # nothing recorded, nothing to bind
        return report
    report = verify_lines(Ledger(ledger_path).iter_raw_lines(), deep=deep)
    report.update(path=str(path), notebook=str(path), ledger=str(ledger_path))
    return _finish(report, meta if isinstance(meta, dict) else None, Path(path).name)


def discover(path: str | os.PathLike) -> Iterator[tuple[str, Path]]:
    """("notebook" | "ledger", path) for a file, or for every one under a folder.

    A ledger beside a notebook is verified through that notebook, not twice.
    """
    root = Path(path)
    if root.is_file():
        yield ("notebook" if root.suffix == ".ipynb" else "ledger"), root
        return
    if not root.is_dir():
        raise LedgerError(f"no file or folder at {path}")
    notebooks = sorted(p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    covered = {p.with_name(p.stem + LEDGER_SUFFIX) for p in notebooks}
    for notebook in notebooks:
        yield "notebook", notebook
    for ledger in sorted(root.rglob("*" + LEDGER_SUFFIX)):
        if ledger not in covered and ".ipynb_checkpoints" not in ledger.parts:
            yield "ledger", ledger


def verify_item(kind: str, item: Path, replay: bool = False, deep: bool = False) -> dict:
    """The report of one notebook or ledger, with its replay when asked."""
    report = verify_notebook(item, deep=deep or replay) if kind == "notebook" else \
        verify_ledger_file(item, deep=deep or replay)
    if replay:
        from .replay import replay_lines

        report["replay"] = replay_lines(ledger_lines(kind, item))
        report["ok"] = report["ok"] and report["replay"]["ok"]
    report.pop("_hashes", None)
    report.pop("_last_complete_line", None)
    return report


def verify_items(items: list[tuple[str, Path]], *, replay: bool = False, deep: bool = False,
                 jobs: int | None = 1) -> list[dict]:
    """The report of each `(kind, path)` from `discover`, in order.

    With `replay` and several submissions, `jobs` worker processes (None: one per CPU) share
    them; each report is the same as one made alone.
    """
    workers = min(len(items), jobs if jobs is not None else os.cpu_count() or 1)
    if replay and workers > 1:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            return list(pool.map(verify_item, *zip(*items), [replay] * len(items), [deep] * len(items)))
    return [verify_item(kind, item, replay, deep) for kind, item in items]


def verify_path(path: str | os.PathLike, *, replay: bool = False, deep: bool = False, jobs: int | None = 1) -> dict:
    """`{"ok", "reports"}` for a ledger, a notebook or a folder; `replay` re-runs observations."""
    reports = verify_items(list(discover(path)), replay=replay, deep=deep, jobs=jobs)
    return {"ok": all(r["ok"] for r in reports), "reports": reports}


def ledger_lines(kind: str, item: Path) -> list[tuple[int, bytes, bool]]:
    """The lines of a ledger file, or of the ledger a notebook embeds or names."""
    if kind == "notebook":
        meta = read_binding(item)
        embedded = embedded_lines(meta)
        if embedded is not None:
            return embedded[1]
        name = meta.get("ledger") if isinstance(meta, dict) and meta.get("ledger") else item.stem + LEDGER_SUFFIX
        item = item.parent / str(name)
        if not item.is_file():
            return []
    return list(Ledger(item).iter_raw_lines())
