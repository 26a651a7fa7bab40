"""Benchmarks of jupyterlab-gradcheck against PyTorch's own gradcheck, run by `python -m benchmarks`.

Each `bench_*.py` module exposes `run(quick: bool) -> list[dict]` returning rows
`{"name", "value", "unit", "goal", "status", "note"}` (status PASS, MISS, or INFO for a
figure that has no goal of its own); a row may add `"profile"`, text that the full report
keeps. This module holds what the modules share: the device they run on, timing by
interleaved medians (the machine is shared, so every figure that matters is a ratio against a
baseline timed in the same rounds), and peak memory of one call.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

#: Environment variable through which the runner passes `--device` to every module.
DEVICE_VARIABLE = "GRADCHECK_BENCH_DEVICE"


def device() -> str:
    """The torch device the benchmarks run on: `cpu` unless the runner was given `--device`."""
    return os.environ.get(DEVICE_VARIABLE, "cpu")


def synchronize() -> None:
    """Wait for queued device work, so that a timer stops when the work is done."""
    if device().startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def row(name: str, value, unit: str, goal: str, status: str, note: str = "", **extra) -> dict:
    """One benchmark row; `status` is PASS, MISS or INFO."""
    if status not in ("PASS", "MISS", "INFO"):
        raise ValueError(f"status {status!r} is not PASS, MISS or INFO")
    return {"name": name, "value": value, "unit": unit, "goal": goal, "status": status, "note": note, **extra}


def graded(name: str, value: float, unit: str, goal: str, met: bool, note: str = "", **extra) -> dict:
    """A row with a goal: PASS when `met`, else MISS (never anything in between)."""
    return row(name, value, unit, goal, "PASS" if met else "MISS", note, **extra)


def interleaved_medians(candidates: dict[str, Callable[[], object]], rounds: int, warmup: int = 3) -> dict:
    """Median seconds per call of each candidate, timed in alternating rounds.

    Every round calls each candidate once, in an order that rotates from round to round, so a
    burst of load from another process lands on all of them alike and their ratio survives
    it. Returns `{name: {"median", "cpu_median", "samples", "min"}}`; `cpu_median` is this
    process's CPU time per call, which another process taking the core does not inflate.
    """
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            started, cpu_started = time.perf_counter(), time.process_time()
            candidates[name]()
            synchronize()
            samples[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - cpu_started)
    return {
        name: {
            "median": statistics.median(times),
            "cpu_median": statistics.median(cpu[name]),
            "samples": len(times),
            "min": min(times),
        }
        for name, times in samples.items()
    }


def timed_once(function: Callable[[], object]) -> tuple[float, float, object]:
    """(seconds, CPU seconds of this process) taken by one call, and what it returned."""
    synchronize()
    started, cpu_started = time.perf_counter(), time.process_time()
    result = function()
    synchronize()
    return time.perf_counter() - started, time.process_time() - cpu_started, result


def peak_memory(function: Callable[[], object]) -> tuple[int | None, float, float, object]:
    """(peak bytes above the level before the call, seconds, CPU seconds, result) of one call.

    On CUDA: torch's peak allocated-memory counter. On the CPU: the process's resident peak
    (VmHWM), reset just before the call after returning freed heap memory to the system, so
    the figure is what the call itself made resident. None where neither is available.
    """
    if device().startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        seconds, cpu_seconds, result = timed_once(function)
        return torch.cuda.max_memory_allocated() - before, seconds, cpu_seconds, result
    if not _can_reset_peak():
        return None, *timed_once(function)
    _trim_heap()
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    before = _status_bytes("VmRSS:")
    seconds, cpu_seconds, result = timed_once(function)
    return max(0, _status_bytes("VmHWM:") - before), seconds, cpu_seconds, result


def _can_reset_peak() -> bool:
    return os.access("/proc/self/clear_refs", os.W_OK) and os.path.exists("/proc/self/status")


def _trim_heap() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the peak may then read low, never high
        pass


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def format_seconds(seconds: float) -> str:
    """A duration with a unit a reader takes in at a glance."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def profile_text(function: Callable[[], object], repeat: int, title: str) -> str:
    """A call-tree profile of `repeat` calls: pyinstrument when installed, else cProfile."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        Profiler = None
    if Profiler is not None:
        profiler = Profiler(interval=0.0001)
        profiler.start()
        for _ in range(repeat):
            function()
        profiler.stop()
        text = profiler.output_text(unicode=False, color=False, show_all=False)
        return _without_paths(f"{title} (pyinstrument, {repeat} calls)\n{text}")
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        function()
    profiler.disable()
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("cumulative").print_stats(30)
    return _without_paths(
        f"{title} (cProfile, {repeat} calls; install pyinstrument for a call tree)\n{buffer.getvalue()}"
    )


def _without_paths(text: str) -> str:
    """A profile without this machine's folders: paths are kept relative to the repository
    or to site-packages, so a committed report names no machine."""
    import re
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent) + "/"
    prefixes = [root] + sorted(
        {p.rstrip("/") + "/" for p in sys.path if p and p.startswith("/")}, key=len, reverse=True
    )
    lines = []
    for line in text.splitlines():
        if line.startswith("Profile at "):
            continue
        for prefix in prefixes:
            line = line.replace(prefix, "")
        lines.append(re.sub(r"(/[^\s/:]+)+/(site-packages|dist-packages)/", "", line))
    return "\n".join(lines)
