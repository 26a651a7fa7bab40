"""B7, load and faults: a real `jupyter server` (2 workers, default settings) under many clients.

Figures, each from this run:
- checks/s, p50 and p99 at 1, 4, 16 and 64 clients (each client on its own notebook, one
  keep-alive connection, as fast as it is answered), and acknowledged checks lost: a 200 whose
  observation is not in its notebook's ledger (goal 0); every ledger's chain verifies;
- two heavy checks that passed admission, running over and over from two notebooks, while a
  light client sends checks: the light client's p99 (goal < 1 s) beside its p99 alone;
- faults, with what clients saw and what the ledgers kept: a worker killed with SIGKILL under
  load, a ledger made immutable (`chattr +i`) under load, clients that close their connection
  while their check waits, and the server itself killed with SIGKILL (then `verify` must name
  every check whose expectation has no outcome);
- the server's memory over many checks: the slope in MB per 1,000 checks after warm-up.

`python -m benchmarks.bench_load` runs the full suite and writes `benchmarks/load.md`;
`make bench` runs it with the others; `--quick` (in `make test`) runs a small subset.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from .live_server import LiveJupyter, percentile

HERE = Path(__file__).resolve().parent
LIGHT = {"function": "x*x", "x": 3.0, "analytical_gradient": "2*x"}
LIGHT_P99_GOAL_MS = 1000.0


def _heavy(n: int) -> dict:
    """sum(x)*sum(x) on n elements: every element differenced on its own (2n evaluations of n)."""
    return {"function": "sum(x)*sum(x)", "x": [0.5] * n, "analytical_gradient": "2*sum(x) + 0*x"}


def _notebook(server: LiveJupyter, name: str) -> str:
    source = server.root / "work" / "lab1.ipynb"
    target = server.root / "work" / f"{name}.ipynb"
    if not target.exists():
        shutil.copyfile(source, target)
    return f"work/{name}.ipynb"


def _observations(server: LiveJupyter, notebook: str) -> tuple[int, int]:
    """(observations with a result, failed-to-run entries) in the notebook's ledger."""
    ledger = server.root / notebook.replace(".ipynb", ".gradcheck.jsonl")
    if not ledger.exists():
        return 0, 0
    kinds = Counter()
    for line in ledger.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("kind") == "observation":
            kinds["failed" if entry["data"].get("failed_to_run") else "ok"] += 1
    return kinds["ok"], kinds["failed"]


class _Client(threading.Thread):
    """One client: POSTs `check` on `notebook` over its own connection until `stop` is set."""

    def __init__(self, server: LiveJupyter, notebook: str, check: dict, stop: threading.Event, once: bool = False):
        super().__init__(daemon=True)
        self.server, self.notebook, self.check, self.stop, self.once = server, notebook, check, stop, once
        self.latencies: list[float] = []
        self.statuses: Counter = Counter()
        self.codes: Counter = Counter()
        self.acknowledged = 0
        self.pending = False  #: a request was on its way when the loop ended

    def run(self) -> None:
        connection = self.server.connect(timeout=300)
        while not self.stop.is_set():
            began = time.perf_counter()
            self.pending = True
            try:
                status, body = self.server.request(
                    "POST", "checks", {"notebook": self.notebook, "check": self.check}, connection=connection
                )
            except (OSError, http.client.HTTPException, ValueError):
                self.statuses["no answer"] += 1
                connection.close()
                if self.server.process.poll() is not None:
                    return
                connection = self.server.connect(timeout=300)
                continue
            self.pending = False
            self.latencies.append((time.perf_counter() - began) * 1000)
            self.statuses[status] += 1
            if status == 200:
                self.acknowledged += 1
            elif isinstance(body, dict):
                self.codes[body.get("code")] += 1
            if self.once:
                break
        connection.close()


