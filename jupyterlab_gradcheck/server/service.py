"""What each route does, between the HTTP layer and the core.

Handlers parse a request and call one method here; each method resolves the API paths
inside the server root, validates with the core (torch-free), writes the ledger off the
event loop, and hands anything that runs a check to the worker pool. The order that makes a
check evidence is the core's: the expectation is in the ledger before the worker starts,
and the observation (or the failed attempt, with its reason) follows it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import hashlib
import json
import logging
import os
import re
import threading
import uuid
import weakref
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from ..core.check.record.spec import parse_spec
from ..core.errors import GradcheckError, LedgerError, SpecError
from ..core.expr.parser import Limits
from ..core.ledger.binding import (
    binding_for,
    move_ledger,
    moved_path,
    read_binding,
    rebind_ledger_name,
    remove_forwarding,
    write_forwarding,
)
from ..core.ledger.chain import drop_internals
from ..core.ledger.store import Ledger, ledger_path_for
from ..core.ledger.verify import discover, verify_ledger_file
from ..core.run import Admission, run_spec
from ..core.values.blobs import referenced_shas, store_dir_for
from ..core.values.form import PENDING
from .errors import BadPath, ClientGone, NotFound, PathForbidden, WorkerFailed
from .pool import WorkerPool

# -------------------- paths
# API paths: the `work/lab1.ipynb` a client names, turned into a file inside the server root.
#
# A request may only reach files under the root the server was started in. A path with `..`,
# an absolute path, or one that a symbolic link carries out of the root is refused before any
# file is opened, so nothing outside the root is read or written.

_DRIVE = re.compile(r"^[A-Za-z]:")
#: The longest file or folder name, in bytes, the common filesystems accept.
NAME_MAX = 255
#: The longest whole path, in bytes, the system calls accept (Linux's PATH_MAX).
PATH_MAX = 4096


def resolve(
    root: str | os.PathLike, api_path, *, field: str, must_exist: bool = True, suffix: str | None = None
) -> Path:
    """The real file an API path names, checked to lie inside `root`."""
    if not isinstance(api_path, str) or not api_path.strip():
        raise BadPath(
            "{name} must be a path relative to the server root, like work/lab1.ipynb", name=field, field=field
        )
    if "\x00" in api_path:
        raise BadPath("{name} contains a NUL character", name=field, field=field)
    text = api_path.replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        raise BadPath(
            "{name} {path!r} is absolute: give a path relative to the server root",
            name=field,
            path=api_path,
            field=field,
        )
    parts = PurePosixPath(text).parts
    if ".." in parts:
        raise BadPath(
            "{name} {path!r} contains '..': paths may not leave the server root", name=field, path=api_path, field=field
        )
    for part in parts:  # the filesystem would answer ENAMETOOLONG; the request is bad input
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            raise BadPath(
                "{name} has a path component of {size} bytes; the limit is {limit}",
                name=field,
                size=len(part.encode("utf-8", "surrogatepass")),
                limit=NAME_MAX,
                field=field,
            )
    if suffix is not None and not text.endswith(suffix):
        raise BadPath("{name} {path!r} does not end in {suffix}", name=field, path=api_path, suffix=suffix, field=field)
    real_root = Path(os.path.realpath(root))
    size = len(str(real_root.joinpath(*parts)).encode("utf-8", "surrogatepass"))
    if size >= PATH_MAX:  # the system calls would answer ENAMETOOLONG as well
        raise BadPath(
            "{name} is too long: {size} bytes under the server root; the limit is {limit}",
            field=field,
            name=field,
            size=size - len(str(real_root).encode("utf-8", "surrogatepass")) - 1,
            limit=PATH_MAX - 1 - len(str(real_root).encode("utf-8", "surrogatepass")),
        )
    target = ensure_inside(real_root, real_root.joinpath(*parts), field=field, shown=api_path)
    if must_exist and not target.exists():
        raise NotFound("{name} {path!r} does not exist under the server root", name=field, path=api_path, field=field)
    return target


def ensure_inside(root: str | os.PathLike, path: str | os.PathLike, *, field: str, shown: str | None = None) -> Path:
    """`path` with its links resolved; PathForbidden when that leaves `root`."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise PathForbidden(
            "{name} {path!r} leads outside the server root through a symbolic link",
            name=field,
            path=shown or to_api_path(real_root, path),
            field=field,
        )
    return real


