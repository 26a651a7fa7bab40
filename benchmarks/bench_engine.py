"""B1, one scalar check: x*x at x = 3 in float64, against a bare torch.autograd.gradcheck.

The baseline is `torch.autograd.gradcheck(square, (x,))` with its defaults, timed in the
same interleaved rounds as what is compared with it:

- (a) the numerical verdict, `core.check.first_order.numerical_verdict`: finite differences against
  autograd with the worst element and its index, the question gradcheck answers. Goal <= 1.0x.
- (b) the full check through `core.run.run_and_record` with the sweep off: the six
  observations (torch's own gradcheck among them), the five comparisons, the diagnosis
  context, the environment and the two fsynced ledger appends. Goal <= 5x. The function is
  the Python callable `square`, for which the contract skips the SymPy opinion; the same
  check written as the expression "x*x" (the seed record) is reported next to it, and the
  SymPy opinion on its own, uncached and cached.

The ledger is a fresh file every 10 repetitions (so it holds at most 20 entries, as a
notebook with a few checks does); the full run also times a ledger of 10^3 entries, because
`run_and_record` reads the check's history first. A breakdown times each stage of (b) by
wrapping the engine's and the ledger's functions for a few hundred calls.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

from . import device, format_seconds, graded, interleaved_medians, profile_text, row

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6}
RATIO_GOAL_VERDICT = 1.0
RATIO_GOAL_FULL = 5.0
#: Repetitions a ledger file takes before the next one starts (2 entries each).
LEDGER_ROTATION = 10


def square(x):
    """The course's first exercise, as a Python callable."""
    return x * x


class RotatingLedger:
    """A new ledger file every LEDGER_ROTATION uses, inside one temporary folder."""

    def __init__(self, folder: Path, prefix: str):
        self.folder, self.prefix, self.uses, self.current = folder, prefix, 0, None

    def __call__(self):
        from jupyterlab_gradcheck.core.ledger.store import Ledger

        if self.uses % LEDGER_ROTATION == 0:
            self.current = Ledger(self.folder / f"{self.prefix}-{self.uses}.gradcheck.jsonl")
        self.uses += 1
        return self.current


def _stage_targets():
    """(owner, attribute, stage label) for every stage of run_and_record that is timed."""
    from jupyterlab_gradcheck.core import run as ledgered_run
    from jupyterlab_gradcheck.core.check import engine
    from jupyterlab_gradcheck.core.ledger import store

    return [
        (ledgered_run, "parse_spec", "parse and validate the record"),
        (engine, "parse_spec", "parse and validate the record"),
        (engine, "resolve_device", "resolve the device"),
        (ledgered_run, "resolve_device", "resolve the device"),
        (engine, "observe_autograd", "four autograd observations"),
        (engine, "analytical_tensors", "the analytical expectation"),
        (engine, "fd_gradients", "finite-difference observation"),
        (engine, "torch_gradcheck", "torch.autograd.gradcheck observation"),
        (engine, "_comparisons", "five comparisons"),
        (engine, "_nondeterminism", "repeated forward (diagnosis context)"),
        (engine, "diagnose", "diagnosis of failed comparisons"),
        (engine, "symbolic_opinion", "SymPy opinion"),
        (engine, "capture_environment", "environment"),
        (engine, "step_sweep", "step sweep"),
        (store.Ledger, "checks", "ledger: read the check's history"),
        (store.Ledger, "history", "ledger: read the check's history"),
        (store.LockedLedger, "__enter__", "ledger: open and lock for the expectation"),
        (store.LockedLedger, "history", "ledger: read the check's history"),
        (store.LockedLedger, "record_expectation", "ledger: append expectation (fsync)"),
        (store.Ledger, "record_expectation", "ledger: append expectation (fsync)"),
        (store.Ledger, "record_observation", "ledger: append observation (fsync)"),
        (ledgered_run, "refresh_binding", "notebook binding"),
    ]


@contextlib.contextmanager
def _stage_timers(totals: dict):
    """Wrap every stage so that its time accumulates in totals[label]; restore on exit."""
    saved = []

    def wrap(function, label):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                totals[label] = totals.get(label, 0.0) + time.perf_counter() - started

        return timed

    try:
        for owner, attribute, label in _stage_targets():
            original = owner.__dict__.get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)
            if original is None:
                continue
            saved.append((owner, attribute, original))
            setattr(owner, attribute, wrap(original, label))
        yield
    finally:
        for owner, attribute, original in reversed(saved):
            setattr(owner, attribute, original)


