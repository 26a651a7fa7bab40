"""Warm REST round trip: POST checks -> worker -> ledger -> response, on the seed record.

Starts a real `jupyter server` with the extension (two workers) in a temporary root, waits
for the pool, warms it, then times sequential POSTs of the seed record over one keep-alive
connection. The baseline is the same check through `core.check.engine.run_check` in this process,
measured in the same run, so the ratio shows what the server, the pipe and the two fsynced
ledger appends add to the engine's own time.

Goals (issue 4): p50 <= 30 ms and p99 <= 100 ms for the round trip.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .live_server import LiveJupyter, percentile

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}
P50_GOAL_MS = 30.0
P99_GOAL_MS = 100.0


def _time_rest(server: LiveJupyter, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        status, body = server.request("POST", "checks", {"notebook": "work/lab1.ipynb", "check": SEED})
        samples.append((time.perf_counter() - began) * 1000)
        if status != 200 or not body["record"]["executed"]:
            raise RuntimeError(f"POST checks answered {status}: {body}")
    return samples


def _time_engine(count: int) -> list[float]:
    from jupyterlab_gradcheck.core.check.engine import run_check

    run_check(dict(SEED))  # the first call pays for lazy imports, as the worker's warm-up does
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        run_check(dict(SEED))
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def run(quick: bool) -> list[dict]:
    """Rows `{"name", "value", "unit", "goal", "status", "note"}` for the REST round trip."""
    count, warm = (60, 10) if quick else (400, 30)
    with tempfile.TemporaryDirectory(prefix="bench-rest-") as folder:
        server = LiveJupyter(Path(folder))
        try:
            server.wait_ready()
            _time_rest(server, warm)
            rest = _time_rest(server, count)
            entries = len((server.root / "work" / "lab1.gradcheck.jsonl").read_text().splitlines())
            torch_in_server = server.torch_libraries()
        finally:
            server.stop()
    engine = _time_engine(count)
    p50, p99 = statistics.median(rest), percentile(rest, 0.99)
    engine_p50 = statistics.median(engine)
    quarter = max(1, count // 4)
    growth = (
        f"p50 of the first {quarter}: {statistics.median(rest[:quarter]):.1f} ms, of the last "
        f"{quarter}: {statistics.median(rest[-quarter:]):.1f} ms (each check reads the ledger's history)"
    )
    note = f"{count} sequential POSTs after {warm} warm-up, 2 workers, one keep-alive connection"
    return [
        {
            "name": "rest_round_trip_p50",
            "value": round(p50, 2),
            "unit": "ms",
            "goal": f"<= {P50_GOAL_MS:g}",
            "status": "PASS" if p50 <= P50_GOAL_MS else "MISS",
            "note": f"{note}; {growth}",
        },
        {
            "name": "rest_round_trip_p99",
            "value": round(p99, 2),
            "unit": "ms",
            "goal": f"<= {P99_GOAL_MS:g}",
            "status": "PASS" if p99 <= P99_GOAL_MS else "MISS",
            "note": f"{note}; the ledger ended with {entries} entries",
        },
        {
            "name": "engine_in_process_p50",
            "value": round(engine_p50, 2),
            "unit": "ms",
            "goal": "baseline",
            "status": "PASS",
            "note": "core.check.engine.run_check on the seed record in this process, same run",
        },
        {
            "name": "rest_over_engine_p50_ratio",
            "value": round(p50 / engine_p50, 2),
            "unit": "x",
            "goal": "reported",
            "status": "PASS",
            "note": "what HTTP, auth, validation, the worker pipe and two fsynced ledger appends add",
        },
        {
            "name": "server_process_torch_libraries",
            "value": torch_in_server,
            "unit": "libraries",
            "goal": "0",
            "status": "PASS" if torch_in_server == 0 else "MISS",
            "note": "libtorch mapped into the jupyter server process after the run (checks run in workers)"
            if torch_in_server is not None
            else "not measured: no /proc on this system",
        },
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(json.dumps(row))
