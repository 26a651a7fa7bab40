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

from jupyterlab_gradcheck.core.ledger.ledgered_run import run_and_record
from jupyterlab_gradcheck.core.ledger.line_format import genesis_entry, make_line
from jupyterlab_gradcheck.core.ledger.store import Ledger

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
