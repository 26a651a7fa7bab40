"""Every cheat the integrity issue lists, played by a class, flagged in one export with --witness.

A class hands in `submitted/<student>/lab1/lab1.ipynb` with its ledger beside it. Each student
works as in JupyterLab with a witness configured (a real `jupyter gradcheck witness` on
loopback): checks run from the notebook, their attestations kept in the outputs, the metadata
bound on save. Then each cheater edits their files offline, as a student who had read
docs/ledger.md would: recompute the chain, rewrite `metadata.gradcheck`, clear the outputs.

One export (`--replay --witness`) must flag every cheater and not the honest student. The same
export without the witness flags exactly the cheats docs/ledger.md's table marks as caught
without one (`FLAGGED_WITHOUT_WITNESS`).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from figures import record
from live_witness import LiveWitness, environment

from jupyterlab_gradcheck.core.ledger.binding import binding_for
from jupyterlab_gradcheck.core.ledger.store import Ledger
from support.course import Notebook, rebind, rewrite, working_as
from support.ledger import forge_passed, seal_junk

SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")
RIGHT = {"function": "x*x", "x": 3, "analytical_gradient": 6}  # d/dx x^2 at 3 is 6
WRONG = {"function": "x*x", "x": 3, "analytical_gradient": 5}  # a wrong hand derivation
OTHER = {"function": "sin(x)", "x": 0.5, "analytical_gradient": "cos(x)"}
CUBE_WRONG = {"function": "x*x*x", "x": 2, "analytical_gradient": 6}  # 3x^2 at 2 is 12: a kept failure
CUBE_RIGHT = {**CUBE_WRONG, "analytical_gradient": 12}

#: The cheats of the issue and of docs/reliability.md, one student each.
CHEATS = (
    "truncate_rebind",
    "delete_failed_check",
    "replace_failed_record",
    "delete_failure_and_widening",
    "swap_other_student",
    "older_run",
    "fresh_ledger",
    "clean_binding",
    "outside_binding",
    "edit_times",
    "junk_seal",
    "private_runs",
    "deleted_ledger",
    "widen",
    "revise",
    "delete_line",
    "truncate",
    "swap",
    "forge",
)
#: Caught with no witness (docs/ledger.md, "What catches what"): by the chain's rules, the
#: metadata binding, the notebook's own files, or replay. The rest only the witness sees.
FLAGGED_WITHOUT_WITNESS = {
    "delete_failure_and_widening",
    "clean_binding",
    "outside_binding",
    "junk_seal",
    "deleted_ledger",
    "widen",
    "revise",
    "delete_line",
    "truncate",
    "swap",
    "forge",
}


def _ledger(notebook: Notebook) -> Path:
    return notebook.path.with_name("lab1.gradcheck.jsonl")


def _failed(entry: dict) -> bool:
    return entry["kind"] == "observation" and entry["data"]["passed"] is False


def _work(folder: Path, witness: LiveWitness) -> dict[str, Notebook]:
    """Every student's honest work, witnessed; returns their notebooks."""
    books = {}
    for student in ("honest", *CHEATS):
        book = books[student] = Notebook(folder / student / "lab1" / "lab1.ipynb")
        with working_as(student, witness.url, witness.tokens[student]):
            if student == "private_runs":
                for _ in range(2):
                    assert not book.run(WRONG, ledger=False).passed  # trial runs, kept out of the ledger
                book.run(RIGHT)
            elif student == "older_run":
                book.run(RIGHT)
                book.save()
                shutil.copytree(book.path.parent, folder.parent / "older_copy")  # a copy kept aside
                _ledger(book).unlink()
                assert not book.run(WRONG).passed  # the newer ledger, with its failure
            elif student == "honest":
                book.run(RIGHT), book.run(OTHER)
            elif student in ("widen", "delete_failure_and_widening"):
                assert not book.run(WRONG).passed
                assert book.run({**WRONG, "tolerance": {"rtol": 0.5}}, justification="float rounding").passed
            elif student == "revise":
                assert not book.run(WRONG).passed
                book.run(RIGHT)
            else:
                book.run(RIGHT)
                assert not book.run(CUBE_WRONG).passed
                book.run(OTHER)
        book.save()
    return books


