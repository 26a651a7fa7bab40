"""Who gets the next free worker: turns by notebook, and a worker kept for light checks.

A plain first-come queue lets one notebook that sends many checks, or two heavy checks, hold
every worker while everyone else waits. Here each waiting request belongs to a key (its
notebook) and the keys take turns (start-time fair queuing): each key carries the number of
turns it has had, a key that starts waiting again is brought up to the turn now being served,
and a free worker goes to the waiting key with the fewest turns (the first to wait on a tie). A heavy request (one whose
predicted work is long, see `core/check/record/cost_estimate.py`) may run only while fewer than `heavy_limit`
heavy requests hold workers, so with two or more workers at least one is always left for light
checks. Within one key, requests keep their order, except that a light one may pass a heavy one
that is waiting for the heavy limit.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field


@dataclass
class _Waiter:
    key: str
    heavy: bool
    granted: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class FairScheduler:
    """Hands free slots to waiting requests, in turns by key, with a cap on heavy ones."""

    def __init__(self, heavy_limit: int):
        self.heavy_limit = max(1, heavy_limit)
        self._free: deque = deque()
        self._waiting: dict[str, deque] = {}
        self._turns: deque = deque()  #: keys with waiting requests, in the order they began waiting
        self._tags: dict[str, int] = {}  #: turns each key has had (keys that could still be ahead)
        self._now = 0  #: the tag of the last turn served
        self._heavy: set = set()  #: ids of the slots that heavy requests hold

    def add(self, slot) -> None:
        """A slot that has become free (at start, or when a request gives it back)."""
        self._heavy.discard(id(slot))
        self._free.append(slot)
        self._dispatch()

    async def acquire(self, key: str, heavy: bool):
        """A free slot for a request of `key`, once its turn comes. Cancelling the wait leaves
        no trace: a slot granted at the same moment goes back to the others."""
        waiter = _Waiter(key, heavy)
        self._waiting.setdefault(key, deque()).append(waiter)
        if key not in self._turns:
            self._turns.append(key)
            self._tags[key] = max(self._tags.get(key, 0), self._now)
        self._dispatch()
        try:
            return await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.add(waiter.granted.result())
            else:
                self._forget(waiter)
            raise

    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return sum(len(queue) for queue in self._waiting.values())

    def heavy_running(self) -> int:
        """Slots that heavy requests hold now."""
        return len(self._heavy)

    def _dispatch(self) -> None:
        while self._free:
            waiter = self._next()
            if waiter is None:
                return
            slot = self._free.popleft()
            if waiter.heavy:
                self._heavy.add(id(slot))
            waiter.granted.set_result(slot)

    def _next(self) -> _Waiter | None:
        """The first allowed waiter of the key with the fewest turns; that key has one more."""
        heavy_allowed = len(self._heavy) < self.heavy_limit
        best = None
        for key in self._turns:
            chosen = next((w for w in self._waiting[key] if heavy_allowed or not w.heavy), None)
            if chosen is not None and (best is None or self._tags[key] < self._tags[best.key]):
                best = chosen
        if best is not None:
            self._now = self._tags[best.key]
            self._tags[best.key] += 1
            self._forget(best)
        return best

    def _forget(self, waiter: _Waiter) -> None:
        queue = self._waiting.get(waiter.key)
        if queue is None or waiter not in queue:
            return
        queue.remove(waiter)
        if not queue:
            del self._waiting[waiter.key]
            self._turns.remove(waiter.key)
            if self._tags[waiter.key] <= self._now:  # it would start again at the current turn
                del self._tags[waiter.key]