def breakdown(full_check, calls: int) -> tuple[float, list[tuple[str, float]]]:
    """(mean seconds per check, [(stage, mean seconds)]) of `calls` full checks, largest first."""
    totals: dict[str, float] = {}
    with _stage_timers(totals):
        started = time.perf_counter()
        for _ in range(calls):
            full_check()
        total = (time.perf_counter() - started) / calls
    stages = sorted(((label, seconds / calls) for label, seconds in totals.items()), key=lambda item: -item[1])
    stages.append(("other: record assembly and glue", max(0.0, total - sum(s for _, s in stages))))
    return total, stages


def _sympy_opinion_timers(dev: str):
    """(uncached, cached) callables that each compute the SymPy opinion of the seed record."""
    import torch

    from jupyterlab_gradcheck.core.check.record.spec import parse_spec
    from jupyterlab_gradcheck.core.expr import symbolic

    spec = parse_spec({**SEED, "device": dev})
    leaves = {"x": torch.tensor(3.0, dtype=torch.float64, device=dev, requires_grad=True)}
    expected = {"x": torch.tensor(6.0, dtype=torch.float64, device=dev)}

    def cached():
        return symbolic.symbolic_opinion(spec, leaves, expected, expected)

    def uncached():
        import sympy

        sympy.core.cache.clear_cache()
        for name in ("symbolic_derivatives", "_hand_formula"):
            function = getattr(symbolic, name, None)
            if hasattr(function, "cache_clear"):
                function.cache_clear()
        return cached()

    return uncached, cached


