"""The server reports the heads of its kernels' ledgers to the witness itself.

A kernel reports what it appends when `GRADCHECK_WITNESS_URL` is in its environment, but the
kernel is the student's: a cell can pop the variable or point it at another witness. The
kernels of this server are started by this server, and every check run in one displays its
attestation (core.ledger.binding) on the kernel's iopub channel. So the extension subscribes
to each kernel's iopub; on an attestation it reads that ledger from disk (beside the kernel's
notebook) and reports every entry it has not reported yet, in order, one report per entry,
with the entry's own seq, head, time, kind and verdict, `source: "server"`, to the witness and
with the token of the extension's own options. A witness that cannot be reached costs no check:
the reports wait and are retried, from the first unreported entry, with a growing pause.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ..core.errors import GradcheckError
from ..core.ledger.binding import MIME_TYPE
from ..core.ledger.store import Ledger, ledger_path_for
from ..server import service as paths
from ..server.service import KERNEL_EVENTS
from .client import entry_report

_MIME_BYTES = MIME_TYPE.encode("ascii")
#: Message types that carry a display's MIME bundle.
DISPLAY_TYPES = ("display_data", "execute_result", "update_display_data")
#: Pauses between tries while the witness cannot be reached, in seconds.
RETRY_PAUSES = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
TIMEOUT = 5.0
#: Who the reports say sent them (the kernel's own reports say "kernel").
SOURCE = "server"


class WitnessRelay:
    """Subscribes to every kernel's iopub and reports the attested ledgers' entries."""

    def __init__(self, url: str, token: str, root: str, session_manager, kernel_manager, log: logging.Logger):
        self.url, self.token, self.root = url.rstrip("/"), token, root
        self.sessions, self.kernels, self.log = session_manager, kernel_manager, log
        self._streams: dict[str, object] = {}
        #: ledger path -> (ledger id, last seq the witness acknowledged)
        self.reported: dict[str, tuple[str, int]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._retry: dict[str, asyncio.TimerHandle] = {}
        self._failures: dict[str, int] = {}
        self._tasks: set[asyncio.Task] = set()
        self.last_error: str | None = None

    # ------------------------------------------------------------ subscriptions
    def listen(self, event_logger) -> None:
        """Watch the kernels running now and every kernel started or restarted from now on."""
        event_logger.add_listener(schema_id=KERNEL_EVENTS, listener=self.on_kernel_event)
        for kernel_id in self.kernels.list_kernel_ids():
            self.watch(kernel_id)

    def stop(self, event_logger) -> None:
        event_logger.remove_listener(schema_id=KERNEL_EVENTS, listener=self.on_kernel_event)
        for kernel_id in list(self._streams):
            self.unwatch(kernel_id)
        for handle in self._retry.values():
            handle.cancel()

    async def on_kernel_event(self, logger, schema_id: str, data: dict) -> None:
        kernel_id, action = data.get("kernel_id"), data.get("action")
        if not kernel_id or data.get("status") != "success":
            return
        if action in ("start", "restart"):
            self.watch(kernel_id)
        elif action == "shutdown":
            self.unwatch(kernel_id)

    def watch(self, kernel_id: str) -> None:
        """Subscribe to the kernel's iopub (a restarted kernel keeps its ports: subscribe once)."""
        if kernel_id in self._streams:
            return
        try:
            kernel = self.kernels.get_kernel(kernel_id)
            stream = kernel.connect_iopub()
        except Exception as exc:  # noqa: BLE001 - a kernel the server cannot watch must not stop it
            self.log.warning("gradcheck: cannot watch kernel %s for checks: %s", kernel_id, exc)
            return
        stream.on_recv(lambda frames: self.on_iopub(kernel_id, kernel.session, frames))
        self._streams[kernel_id] = stream

    def unwatch(self, kernel_id: str) -> None:
        stream = self._streams.pop(kernel_id, None)
        if stream is not None:
            stream.on_recv(None)
            stream.close()

    def on_iopub(self, kernel_id: str, session, frames) -> None:
        """A message on a kernel's iopub: an attestation starts a report of its ledger."""
        if not any(_MIME_BYTES in bytes(frame) for frame in frames):
            return  # most messages (streams, status) never carry one; skip decoding them
        try:
            _, parts = session.feed_identities(frames)
            message = session.deserialize(parts)
        except Exception as exc:  # noqa: BLE001 - a message that does not decode is not ours
            self.log.debug("gradcheck: undecodable iopub message from %s: %s", kernel_id, exc)
            return
        if message["header"].get("msg_type") not in DISPLAY_TYPES:
            return
        attestation = (message["content"].get("data") or {}).get(MIME_TYPE)
        if isinstance(attestation, dict):
            task = asyncio.ensure_future(self.attested(kernel_id, attestation))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------- reports
    async def attested(self, kernel_id: str, attestation: dict) -> None:
        """Report what the witness has not heard of the ledger this attestation names."""
        try:
            notebook = await self._notebook_of(kernel_id)
        except GradcheckError as exc:  # a session path that leads outside the root
            self.log.warning("gradcheck: kernel %s attested a check for a notebook not reported: %s", kernel_id, exc)
            return
        if notebook is None:
            self.log.warning("gradcheck: kernel %s attested a check but belongs to no notebook", kernel_id)
            return
        name = str(attestation.get("ledger") or "")
        ledger = notebook.parent / name if name and Path(name).name == name else ledger_path_for(notebook)
        if not ledger.is_file():  # the notebook was renamed since: its ledger moved with it
            ledger = ledger_path_for(notebook)
        await self.flush(ledger, notebook.name)

    async def flush(self, ledger_path: Path, notebook: str) -> bool:
        """Report every entry after the last acknowledged one; whether all were delivered."""
        key = str(ledger_path)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            entries, ledger_id = await asyncio.get_running_loop().run_in_executor(None, _read, ledger_path)
            if ledger_id is None:
                return True
            known_id, done = self.reported.get(key, (ledger_id, 0))
            if known_id != ledger_id:  # another ledger now has this name: it starts from its genesis
                done = 0
            for entry in entries:
                if entry["seq"] <= done:
                    continue
                try:
                    await self._post(entry_report(ledger_path, notebook, entry, ledger_id, SOURCE))
                except Exception as exc:  # noqa: BLE001 - any failure to deliver is retried later
                    self.last_error = str(exc)
                    self.log.warning("gradcheck: the witness did not take seq %d of %s: %s", entry["seq"], key, exc)
                    self._schedule_retry(ledger_path, notebook)
                    return False
                done = entry["seq"]
                self.reported[key] = (ledger_id, done)
            self._failures.pop(key, None)
            return True

    def _schedule_retry(self, ledger_path: Path, notebook: str) -> None:
        key = str(ledger_path)
        if key in self._retry and not self._retry[key].cancelled():
            self._retry[key].cancel()
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        pause = RETRY_PAUSES[min(failures, len(RETRY_PAUSES) - 1)]

        def again() -> None:
            self._retry.pop(key, None)
            task = asyncio.ensure_future(self.flush(ledger_path, notebook))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._retry[key] = asyncio.get_running_loop().call_later(pause, again)

    async def _post(self, report: dict) -> dict:
        request = HTTPRequest(
            f"{self.url}/heads",
            method="POST",
            body=json.dumps(report),
            headers={"Content-Type": "application/json", "Authorization": f"token {self.token}"},
            request_timeout=TIMEOUT,
            connect_timeout=TIMEOUT,
        )
        answer = await AsyncHTTPClient().fetch(request)
        return json.loads(answer.body.decode("utf-8"))

    async def _notebook_of(self, kernel_id: str) -> Path | None:
        """The notebook of the kernel's session, as an OS path under the server root."""
        for session in await self.sessions.list_sessions():
            path = str(session.get("path") or "")
            if (session.get("kernel") or {}).get("id") == kernel_id and path.endswith(".ipynb"):
                return paths.resolve(self.root, path, field="path", must_exist=False)
        return None


def _read(ledger_path: Path) -> tuple[list[dict], str | None]:
    """The ledger's entries after its genesis and its id (None when it has none)."""
    ledger = Ledger(ledger_path, bind=False)
    ledger_id = ledger.ledger_id()
    return ([e for e in ledger.entries() if e["seq"] >= 1] if ledger_id else []), ledger_id
