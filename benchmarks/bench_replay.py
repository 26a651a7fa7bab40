"""B8, replay at scale: `verify --replay` over a class of submissions, and its scaling with --jobs.

What a grader runs on a class: `jupyter gradcheck verify --replay submitted/ --jobs N` over
nbgrader's layout, `submitted/<student>/<assignment>/`, every notebook's ledger chain, binding
and attestations checked and every recorded observation re-run.

How the submissions are made (real outputs, not hand-written JSON):
- The course notebook's checks are the 14 distinct checks its committed ledger
  (`examples/gradient-check-notebook.gradcheck.jsonl`) declares, each as first declared: the
  square, the vector sum, the seed record, the chosen and the float32 steps, the wrong
  derivative, ReLU at and away from its kink, the wide step, the linear model, softmax with
  cross-entropy and the two-layer network with and without tanh's derivative. Tolerances that
  were only the defaults written out are left to default again, so each check is declared as
  the notebook declares it.
- Each of V distinct student variants (2 in --quick, 10 in the full run) is really run: its
  checks go through the Python API (`check_record`, which writes the expectation, runs the
  engine and appends the observation to the notebook's ledger) from the cells of a notebook
  whose outputs keep each check's attestation, and the notebook is then saved with its ledger's
  binding, as JupyterLab saves it. Variant k moves the inputs of every check whose expectation is
  an expression by 0.25 k, so the variants compute different values; checks written with
  numbers stay as written. The course's deliberate failures stay failures in every variant.
- Student i's folder `submitted/student_NNNN/ps1/` holds a copy of variant i mod V (notebook and
  ledger side by side; the binding names the ledger by its file name, so it still binds). Every
  timed run must find every submission verified and every observation reproduced, or the
  benchmark raises.

Figures: submissions per second at --jobs 1, 2 and, in the full run, 4 (and the core count when
larger); the ratio jobs=N / jobs=1 from the same run; for --jobs 1 the CPU time per submission;
for every run, how many of the machine's cores stayed idle meanwhile (from /proc/stat). On a
shared machine that ratio is set by what the neighbours leave, so a control is timed just before
and after each replay run: pure-Python arithmetic in a pool of the same size started the same
way. Its ratio jobs=N / jobs=1 is what the machine gave N processes at that time, and the graded
figure is replay's ratio divided by the control's: the share of the available parallelism that
replay turns into throughput (goal >= 0.8). --jobs 1 replays in this process, as the CLI does;
N > 1 forks N workers from the fork server (core/ledger/verify.py), which this benchmark starts
once beforehand and reports apart, as a command pays it once. The full run also times the real
command line once over the whole folder, everything included.

Quick mode (in `make test`): 50 submissions of 2 variants, --jobs 1 and 2, once each.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import graded, row

ROOT = Path(__file__).resolve().parent.parent
COURSE_LEDGER = ROOT / "examples" / "gradient-check-notebook.gradcheck.jsonl"
ASSIGNMENT = "ps1"
NOTEBOOK = "gradient-check.ipynb"
#: (submissions, variants, jobs counts, timed runs per count)
FULL = (1000, 10, (1, 2, 4), 1)
QUICK = (50, 2, (1, 2), 1)
#: Inputs of variant k are moved by this much times k.
SHIFT = 0.25
#: Replay's jobs=N / jobs=1 against the same ratio for pure CPU work in the same pool, in the same
#: run: the share of the parallelism the machine gave that replay turns into throughput.
EFFICIENCY_GOAL = 0.8
#: The control: tasks of pure-Python arithmetic, per worker, each about 0.05 s of CPU.
CONTROL_TASKS, CONTROL_LOOP = 6, 400_000


def course_checks() -> list[dict]:
    """The course notebook's checks, each as first declared in its committed ledger."""
    from jupyterlab_gradcheck.core.check.record.spec import parse_spec

    checks: dict[str, dict] = {}
    for line in COURSE_LEDGER.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["kind"] == "expectation" and entry["check_id"] not in checks:
            checks[entry["check_id"]] = _as_declared(entry["data"], parse_spec)
    return list(checks.values())