def run(quick: bool) -> list[dict]:
    """B1 rows: the baseline, the two graded ratios, the SymPy opinion and the breakdown."""
    import torch

    from jupyterlab_gradcheck.core.check.engine import run_check
    from jupyterlab_gradcheck.core.check.first_order import numerical_verdict
    from jupyterlab_gradcheck.core.run import run_and_record

    dev = device()
    rounds = 200 if quick else (500 if dev.startswith("cuda") else 2000)  # cuda: gpu-check has 5 minutes
    x = torch.tensor(3.0, dtype=torch.float64, device=dev)
    leaf = x.clone().requires_grad_(True)
    callable_record = {"function": square, "inputs": {"x": 3}, "analytical_gradient": 6, "device": dev}
    expression_record = {**SEED, "device": dev}

    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-") as folder:
        folder = Path(folder)
        ledgers = RotatingLedger(folder, "callable")
        expression_ledgers = RotatingLedger(folder, "expression")
        failing_ledgers = RotatingLedger(folder, "failing")

        def full():
            return run_and_record(callable_record, ledgers(), sweep=False)

        sink = open(folder / "fsync-floor.bin", "ab")  # noqa: SIM115 - closed below
        line = b"x" * 511 + b"\n"

        def fsync_floor():
            sink.write(line)
            sink.flush()
            os.fsync(sink.fileno())

        candidates = {
            "gradcheck": lambda: torch.autograd.gradcheck(square, (leaf,)),
            "verdict": lambda: numerical_verdict(square, {"x": x}),
            "full": full,
            "engine": lambda: run_check(callable_record, sweep=False),
            "fsync": fsync_floor,
            "expression": lambda: run_and_record(expression_record, expression_ledgers(), sweep=False),
            "failing": lambda: run_and_record(
                {**callable_record, "analytical_gradient": 5}, failing_ledgers(), sweep=False
            ),
        }
        verdict = numerical_verdict(square, {"x": x})
        record = full()
        failing = candidates["failing"]()
        try:
            times = interleaved_medians(candidates, rounds)
        finally:
            sink.close()
        base = times["gradcheck"]["median"]
        ratio = {name: t["median"] / base for name, t in times.items()}
        uncached, cached = _sympy_opinion_timers(dev)
        sympy_times = interleaved_medians({"uncached": uncached, "cached": cached}, 10 if quick else 60, warmup=1)
        total, stages = breakdown(full, 100 if quick else 500)

        rows = [
            row(
                "B1 baseline: torch.autograd.gradcheck on x*x",
                round(base * 1e6, 1),
                "µs",
                "-",
                "INFO",
                f"median of {rounds} rounds, interleaved with every figure below; device {dev}",
            ),
        ]
        worst = verdict["worst"]
        rows.append(
            graded(
                "B1(a) numerical verdict / gradcheck",
                round(ratio["verdict"], 3),
                "x",
                f"<= {RATIO_GOAL_VERDICT}x",
                ratio["verdict"] <= RATIO_GOAL_VERDICT,
                f"{format_seconds(times['verdict']['median'])} vs {format_seconds(base)}; passed={verdict['passed']}, "
                f"worst element {worst['input']}{worst['index']} abs err {worst['abs_err']:.2g}",
            )
        )
        observations = sorted(record["observations"])
        met = ratio["full"] <= RATIO_GOAL_FULL
        full_row = graded(
            "B1(b) full check + 2 fsynced ledger appends / gradcheck",
            round(ratio["full"], 2),
            "x",
            f"<= {RATIO_GOAL_FULL:g}x",
            met,
            f"{format_seconds(times['full']['median'])}; {len(observations)} observations "
            f"({', '.join(observations)}), {len(record['comparisons'])} comparisons, passed={record['passed']}; "
            "callable form (no SymPy opinion by contract), sweep off; of which the engine alone "
            f"{ratio['engine']:.2f}x and one bare 512-byte write+fsync {ratio['fsync']:.2f}x"
            + (
                ""
                if met
                else "; largest stages: "
                + ", ".join(f"{label} {format_seconds(seconds)}" for label, seconds in stages[:4])
            ),
        )
        if not met and not quick:
            full_row["profile"] = profile_text(full, 300, "B1(b) run_and_record on square, sweep off")
        rows.append(full_row)
        rows.append(
            row(
                "B1(b) engine alone, no ledger (run_check) / gradcheck",
                round(ratio["engine"], 2),
                "x",
                "-",
                "INFO",
                f"{format_seconds(times['engine']['median'])}; the same check without the two appends",
            )
        )
        rows.append(
            row(
                "B1 fsync floor: one 512-byte write + fsync / gradcheck",
                round(ratio["fsync"], 2),
                "x",
                "-",
                "INFO",
                f"{format_seconds(times['fsync']['median'])}; each ledger append pays at least this, on this disk",
            )
        )
        rows.append(
            row(
                'B1(b) expression form "x*x" with cached SymPy opinion / gradcheck',
                round(ratio["expression"], 2),
                "x",
                "-",
                "INFO",
                f"{format_seconds(times['expression']['median'])}; the seed record as written",
            )
        )
        rows.append(
            row(
                "B1(b) with a failed comparison (diagnosis runs) / gradcheck",
                round(ratio["failing"], 2),
                "x",
                "-",
                "INFO",
                f"{format_seconds(times['failing']['median'])}; analytical 5 instead of 6: "
                f"{', '.join(sorted({f['diagnosis'] for f in failing['failures']}))}",
            )
        )
        for name in ("uncached", "cached"):
            seconds = sympy_times[name]["median"]
            rows.append(
                row(
                    f"B1 SymPy opinion of x*x, {name}",
                    round(seconds * 1e6, 1),
                    "µs",
                    "-",
                    "INFO",
                    f"{seconds / base:.2f}x the baseline"
                    + (
                        "; SymPy's own cache cleared too"
                        if name == "uncached"
                        else "; derivative cached per expression"
                    ),
                )
            )
        for label, seconds in stages:
            rows.append(
                row(
                    f"B1(b) breakdown: {label}",
                    round(seconds * 1e6, 1),
                    "µs",
                    "-",
                    "INFO",
                    f"{100 * seconds / total:.0f}% of {format_seconds(total)} (wrapped timers, mean)",
                )
            )
        if not quick:
            rows.append(_grown_ledger_row(folder, callable_record, leaf))
    return rows


def _grown_ledger_row(folder: Path, record: dict, leaf) -> dict:
    """B1(b) on a ledger that already holds 10^3 entries, against the same baseline."""
    import torch

    from jupyterlab_gradcheck.core.ledger.store import Ledger
    from jupyterlab_gradcheck.core.run import run_and_record

    ledger = Ledger(folder / "grown.gradcheck.jsonl")
    for _ in range(500):
        run_and_record(record, ledger, sweep=False)
    times = interleaved_medians(
        {
            "gradcheck": lambda: torch.autograd.gradcheck(square, (leaf,)),
            "full": lambda: run_and_record(record, ledger, sweep=False),
        },
        50,
        warmup=1,
    )
    ratio = times["full"]["median"] / times["gradcheck"]["median"]
    return row(
        "B1(b) on a ledger of 10^3 entries / gradcheck",
        round(ratio, 2),
        "x",
        "-",
        "INFO",
        f"{format_seconds(times['full']['median'])}: the history is kept between runs, and each read decodes only the lines appended since",
    )