def to_api_path(root: str | os.PathLike, path: str | os.PathLike) -> str:
    """The API path (relative, with `/`) of a file inside `root`."""
    relative = os.path.relpath(os.path.abspath(path), os.path.realpath(root))
    return PurePosixPath(*Path(relative).parts).as_posix()


def without_root(value, root: str | os.PathLike):
    """`value` (JSON-shaped) with the server root's absolute prefix taken out of every string.

    A report made from files under the root names them by absolute path; a client only ever
    sees API paths, and learns nothing of where the server keeps its files.
    """
    prefix = os.path.realpath(root).rstrip(os.sep) + os.sep
    if isinstance(value, str):
        return value.replace(prefix, "")
    if isinstance(value, list):
        return [without_root(item, root) for item in value]
    if isinstance(value, dict):
        return {key: without_root(item, root) for key, item in value.items()}
    return value


# -------------------- ledger io
# Ledger file I/O off the event loop, one operation at a time per ledger file.
#
# Ledger appends lock, flush and fsync: blocking work that must not stall the server. They run
# on a small thread pool; an asyncio lock per ledger keeps the operations on one ledger in the
# order the requests made them, while different notebooks' ledgers proceed side by side.


class LedgerIO:
    """Runs the core's ledger calls in threads, serialised per ledger path."""

    def __init__(self, threads: int = 2):
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="gradcheck-ledger"
        )
        # A lock lives as long as some request holds it; idle ledgers leave no trace.
        self._locks: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    async def call(self, ledger_path, function, *args, **kwargs):
        """`function(*args, **kwargs)` in a thread, after earlier calls on the same ledger."""
        key = str(ledger_path)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads, _in_context(function, *args, **kwargs))

    async def run(self, function, *args, **kwargs):
        """`function(*args, **kwargs)` in a thread, with no ordering (reads over many files)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, _in_context(function, *args, **kwargs))

    def close(self) -> None:
        """Finish the writes under way, then release the threads."""
        self._threads.shutdown(wait=True)


def _in_context(function, *args, **kwargs):
    """The call, run in the caller's context (its reader's language), as asyncio.to_thread does."""
    return functools.partial(contextvars.copy_context().run, function, *args, **kwargs)


# -------------------- notebook renames
# Renames made through this server keep each notebook's one ledger.
#
# jupyter-server announces every rename its contents manager makes (the first save's rename
# dialog, File -> Rename, the file browser, a folder renamed) as a `contents_service` event. On
# each one this moves the renamed notebook's ledger with it, names the moved ledger in the
# notebook's saved binding, and tells every kernel whose session is that notebook (or lies in
# that folder) where its notebook is now (core.ledger.binding), so the kernel's next
# check lands in the moved ledger and none goes to the old name.

CONTENTS_EVENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"
KERNEL_EVENTS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"


class RenameFollower:
    """Listens to the server's contents and kernel events; see the module's docstring."""

    def __init__(self, root: str, session_manager, kernel_manager, log: logging.Logger):
        self.root, self.sessions, self.kernels, self.log = root, session_manager, kernel_manager, log

    def listen(self, event_logger) -> None:
        event_logger.add_listener(schema_id=CONTENTS_EVENTS, listener=self.on_contents_event)
        event_logger.add_listener(schema_id=KERNEL_EVENTS, listener=self.on_kernel_event)

    def stop(self, event_logger) -> None:
        event_logger.remove_listener(schema_id=CONTENTS_EVENTS, listener=self.on_contents_event)
        event_logger.remove_listener(schema_id=KERNEL_EVENTS, listener=self.on_kernel_event)

    async def on_contents_event(self, logger, schema_id: str, data: dict) -> None:
        if data.get("action") == "rename" and data.get("source_path") and data.get("path"):
            await self.follow(str(data["source_path"]).strip("/"), str(data["path"]).strip("/"))

    async def on_kernel_event(self, logger, schema_id: str, data: dict) -> None:
        """A kernel shut down: its forwarding record goes with its connection file."""
        if data.get("action") == "shutdown" and data.get("kernel_id"):
            folder = getattr(self.kernels, "connection_dir", "")
            if folder:
                remove_forwarding(Path(folder) / f"kernel-{data['kernel_id']}.json")

    async def follow(self, old: str, new: str) -> None:
        """Move the ledger of the notebook (or the notebooks of the folder) renamed from `old`
        to `new` (API paths), then point the kernels of its sessions at the new path."""
        if old.endswith(".ipynb") and new.endswith(".ipynb"):
            self.move(old, new)
        for session in await self.sessions.list_sessions():
            path = str(session.get("path") or "")
            target = moved_path(path, old, new) or (path if moved_path(path, new, new) else None)
            kernel = (session.get("kernel") or {}).get("id")
            if target is None or not target.endswith(".ipynb") or not kernel:
                continue
            connection_file = self._connection_file(kernel)
            if connection_file:
                write_forwarding(connection_file, self._os_path(target))
                self.log.info("gradcheck: kernel %s now checks into the ledger of %s", kernel, target)

    def move(self, old: str, new: str) -> None:
        """The ledger beside `old` moves beside `new`, and the saved binding names it there."""
        try:
            old_notebook, new_notebook = self._os_path(old), self._os_path(new)
            moved = move_ledger(old_notebook, new_notebook)
        except (OSError, GradcheckError) as exc:
            self.log.warning("gradcheck: the ledger of %s did not move with it to %s: %s", old, new, exc)
            return
        if moved is not None:
            rebind_ledger_name(new_notebook, ledger_path_for(old_notebook).name, moved.name)
            self.log.info("gradcheck: the ledger of %s moved with it to %s", old, new)

    def _os_path(self, api_path: str) -> Path:
        return resolve(self.root, api_path, field="path", must_exist=False)

    def _connection_file(self, kernel_id: str) -> str | None:
        try:
            return self.kernels.get_kernel(kernel_id).connection_file or None
        except KeyError:
            self.log.warning("gradcheck: no kernel %s to tell of a rename", kernel_id)
            return None


# -------------------- inflight
# The checks a server has started and not finished, kept on disk so a crash leaves a trace.
#
# Between the expectation a check writes to its ledger and the observation that completes it,
# the server may die (killed, out of memory, the machine rebooted). The ledger then holds an
# expectation with no outcome, and nothing says why. Each server process keeps a journal in the
# Jupyter runtime folder: one line before a check's expectation is written (its ledger, its id and
# the ledger's size then), one with the expectation's seq once it is written, one when its outcome
# is. The first line comes before the ledger write, so no kill between the two can leave an
# expectation the journal does not know. A server that starts finds the journals of the processes
# gone before it (same root, a pid no longer alive), and for every check they left open whose
# ledger still has no outcome it appends a note saying the server stopped while the check ran.
# `verify` names these checks too.

#: The note's event name in the ledger.
INTERRUPTED_EVENT = "interrupted"


def journal_folder(runtime_dir: str | os.PathLike) -> Path:
    """Where the journals live (created on demand)."""
    return Path(runtime_dir) / "jupyterlab_gradcheck"


def _prefix(root: str | os.PathLike) -> str:
    return "inflight-" + hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogatepass")).hexdigest()[:16]


class InFlightJournal:
    """This server process's journal of started and finished checks."""

    def __init__(self, runtime_dir: str | os.PathLike, root: str | os.PathLike):
        self.folder = journal_folder(runtime_dir)
        self.prefix = _prefix(root)
        self.path = self.folder / f"{self.prefix}-{os.getpid()}.jsonl"
        self._lock = threading.Lock()
        self._open: set[str] = set()

    def starting(self, ledger_path: str | os.PathLike, check_id: str) -> str:
        """A check is about to write its expectation; returns the token its later lines name.

        The ledger's size now bounds where that expectation can start, so a server that finds
        this line with no seq after it can still tell the expectation from older ones."""
        try:
            size = os.stat(ledger_path).st_size
        except FileNotFoundError:
            size = 0
        token = uuid.uuid4().hex
        self._write({"op": "start", "token": token, "ledger": str(ledger_path), "check_id": check_id, "size": size})
        self._open.add(token)
        return token

    def declared(self, token: str, seq: int) -> None:
        """The check's expectation is in its ledger, at `seq`; its outcome is not yet."""
        self._write({"op": "seq", "token": token, "seq": int(seq)})

    def finished(self, token: str) -> None:
        """The check's outcome (observation or failed-to-run) is in its ledger, or its
        expectation was never written."""
        self._write({"op": "end", "token": token})
        self._open.discard(token)

    def close(self) -> None:
        """A clean stop: the journal goes, unless a check is still open (its outcome could not
        be written), which the next server to start will then note."""
        with self._lock:
            if not self._open:
                self.path.unlink(missing_ok=True)

    def _write(self, item: dict) -> None:
        line = (json.dumps(item) + "\n").encode("utf-8", "surrogatepass")
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as handle:
                handle.write(line)

    def recover(self) -> list[dict]:
        """Notes for the checks that servers gone before this one left open (see the section
        comment); returns what was noted, and removes the journals it read."""
        noted = []
        for journal in sorted(self.folder.glob(f"{self.prefix}-*.jsonl")) if self.folder.is_dir() else []:
            pid = journal.stem.rsplit("-", 1)[-1]
            if journal == self.path or not pid.isdigit() or _alive(int(pid)):
                continue
            for item in _open_items(journal):
                noted += _note_if_open(item, int(pid))
            journal.unlink(missing_ok=True)
        return noted


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_items(journal: Path) -> list[dict]:
    """The starts in a journal with no end, each with its seq if one was written (lines cut
    short by the crash are skipped)."""
    open_items: dict[str, dict] = {}
    for line in journal.read_bytes().splitlines():
        try:
            item = json.loads(line)
            token, op = item["token"], item["op"]
        except (ValueError, KeyError, TypeError):
            continue
        if op == "start" and isinstance(item.get("ledger"), str):
            open_items[token] = item
        elif op == "seq" and token in open_items and isinstance(item.get("seq"), int):
            open_items[token]["seq"] = item["seq"]
        elif op == "end":
            open_items.pop(token, None)
    return list(open_items.values())


