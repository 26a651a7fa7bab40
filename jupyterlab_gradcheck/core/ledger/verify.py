"""Verification of ledgers, notebooks and folders: the chain, the notebook binding, replay.

`verify_path` is what `jupyter gradcheck verify` and the server's verify route call. For each
notebook (its ledger file, or the ledger the notebook export embedded) and each ledger not
beside a notebook, it runs the chain check (core.ledger.chain), compares the head with the
notebook's binding (core.ledger.binding) and, with `replay`, re-runs every observation
(core.ledger.replay). A folder of submissions is replayed in a pool of processes: each worker
takes the next submission as soon as it is free (a class's notebooks differ in cost), runs
torch on one thread (the processes are the parallelism; one thread each keeps N workers from
contending for N cores with N threads each), and each finished submission is reported to an
optional `progress(done, total)` callback, which the CLI draws as a bar on a terminal. Workers
are forked from a fork server that imported torch and the engine once (WORKER_PRELOAD), so N
workers do not each spend seconds importing torch; where there is no fork server, they are
spawned. Never forked from the verifying process itself: it may hold torch's threads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from ...witness.verify import DEFAULT_MAX_DELAY, apply_witness, load_witness
from ..errors import LedgerError, SpecError
from ..i18n import Message
from ..values.blobs import store_dir_for
from .binding import (
    binding_of,
    calls_the_checker,
    judge_binding,
    notebook_attestations,
    notebook_beside,
    read_binding,
    read_document,
)
from .chain import Lines, add_error, drop_internals, hash_in_child, new_report, settle_ok, verify_lines
from .replay import Progress, replay_worker, worker_context
from .store import LEDGER_SUFFIX, Ledger

# -------------------- missing ledger
# The verify report of a submission whose ledger cannot be read: missing, or refused.
#
# A notebook whose ledger is missing is an error when anything says it had one (a binding, an
# attested output, a call of the checker), else a warning that no checks were recorded. A binding
# that names a file outside the notebook's folder, and a file a server refuses to read, are
# errors naming why, so one such file never hides the rest of a folder.


def refused_binding(path: Path, meta, reason: str) -> dict:
    report = new_report()
    report.update(path=str(path), notebook=str(path), ledger=None, _hashes={}, last_seq=0)
    add_error(report, None, reason, scope="binding")
    report["binding"] = {"ok": False, "recorded": meta, "found": None}
    settle_ok(report)
    return report


def missing_ledger(path: Path, document: dict, meta, ledger_path: Path) -> dict:
    """The report of a notebook whose ledger is missing: an error when anything says it had one."""
    report = new_report()
    report.update(
        path=str(path), notebook=str(path), ledger=str(ledger_path), _hashes={}, last_seq=0, ledger_missing=True
    )
    attested = notebook_attestations(document)
    if isinstance(meta, dict):
        add_error(
            report,
            None,
            Message("the notebook binding names {name}, which is missing", name=ledger_path.name),
            scope="binding",
        )
    if attested:
        add_error(
            report,
            None,
            Message(
                "the notebook's outputs attest {count} entries of {name}, which is missing: the ledger was deleted",
                count=len(attested),
                name=ledger_path.name,
            ),
            scope="binding",
        )
    elif calls_the_checker(document):
        add_error(
            report,
            None,
            Message(
                "the notebook calls the checker, but its ledger {name} is missing: the ledger was deleted",
                name=ledger_path.name,
            ),
            scope="binding",
        )
    if report["errors"]:
        report["binding"] = {"ok": False, "recorded": meta, "found": None, "attested": len(attested)}
    else:
        report["warnings"].append(
            Message("{name}: no ledger, no binding and no checker call (no checks recorded)", name=path.name)
        )
    settle_ok(report)
    if not report["errors"]:
        report["binding_ok"] = None  # nothing recorded, nothing to bind
    return report


def refused_report(kind: str, item: Path, reason: str) -> dict:
    """The report of a file that is not read at all (a server refuses one a link leads outside
    its root): an error naming why, so one such file never hides the rest of a folder."""
    report = new_report()
    report.update(
        path=str(item), notebook=str(item) if kind == "notebook" else None, ledger=None, last_seq=0, refused=True
    )
    add_error(report, None, reason, scope="path")
    settle_ok(report)
    return report


# -------------------- verify

__all__ = [
    "Lines",
    "discover",
    "embedded_lines",
    "ledger_lines",
    "refused_report",
    "verify_item",
    "verify_items",
    "verify_ledger_file",
    "verify_lines",
    "verify_notebook",
    "verify_path",
    "worker_context",
]


def embedded_lines(meta: dict | None) -> tuple[str, list[tuple[int, bytes, bool]]] | None:
    """(ledger name, lines) of a ledger embedded in `metadata.gradcheck` by the notebook export."""
    embedded = meta.get("embedded") if isinstance(meta, dict) else None
    if not isinstance(embedded, dict) or not isinstance(embedded.get("lines"), list):
        return None
    lines = [(i, str(text).encode("utf-8"), True) for i, text in enumerate(embedded["lines"], start=1)]
    if embedded.get("torn_tail"):
        lines.append((len(lines) + 1, str(embedded["torn_tail"]).encode("utf-8"), False))
    return str(embedded.get("ledger", "")), lines


#: Ledgers above this size have their hashes checked in a forked process (see chain.hash_in_child).
HASH_IN_CHILD_ABOVE = 32 * 2**20


def _verify_file_lines(ledger: Ledger, deep: bool) -> dict:
    """The chain report of a ledger file; large files hash in a second process meanwhile.

    When the child finds a wrong hash, or did not see every line this process saw (an append
    in between), the file is verified again the ordinary way, so the report is the same.
    """
    store = store_dir_for(ledger.path)
    if deep or ledger.path.stat().st_size <= HASH_IN_CHILD_ABOVE:
        return verify_lines(ledger.iter_raw_lines(), deep=deep, store_dir=store)
    collect = hash_in_child(Ledger(ledger.path).iter_raw_lines)
    report = verify_lines(ledger.iter_raw_lines(), hashes_checked_elsewhere=True, store_dir=store)
    child = collect()
    if child is None or child[1] or child[0] < report["_last_complete_line"]:
        return verify_lines(ledger.iter_raw_lines(), deep=deep, store_dir=store)
    return report


def verify_ledger_file(path: str | os.PathLike, *, deep: bool = False, with_notebook: bool = True) -> dict:
    """Verify a ledger file, and its binding when the notebook beside it binds it (through its
    metadata or the attestations in its outputs). `with_notebook=False` checks the ledger
    alone: for a check made from inside the running notebook, whose saved copy is older than
    its kernel."""
    ledger = Ledger(path)
    if not ledger.path.is_file():
        raise LedgerError("no ledger at {path}", path=path)
    report = _verify_file_lines(ledger, deep)
    report.update(path=str(ledger.path), ledger=str(ledger.path), notebook=None)
    notebook = notebook_beside(ledger.path) if with_notebook else None
    document = read_document(notebook) if notebook is not None else None
    if document is not None:
        report["notebook"] = str(notebook)
        meta = binding_of(document)
        bound = str(meta.get("ledger", "")) if isinstance(meta, dict) else ""
        if bound and "embedded" not in meta and bound != ledger.path.name:
            add_error(
                report,
                None,
                Message(
                    "{name}, beside this ledger, binds {bound} instead: two ledgers for one notebook, "
                    "the one it binds hiding this one",
                    name=notebook.name,
                    bound=bound,
                ),
                scope="binding",
            )
    return judge_binding(report, document, ledger.path.name, ledger.path.name)


def _embedded_store(notebook: Path, name: str) -> Path:
    """The blob folder of a ledger embedded in a notebook: the one its ledger file would have beside it."""
    return store_dir_for(notebook.parent / (Path(name).name or notebook.stem + LEDGER_SUFFIX))


def _bound_ledger(path: Path, meta: dict | None) -> Path:
    """The ledger a notebook's binding names (a file beside it), else the one beside it by name;
    LedgerError when the binding names a file outside the notebook's folder."""
    if isinstance(meta, dict) and meta.get("ledger"):
        name = str(meta["ledger"])
        if Path(name).name != name or name in (".", ".."):
            raise LedgerError(
                "the binding of {name} names {ledger_name!r}, outside the notebook's folder: a "
                "submission's ledger sits beside its notebook",
                name=path.name,
                ledger_name=name,
            )
        return path.parent / name
    return path.with_name(path.stem + LEDGER_SUFFIX)


