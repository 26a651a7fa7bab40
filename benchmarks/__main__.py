"""`python -m benchmarks [--quick] [--device cpu|cuda] [--out DIR] [--only NAMES]`.

Imports every `benchmarks/bench_*.py` module there is, calls its `run(quick)`, and prints one
table: each figure, its goal, and PASS, MISS or INFO. A module that raises (or cannot be
imported) becomes an ERROR row, and the exit status is then 1; a missed goal is a finding,
reported as MISS, and leaves the status 0.

The full run writes `results.md` (and `results.json`) into --out, by default this folder:
the machine, the versions, the date and every figure. --quick is the smoke version run by
`make test`: smaller sizes, fewer repetitions, under a minute; it never writes results.md
(with --out it writes results-quick.md there instead).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from . import DEVICE_VARIABLE

HERE = Path(__file__).resolve().parent
#: Modules in the order of the figures they hold (B1..B4); any other bench_* module follows.
ORDER = (
    "bench_engine",
    "bench_scale",
    "bench_accuracy",
    "bench_opinfo",
    "bench_ledger",
    "bench_rest",
    "bench_witness",
    "bench_load",
    "bench_function_db",
    "bench_device_scale",
)
COLUMNS = ("figure", "value", "unit", "goal", "status", "note")


def discover(only: list[str] | None) -> list[str]:
    """The bench_* module names present in this folder, in report order."""
    present = sorted(info.name for info in pkgutil.iter_modules([str(HERE)]) if info.name.startswith("bench_"))
    ordered = [name for name in ORDER if name in present] + [name for name in present if name not in ORDER]
    if only:
        wanted = {name if name.startswith("bench_") else f"bench_{name}" for name in only}
        unknown = wanted - set(ordered)
        if unknown:
            raise SystemExit(f"benchmarks: no module {', '.join(sorted(unknown))} (present: {', '.join(ordered)})")
        ordered = [name for name in ordered if name in wanted]
    return ordered


def error_row(module: str, message: str) -> dict:
    return {"name": f"{module}: ERROR", "value": "-", "unit": "", "goal": "runs", "status": "ERROR", "note": message}


def _valid(rows) -> str:
    """Why `rows` is not a list of benchmark rows, or "" when it is."""
    if not isinstance(rows, list):
        return f"run() returned {type(rows).__name__}, not a list of rows"
    for item in rows:
        missing = [
            key
            for key in ("name", "value", "unit", "goal", "status", "note")
            if not isinstance(item, dict) or key not in item
        ]
        if missing:
            return f"a row lacks {', '.join(missing)}: {item!r:.120}"
        if item["status"] not in ("PASS", "MISS", "INFO"):
            return f"row {item['name']!r} has status {item['status']!r}, not PASS, MISS or INFO"
    return ""


def run_module(name: str, quick: bool) -> tuple[list[dict], float]:
    """(rows, seconds) of one module; an ERROR row when it cannot be imported or raises."""
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.{name}")
        rows = module.run(quick)
    except Exception as exc:  # a benchmark that breaks is reported, and the run goes on
        traceback.print_exc(file=sys.stderr)
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        return [error_row(name, message)], time.perf_counter() - started
    problem = _valid(rows)
    if problem:
        return [error_row(name, problem)], time.perf_counter() - started
    for item in rows:
        item.setdefault("module", name)
    return rows, time.perf_counter() - started


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 or abs(value) >= 1e5 else f"{value:.4g}"
    return str(value)


def table(rows: list[dict]) -> str:
    """One Markdown table of every row, readable as plain text too."""
    cells = [[_cell(r["name"]), _cell(r["value"]), r["unit"], r["goal"], r["status"], r["note"]] for r in rows]
    widths = [
        max(len(COLUMNS[i]), *(len(c[i]) for c in cells)) if cells else len(COLUMNS[i]) for i in range(len(COLUMNS) - 1)
    ]

    def line(values):
        padded = [str(v).replace("|", "\\|").ljust(widths[i]) for i, v in enumerate(values[:-1])]
        return "| " + " | ".join(padded + [str(values[-1]).replace("|", "\\|")]) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|---|"
    return "\n".join([line(COLUMNS), rule] + [line(c) for c in cells])


def machine() -> dict:
    """What the figures were measured on."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), model)
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo") as handle:
            memory = int(next(line for line in handle if line.startswith("MemTotal")).split()[1]) / 2**20
    except (OSError, StopIteration):
        pass
    info = {
        "cpu": model,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": round(memory, 1) if memory else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    for package in ("numpy", "sympy"):
        try:
            info[package] = importlib.import_module(package).__version__
        except ImportError:
            info[package] = None
    try:
        from jupyterlab_gradcheck import __version__ as ours
    except ImportError:
        ours = None
    info["jupyterlab_gradcheck"] = ours
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def report(rows: list[dict], info: dict, *, quick: bool, device: str, seconds: float, load: tuple) -> str:
    """The Markdown report: header, machine, the table, then the profiles kept for missed goals."""
    counts = {status: sum(r["status"] == status for r in rows) for status in ("PASS", "MISS", "INFO", "ERROR")}
    lines = [
        "# Benchmark results" + (" (quick)" if quick else ""),
        "",
        f"Generated by `python -m benchmarks{' --quick' if quick else ''}"
        f"{'' if device == 'cpu' else ' --device ' + device}` on {info['date']}, in {seconds:.0f} s. "
        "Goals and method: docs/benchmarks.md. Figures that matter are ratios against a baseline "
        "timed in the same run; absolute times on a shared machine are noise.",
        "",
        "## Machine and versions",
        "",
        f"- CPU: {info['cpu']}, {info['cores']} cores (torch ran with {info['torch_threads']} "
        f"thread{'s' if info['torch_threads'] != 1 else ''}, see --threads), "
        f"{info['memory_gib']} GiB memory; {info['platform']}",
        f"- Load average (1, 5, 15 min) at start: {load[0]}; at end: {load[1]}",
        f"- Device: {device}" + (f" ({info['gpu']}, CUDA {info['cuda']})" if info.get("gpu") else ""),
        f"- Python {info['python']}, torch {info['torch']}, numpy {info['numpy']}, sympy {info['sympy']}, "
        f"jupyterlab_gradcheck {info['jupyterlab_gradcheck']}",
        "",
        f"## Figures: {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['ERROR']} ERROR, {counts['INFO']} INFO",
        "",
        table(rows),
    ]
    profiles = [r for r in rows if r.get("profile")]
    if profiles:
        lines += ["", "## Profiles of missed goals", ""]
        for r in profiles:
            lines += [f"### {r['name']}", "", "```text", r["profile"].rstrip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[1])
    parser.add_argument("--quick", action="store_true", help="smoke run under a minute; results.md is left alone")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="torch device for B1-B3")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the report (default: this folder; --quick writes only with --out)",
    )
    parser.add_argument("--only", default="", help="comma-separated modules, e.g. engine,scale,accuracy")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads for every figure (default 1, 0 keeps torch's default): on a "
        "shared machine a parallel region waits for whichever of its threads another process "
        "has descheduled, which times the neighbours, not the code",
    )
    args = parser.parse_args(argv)

    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print(
                "benchmarks: --device cuda asked for, but torch.cuda.is_available() is False "
                f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); nothing was run",
                file=sys.stderr,
            )
            return 2
    os.environ[DEVICE_VARIABLE] = args.device
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    names = discover([n.strip() for n in args.only.split(",") if n.strip()])
    load_start = _load()
    started = time.perf_counter()
    rows: list[dict] = []
    for name in names:
        print(f"benchmarks: {name} ...", file=sys.stderr, flush=True)
        module_rows, seconds = run_module(name, args.quick)
        print(f"benchmarks: {name} done in {seconds:.1f} s", file=sys.stderr, flush=True)
        rows += module_rows
    elapsed = time.perf_counter() - started
    print(table(rows))
    errors = sum(r["status"] == "ERROR" for r in rows)
    misses = sum(r["status"] == "MISS" for r in rows)
    print(
        f"\n{len(rows)} figures: {sum(r['status'] == 'PASS' for r in rows)} PASS, {misses} MISS, "
        f"{errors} ERROR, in {elapsed:.1f} s"
    )

    out = args.out if args.out is not None else (None if args.quick else HERE)
    if out is not None:
        info = {**machine(), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
        out.mkdir(parents=True, exist_ok=True)
        stem = "results-quick" if args.quick else "results"
        text = report(rows, info, quick=args.quick, device=args.device, seconds=elapsed, load=(load_start, _load()))
        (out / f"{stem}.md").write_text(text, encoding="utf-8")
        if args.out is not None:
            (out / f"{stem}.json").write_text(
                json.dumps({"machine": info, "device": args.device, "rows": rows}, indent=1, default=str),
                encoding="utf-8",
            )
        print(f"wrote {out / (stem + '.md')}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