def _interrupted_of(path: Path, item: dict, report: dict) -> dict | None:
    """The expectation an open journal item left with no outcome, or None.

    With its seq, that expectation; without one (the server died between the journal's line and
    the seq's), the expectation of its check that starts at or after the ledger's size then, and
    that no earlier recovery has noted already."""
    waiting = report.get("interrupted", [])
    if "seq" in item:
        return next((entry for entry in waiting if entry["seq"] == item["seq"]), None)
    lines = path.read_bytes().splitlines(keepends=True)
    starts = [0]
    for raw in lines:
        starts.append(starts[-1] + len(raw))
    noted = set()
    for raw in lines:
        if b'"event":"' + INTERRUPTED_EVENT.encode() + b'"' in raw.replace(b" ", b""):
            try:
                noted.add(json.loads(raw)["data"]["expectation_seq"])
            except (ValueError, KeyError, TypeError):
                continue
    for entry in waiting:
        if (
            entry["check_id"] == item.get("check_id")
            and starts[entry["line"] - 1] >= int(item.get("size", 0))
            and entry["seq"] not in noted
        ):
            return entry
    return None


def _note_if_open(item: dict, pid: int) -> list[dict]:
    """The note appended for one open check, if its ledger still has no outcome for it."""
    path = Path(item["ledger"])
    try:
        report = verify_ledger_file(path, with_notebook=False)
        entry = _interrupted_of(path, item, report)
    except Exception:  # a ledger removed or unreadable since: verify will say so itself
        return []
    if entry is None:
        return []
    note = Ledger(path, bind=False).note(
        f"the server (process {pid}) stopped while this check ran (expectation seq {entry['seq']}); "
        "its outcome was never recorded",
        entry["check_id"],
        event=INTERRUPTED_EVENT,
        expectation_seq=entry["seq"],
    )
    return [note]