def _as_declared(record: dict, parse_spec) -> dict:
    """The record without what the ledger wrote out for it: the run's fields and tolerances
    that are only the defaults (written explicitly, they would be taken as chosen)."""
    declared = {k: v for k, v in record.items() if k not in ("observed_gradient", "executed", "policy")}
    fd = dict(declared.get("finite_difference") or {})
    bare = {**declared, "finite_difference": {k: v for k, v in fd.items() if k in ("scheme", "step")}}
    bare.pop("tolerance", None)
    defaults = parse_spec(bare)
    if declared.get("tolerance") == defaults.tolerance:
        declared.pop("tolerance")
    if {k: fd.get(k) for k in ("rtol", "atol")} == {k: defaults.finite_difference[k] for k in ("rtol", "atol")}:
        declared["finite_difference"] = bare["finite_difference"]
    return declared


def _moved(value, by: float):
    if isinstance(value, list):
        return [_moved(item, by) for item in value]
    return value + by if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def variant_checks(k: int) -> list[dict]:
    """Variant k of the course: inputs of every check whose expectation is an expression moved
    by SHIFT * k (the expectation follows them); checks written with numbers as they are."""
    checks = course_checks()
    if k == 0:
        return checks
    out = []
    for check in checks:
        written = check["analytical_gradient"]
        symbolic = isinstance(written, str) or (
            isinstance(written, dict) and all(isinstance(v, str) for v in written.values())
        )
        out.append({**check, "inputs": _moved(check["inputs"], SHIFT * k)} if symbolic else check)
    return out


def run_variant(folder: Path, k: int) -> Path:
    """Variant k's notebook, really run: one cell per check through the Python API, each cell's
    output its attestation, saved with its ledger's binding. Returns the notebook."""
    import nbformat

    from jupyterlab_gradcheck.api import check_record
    from jupyterlab_gradcheck.core.ledger.binding import MIME_TYPE, update_binding
    from jupyterlab_gradcheck.core.ledger.store import Ledger

    folder.mkdir(parents=True, exist_ok=True)
    notebook = folder / NOTEBOOK
    cells = [nbformat.v4.new_code_cell("from jupyterlab_gradcheck.api import check_record")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), str(notebook))  # the notebook exists before it runs
    for record in variant_checks(k):
        result = check_record(record, notebook=str(notebook))
        cell = nbformat.v4.new_code_cell(f"check_record({json.dumps(record)})", execution_count=len(cells))
        cell.outputs = [
            nbformat.v4.new_output("display_data", data={MIME_TYPE: result.attestation, "text/plain": result.summary()})
        ]
        cells.append(cell)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), str(notebook))
    update_binding(notebook, Ledger(notebook.with_name(notebook.stem + ".gradcheck.jsonl")))
    return notebook


def make_class(root: Path, submissions: int, variants: int) -> dict:
    """`root/submitted/student_NNNN/ps1/` for each student, a copy of a really-run variant."""
    started = time.perf_counter()
    notebooks = [run_variant(root / "variants" / f"v{k}", k) for k in range(variants)]
    ran = time.perf_counter() - started
    submitted = root / "submitted"
    for i in range(submissions):
        source = notebooks[i % variants]
        target = submitted / f"student_{i:04d}" / ASSIGNMENT
        target.mkdir(parents=True)
        for name in (source.name, source.stem + ".gradcheck.jsonl"):
            shutil.copy2(source.with_name(name), target / name)
    return {"folder": submitted, "run_seconds": ran, "checks": len(course_checks())}


def _cpu_ticks() -> tuple[int, int] | None:
    """(idle, total) jiffies of the whole machine since boot, from /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + fields[4], sum(fields[:8])


def _idle_cores(before, after, cores: int) -> float | None:
    """How many of the machine's cores were idle on average between two `_cpu_ticks`."""
    if before is None or after is None or after[1] == before[1]:
        return None
    return cores * (after[0] - before[0]) / (after[1] - before[1])


