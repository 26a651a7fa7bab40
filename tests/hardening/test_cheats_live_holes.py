"""The ledger's own holes, played against a live witness: each is caught, with or without it.

- A forged ledger embedded in `metadata.gradcheck.embedded` beside the real ledger file.
- A failed check widened by re-running it under a new id (the flag followed the id).
- A failed observation cut to half a line and sealed as a torn write.
"""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
from live_witness import (
    CUBE_WRONG,
    OTHER,
    RIGHT,
    SCRIPT,
    LiveWitness,
    environment,
    errors,
    grade_row,
    ledger_of,
    notebook_of,
)
from live_witness import verify as verify_with

from jupyterlab_gradcheck.core.ledger.store import make_line, read_entry
from support.course import Notebook, rebind
from support.ledger import lines_of

STUDENTS = ("jo", "jay", "kim", "lee")
WIDE = {"rtol": 0.5, "atol": 10.0}  # wide enough that the wrong 6 (for 12) passes


@pytest.fixture(scope="module")
def witness(tmp_path_factory):
    live = LiveWitness(tmp_path_factory.mktemp("holes-witness"), STUDENTS).start()
    yield live
    live.stop()


def test_a_forged_embedded_ledger_beside_the_real_file_is_an_error_naming_both(witness, tmp_path):
    """Given jo's witnessed lab1 with a failure, and a clean ledger (run elsewhere) embedded in
    lab1.ipynb's metadata by the notebook export while the real lab1.gradcheck.jsonl stays beside
    it, when verified, with or without the witness, then the error names the notebook, the
    embedded ledger and the file beside it."""
    book = notebook_of(tmp_path, "jo")
    with witness.student("jo"):
        book.run(RIGHT), book.run(CUBE_WRONG)
    book.save()
    clean = Notebook(tmp_path / "elsewhere" / "lab1.ipynb")
    with witness.student("jo", None):
        clean.run(RIGHT)
    clean.save()
    exported = tmp_path / "elsewhere" / "export.ipynb"
    done = subprocess.run(
        [str(SCRIPT), "export", str(clean.path), "--format", "notebook", "-o", str(exported)],
        capture_output=True,
        env=environment(),
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(book.path.read_text())
    document["metadata"]["gradcheck"] = json.loads(exported.read_text())["metadata"]["gradcheck"]
    book.path.write_text(json.dumps(document))
    expected = (
        "lab1.ipynb embeds a ledger (lab1.gradcheck.jsonl) that differs from the ledger file "
        "lab1.gradcheck.jsonl beside it: two ledgers for one notebook, the embedded one hiding the file"
    )
    status, report = verify_with(book.path, witness)
    assert status == 1 and expected in errors(report), errors(report)


def test_a_failed_check_widened_under_a_new_id_keeps_its_flag(witness, tmp_path):
    """Given jay's check that failed (id cube) and the same computation re-run under a new id with
    a tolerance wide enough to pass, when graded, then the new check carries
    widened_after_failure and the grade is 0.5, as for a widening under the same id, not 1.0."""
    book = notebook_of(tmp_path, "jay")
    with witness.student("jay"):
        assert not book.run({**CUBE_WRONG, "id": "cube"}).passed
        assert book.run({**CUBE_WRONG, "id": "cube_again", "tolerance": WIDE}).passed
    book.save()
    status, report = verify_with(book.path, witness)
    assert (status, errors(report)) == (0, [])
    row = grade_row(tmp_path / "submitted" / "jay", witness)
    assert (row["widened_after_failure"], row["failures_kept"], row["ledger_fraction"]) == ("1", "1", "0.5")


def _seal_half(ledger, number: int) -> None:
    """The cheat: line `number` cut to half its bytes, sealed by a forged torn-write note that
    takes its seq, every hash after it recomputed."""
    lines = lines_of(ledger)
    cut = lines[number - 1][: len(lines[number - 1]) // 2]
    replaced = read_entry(lines[number - 1])
    seal = {
        "seq": replaced["seq"],
        "time": replaced["time"],
        "kind": "note",
        "check_id": None,
        "prev": replaced["prev"],
        "data": {
            "event": "torn_tail_sealed",
            "restart": True,
            "text": "an interrupted write left these bytes; they are kept in place",
            "lines": [{"line": number, "bytes": len(cut), "sha256": hashlib.sha256(cut).hexdigest()}],
        },
    }
    line, prev = make_line(seal)
    out = [cut]
    out.append(line.rstrip(b"\n"))
    for raw in lines[number:]:
        entry = read_entry(raw)
        entry.pop("hash")
        entry["prev"] = prev
        line, prev = make_line(entry)
        out.append(line.rstrip(b"\n"))
    ledger.write_bytes(b"".join(raw + b"\n" for raw in lines[: number - 1] + out))


def test_a_failed_observation_cut_and_sealed_as_a_torn_write_is_an_error(witness, tmp_path):
    """Given kim's witnessed lab1 whose failed observation is then cut to half a line and sealed
    by a forged torn-write note (restart recorded, chain recomputed, outputs cleared, binding
    rewritten), when verified without the witness, then the seal over a failed observation is an
    error; with the witness, the witnessed failure at that seq is named as removed too."""
    book = notebook_of(tmp_path, "kim")
    with witness.student("kim"):
        book.run(RIGHT), book.run(CUBE_WRONG), book.run(OTHER)
    book.save()
    ledger = ledger_of(book)
    number = next(
        i
        for i, raw in enumerate(lines_of(ledger), start=1)
        if b'"kind":"observation"' in raw and b'"passed":false' in raw
    )
    _seal_half(ledger, number)
    book.clear_outputs()
    rebind(book.path)
    alone = subprocess.run(
        [str(SCRIPT), "verify", str(book.path), "--json"], capture_output=True, text=True, env=environment()
    )
    reasons = [e["reason"] for e in json.loads(alone.stdout)["reports"][0]["errors"]]
    assert alone.returncode == 1 and reasons == [
        "the bytes sealed as a torn write are a failed observation cut short: a failure was hidden"
    ]
    status, report = verify_with(book.path, witness)
    assert status == 1 and any("a failed observation was removed" in e for e in errors(report)), errors(report)