# -------------------- service


def _on_loop(coroutine, loop: asyncio.AbstractEventLoop):
    """Run `coroutine` on the server's loop from an entry thread, and wait for its result.

    A loop that stops first (the server shutting down) raises instead of leaving the thread
    waiting for ever: the process waits for its threads before it exits."""
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    while True:
        try:
            return future.result(timeout=0.5)
        except TimeoutError:
            if loop.is_closed() or not loop.is_running():
                future.cancel()
                raise RuntimeError("the server stopped while this check was waiting") from None


#: Where the handlers find the GradcheckService in the tornado settings.
SERVICE_SETTING = "gradcheck_service"


def package_version() -> str:
    """The installed package's version, which the side panel compares with its own."""
    try:
        return metadata.version("jupyterlab_gradcheck")
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        return "0.0.0+unknown"


@dataclass
class GradcheckService:
    """The server's state (root, pool, ledger I/O, options) and the operations on it."""

    root: str
    pool: WorkerPool
    ledgers: LedgerIO
    limits: Limits
    default_device: str = "cpu"
    #: Element evaluations per second assumed when a check is admitted (core/run.py `admit`).
    admission_rate: float = 1e8
    #: Fraction of a device's free memory (as a worker measured it) a check may be estimated to need;
    #: 0 admits any size (core/run.py).
    memory_fraction: float = 1.0
    #: Predicted seconds above which a check is heavy and never takes the last free worker.
    heavy_seconds: float = 1.0
    #: Where started checks are kept until their outcome is written (a crash leaves them open).
    journal: InFlightJournal | None = None
    #: The threads the entry routine runs in (see `_entries`), made on the first check.
    _entry_threads: concurrent.futures.ThreadPoolExecutor | None = None

    # --- GET status ----------------------------------------------------------------
    async def status(self) -> dict:
        """The version handshake: package, torch, devices and the pool."""
        try:
            hello = await self.pool.hello()
            worker = {"torch": hello["torch"], "python": hello["python"], "devices": hello["devices"], "error": None}
        except WorkerFailed as exc:
            worker = {"torch": None, "python": None, "devices": [], "error": exc.message}
        return {
            "version": package_version(),
            **worker,
            "default_device": self.default_device,
            "limits": {
                "max_input_elements": self.limits.max_input_elements,
                "max_element_evaluations": int(self.admission_rate * self.pool.timeout),
            },
            "pool": self.pool.state(),
        }

    # --- POST checks ---------------------------------------------------------------
    async def run_check(self, notebook, check, client_gone: asyncio.Event | None = None) -> dict:
        """Expectation, run in a worker, observation; the completed record and the ledger head.

        The core's entry routine (`core.run.run_spec`) takes the check from parse to its appended
        outcome, in a thread of its own; this method gives it the server's three differences: the
        devices, limits and timeout it admits against, a gate that takes a place at a worker before
        anything is written (a full queue answers 503 with the ledger untouched, and a client that
        goes away meanwhile, `client_gone` set, leaves the ledger as it was), and a runner that hands
        the declared check to that worker. Ledger writes go through the per-ledger serialisation.
        """
        notebook_path, ledger = self._ledger_of(notebook, field="notebook")
        if not isinstance(check, dict):
            raise SpecError("check must be a JSON object holding the check record", field="check")
        loop = asyncio.get_running_loop()
        admission = Admission(
            devices=(await self.pool.hello())["devices"],
            limits=self.limits,
            default_device=self.default_device,
            memory_fraction=self.memory_fraction,
            timeout=self.pool.timeout,
            rate=self.admission_rate,
        )
        key = self._api_path(notebook_path)
        state: dict = {}

        def on_loop(coroutine):
            return _on_loop(coroutine, loop)

        async def take_place(heavy: bool):
            place = self.pool.reserve(key, heavy=heavy)
            try:
                await _turn(place, client_gone)
            except BaseException:
                place.release()
                raise
            return place

        async def give_back(place):
            place.release()

        @contextlib.contextmanager
        def gate(admitted):
            place = state["place"] = on_loop(take_place(admitted.seconds > self.heavy_seconds))
            try:
                if self.journal is not None:  # before the expectation is written: see the journal
                    state["token"] = self.journal.starting(ledger.path, admitted.spec.id)
                yield
            finally:
                on_loop(give_back(place))

        def runner(spec, spec_dict, expectation):
            state["held"] = set(
                referenced_shas({"inputs": spec.inputs, "analytical_gradient": spec.analytical_gradient})
            )
            if "token" in state:
                self.journal.declared(state["token"], expectation["seq"])
            store = str(store_dir_for(ledger.path))  # the worker reads the record's stored values there
            completed = state["completed"] = on_loop(
                state["place"].run({"op": "check", "record": spec_dict, "store": store})
            )
            return completed

        def ledger_call(function, *args):
            return on_loop(self.ledgers.call(ledger.path, function, *args))

        entry = functools.partial(
            run_spec,
            check,
            ledger,
            admission=admission,
            runner=runner,
            gate=gate,
            ledger_call=ledger_call,
            forget_staged=True,
        )
        try:
            outcome = await loop.run_in_executor(self._entries(), contextvars.copy_context().run, entry)
        finally:
            if "token" in state:
                self.journal.finished(state["token"])
            if "completed" in state:  # the worker's blobs, written beside the ledger or refused with it
                PENDING.discard([sha for sha in referenced_shas(state["completed"]) if sha not in state["held"]])
        binding = await self.ledgers.call(ledger.path, binding_for, ledger, notebook_path)
        return {"record": outcome.record, "ledger": {"path": self._api_path(ledger.path), **binding}}

    def _entries(self) -> concurrent.futures.ThreadPoolExecutor:
        """The threads the entry routine runs in: one per check that may be admitted at once (every
        worker and queue place, and a few being admitted), so none waits for a thread."""
        if self._entry_threads is None:
            self._entry_threads = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.pool.size + self.pool.queue_size + 4, thread_name_prefix="gradcheck-check"
            )
        return self._entry_threads

    def close(self) -> None:
        """Let go of the entry threads once the pool has stopped: checks still queued are
        cancelled, and a thread still waiting on the loop stops when the loop does (`_on_loop`)."""
        if self._entry_threads is not None:
            self._entry_threads.shutdown(wait=False, cancel_futures=True)

    # --- GET ledger ----------------------------------------------------------------
    async def ledger_view(self, notebook) -> dict:
        """The entries, each check's history, the chain report and the binding to keep."""
        notebook_path, ledger = self._ledger_of(notebook, field="path")
        view = await self.ledgers.call(ledger.path, _read_view, ledger, notebook_path)
        return {"ledger": self._api_path(ledger.path), "notebook": self._api_path(notebook_path), **view}

    # --- POST tolerance / expectation -------------------------------------------------
    async def change_tolerance(
        self, notebook, check_id, *, rtol=None, atol=None, target="tolerance", justification=None
    ) -> dict:
        """A justified tolerance change, appended to the ledger."""
        _, ledger = self._ledger_of(notebook, field="notebook")
        _require_text(check_id, "check_id")
        entry = await self.ledgers.call(
            ledger.path,
            ledger.change_tolerance,
            check_id,
            rtol=rtol,
            atol=atol,
            target=target,
            justification=justification,
            max_rtol=self.limits.max_rtol,
        )
        return {"entry": entry}

    async def change_expectation(self, notebook, check_id, analytical_gradient, *, justification=None) -> dict:
        """A justified change of a check's analytical gradient, appended to the ledger."""
        _, ledger = self._ledger_of(notebook, field="notebook")
        _require_text(check_id, "check_id")
        entry = await self.ledgers.call(
            ledger.path, _change_expectation, ledger, check_id, analytical_gradient, justification, self.limits
        )
        return {"entry": entry}

    # --- GET export / POST verify -------------------------------------------------------
    async def export(self, api_path, export_format) -> tuple[str, str, str]:
        """(text, media type, file name) of a CSV, JSON or HTML export of a notebook or folder."""
        if export_format not in _EXPORTS:
            raise SpecError(
                "format {format!r} is not one of {choices}",
                format=export_format,
                choices=", ".join(_EXPORTS),
                field="format",
            )
        target = resolve(self.root, api_path, field="path")
        refused = await self.ledgers.run(self._confine_tree, target, "path")
        module, function, media_type = _EXPORTS[export_format]
        text = await self.ledgers.run(_render, module, function, target, refused)
        return text, media_type, f"{_stem(target)}.gradcheck.{export_format}"

    async def verify(self, api_path, replay=False, deep=False) -> dict:
        """The CLI's verify report for a notebook, a ledger or a folder, made in a worker
        (replay re-runs checks; every verify parses files that may be hostile)."""
        for name, value in (("replay", replay), ("deep", deep)):
            if not isinstance(value, bool):
                raise SpecError("{name} must be true or false", name=name, field=name)
        target = resolve(self.root, api_path, field="path")
        refused = await self.ledgers.run(self._confine_tree, target, "path")
        report = await self.pool.run(
            {"op": "verify", "path": str(target), "replay": replay, "deep": deep, "refused": refused}
        )
        return without_root(report, self.root)

    # --- paths -------------------------------------------------------------------
    def _ledger_of(self, notebook, *, field: str) -> tuple[Path, Ledger]:
        """The notebook (inside the root) and its ledger (refused if a link leads it outside).

        The server never rewrites a notebook's metadata: the panel keeps the binding through
        the open notebook's model, so the ledger is opened without binding.
        """
        notebook_path = resolve(self.root, notebook, field=field, suffix=".ipynb")
        if not notebook_path.is_file():
            raise NotFound("{name} {path!r} is not a notebook file", name=field, path=notebook, field=field)
        ledger = Ledger.for_notebook(notebook_path, bind=False)
        ensure_inside(self.root, ledger.path, field=field, shown=self._api_path(ledger.path))
        return notebook_path, ledger

    def _confine_tree(self, target: Path, field: str) -> dict[str, str]:
        """The files under `target` that a verify or export must not read, with the reason: one
        that leads outside the root through a link, or whose ledger (beside it, or named by its
        binding) does. A file target that does is refused whole (403); in a folder, each such
        file is reported on its own, so one student's link never blocks a class's export."""
        refused = {}
        for kind, item in discover(target):
            try:
                ensure_inside(self.root, item, field=field)
                if kind == "notebook":
                    ensure_inside(self.root, ledger_path_for(item), field=field)
                    try:
                        named = (read_binding(item) or {}).get("ledger")
                    except LedgerError:  # unreadable: verify reports it, and follows no binding
                        named = None
                    if named:
                        ensure_inside(self.root, item.parent / str(named), field=field)
            except PathForbidden as exc:
                if not target.is_dir():
                    raise
                refused[str(item)] = f"not read: {exc.message}"
        return refused

    def _api_path(self, path) -> str:
        return to_api_path(self.root, path)


