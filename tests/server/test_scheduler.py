"""The scheduler that hands free workers out: turns by notebook, and a worker kept for light checks."""

from __future__ import annotations

import asyncio

from jupyterlab_gradcheck.server.pool import FairScheduler


async def _granted_order(scheduler: FairScheduler, requests: list[tuple[str, str, bool]], hold: int) -> list[str]:
    """Queue `requests` (name, key, heavy) in order; each holds its slot for `hold` loop turns."""
    order = []

    async def one(name, key, heavy):
        slot = await scheduler.acquire(key, heavy)
        order.append(name)
        for _ in range(hold):
            await asyncio.sleep(0)
        scheduler.add(slot)

    tasks = []
    for request in requests:
        tasks.append(asyncio.ensure_future(one(*request)))
        await asyncio.sleep(0)  # each request queues before the next one arrives
    await asyncio.gather(*tasks)
    return order


async def test_notebooks_take_turns_at_a_single_worker():
    """Given one worker and notebook A queueing three checks before notebook B queues one,
    when the worker frees up after each,
    then B's check runs second, not last: the notebooks take turns."""
    scheduler = FairScheduler(heavy_limit=1)
    scheduler.add("worker-0")

    order = await _granted_order(
        scheduler, [("a1", "A", False), ("a2", "A", False), ("a3", "A", False), ("b1", "B", False)], hold=20
    )

    assert order == ["a1", "b1", "a2", "a3"]


async def test_heavy_checks_never_take_the_last_free_worker():
    """Given two workers with one kept for light checks,
    when two heavy checks arrive and then a light one,
    then one heavy check runs, the light one runs beside it at once, and the second heavy
    check waits for the first to end."""
    scheduler = FairScheduler(heavy_limit=1)
    scheduler.add("worker-0")
    scheduler.add("worker-1")

    first = await scheduler.acquire("A", heavy=True)
    second = asyncio.ensure_future(scheduler.acquire("B", heavy=True))
    await asyncio.sleep(0)
    light = await asyncio.wait_for(scheduler.acquire("C", heavy=False), 1.0)

    assert {first, light} == {"worker-0", "worker-1"}
    assert not second.done() and scheduler.heavy_running() == 1 and scheduler.waiting() == 1
    scheduler.add(first)
    assert await asyncio.wait_for(second, 1.0) == first
    assert scheduler.heavy_running() == 1


async def test_a_request_cancelled_while_waiting_leaves_no_trace():
    """Given one busy worker and a request waiting for it,
    when that request is cancelled (its client went away) and the worker frees up,
    then the worker goes to the next waiting request and none is left waiting."""
    scheduler = FairScheduler(heavy_limit=1)
    scheduler.add("worker-0")
    held = await scheduler.acquire("A", heavy=False)
    gone = asyncio.ensure_future(scheduler.acquire("B", heavy=False))
    after = asyncio.ensure_future(scheduler.acquire("C", heavy=False))
    await asyncio.sleep(0)

    gone.cancel()
    await asyncio.sleep(0)
    scheduler.add(held)

    assert await asyncio.wait_for(after, 1.0) == "worker-0"
    assert gone.cancelled() and scheduler.waiting() == 0