def _drive(server: LiveJupyter, clients: list[_Client], seconds: float, during=None) -> float:
    """Run the clients for `seconds` (calling `during()` halfway); returns the elapsed time."""
    stop = clients[0].stop
    began = time.perf_counter()
    for client in clients:
        client.start()
    if during is not None:
        time.sleep(seconds / 2)
        during()
        time.sleep(seconds / 2)
    else:
        time.sleep(seconds)
    stop.set()
    for client in clients:
        client.join(timeout=300)
    return time.perf_counter() - began


def _lost(server: LiveJupyter, clients: list[_Client]) -> int:
    """Acknowledged checks whose observation is not in their ledger."""
    by_book = Counter()
    for client in clients:
        by_book[client.notebook] += client.acknowledged
    return sum(max(0, acked - _observations(server, book)[0]) for book, acked in by_book.items())


def _chains(server: LiveJupyter) -> tuple[int, int, int]:
    """(ledgers, ledgers whose chain verifies, expectations without an outcome) under work/."""
    from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file

    ledgers = sorted((server.root / "work").glob("*.gradcheck.jsonl"))
    reports = [verify_ledger_file(path, with_notebook=False) for path in ledgers]
    return len(ledgers), sum(r["ok"] for r in reports), sum(len(r.get("interrupted", [])) for r in reports)


def _load(server: LiveJupyter, count: int, seconds: float) -> dict:
    stop = threading.Event()
    clients = [_Client(server, _notebook(server, f"load{count}-{i}"), LIGHT, stop) for i in range(count)]
    elapsed = _drive(server, clients, seconds)
    samples = [value for client in clients for value in client.latencies]
    acked = sum(client.acknowledged for client in clients)
    statuses = sum((client.statuses for client in clients), Counter())
    return {
        "clients": count,
        "rate": acked / elapsed,
        "p50": statistics.median(samples),
        "p99": percentile(samples, 0.99),
        "acked": acked,
        "lost": _lost(server, clients),
        "statuses": dict(statuses),
    }


def _fairness(server: LiveJupyter, n: int, seconds: float) -> dict:
    stop = threading.Event()
    heavy = [_Client(server, _notebook(server, f"heavy{i}"), _heavy(n), stop) for i in range(2)]
    light = _Client(server, _notebook(server, "light"), LIGHT, stop)
    for client in heavy:
        client.start()
    time.sleep(0.5)  # both heavy checks are in: one runs, the other holds its turn
    _drive(server, [light], seconds)
    for client in heavy:
        client.join(timeout=300)
    return {
        "p50": statistics.median(light.latencies),
        "p99": percentile(light.latencies, 0.99),
        "light": len(light.latencies),
        "heavy": sum(c.acknowledged for c in heavy),
        "heavy_statuses": dict(sum((c.statuses for c in heavy), Counter())),
    }


def _worker_kill(server: LiveJupyter, seconds: float) -> dict:
    stop = threading.Event()
    # Checks of about 0.1 s each (light by admission), so that a worker is caught mid-check.
    clients = [_Client(server, _notebook(server, f"wk{i}"), _heavy(4000), stop) for i in range(4)]
    killed = {}

    def kill():
        for _ in range(200):  # a worker in the middle of a check, not one between checks
            _, status = server.request("GET", "status")
            busy = [w["pid"] for w in status["pool"]["workers"] if w["state"] == "busy"]
            if busy:
                break
            time.sleep(0.01)
        killed["busy"] = bool(busy)
        os.kill((busy or [status["pool"]["workers"][0]["pid"]])[0], signal.SIGKILL)

    _drive(server, clients, seconds, during=kill)
    failed = sum(_observations(server, c.notebook)[1] for c in clients)
    statuses = sum((c.statuses for c in clients), Counter())
    answered_500 = statuses.get(500, 0)
    return {
        "statuses": dict(statuses),
        "failed_to_run_kept": failed,
        "answered_500": answered_500,
        "lost": _lost(server, clients),
        "busy": killed.get("busy"),
    }


