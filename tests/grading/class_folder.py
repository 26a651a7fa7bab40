"""A class folder of real ledgers, `<root>/<student>/ps1/lab.gradcheck.jsonl`, with copies.

Each student's ledger is written by the real ledgered run (`run_and_record`): one check of
x*x at the student's own point, so no two students share anything. Then three students copy a
classmate, each in a different way:

- a byte copy (the same ledger id and entries);
- a copy continued with a run of one's own (the ledger id and the first entries shared);
- a copy re-chained under a fresh ledger id (no id or hash shared: the same run at the same
  instants, an identical run).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from jupyterlab_gradcheck.core.ledger.store import Ledger, genesis_entry, make_line
from jupyterlab_gradcheck.core.run import run_and_record

ASSIGNMENT = "ps1"
LEDGER = "lab.gradcheck.jsonl"


def spec(point: float, grad: str = "2*x") -> dict:
    return {"function": "x*x", "inputs": {"x": point}, "analytical_gradient": grad, "id": "square"}


def student(index: int) -> str:
    return f"student_{index:04d}"


def ledger_of(root: Path, index: int) -> Path:
    return root / student(index) / ASSIGNMENT / LEDGER


def rechained(source: Path, target: Path) -> None:
    """`source`'s entries under a fresh genesis (a new ledger id), every hash recomputed."""
    entries = [json.loads(line) for line in source.read_text().splitlines()]
    lines, prev = [], None
    for entry in entries:
        entry.pop("hash")
        if entry["seq"] == 0:
            entry = genesis_entry(entry["time"])
        else:
            entry["prev"] = prev
        line, prev = make_line(entry)
        lines.append(line)
    target.write_bytes(b"".join(lines))


def make_class(root: Path, size: int) -> list[tuple[str, str, str]]:
    """Write `size` students' ledgers, the last three copies; returns (copier, source, way)."""
    copies = {size - 3: (0, "byte copy"), size - 2: (1, "continued"), size - 1: (2, "re-chained")}
    for index in range(size):
        path = ledger_of(root, index)
        path.parent.mkdir(parents=True)
        if index not in copies:
            run_and_record(spec(1.0 + index / 64, "x" if index % 7 == 0 else "2*x"), Ledger(path))
    for index, (source, way) in copies.items():
        target = ledger_of(root, index)
        if way == "re-chained":
            rechained(ledger_of(root, source), target)
        else:
            shutil.copyfile(ledger_of(root, source), target)
        if way == "continued":
            run_and_record(spec(5.0 + index), Ledger(target))
    return [(student(index), student(source), way) for index, (source, way) in copies.items()]


def measure(size: int, jobs: int | None) -> None:
    """Print the figures of benchmarks/results.md ("Grading at class scale") for a class of `size`:
    collect with copy detection, then with the replay at --jobs 1 and `jobs` (None: every core)."""
    import os
    import tempfile
    import time

    from jupyterlab_gradcheck.core.report.submissions import collect

    root = Path(tempfile.mkdtemp(prefix="gradcheck-class-"))
    make_class(root, size)
    for replay, workers in ((False, 1), (True, 1), (True, jobs)):
        started = time.perf_counter()
        found = collect([str(root)], replay=replay, jobs=workers)
        seconds = time.perf_counter() - started
        flagged = sum(1 for submission in found if submission["shared_with"])
        print(
            f"{size} submissions, replay {replay}, jobs {workers or os.cpu_count()}: {seconds:.2f} s, "
            f"{seconds / size * 1000:.2f} ms each, {size / seconds:.0f} per second, {flagged} students in pairs"
        )
    shutil.rmtree(root)


if __name__ == "__main__":  # python tests/grading/class_folder.py [SIZE [JOBS]]
    import sys

    arguments = sys.argv[1:]
    measure(int(arguments[0]) if arguments else 1000, int(arguments[1]) if len(arguments) > 1 else None)
