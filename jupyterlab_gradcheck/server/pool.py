"""The pool of warm worker processes that run checks for the server.

N workers start with the extension. A request waits in a bounded queue for a free worker,
handed out in turns by notebook with one worker kept for light checks (pool.py); when the
queue is full it is refused at once (503 with Retry-After) rather than piling up.
Each task runs under a timeout. A worker that dies or overruns is killed and a fresh one
takes its slot, so one bad check cannot take the server down or poison the next check.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import time
from collections import deque
from dataclasses import dataclass, field

from .errors import PoolBusy, WorkerCrashed, WorkerFailed, WorkerGone, WorkerTimeout, from_json
from .worker import WorkerProcess

# -------------------- scheduler
# Who gets the next free worker: turns by notebook, and a worker kept for light checks.
#
# A plain first-come queue lets one notebook that sends many checks, or two heavy checks, hold
# every worker while everyone else waits. Here each waiting request belongs to a key (its
# notebook) and the keys take turns (start-time fair queuing): each key carries the number of
# turns it has had, a key that starts waiting again is brought up to the turn now being served,
# and a free worker goes to the waiting key with the fewest turns (the first to wait on a tie). A heavy request (one whose
# predicted work is long, see `core/run.py`) may run only while fewer than `heavy_limit`
# heavy requests hold workers, so with two or more workers at least one is always left for light
# checks. Within one key, requests keep their order, except that a light one may pass a heavy one
# that is waiting for the heavy limit.


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


# -------------------- pool


@dataclass
class _Slot:
    """One place in the pool, holding its current worker process."""

    index: int
    worker: WorkerProcess | None = None
    ready: concurrent.futures.Future | None = None  #: resolves to the worker's hello
    busy: bool = False
    tasks: int = 0

    def state(self) -> str:
        if self.busy:
            return "busy"
        if not self.ready.done():
            return "starting"
        if self.ready.exception() is not None:
            return "failed"
        return "idle" if self.worker.is_alive() else "dead"


@dataclass
class WorkerPool:
    """Warm worker processes behind a bounded queue, each task under a timeout."""

    size: int
    timeout: float
    queue_size: int
    startup_timeout: float
    options: dict = field(default_factory=dict)  #: handed to every worker (limits, test hooks)
    #: Workers that heavy checks may not take, so that light ones keep flowing (at least one
    #: worker always takes heavy checks).
    light_reserve: int = 1

    def __post_init__(self):
        # Blocking pipe waits run here: one per slot for tasks, one per slot for a start-up,
        # and one for the first hello.
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=2 * self.size + 1, thread_name_prefix="gradcheck-pool"
        )
        self._slots: list[_Slot] = []
        self._scheduler = FairScheduler(heavy_limit=self.size - self.light_reserve)
        self._in_flight = 0  #: reserved places: running or waiting for a worker
        self._durations: deque = deque(maxlen=32)
        self._hello: concurrent.futures.Future | None = None
        self.restarts = 0
        self.stopped = False

    def start(self) -> None:
        """Start every worker; each imports torch in the background."""
        for index in range(self.size):
            slot = _Slot(index)
            self._spawn(slot)
            self._slots.append(slot)
            self._scheduler.add(slot)

    async def hello(self) -> dict:
        """What the first worker to start reported: torch and python versions, devices."""
        if self._hello is None:  # every request waiting for start-up shares one wait
            self._hello = self._threads.submit(self._first_hello)
        try:
            return await asyncio.wrap_future(self._hello)
        except WorkerFailed:
            # None started: start fresh ones, so a later request waits for them.
            self._hello = None
            for slot in self._slots:
                if slot.ready.done() and slot.ready.exception() is not None:
                    self._replace(slot)
            raise

    def reserve(self, key: str = "", heavy: bool = False) -> Place:
        """A place for one request of `key` (its notebook), or PoolBusy when every worker and
        queue place is taken. `heavy` requests never take the workers kept for light ones.

        Reserve before writing anything that the run would complete, so that a full pool
        refuses the request while nothing has happened yet.
        """
        if self.stopped:
            raise WorkerFailed("the worker pool is stopped")
        if self._in_flight >= self.size + self.queue_size:
            raise PoolBusy(
                f"all {self.size} workers are busy and the queue of {self.queue_size} waiting "
                f"requests is full; retry later",
                retry_after=self._retry_after(),
            )
        self._in_flight += 1
        return Place(self, key, heavy)

    async def run(self, task: dict, key: str = "", heavy: bool = False):
        """Reserve a place and run one task in it (see `Place.run`)."""
        with self.reserve(key, heavy) as place:
            return await place.run(task)

    async def _run(self, slot: _Slot, task: dict):
        # Shielded: a cancelled request must still wait for its worker before the slot is
        # handed on, or the next task would read this task's answer.
        answer = await asyncio.shield(self._run_in(slot, task))
        if not answer["ok"]:
            raise from_json(answer["error"])
        return answer["result"]

    def worker(self, index: int) -> WorkerProcess | None:
        """The worker process now in place `index` (None before it is spawned)."""
        return self._slots[index].worker

    def state(self) -> dict:
        """The pool as the status route shows it."""
        states = [slot.state() for slot in self._slots]
        if self.stopped:
            overall = "stopped"
        elif any(s in ("idle", "busy") for s in states):
            overall = "ready"
        elif any(s == "starting" for s in states):
            overall = "starting"
        else:
            overall = "failed"
        return {
            "state": overall,
            "size": self.size,
            "timeout": self.timeout,
            "queue": {
                "waiting": self._in_flight - states.count("busy"),
                "limit": self.queue_size,
                "heavy_running": self._scheduler.heavy_running(),
                "heavy_limit": self._scheduler.heavy_limit,
            },
            "restarts": self.restarts,
            "workers": [
                {"index": slot.index, "pid": slot.worker.pid, "state": state, "tasks": slot.tasks}
                for slot, state in zip(self._slots, states)
            ],
        }

    def stop(self, grace: float = 2.0) -> None:
        """Stop every worker. Workers hold nothing that needs saving (ledgers are written
        by the server), so they are terminated at once, and killed if still there after
        `grace` seconds."""
        self.stopped = True
        for slot in self._slots:
            slot.worker.terminate()
        deadline = time.monotonic() + grace
        for slot in self._slots:
            slot.worker.wait(max(0.0, deadline - time.monotonic()))
            slot.worker.kill()
        self._threads.shutdown(wait=False, cancel_futures=True)

    # --- inside the pool -------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        slot.worker = WorkerProcess(f"gradcheck-worker-{slot.index}", self.options)
        slot.ready = self._threads.submit(slot.worker.handshake, self.startup_timeout)

    def _replace(self, slot: _Slot) -> None:
        old = slot.worker
        self._threads.submit(old.kill)
        self.restarts += 1
        self._spawn(slot)

    async def _run_in(self, slot: _Slot, task: dict) -> dict:
        """The task's answer from the slot's worker; once more on a fresh one if the worker was
        found dead before it took the task (it died idle: nothing ran)."""
        try:
            for attempt in range(2):
                worker = await self._started(slot)
                slot.busy = True
                began = time.monotonic()
                try:
                    answer = await asyncio.wrap_future(self._threads.submit(worker.call, task, self.timeout))
                except WorkerGone:
                    self._replace(slot)
                    if attempt:
                        raise
                    continue
                except (WorkerCrashed, WorkerTimeout):
                    self._replace(slot)
                    raise
                finally:
                    slot.busy = False
                self._durations.append(time.monotonic() - began)
                slot.tasks += 1
                return answer
        finally:
            self._scheduler.add(slot)

    async def _started(self, slot: _Slot) -> WorkerProcess:
        """The slot's worker once it has said hello; one fresh start if it failed or died."""
        for attempt in range(2):
            try:
                await asyncio.wrap_future(slot.ready)
            except WorkerFailed:
                if attempt:
                    raise
            else:
                if slot.worker.is_alive():
                    return slot.worker
                if attempt:
                    break
            self._replace(slot)
        raise WorkerFailed(f"worker {slot.index} died right after starting ({slot.worker.exit_reason()})")

    def _first_hello(self) -> dict:
        pending = {slot.ready for slot in self._slots}
        reasons = []
        while pending:
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                if future.exception() is None:
                    return future.result()
                reasons.append(str(future.exception()))
        raise WorkerFailed(f"no worker process could start: {reasons[0]}")

    def _retry_after(self) -> int:
        mean = sum(self._durations) / len(self._durations) if self._durations else 1.0
        rounds = (self._in_flight - self.size) / self.size + 1
        return max(1, math.ceil(mean * rounds))


class Place:
    """One request's place in the pool, held from `reserve` until its task is done."""

    def __init__(self, pool: WorkerPool, key: str, heavy: bool):
        self._pool = pool
        self._held = True
        self._key = key
        self._heavy = heavy
        self._slot: _Slot | None = None

    def __enter__(self) -> Place:
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    async def acquire(self) -> None:
        """Wait for this request's turn at a free worker. Cancelled (its client went away),
        it leaves the queue with nothing run."""
        if self._slot is None:
            self._slot = await self._pool._scheduler.acquire(self._key, self._heavy)

    async def run(self, task: dict):
        """Wait for a free worker (unless `acquire` did), run `task` under the timeout,
        return its result.

        Raises the error the worker reported, WorkerTimeout (the worker was killed and
        replaced), WorkerCrashed (it died; replaced) or WorkerFailed (none could start).
        """
        try:
            await self.acquire()
            slot, self._slot = self._slot, None
            return await self._pool._run(slot, task)
        finally:
            self.release()

    def release(self) -> None:
        """Give the place back, and a worker acquired but never used."""
        if self._slot is not None:
            slot, self._slot = self._slot, None
            self._pool._scheduler.add(slot)
        if self._held:
            self._held = False
            self._pool._in_flight -= 1
