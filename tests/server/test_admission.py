"""Admission and fair turns on a real server: what cannot finish within the timeout is refused
before anything is written, and light checks keep flowing while heavy ones run."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from support.server import server_config

#: Predicted at about 4,000 evaluations of 1,000 elements (40 ms at the default rate): heavy under
#: this test's threshold of 1 ms, while its real work stays small. The test option below makes
#: a worker sleep 3 s before running it, so it holds its worker.
HEAVY = "sum(x)*sum(x)"
HEAVY_INPUT = [0.5] * 1000
LIGHT = {"function": "x*x", "x": 3.0, "analytical_gradient": "2*x"}


@pytest.fixture
def jp_server_config():
    return server_config(timeout=10.0, heavy_seconds=0.001, test_slow_functions={HEAVY: 3.0, "x*x*x": 600.0})


def _heavy() -> dict:
    return {"function": HEAVY, "x": HEAVY_INPUT, "analytical_gradient": "2*sum(x) + 0*x"}


async def test_a_check_that_cannot_finish_within_the_timeout_is_refused_before_it_runs(api, lab1, jp_root_dir):
    """Given the default admission rate and a 10 s timeout,
    when a client sends sum(matmul(x, y)) with a 7000x1 and a 1x7000 input (each evaluation
    builds 49 million elements, 28,000 evaluations),
    then the answer is 400 over_budget naming the timeout and the inputs differenced one
    element at a time, and no ledger is written."""
    check = {
        "function": "sum(matmul(x, y))",
        "x": [[0.1]] * 7000,
        "y": [[0.2] * 7000],
        "analytical_gradient": {"x": "0*x", "y": "0*y"},
    }

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": check})

    assert status == 400, body
    assert body["code"] == "over_budget"
    assert "10 s timeout" in body["message"] and "x, y" in body["message"]
    assert not (Path(jp_root_dir) / "work" / "lab1.gradcheck.jsonl").exists()


async def test_an_elementwise_check_at_the_element_limit_is_admitted_and_runs(api, lab1):
    """Given the documented limit of 100,000 input elements,
    when the check is an elementwise chain summed (its finite differences take a few
    evaluations whatever the size),
    then it is admitted and passes."""
    check = {"function": "sum(sin(x))", "x": [0.25] * 100_000, "analytical_gradient": "cos(x)"}

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": check})

    assert status == 200, body
    assert body["record"]["passed"] is True


async def test_a_light_check_runs_while_two_heavy_checks_hold_their_turns(api, lab1, wait_pool, jp_root_dir):
    """Given two workers and two heavy checks from two notebooks, each holding a worker for 3 s,
    when a third notebook sends a light check,
    then the light check is answered while both heavy checks are still unanswered: one heavy
    check runs, the other waits for it, and a worker stays free for light work."""
    other = Path(jp_root_dir) / "work" / "lab2.ipynb"
    other.write_bytes((Path(jp_root_dir) / lab1).read_bytes())
    third = Path(jp_root_dir) / "work" / "lab3.ipynb"
    third.write_bytes((Path(jp_root_dir) / lab1).read_bytes())
    await wait_pool(lambda pool: pool["state"] == "ready", "the pool to start")

    heavy = [
        asyncio.ensure_future(api("POST", "checks", {"notebook": book, "check": _heavy()}))
        for book in (lab1, "work/lab2.ipynb")
    ]
    await wait_pool(
        lambda pool: pool["queue"]["heavy_running"] == 1 and pool["queue"]["waiting"] == 1,
        "one heavy check running and one waiting",
    )
    status, _, body = await api("POST", "checks", {"notebook": "work/lab3.ipynb", "check": LIGHT})

    assert status == 200 and body["record"]["passed"] is True, body
    assert not any(task.done() for task in heavy)
    answers = await asyncio.gather(*heavy)
    assert [answer[0] for answer in answers] == [200, 200], answers


async def test_a_client_that_leaves_while_its_check_waits_leaves_the_ledger_untouched(
    api, lab1, wait_pool, jp_root_dir, jp_http_port, jp_base_url, jp_auth_header
):
    """Given both workers busy with checks that never finish,
    when a client sends a check and closes its connection before a worker is free,
    then nothing of that check reaches the ledger (it never ran), and the pool's queue is
    empty again."""
    await wait_pool(lambda pool: pool["state"] == "ready", "the pool to start")
    stuck = [
        asyncio.ensure_future(
            api(
                "POST",
                "checks",
                {
                    "notebook": f"work/stuck{i}.ipynb",
                    "check": {"function": "x*x*x", "x": 1.0, "analytical_gradient": "3*x*x"},
                },
            )
        )
        for i in range(2)
    ]
    for i in range(2):
        (Path(jp_root_dir) / "work" / f"stuck{i}.ipynb").write_bytes((Path(jp_root_dir) / lab1).read_bytes())
    await wait_pool(lambda pool: [w["state"] for w in pool["workers"]] == ["busy", "busy"], "both workers busy")

    body = json.dumps({"notebook": lab1, "check": LIGHT}).encode()
    headers = "".join(f"{name}: {value}\r\n" for name, value in jp_auth_header.items())
    request = (
        f"POST {jp_base_url}gradcheck/checks HTTP/1.1\r\nHost: localhost:{jp_http_port}\r\n{headers}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    client = socket.create_connection(("127.0.0.1", jp_http_port))
    client.sendall(request)
    await wait_pool(lambda pool: pool["queue"]["waiting"] == 1, "the check to wait for a worker")
    client.close()

    # Well before the 10 s timeout frees a worker: the check leaves the queue because its client left.
    await wait_pool(lambda pool: pool["queue"]["waiting"] == 0, "the abandoned check to leave the queue", limit=5.0)
    assert not (Path(jp_root_dir) / "work" / "lab1.gradcheck.jsonl").exists()
    for task in stuck:
        task.cancel()
