"""Helpers shared by the ledger, verify, replay and export tests.

They build real ledgers with the real engine (`run_and_record`), and they forge ledgers the
way someone editing one by hand would: change the bytes, or change an entry and recompute
every hash after it, so the tests can show what `verify` and `--replay` catch.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from jupyterlab_gradcheck.core.ledger.binding import update_binding
from jupyterlab_gradcheck.core.ledger.store import GENESIS, Ledger, make_line, read_entry
from jupyterlab_gradcheck.core.run import run_and_record

#: Three checks from the course: the square, a short vector sum, and a wrong hand derivation
#: (d/dx x^3 at 2 is 12, written as 6), which fails.
THREE_CHECKS = [
    {
        "id": "square",
        "function": "x*x",
        "x": 3,
        "analytical_gradient": 6,
        "origin": "d/dx x^2 = 2x",
        "destination": "x.grad",
    },
    {"id": "vector_sum", "function": "sum(x*x)", "x": [1.0, 2.0, 3.0], "analytical_gradient": "2*x"},
    {"id": "cube_wrong", "function": "x*x*x", "x": 2, "analytical_gradient": 6},
]
JUSTIFICATION = "the hand derivation 6 is wrong (3x^2 = 12); widened only to show the flag"


def new_notebook(path: Path) -> Path:
    """An empty notebook at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(path))
    return path


def notebook_with_three_checks(folder: Path, name: str = "lab1.ipynb", *, tolerance_change: bool = True):
    """A notebook whose ledger holds the three checks (one failing) and, optionally, a
    justified widening of the failing check's tolerance. Returns (notebook, ledger)."""
    notebook = new_notebook(folder / name)
    ledger = Ledger.for_notebook(notebook)
    for spec in THREE_CHECKS:
        run_and_record(spec, ledger, sweep=False)
    if tolerance_change:
        ledger.change_tolerance("cube_wrong", rtol=0.9, justification=JUSTIFICATION)
        update_binding(notebook, ledger)
    return notebook, ledger


def lines_of(path: Path) -> list[bytes]:
    """The complete lines of a ledger file, without their newlines."""
    return path.read_bytes().split(b"\n")[:-1]


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def rechain(path: Path, edit) -> None:
    """Forge a ledger: `edit(entry)` each decoded entry, then recompute every prev and hash."""
    prev = GENESIS
    out = []
    for raw in lines_of(path):
        entry = read_entry(raw)
        entry.pop("hash")
        edit(entry)
        entry["prev"] = prev
        line, prev = make_line(entry)
        out.append(line)
    path.write_bytes(b"".join(out))


def line_number_of(path: Path, predicate) -> int:
    """The 1-based line number of the first entry for which `predicate(entry)` holds."""
    for number, raw in enumerate(lines_of(path), start=1):
        if predicate(json.loads(raw)):
            return number
    raise AssertionError("no such entry")


def is_observation_of(check_id: str):
    return lambda entry: entry["kind"] == "observation" and entry["check_id"] == check_id


def check_entries(ledger: Ledger) -> list[dict]:
    """The ledger's entries after its genesis entry (seq 0, which names the ledger): the ones
    the checks wrote. Fails when the ledger does not open with a genesis entry."""
    genesis, *entries = ledger.entries()
    assert (genesis["seq"], genesis["kind"], genesis["data"]["event"]) == (0, "note", "genesis"), genesis
    return entries


def seal_junk(path: Path, number: int, junk: bytes = b"x" * 40) -> None:
    """Forge a ledger: line `number` replaced by `junk`, sealed by a forged torn-write note that
    takes its seq, and every hash after it recomputed (the chain then holds)."""
    import hashlib

    lines = lines_of(path)
    replaced = read_entry(lines[number - 1])
    seal = {
        "seq": replaced["seq"],
        "time": replaced["time"],
        "kind": "note",
        "check_id": None,
        "prev": replaced["prev"],
        "data": {
            "event": "torn_tail_sealed",
            "text": "an interrupted write",
            "lines": [{"line": number, "bytes": len(junk), "sha256": hashlib.sha256(junk).hexdigest()}],
        },
    }
    sealed, prev = make_line(seal)
    rest = []
    for raw in lines[number:]:
        entry = read_entry(raw)
        entry.pop("hash")
        entry["prev"] = prev
        line, prev = make_line(entry)
        rest.append(line[:-1])
    write_lines(path, lines[: number - 1] + [junk, sealed[:-1]] + rest)


def forge_passed(entry: dict, value: float) -> None:
    """Forge an observation: a failed one made to say it passed with the hand-derived `value`."""
    data, record_ = entry["data"], entry["data"]["record"]
    data["passed"] = record_["passed"] = True
    record_["observed_gradient"] = value
    for name, observation in record_["observations"].items():
        for gradient in (observation.get("gradients") or {}).values():
            gradient["value"] = 2 * value if name == "backward_pass_2_accumulated" else value
    for comparison in record_["comparisons"]:
        comparison.update(passed=True, max_abs_err=0.0, max_rel_err=0.0)
    record_["failure"], record_["failures"] = None, []
