"""The witness: what reporting a ledger head costs, and that a check never waits for it.

A real witness (`jupyter gradcheck witness`) runs on loopback. Measured in the same run:

- one report's round trip (POST heads: validate, append to the hash-chained log, fsync, sign
  with Ed25519, answer the receipt), median over many, against a bare check (`run_check` of the
  seed record in this process, no ledger) as the baseline. Goal: under 5 ms median.
- a ledgered check with the witness configured against the same check with none: the report
  goes out from a background thread, so the ratio stays near 1.
- a ledgered check while the witness is down: it completes, and the ratio stays near 1.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
WITNESS_GOAL_MS = 5.0
SEED = {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6}


def _median_ms(function, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def run(quick: bool) -> list[dict]:
    """Benchmark rows: the report's round trip, and a check with and without a witness."""
    import json
    import urllib.request

    from jupyterlab_gradcheck.core.check.engine import run_check
    from jupyterlab_gradcheck.core.ledger import witness_client
    from jupyterlab_gradcheck.core.ledger.ledgered_run import run_and_record
    from jupyterlab_gradcheck.core.ledger.store import Ledger

    sys.path.insert(0, str(TESTS))
    from support.witness import TOKEN, Witness

    rounds = 50 if quick else 500
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        witness = Witness(folder / "w.jsonl").start()
        try:
            counter = iter(range(1, 10**9))

            def report_once():
                body = json.dumps(
                    {
                        "ledger_id": "bench",
                        "notebook": "lab1.ipynb",
                        "user": "bench",
                        "seq": next(counter),
                        "head": "a" * 64,
                    }
                ).encode()
                request = urllib.request.Request(
                    witness.url + "/heads",
                    data=body,
                    method="POST",
                    headers={"Content-Type": "application/json", "Authorization": f"token {TOKEN}"},
                )
                with urllib.request.urlopen(request, timeout=10) as answer:
                    answer.read()

            report_once()  # warm the connection path and the key
            run_check(SEED)
            bare = _median_ms(lambda: run_check(SEED, sweep=False), rounds)
            report = _median_ms(report_once, rounds)

            plain = Ledger(folder / "plain.gradcheck.jsonl")
            checks = max(10, rounds // 5)
            without = _median_ms(lambda: run_and_record(SEED, plain, sweep=False), checks)
            witness_client.configure(witness.url, TOKEN)
            watched = Ledger(folder / "watched.gradcheck.jsonl")
            with_witness = _median_ms(lambda: run_and_record(SEED, watched, sweep=False), checks)
            witness_client.client().drain(10)
            witness.kill()
            down = Ledger(folder / "down.gradcheck.jsonl")
            while_down = _median_ms(lambda: run_and_record(SEED, down, sweep=False), checks)
        finally:
            witness_client.configure(None, None)
            if witness.process.poll() is None:
                witness.kill()
    return [
        {
            "name": "B6 witness report round trip (loopback), median",
            "value": round(report, 2),
            "unit": "ms",
            "goal": f"< {WITNESS_GOAL_MS:g} ms",
            "status": "PASS" if report < WITNESS_GOAL_MS else "MISS",
            "note": f"{report / bare:.2f}x a bare check ({bare:.2f} ms, run_check of the seed, no ledger); "
            f"POST heads: validate, append, fsync, Ed25519 signature; median of {rounds}",
        },
        {
            "name": "B6 ledgered check with a witness / without",
            "value": round(with_witness / without, 2),
            "unit": "x",
            "goal": "-",
            "status": "INFO",
            "note": f"{with_witness:.2f} ms vs {without:.2f} ms: reports go out from a background thread",
        },
        {
            "name": "B6 ledgered check with the witness down / without",
            "value": round(while_down / without, 2),
            "unit": "x",
            "goal": "-",
            "status": "INFO",
            "note": f"{while_down:.2f} ms vs {without:.2f} ms: the check never waits for the witness",
        },
    ]
