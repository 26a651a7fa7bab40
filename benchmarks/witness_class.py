"""A class reporting to a real witness process on loopback: the load figure and the kill -9 figure.

- `class_load`: each student holds one keep-alive connection and posts one head a second, the
  students' phases spread evenly over the second (an open schedule: a late answer delays no
  later send's clock). A receipt's latency runs from the moment its report was due to the moment
  its answer was read, so a stalled witness shows in the figure rather than slowing the senders.
- `kill_nine`: each student's real client queue (witness.client) reports a head a
  second; mid-load the witness gets SIGKILL, and is started again on the same log and port.
  Then every receipt a client got back must be in the log, the log's chain must be intact, and
  the log must end up holding every head the clients queued, each ledger's in order.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import threading
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from support.witness import Witness  # noqa: E402 - the tests' real witness process


def class_list(size: int) -> tuple[str, ...]:
    return tuple(f"student{number:03d}" for number in range(size))


def start_witness(folder: Path, size: int) -> Witness:
    """`jupyter gradcheck witness` in its own process, knowing a class of `size` students."""
    return Witness(folder / "w.jsonl", students=class_list(size)).start()


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile (fraction 0.99: the value 99% of the samples do not exceed)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * len(ordered) + 0.5)) - 1))]


def _report(user: str, seq: int) -> dict:
    return {
        "ledger_id": f"ledger-{user}",
        "notebook": "lab1.ipynb",
        "seq": seq,
        "head": f"{seq:064x}",
        "entry_time": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "check_id": "square",
        "kind": "observation",
        "passed": True,
        "source": "kernel",
    }


async def _post(reader, writer, port: int, token: str, body: bytes) -> int:
    writer.write(
        (
            f"POST /heads HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: token {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _student(port, user, token, phase, start, seconds, latencies, failures) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    loop = asyncio.get_running_loop()
    try:
        for seq in range(1, int(seconds) + 1):
            due = start + phase + (seq - 1)
            await asyncio.sleep(max(0.0, due - loop.time()))
            status = await _post(reader, writer, port, token, json.dumps(_report(user, seq)).encode())
            if status == 200:
                latencies.append(loop.time() - due)
            else:
                failures.append(status)
    finally:
        writer.close()


async def _class(port: int, tokens: dict[str, str], seconds: float) -> tuple[list[float], list[int]]:
    latencies: list[float] = []
    failures: list[int] = []
    start = asyncio.get_running_loop().time() + 1.0  # every connection open before the first send
    users = sorted(tokens)
    await asyncio.gather(
        *(
            _student(port, user, tokens[user], number / len(users), start, seconds, latencies, failures)
            for number, user in enumerate(users)
        )
    )
    return latencies, failures


def class_load(folder: Path, size: int, seconds: float) -> dict:
    """A class of `size` students, one head a second each for `seconds`, against a real witness:
    receipt latencies (ms) and what the log holds after."""
    from jupyterlab_gradcheck.witness.log import log_problems, read_log

    witness = start_witness(folder, size)
    try:
        latencies, failures = asyncio.run(_class(witness.port, witness.tokens, seconds))
    finally:
        witness.kill()
    receipts = read_log(witness.log)
    ms = [value * 1e3 for value in latencies]
    return {
        "students": size,
        "seconds": seconds,
        "receipts": len(ms),
        "failures": len(failures),
        "logged": len(receipts),
        "chain_problems": len(log_problems(receipts, None)),
        "p50": statistics.median(ms),
        "p99": percentile(ms, 0.99),
        "max": max(ms),
    }


def _until_acknowledged(clients: dict, count: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while sum(len(c.receipts) for c in clients.values()) < count and time.monotonic() < deadline:
        time.sleep(0.001)


def kill_nine(folder: Path, size: int, before: float, down: float, after: float) -> dict:
    """A class's real client queues reporting a head a second each; the witness is SIGKILLed
    `before` seconds in, kept down `down` seconds, started again, fed `after` more seconds, and
    every queue drained. What was lost, re-sent and kept."""
    from jupyterlab_gradcheck.witness.client import WitnessClient
    from jupyterlab_gradcheck.witness.log import log_problems, read_log

    witness = start_witness(folder, size)
    clients = {user: WitnessClient(witness.url, token) for user, token in witness.tokens.items()}
    queued: dict[str, int] = {user: 0 for user in clients}
    stop, fed = threading.Event(), threading.Event()

    def feed() -> None:  # every student's kernel appends an entry a second
        tick = time.monotonic()
        while not stop.is_set():
            for user, client in clients.items():
                queued[user] += 1
                client.report(f"ledger-{user}", _report(user, queued[user]))
            fed.set()
            tick += 1.0
            stop.wait(max(0.0, tick - time.monotonic()))

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        time.sleep(before)
        fed.clear()
        fed.wait()
        _until_acknowledged(clients, sum(len(c.receipts) for c in clients.values()) + size // 10 + 1)
        # the kill comes while this second's heads are being sent: a tenth answered, the rest not
        acknowledged_before = sum(len(c.receipts) for c in clients.values())
        waiting_at_kill = sum(c.pending() for c in clients.values())
        witness.process.kill()  # SIGKILL, mid-load
        witness.process.wait(timeout=10)
        time.sleep(down)
        restarted = time.monotonic()
        witness.start()
        restart_seconds = time.monotonic() - restarted
        time.sleep(after)
        stop.set()
        feeder.join()
        drained = all(client.drain(120) for client in clients.values())
    finally:
        stop.set()
        if witness.process.poll() is None:
            witness.kill()
    receipts = read_log(witness.log)
    logged = {json.dumps(r, sort_keys=True) for r in receipts}
    acknowledged = [answer["receipt"] for c in clients.values() for answer in c.receipts]
    lost = [r for r in acknowledged if json.dumps(r, sort_keys=True) not in logged]
    seqs: dict[str, list[int]] = {}
    for receipt in receipts:
        seqs.setdefault(receipt["user"], []).append(receipt["seq"])
    missing = sum(len(set(range(1, queued[user] + 1)) - set(seqs.get(user, []))) for user in clients)
    out_of_order = sum(any(b < a for a, b in zip(s, s[1:])) for s in seqs.values())
    return {
        "students": size,
        "queued": sum(queued.values()),
        "acknowledged_before_kill": acknowledged_before,
        "waiting_at_kill": waiting_at_kill,
        "acknowledged": len(acknowledged),
        "lost": len(lost),
        "missing": missing,
        "duplicates": len(receipts) - len({(r["user"], r["seq"]) for r in receipts}),
        "out_of_order": out_of_order,
        "chain_problems": len(log_problems(receipts, None)),
        "drained": drained,
        "restart_seconds": restart_seconds,
    }