def _cheat(folder: Path, books: dict[str, Notebook]) -> None:
    """Each cheater's offline edits (no witness is told of them)."""
    ledger = {student: _ledger(book) for student, book in books.items()}
    with working_as("offline", None, ""):
        lines = ledger["truncate_rebind"].read_text().splitlines(keepends=True)
        ledger["truncate_rebind"].write_text("".join(lines[:3]))  # genesis and the first passing check
        for student in ("delete_failed_check", "delete_failure_and_widening"):
            failed_ids = {e["check_id"] for e in Ledger(ledger[student]).entries() if _failed(e)}
            keep = (
                (lambda e: e["check_id"] not in failed_ids)
                if student == "delete_failed_check"
                else (lambda e: not _failed(e) and e["kind"] != "tolerance_change")
            )
            rewrite(ledger[student], keep=keep)
        scratch = Notebook(folder.parent / "scratch" / "lab1.ipynb")
        genuine = Ledger(_ledger(scratch))
        scratch.run(CUBE_RIGHT)  # the corrected derivation, run for real elsewhere
        right_obs = next(e for e in genuine.entries() if e["kind"] == "observation")
        rewrite(
            ledger["replace_failed_record"], edit=lambda e: e.update(data=right_obs["data"]) if _failed(e) else None
        )
        shutil.copyfile(ledger["honest"], ledger["swap_other_student"])
        for name in ("lab1.ipynb", "lab1.gradcheck.jsonl"):
            shutil.copyfile(folder.parent / "older_copy" / name, books["older_run"].path.with_name(name))
        ledger["fresh_ledger"].unlink()
        books["fresh_ledger"].run(RIGHT)
        clean = books["clean_binding"].path.with_name("clean.gradcheck.jsonl")
        shutil.copyfile(ledger["honest"], clean)
        for student, name in (
            ("clean_binding", "clean.gradcheck.jsonl"),
            ("outside_binding", "../../../elsewhere/lab1.gradcheck.jsonl"),
        ):
            document = json.loads(books[student].path.read_text())
            document["metadata"]["gradcheck"] = {**binding_for(Ledger(clean), books[student].path), "ledger": name}
            books[student].path.write_text(json.dumps(document))
        rewrite(ledger["edit_times"], edit=lambda e: e.update(time="2026-01-01T09:00:00+00:00"))
        seal_junk(
            ledger["junk_seal"],
            next(i for i, e in enumerate(Ledger(ledger["junk_seal"]).entries(), start=1) if _failed(e)),
        )
        ledger["deleted_ledger"].unlink()
        ledger["delete_line"].write_text(
            "".join(
                line
                for line in ledger["delete_line"].read_text().splitlines(keepends=True)
                if not ('"kind":"observation"' in line and '"passed":false' in line)
            )
        )
        ledger["truncate"].write_text("".join(ledger["truncate"].read_text().splitlines(keepends=True)[:3]))
        shutil.copyfile(ledger["honest"], ledger["swap"])
        rewrite(
            ledger["forge"],
            edit=lambda e: forge_passed(e, float(e["data"]["record"]["analytical_gradient"])) if _failed(e) else None,
        )
        for student in (
            "truncate_rebind",
            "delete_failed_check",
            "replace_failed_record",
            "delete_failure_and_widening",
            "fresh_ledger",
            "edit_times",
            "junk_seal",
            "forge",
        ):
            books[student].clear_outputs()
            rebind(books[student].path)
        books["swap_other_student"].clear_outputs()
        honest_binding = json.loads(books["honest"].path.read_text())["metadata"]["gradcheck"]
        document = json.loads(books["swap_other_student"].path.read_text())
        document["metadata"]["gradcheck"] = honest_binding
        books["swap_other_student"].path.write_text(json.dumps(document))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """(submitted folder, the live witness) after the class worked, witnessed, and cheated offline."""
    root = tmp_path_factory.mktemp("witnessed-course")
    witness = LiveWitness(root / "witness", ("honest", *CHEATS)).start()
    try:
        folder = root / "submitted"
        books = _work(folder, witness)
        _cheat(folder, books)
        yield folder, witness
    finally:
        witness.stop()


def _export(folder: Path, *extra: str) -> dict[str, list[dict]]:
    done = subprocess.run(
        [str(SCRIPT), "export", str(folder), "--format", "csv", "--replay", "--jobs", "1", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment(),
    )
    assert done.returncode == 0, done.stderr
    by_student: dict[str, list[dict]] = {}
    for row in csv.DictReader(io.StringIO(done.stdout)):
        by_student.setdefault(row["student_id"], []).append(row)
    return by_student


def _flagged(rows: list[dict]) -> bool:
    """Whether a grader reading the student's rows is told something is off: a failed verify,
    a flag, a replay that differs, or a witness finding."""
    return any(
        r["status"] != "ok"
        or r["replay_ok"] == "false"
        or r["witnessed"] == "false"
        or r["witness_flags"]
        or r["widened_after_failure"] == "true"
        or r["expectation_revised_after_observation"] == "true"
        for r in rows
    )


def test_one_export_with_the_witness_flags_every_cheat_and_not_the_honest_work(course):
    """Given the class, when it is exported once with --replay --witness URL,
    then every one of the nineteen cheaters has a flagged row, and the honest student's rows
    say ok, witnessed, with no flag."""
    folder, witness = course
    rows = _export(folder, "--witness", witness.url)
    flagged = sorted(s for s, r in rows.items() if _flagged(r))
    assert "honest" not in flagged, rows["honest"]
    assert [(r["status"], r["witnessed"], r["witness_flags"]) for r in rows["honest"]] == [("ok", "true", "")] * 2
    missed = sorted(set(CHEATS) - set(flagged))
    record("integrity cheats flagged in one export with --witness", f"{len(CHEATS) - len(missed)} of {len(CHEATS)}")
    assert missed == []


def test_without_the_witness_exactly_the_documented_cheats_are_flagged(course):
    """Given the same class, when it is exported with --replay but no witness,
    then the cheats flagged are exactly those docs/ledger.md marks as caught without one,
    and the rest (a consistent rewrite with the outputs cleared) pass: only the witness sees them."""
    folder, _witness = course
    rows = _export(folder)
    flagged = {s for s, r in rows.items() if _flagged(r)}
    record("integrity cheats flagged without a witness", f"{len(flagged & set(CHEATS))} of {len(CHEATS)}")
    assert flagged == FLAGGED_WITHOUT_WITNESS