def replay_once(folder: Path, jobs: int, expected: int) -> dict:
    """One `verify_path(folder, replay=True, jobs=jobs)`: wall seconds, this process's CPU
    seconds, the cores left idle meanwhile, and what it found; raises unless every submission
    verified and every observation reproduced."""
    from jupyterlab_gradcheck.core.ledger.verify import verify_path

    cpu, ticks, started = time.process_time(), _cpu_ticks(), time.perf_counter()
    result = verify_path(folder, replay=True, jobs=jobs)
    seconds = time.perf_counter() - started
    cpu, idle = time.process_time() - cpu, _idle_cores(ticks, _cpu_ticks(), os.cpu_count() or 1)
    reports = result["reports"]
    replays = [r["replay"] for r in reports]
    found = {
        "submissions": len(reports),
        "ok": sum(r["ok"] for r in reports),
        "observations": sum(r["observations"] for r in replays),
        "reproduced": sum(r["reproduced"] for r in replays),
        "differ": sum(len(r["differs"]) for r in replays),
        "skipped": sum(len(r["skipped"]) for r in replays),
    }
    if found["submissions"] != expected or found["ok"] != expected or found["reproduced"] != found["observations"]:
        raise RuntimeError(f"replay with --jobs {jobs} did not verify every submission: {found}")
    return {"seconds": seconds, "cpu": cpu, "idle_cores": idle, **found}