def _immutable(server: LiveJupyter, seconds: float) -> dict:
    stop = threading.Event()
    clients = [_Client(server, _notebook(server, f"imm{i}"), LIGHT, stop) for i in range(2)]
    target = server.root / clients[0].notebook.replace(".ipynb", ".gradcheck.jsonl")
    outcome = {"chattr": "unavailable"}

    def freeze():
        done = subprocess.run(["chattr", "+i", str(target)], capture_output=True, text=True)
        outcome["chattr"] = "set" if done.returncode == 0 else (done.stderr.strip() or "failed")[:80]

    _drive(server, clients, seconds, during=freeze)
    subprocess.run(["chattr", "-i", str(target)], capture_output=True)
    from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file

    report = verify_ledger_file(target, with_notebook=False)
    outcome.update(
        statuses=dict(clients[0].statuses),
        codes=dict(clients[0].codes),
        other_statuses=dict(clients[1].statuses),
        chain_ok=report["ok"],
        interrupted=len(report.get("interrupted", [])),
        lost=_lost(server, clients),
    )
    return outcome


def _disconnects(server: LiveJupyter, n: int, count: int) -> dict:
    """While both workers are busy with heavy checks, `count` clients send and hang up."""
    stop = threading.Event()
    heavy = [_Client(server, _notebook(server, f"dheavy{i}"), _heavy(n), stop, once=True) for i in range(2)]
    for client in heavy:
        client.start()
    time.sleep(0.3)
    books = [_notebook(server, f"gone{i}") for i in range(count)]
    for book in books:
        body = json.dumps({"notebook": book, "check": LIGHT}).encode()
        request = (
            f"POST /gradcheck/checks HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Authorization: token {server.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(request)
            time.sleep(0.01)
    for client in heavy:
        client.join(timeout=300)
    time.sleep(1.0)
    recorded = sum(1 for book in books if (server.root / book.replace(".ipynb", ".gradcheck.jsonl")).exists())
    return {"sent": count, "recorded": recorded, "heavy_statuses": dict(sum((c.statuses for c in heavy), Counter()))}


def _memory(server: LiveJupyter, total: int, step: int) -> dict:
    stop = threading.Event()
    clients = [_Client(server, _notebook(server, f"mem{i}"), LIGHT, stop) for i in range(4)]
    samples, done = [], 0
    for client in clients:
        client.start()
    while done < total:
        time.sleep(0.5)
        done = sum(c.acknowledged for c in clients)
        if not samples or done - samples[-1][0] >= step:
            samples.append((done, server.rss_mb()))
    stop.set()
    for client in clients:
        client.join(timeout=300)
    warm = [(x, y) for x, y in samples if x >= 2 * step] or samples
    slope = _slope(warm) * 1000
    return {
        "checks": done,
        "rss_start": samples[0][1],
        "rss_end": samples[-1][1],
        "slope_per_1000": slope,
        "samples": samples,
    }


def _slope(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def _server_kill(server: LiveJupyter, seconds: float) -> dict:
    stop = threading.Event()
    clients = [_Client(server, _notebook(server, f"sk{i}"), LIGHT, stop) for i in range(8)]
    heavy = _Client(server, _notebook(server, "skheavy"), _heavy(20_000), stop)
    _drive(server, clients + [heavy], seconds, during=server.kill_hard)
    in_flight = sum(c.pending for c in clients + [heavy])
    ledgers, verified, interrupted = _chains(server)
    named, exits = 0, Counter()
    for ledger in sorted((server.root / "work").glob("*.gradcheck.jsonl")):
        cli = subprocess.run(
            [str(Path(sys.executable).parent / "jupyter-gradcheck"), "verify", "--ledger-only", str(ledger)],
            capture_output=True,
            text=True,
        )
        named += cli.stdout.count("has no outcome")
        exits[cli.returncode] += 1
    return {
        "in_flight": in_flight,
        "ledgers": ledgers,
        "chains_ok": verified,
        "interrupted": interrupted,
        "cli_exits": dict(exits),
        "cli_named": named,
    }


def _row(name, value, unit, goal, ok, note):
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "goal": goal,
        "status": "INFO" if ok is None else ("PASS" if ok else "MISS"),
        "note": note,
    }


def measure(quick: bool) -> tuple[list[dict], dict]:
    """(rows, details) of the whole suite."""
    counts, seconds, heavy_n = ((1, 4), 3.0, 10_000) if quick else ((1, 4, 16, 64), 15.0, 20_000)
    details: dict = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as folder:
        server = LiveJupyter(Path(folder) / "a")
        try:
            server.wait_ready()
            _load(server, 1, 1.0)  # warm-up
            details["load"] = [_load(server, count, seconds) for count in counts]
            details["fair"] = _fairness(server, heavy_n, seconds)
            if not quick:
                details["worker_kill"] = _worker_kill(server, seconds)
                details["immutable"] = _immutable(server, seconds)
                details["disconnects"] = _disconnects(server, 20_000, 20)
                details["memory"] = _memory(server, 10_000, 1000)
            details["chains"] = _chains(server)
        finally:
            server.stop()
        if not quick:
            second = LiveJupyter(Path(folder) / "b")
            try:
                second.wait_ready()
                details["server_kill"] = _server_kill(second, 8.0)
            finally:
                second.stop()
    alone = details["load"][0]
    for item in details["load"]:
        rows.append(
            _row(
                f"load_{item['clients']}_clients_checks_per_s",
                round(item["rate"], 1),
                "checks/s",
                "reported",
                None,
                f"p50 {item['p50']:.0f} ms, p99 {item['p99']:.0f} ms over {seconds:g} s; statuses {item['statuses']}",
            )
        )
        rows.append(
            _row(
                f"load_{item['clients']}_clients_lost",
                item["lost"],
                "checks",
                "0",
                item["lost"] == 0,
                f"{item['acked']} acknowledged, each looked for in its notebook's ledger",
            )
        )
    fair = details["fair"]
    rows.append(
        _row(
            "light_p99_beside_two_heavy",
            round(fair["p99"]),
            "ms",
            f"< {LIGHT_P99_GOAL_MS:g}",
            fair["p99"] < LIGHT_P99_GOAL_MS,
            f"{fair['light']} light checks, p50 {fair['p50']:.0f} ms; alone p99 {alone['p99']:.0f} ms "
            f"({fair['p99'] / alone['p99']:.1f}x); {fair['heavy']} heavy checks of {heavy_n} elements "
            f"answered {fair['heavy_statuses']}",
        )
    )
    ledgers, verified, _ = details["chains"]
    rows.append(
        _row(
            "ledgers_verified_after_load",
            f"{verified}/{ledgers}",
            "ledgers",
            "all",
            verified == ledgers,
            "chain of every ledger the run wrote",
        )
    )
    if not quick:
        rows += _fault_rows(details)
        (HERE / "load.md").write_text(_report(details, seconds, heavy_n))
    return rows, details


def _fault_rows(details: dict) -> list[dict]:
    kill, frozen, gone, memory, crash = (
        details[k] for k in ("worker_kill", "immutable", "disconnects", "memory", "server_kill")
    )
    return [
        _row(
            "fault_worker_kill_lost",
            kill["lost"],
            "checks",
            "0",
            kill["lost"] == 0,
            f"{'a busy' if kill['busy'] else 'an idle'} worker killed; clients saw {kill['statuses']}; "
            f"{kill['failed_to_run_kept']} failed-to-run entries kept for {kill['answered_500']} answers of 500",
        ),
        _row(
            "fault_immutable_ledger_lost",
            frozen["lost"],
            "checks",
            "0",
            frozen["lost"] == 0,
            f"chattr +i: {frozen['chattr']}; that notebook's client saw {frozen['statuses']} {frozen['codes']}, "
            f"the other {frozen['other_statuses']}; chain ok {frozen['chain_ok']}, "
            f"{frozen['interrupted']} expectations without outcome",
        ),
        _row(
            "fault_disconnected_clients_recorded",
            gone["recorded"],
            "checks",
            "reported",
            None,
            f"{gone['sent']} clients sent a light check beside two heavy ones and hung up at once: a check that "
            "reached the worker kept for light checks before its client left ran and was recorded; the others "
            f"ran nothing and wrote nothing; heavy checks answered {gone['heavy_statuses']}",
        ),
        _row(
            "fault_server_kill_interrupted_named",
            crash["cli_named"],
            "checks",
            f"= {crash['interrupted']}",
            crash["cli_named"] == crash["interrupted"],
            f"{crash['in_flight']} requests in flight at SIGKILL; {crash['chains_ok']}/{crash['ledgers']} chains "
            f"verify; {crash['interrupted']} expectations without outcome, each named by `jupyter gradcheck verify` "
            f"(exit codes {crash['cli_exits']})",
        ),
        _row(
            "server_memory_slope",
            round(memory["slope_per_1000"], 2),
            "MB per 1000 checks",
            "flat (< 1)",
            abs(memory["slope_per_1000"]) < 1.0,
            f"{memory['checks']} checks by 4 clients; RSS {memory['rss_start']:.0f} -> {memory['rss_end']:.0f} MB; "
            "slope fitted after the first 2,000",
        ),
    ]


def _report(details: dict, seconds: float, heavy_n: int) -> str:
    lines = [
        "# B7: load and faults",
        "",
        "Generated by `python -m benchmarks.bench_load` (see its docstring); a real `jupyter server`, "
        f"2 workers, default settings; each load level ran {seconds:g} s.",
        "",
        "| clients | checks/s | p50 ms | p99 ms | acknowledged | lost | statuses |",
        "|---|---|---|---|---|---|---|",
    ]
    for item in details["load"]:
        lines.append(
            f"| {item['clients']} | {item['rate']:.1f} | {item['p50']:.0f} | {item['p99']:.0f} | "
            f"{item['acked']} | {item['lost']} | {item['statuses']} |"
        )
    fair = details["fair"]
    lines += [
        "",
        f"Two heavy checks ({heavy_n} elements, every element differenced on its own) running over and "
        f"over from two notebooks: a light client's p50 {fair['p50']:.0f} ms, p99 {fair['p99']:.0f} ms over "
        f"{fair['light']} checks; the heavy clients got {fair['heavy_statuses']}.",
        "",
        "| fault | what clients saw | what the ledgers kept |",
        "|---|---|---|",
    ]
    kill, frozen, gone, crash = (details[k] for k in ("worker_kill", "immutable", "disconnects", "server_kill"))
    lines.append(
        f"| {'busy' if kill['busy'] else 'idle'} worker SIGKILL under 4 clients | {kill['statuses']} | {kill['failed_to_run_kept']} failed-to-run "
        f"entries; {kill['lost']} acknowledged checks lost |"
    )
    lines.append(
        f"| ledger made immutable (chattr +i: {frozen['chattr']}) | that notebook: {frozen['statuses']} "
        f"{frozen['codes']}; the other: {frozen['other_statuses']} | chain ok {frozen['chain_ok']}; "
        f"{frozen['interrupted']} expectations without outcome; {frozen['lost']} lost |"
    )
    lines.append(
        f"| {gone['sent']} clients send a light check beside two heavy ones and hang up | nothing (gone) "
        f"| {gone['recorded']} of them recorded (those that reached the light worker before hanging up); "
        "a check that never got a worker writes nothing |"
    )
    lines.append(
        f"| server SIGKILL under 9 clients | {crash['in_flight']} requests without an answer | "
        f"{crash['chains_ok']}/{crash['ledgers']} chains verify; {crash['interrupted']} expectations "
        f"without outcome, {crash['cli_named']} named by `jupyter gradcheck verify` |"
    )
    memory = details["memory"]
    lines += [
        "",
        f"Server memory over {memory['checks']} checks: "
        + ", ".join(f"{x}: {y:.0f} MB" for x, y in memory["samples"])
        + f"; slope after warm-up {memory['slope_per_1000']:.2f} MB per 1,000 checks.",
        "",
    ]
    return "\n".join(lines)


def run(quick: bool) -> list[dict]:
    """Rows for `python -m benchmarks`."""
    return measure(quick)[0]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(json.dumps(row))
