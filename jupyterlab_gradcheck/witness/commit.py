"""Group commit for the witness: one fsync for the appends that arrived together.

Every receipt is answered only after an fsync that covers its line, so a witness killed at
any moment loses no receipt it gave out. An fsync per append on the event loop would hold up
every other report for the length of a disk flush; here the loop writes each line (cheap) and
waits, without blocking, for a commit thread that fsyncs once for every line written before it
started, then wakes the waiting requests.
"""

from __future__ import annotations

import asyncio
import threading


def _settle(future: asyncio.Future, error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class GroupCommit:
    """A thread that runs `sync()` for every batch of waiting appends."""

    def __init__(self, sync):
        self._sync = sync
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="witness-commit", daemon=True)
        self._thread.start()
        #: fsyncs run, and appends they covered: their ratio is the batch size.
        self.syncs = self.covered = 0

    async def durable(self) -> None:
        """Return once every line written before this call is on disk (raise if the fsync fails)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._wake:
            self._waiting.append((loop, future))
            self._wake.notify()
        await future

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._waiting:
                    self._wake.wait()
                batch, self._waiting = self._waiting, []
            error = None
            try:
                self._sync()
            except OSError as exc:
                error = exc
            self.syncs += 1
            self.covered += len(batch)
            for loop, future in batch:
                loop.call_soon_threadsafe(_settle, future, error)
