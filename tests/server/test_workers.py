"""The worker pool: a killed worker, a stuck check and a full queue each get a clear answer,
the attempt is kept in the ledger, and the next check runs on a fresh worker."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from support.server import SLOW, STUCK, TIMEOUT, server_config


def _check(function: str) -> dict:
    return {"function": function, "x": 2.0, "analytical_gradient": 0}


async def test_a_worker_killed_mid_check_answers_500_and_the_next_check_runs(api, lab1, wait_pool, ledger_lines):
    """Given a check that is running in a worker,
    when that worker process is killed with SIGKILL,
    then the request answers 500 worker_crashed before the timeout would have fired, the
    ledger records the attempt as failed to run with the reason, a fresh worker takes the
    slot, and the next check succeeds."""
    await wait_pool(lambda pool: pool["state"] == "ready", "the pool to start")
    request = asyncio.ensure_future(api("POST", "checks", {"notebook": lab1, "check": _check(STUCK)}))
    status_body = await wait_pool(
        lambda pool: any(w["state"] == "busy" for w in pool["workers"]), "the stuck check to reach a worker"
    )
    busy = next(w for w in status_body["pool"]["workers"] if w["state"] == "busy")
    killed_at = time.monotonic()

    os.kill(busy["pid"], signal.SIGKILL)
    status, _, body = await request

    assert time.monotonic() - killed_at < TIMEOUT
    assert status == 500, body
    assert body["code"] == "worker_crashed"
    assert "SIGKILL" in body["message"]
    kinds = [(e["kind"], e["data"].get("failed_to_run")) for e in ledger_lines()]
    assert kinds == [("expectation", None), ("observation", True)]
    assert "SIGKILL" in ledger_lines()[-1]["data"]["reason"]
    after = await wait_pool(lambda pool: pool["restarts"] == 1, "the worker to be replaced")
    assert busy["pid"] not in [w["pid"] for w in after["pool"]["workers"]]

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": _check("x*x")})
    assert status == 200 and body["record"]["executed"] is True, body


async def test_a_check_over_the_timeout_answers_504_and_its_worker_is_replaced(api, lab1, wait_pool, ledger_lines):
    """Given a check that never finishes (a test-only function configured to sleep),
    when it runs past the timeout,
    then the answer is 504, the stuck worker is killed and replaced by a new process, the
    ledger records the attempt as failed to run, and the next check succeeds."""
    before = await wait_pool(lambda pool: pool["state"] == "ready", "the pool to start")
    pids_before = {w["pid"] for w in before["pool"]["workers"]}
    started = time.monotonic()

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": _check(STUCK)})

    assert status == 504, body
    assert body["code"] == "timeout"
    assert time.monotonic() - started >= TIMEOUT
    after = await wait_pool(lambda pool: pool["restarts"] == 1, "the worker to be replaced")
    pids_after = {w["pid"] for w in after["pool"]["workers"]}
    assert len(pids_before - pids_after) == 1, (pids_before, pids_after)
    for pid in pids_before - pids_after:
        try:
            os.kill(pid, 0)
            assert False, f"the timed-out worker {pid} is still running"
        except ProcessLookupError:
            pass
    observation = ledger_lines()[-1]
    assert observation["data"]["failed_to_run"] is True
    assert observation["data"]["reason"].startswith("timeout:")

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": _check("x*x")})
    assert status == 200 and body["record"]["executed"] is True, body


@pytest.mark.parametrize("jp_server_config", [server_config(queue_size=1)])
async def test_a_full_queue_answers_503_with_retry_after_and_appends_nothing(
    api, lab1, wait_pool, ledger_lines, jp_server_config
):
    """Given 2 workers and a queue of 1, with three slow checks running or waiting,
    when a fourth check arrives,
    then it answers 503 with a Retry-After header at once and appends nothing, while the
    three others complete."""
    await wait_pool(lambda pool: pool["state"] == "ready", "the pool to start")
    slow = [asyncio.ensure_future(api("POST", "checks", {"notebook": lab1, "check": _check(SLOW)})) for _ in range(3)]
    await wait_pool(
        lambda pool: pool["queue"]["waiting"] == 1 and all(w["state"] == "busy" for w in pool["workers"]),
        "two busy workers and one waiting",
    )
    entries_before = len(ledger_lines())

    status, headers, body = await api("POST", "checks", {"notebook": lab1, "check": _check("x*x")})

    assert status == 503, body
    assert body["code"] == "busy"
    assert int(headers["Retry-After"]) >= 1
    assert len(ledger_lines()) == entries_before
    assert [s for s, _, _ in await asyncio.gather(*slow)] == [200, 200, 200]


@pytest.mark.parametrize("jp_server_config", [server_config(startup_timeout=0.01)])
async def test_when_no_worker_can_start_status_says_why_and_checks_answer_500(
    api, lab1, ledger_lines, jp_server_config
):
    """Given workers that cannot start in time (a start-up timeout of 10 ms; importing torch
    takes far longer),
    when a client asks for the status and then runs a check,
    then the status still answers (the handshake works without torch) with no torch version
    and the reason, and the check answers 500 worker_error with nothing appended."""
    status, _, info = await api("GET", "status")
    assert status == 200
    assert info["torch"] is None and info["devices"] == []
    assert "did not start within" in info["error"]

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": _check("x*x")})
    assert (status, body["code"]) == (500, "worker_error"), body
    assert ledger_lines() == []