# --- the ledger work, run in the ledger threads ----------------------------------------


async def _turn(place, client_gone: asyncio.Event | None) -> None:
    """Wait for the place's worker; ClientGone (the wait abandoned) if the client leaves first."""
    if client_gone is None:
        return await place.acquire()
    waiting = asyncio.ensure_future(place.acquire())
    gone = asyncio.ensure_future(client_gone.wait())
    await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    gone.cancel()
    if waiting.done():
        return waiting.result()
    waiting.cancel()
    try:
        await waiting
    except asyncio.CancelledError:
        pass
    raise ClientGone("the client closed the connection before a worker was free; nothing ran")


def _read_view(ledger: Ledger, notebook_path: Path) -> dict:
    exists = ledger.path.is_file()
    chain = verify_ledger_file(ledger.path) if exists else None
    if chain is not None:
        drop_internals(chain)
    return {
        "entries": ledger.entries(),
        "checks": ledger.checks(),
        "chain": chain,
        "binding": {"recorded": read_binding(notebook_path), "current": binding_for(ledger, notebook_path)},
    }


def _change_expectation(ledger: Ledger, check_id: str, analytical_gradient, justification, limits) -> dict:
    """Refuse an expectation the check's inputs cannot take (nothing written), then record it."""
    history = ledger.checks(records=False).get(check_id)
    if history and isinstance(history.get("expectation"), dict):
        parse_spec({**history["expectation"], "analytical_gradient": analytical_gradient}, limits=limits)
    return ledger.change_expectation(check_id, analytical_gradient, justification=justification)


#: format -> (core module, renderer over `collect`ed submissions, media type)
_EXPORTS = {
    "csv": ("exports", "to_csv", "text/csv; charset=utf-8"),
    "json": ("exports", "to_json", "application/json; charset=utf-8"),
    "html": ("html_export", "to_html", "text/html; charset=utf-8"),
}


def _render(module: str, function: str, target: Path, refused: dict[str, str]) -> str:
    import importlib

    from ..core.report.submissions import collect

    render = getattr(importlib.import_module(f"..core.report.{module}", __package__), function)
    return render(collect([target], refused=refused))


def _require_text(value, field: str) -> None:
    if not isinstance(value, str) or not value:
        raise SpecError("{name} must be a non-empty string", name=field, field=field)


def _stem(path: Path) -> str:
    name = path.name
    return name[: -len(".ipynb")] if name.endswith(".ipynb") else (name or "export")
