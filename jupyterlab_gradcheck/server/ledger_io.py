"""Ledger file I/O off the event loop, one operation at a time per ledger file.

Ledger appends lock, flush and fsync: blocking work that must not stall the server. They run
on a small thread pool; an asyncio lock per ledger keeps the operations on one ledger in the
order the requests made them, while different notebooks' ledgers proceed side by side.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import weakref


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