def verify_notebook(path: str | os.PathLike, *, deep: bool = False) -> dict:
    """Verify a notebook's ledger: the one embedded in it, else the file its binding names."""
    path = Path(path)
    document = read_document(path)
    meta = binding_of(document)
    embedded = embedded_lines(meta)
    if embedded is not None:
        name, lines = embedded
        report = verify_lines(lines, deep=deep, store_dir=_embedded_store(path, name))
        report.update(path=str(path), notebook=str(path), ledger=name, embedded=True)
        for beside in _ledger_files_beside(path, name):
            if [raw for _n, raw, _c in Ledger(beside).iter_raw_lines()] != [raw for _n, raw, _c in lines]:
                add_error(
                    report,
                    None,
                    Message(
                        "{notebook} embeds a ledger ({name}) that differs from the ledger file {file} beside it: "
                        "two ledgers for one notebook, the embedded one hiding the file",
                        notebook=path.name,
                        name=name,
                        file=beside.name,
                    ),
                    scope="binding",
                )
        return judge_binding(report, document, name, path.name)
    try:
        ledger_path = _bound_ledger(path, meta)
    except LedgerError as exc:
        return refused_binding(path, meta, exc.message)
    if not ledger_path.is_file():
        return missing_ledger(path, document, meta, ledger_path)
    report = verify_lines(Ledger(ledger_path).iter_raw_lines(), deep=deep, store_dir=store_dir_for(ledger_path))
    report.update(path=str(path), notebook=str(path), ledger=str(ledger_path))
    return judge_binding(report, document, ledger_path.name, path.name)