def cli_once(folder: Path, jobs: int) -> tuple[float, int, int, int]:
    """The real command line over the folder: (seconds, exit code, reports OK, reports FAIL)."""
    script = Path(sys.executable).with_name("jupyter-gradcheck")
    started = time.perf_counter()
    done = subprocess.run(
        [str(script), "verify", "--replay", str(folder), "--jobs", str(jobs)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    seconds = time.perf_counter() - started
    lines = done.stdout.splitlines()
    return (
        seconds,
        done.returncode,
        sum(line.startswith("OK ") for line in lines),
        sum(line.startswith("FAIL") for line in lines),
    )


def burn(_: int) -> float:
    """The control task: pure-Python arithmetic, no I/O and no shared state; its CPU seconds."""
    started, total = time.process_time(), 0
    for i in range(CONTROL_LOOP):
        total += i * i
    return time.process_time() - started


def control_rate(jobs: int) -> float:
    """Control tasks per second in a pool of `jobs` workers started as replay's are: what this
    machine gives N processes right now, whatever else runs on it."""
    from concurrent.futures import ProcessPoolExecutor

    from jupyterlab_gradcheck.core.ledger.verify import worker_context

    with ProcessPoolExecutor(jobs, mp_context=worker_context()) as pool:
        list(pool.map(burn, range(jobs)))  # every worker started before the clock
        started = time.perf_counter()
        list(pool.map(burn, range(CONTROL_TASKS * jobs)))
        return CONTROL_TASKS * jobs / (time.perf_counter() - started)


def start_workers_server() -> float | None:
    """Start the fork server replay workers come from (torch and the engine imported once);
    its seconds, or None where workers are spawned instead."""
    import multiprocessing.forkserver

    from jupyterlab_gradcheck.core.ledger.verify import worker_context

    if worker_context().get_start_method() != "forkserver":
        return None
    started = time.perf_counter()
    multiprocessing.forkserver.ensure_running()
    probe = worker_context().Process(target=os.getpid)  # answered once the server has imported its preload
    probe.start()
    probe.join()
    return time.perf_counter() - started


def _idle_text(runs: list[dict]) -> str:
    idle = [r["idle_cores"] for r in runs if r["idle_cores"] is not None]
    return f"{statistics.median(idle):.2f} cores idle meanwhile" if idle else "idle cores not measured"


def run(quick: bool) -> list[dict]:
    submissions, variants, jobs_list, repeats = QUICK if quick else FULL
    cores = os.cpu_count() or 1
    if not quick and cores > max(jobs_list):
        jobs_list = (*jobs_list, cores)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-replay-") as tmp:
        made = make_class(Path(tmp), submissions, variants)
        folder = made["folder"]
        server = start_workers_server()
        timings: dict[int, list[dict]] = {jobs: [] for jobs in jobs_list}
        controls: dict[int, list[float]] = {jobs: [] for jobs in jobs_list}
        for _ in range(repeats):  # interleaved, so a burst of load lands on every count alike
            for jobs in jobs_list:
                controls[jobs].append(control_rate(jobs))
                timings[jobs].append(replay_once(folder, jobs, submissions))
                controls[jobs].append(control_rate(jobs))
        first = timings[jobs_list[0]][0]
        rows.append(
            row(
                f"B8 replay: {submissions} submissions generated",
                submissions,
                "submissions",
                "-",
                "INFO",
                f"{variants} student variants of the course notebook's {made['checks']} checks really run "
                f"through check_record in {made['run_seconds']:.1f} s, copied under {submissions} student "
                f"names in submitted/<student>/{ASSIGNMENT}/; {first['observations']} observations in all",
            )
        )
        rows.append(
            row(
                "B8 replay: worker fork server start (once per command)",
                "-" if server is None else round(server, 2),
                "s",
                "-",
                "INFO",
                "workers are spawned here (no fork server)"
                if server is None
                else "imports torch and the engine once; every --jobs N > 1 figure below forks its workers from it "
                "(the command line pays this once, included in its end-to-end figure)",
            )
        )
        rates = {}
        for jobs, runs in timings.items():
            seconds = statistics.median(r["seconds"] for r in runs)
            rates[jobs] = submissions / seconds
            last = runs[-1]
            cpu = (
                f"; CPU {1000 * statistics.median(r['cpu'] for r in runs) / submissions:.0f} ms per submission"
                if jobs == 1
                else ""
            )
            rows.append(
                row(
                    f"B8 replay --jobs {jobs}: submissions per second",
                    round(rates[jobs], 2),
                    "submissions/s",
                    "-",
                    "INFO",
                    f"{seconds:.1f} s for {submissions} (median of {len(runs)}){cpu}; {_idle_text(runs)}; "
                    f"{last['ok']} of {last['submissions']} verified, {last['reproduced']} of "
                    f"{last['observations']} observations reproduced, {last['differ']} differ, "
                    f"{last['skipped']} skipped",
                )
            )
        control = {jobs: statistics.median(values) for jobs, values in controls.items()}
        for jobs in jobs_list[1:]:
            ratio, machine = rates[jobs] / rates[1], control[jobs] / control[1]
            rows.append(
                row(
                    f"B8 replay scaling: --jobs {jobs} / --jobs 1",
                    round(ratio, 2),
                    "x",
                    "-",
                    "INFO",
                    f"{rates[jobs]:.2f} vs {rates[1]:.2f} submissions/s, same folder, same run; {cores} cores"
                    f"; --jobs 1 left {_idle_text(timings[1])}, --jobs {jobs} {_idle_text(timings[jobs])}"
                    + (f"; more workers than the {cores} cores" if jobs > cores else ""),
                )
            )
            rows.append(
                row(
                    f"B8 control: pure CPU work, {jobs} workers / 1",
                    round(machine, 2),
                    "x",
                    "-",
                    "INFO",
                    f"what this machine gave {jobs} processes meanwhile: {control[jobs]:.1f} vs "
                    f"{control[1]:.1f} tasks/s of pure-Python arithmetic in the same kind of pool, measured "
                    f"just before and after each replay run (median of {len(controls[jobs])})",
                )
            )
            efficiency = ratio / machine
            rows.append(
                graded(
                    f"B8 replay scaling / the machine's, --jobs {jobs}",
                    round(efficiency, 2),
                    "x",
                    f">= {EFFICIENCY_GOAL}",
                    efficiency >= EFFICIENCY_GOAL,
                    f"replay {ratio:.2f}x against pure CPU work {machine:.2f}x: the share of the "
                    "parallelism the machine gave that replay turned into throughput",
                )
            )
        if not quick:
            best = max(rates, key=rates.get)
            seconds, code, passed, failed = cli_once(folder, best)
            rows.append(
                row(
                    f"B8 jupyter gradcheck verify --replay over {submissions}, --jobs {best}",
                    round(seconds, 1),
                    "s",
                    "exit 1",
                    "PASS" if code == 1 else "MISS",
                    f"the real command end to end (start, fork server, discovery, replay, {submissions} "
                    f"reports printed); the class is copies of {variants} runs, so verify flags the shared "
                    f"ledgers and exits 1 (a finding); exit {code}, {passed} OK and {failed} FAIL; "
                    f"{submissions / seconds:.2f} submissions/s",
                )
            )
    return rows


def main() -> int:
    """`python -m benchmarks.bench_replay [--quick]`: this benchmark alone, its rows as a table."""
    import argparse

    from .__main__ import table

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="50 submissions, --jobs 1 and 2 (as in make test)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # as the runner's default --threads 1
    print(table(run(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