def _ledger_files_beside(path: Path, embedded_name: str) -> list[Path]:
    """The ledger files beside a notebook that embeds its ledger: the one it names, and its own.
    The notebook export's copy may lie beside the ledger it was made from, byte for byte the same."""
    names = {path.stem + LEDGER_SUFFIX}
    if embedded_name and Path(embedded_name).name == embedded_name:
        names.add(embedded_name)
    return [path.parent / name for name in sorted(names) if (path.parent / name).is_file()]


def discover(path: str | os.PathLike) -> Iterator[tuple[str, Path]]:
    """("notebook" | "ledger", path) for a file, or for every one under a folder.

    A ledger is verified through the notebook that binds it, not twice; every other ledger,
    one beside a notebook whose binding names another file included, is verified on its own.
    """
    root = Path(path)
    if root.is_file():
        yield ("notebook" if root.suffix == ".ipynb" else "ledger"), root
        return
    if not root.is_dir():
        raise LedgerError("no file or folder at {path}", path=path)
    notebooks = sorted(p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    covered = set()
    for notebook in notebooks:
        try:
            covered.add(_bound_ledger(notebook, read_binding(notebook)))
        except LedgerError:  # unreadable, or bound outside its folder: its report says so
            pass
    for notebook in notebooks:
        yield "notebook", notebook
    for ledger in sorted(root.rglob("*" + LEDGER_SUFFIX)):
        if ledger not in covered and ".ipynb_checkpoints" not in ledger.parts:
            yield "ledger", ledger


def verify_item(
    kind: str,
    item: Path,
    replay: bool = False,
    deep: bool = False,
    with_notebook: bool = True,
    witness: dict | None = None,
) -> dict:
    """The report of one notebook or ledger, with its replay when asked, held against what the
    witness saw when one is given (from `load_witness`)."""
    report = (
        verify_notebook(item, deep=deep or replay)
        if kind == "notebook"
        else verify_ledger_file(item, deep=deep or replay, with_notebook=with_notebook)
    )
    if witness is not None:
        apply_witness(report, witness)
    if replay:
        from .replay import replay_lines

        report["replay"] = replay_lines(ledger_lines(kind, item), store_dir=_store_of(kind, item, report))
        report["ok"] = report["ok"] and report["replay"]["ok"]
    drop_internals(report)
    return report


def verify_items(
    items: list[tuple[str, Path]],
    *,
    replay: bool = False,
    deep: bool = False,
    jobs: int | None = 1,
    witness: dict | None = None,
    progress: Progress | None = None,
) -> list[dict]:
    """The report of each `(kind, path)` from `discover`, in order.

    With `replay` and several submissions, `jobs` worker processes (None: one per CPU) share
    them, each taking the next one when free; each report is the same as one made alone.
    `progress(done, total)` is called after each submission, in the order they finish.
    """
    total = len(items)
    workers = min(total, jobs if jobs is not None else os.cpu_count() or 1)
    if replay and workers > 1:
        reports: list = [None] * total
        with ProcessPoolExecutor(workers, mp_context=worker_context(), initializer=replay_worker) as pool:
            pending = {
                pool.submit(verify_item, kind, item, replay, deep, True, witness): index
                for index, (kind, item) in enumerate(items)
            }
            for done, future in enumerate(as_completed(pending), start=1):
                reports[pending[future]] = future.result()
                if progress is not None:
                    progress(done, total)
        return reports
    reports = []
    for kind, item in items:
        reports.append(verify_item(kind, item, replay, deep, witness=witness))
        if progress is not None:
            progress(len(reports), total)
    return reports


def readable_items(path: str | os.PathLike, refused: dict[str, str] | None) -> tuple[list, list[dict]]:
    """(the `discover` items to read, the reports of those `refused` names with its reason)."""
    refused = refused or {}
    items, reports = [], []
    for kind, item in discover(path):
        if str(item) in refused:
            reports.append(refused_report(kind, item, refused[str(item)]))
        else:
            items.append((kind, item))
    return items, reports


def verify_path(
    path: str | os.PathLike,
    *,
    replay: bool = False,
    deep: bool = False,
    jobs: int | None = 1,
    ledger_only: bool = False,
    witness: str | None = None,
    witness_key: str | None = None,
    student: str | None = None,
    max_delay: float = DEFAULT_MAX_DELAY,
    refused: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> dict:
    """`{"ok", "reports"}` for a ledger, a notebook or a folder; `replay` re-runs observations;
    `ledger_only` verifies one ledger file without the notebook beside it; `witness` (a URL or
    a witness log file, whose key `witness_key` pins) holds each submission against what the
    witness saw, as `student`'s (else the student nbgrader's layout names), each entry due
    within `max_delay` seconds; the files named in `refused` are not read, and each has a report
    with the reason instead; `progress(done, total)` hears of each notebook or ledger verified."""
    seen = witness_for(witness, witness_key, student, max_delay)
    if seen is not None and Path(path).is_dir():
        seen["root"] = str(path)
    if ledger_only:
        if not Path(path).is_file() or Path(path).suffix == ".ipynb":
            raise SpecError(
                "--ledger-only needs a ledger file (.gradcheck.jsonl), got {name}", name=Path(path).name, field="path"
            )
        return {
            "ok": (report := verify_item("ledger", Path(path), replay, deep, False, seen))["ok"],
            "reports": [report],
        }
    items, refusals = readable_items(path, refused)
    reports = verify_items(items, replay=replay, deep=deep, jobs=jobs, witness=seen, progress=progress) + refusals
    return {"ok": all(r["ok"] for r in reports), "reports": reports}


def witness_for(
    source: str | None, witness_key: str | None, student: str | None, max_delay: float = DEFAULT_MAX_DELAY
) -> dict | None:
    """What the witness at `source` saw (`load_witness`), with who submits and the delay allowed;
    None without a witness. SpecError when `max_delay` is not a number of seconds >= 0."""
    if isinstance(max_delay, bool) or not isinstance(max_delay, (int, float)) or not max_delay >= 0:
        raise SpecError(
            "--max-delay must be a number of seconds >= 0, got {value!r}", value=max_delay, field="max_delay"
        )
    if not source:
        if witness_key or student:
            raise SpecError("--witness-key and --student apply with --witness", field="witness")
        return None
    return {**load_witness(source, witness_key), "student": student or None, "max_delay": float(max_delay)}


def _store_of(kind: str, item: Path, report: dict) -> Path:
    """The blob folder of the ledger a report verified: beside the ledger file, or beside the notebook
    for a ledger it embeds."""
    if kind == "notebook" and report.get("embedded"):
        return _embedded_store(item, str(report.get("ledger") or ""))
    return store_dir_for(report.get("ledger") or item)


def ledger_lines(kind: str, item: Path) -> list[tuple[int, bytes, bool]]:
    """The lines of a ledger file, or of the ledger a notebook embeds or names."""
    if kind == "notebook":
        meta = read_binding(item)
        embedded = embedded_lines(meta)
        if embedded is not None:
            return embedded[1]
        try:
            item = _bound_ledger(item, meta)
        except LedgerError:  # bound outside its folder: nothing of it is replayed
            return []
        if not item.is_file():
            return []
    return list(Ledger(item).iter_raw_lines())
