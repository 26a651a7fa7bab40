"""The grader's five cheats, each caught by `verify` and flagged in the CSV and HTML exports.

A class of seven students hands in `submitted/<student>/lab1/lab1.ipynb` with its ledger
beside it, in nbgrader's layout. Each student works through the Python API (what a notebook
cell calls), then one honest student hands the work in as it is and six each cheat once:

- widen:    widens the tolerance of a failed check until it passes (with a justification);
- revise:   rewrites the expected gradient after seeing the observation;
- delete:   deletes the failed observation's line from the ledger;
- truncate: cuts the ledger back to before the failure (the chain that is left is valid);
- swap:     replaces the ledger with the honest student's;
- forge:    hand-edits the observed values of a failed check so that it passed, recomputes
            every hash after it and rewrites the notebook's binding, so that the chain and
            the binding both hold: only `--replay` can see it.

Verify and export run through the real `jupyter-gradcheck` script over the whole folder.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from figures import record

from jupyterlab_gradcheck.api import check_record
from jupyterlab_gradcheck.core.ledger.binding import METADATA_KEY, read_notebook, update_binding, write_notebook
from jupyterlab_gradcheck.core.ledger.store import Ledger, make_line
from support.ledger import forge_passed

SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")
RIGHT = {"function": "x*x", "x": 3, "analytical_gradient": 6}  # d/dx x^2 at 3 is 6
WRONG = {"function": "x*x", "x": 3, "analytical_gradient": 5}  # a wrong hand derivation
OTHER = {"function": "sin(x)", "x": 0.5, "analytical_gradient": "cos(x)"}
CHEATS = ("widen", "revise", "delete", "truncate", "swap", "forge")


def _cli(*args: str) -> tuple[int, str, str]:
    completed = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    return completed.returncode, completed.stdout, completed.stderr


def _lines(ledger: Path) -> list[dict]:
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]


def _rewrite_chain(ledger: Path, entries: list[dict]) -> None:
    """Write `entries` back with every prev and hash recomputed: a forger's careful rewrite."""
    previous, out = None, b""
    for entry in entries:
        body = {key: value for key, value in entry.items() if key != "hash"}
        if previous is not None:
            body["prev"] = previous
        line, previous = make_line(body)
        out += line
    ledger.write_bytes(out)


def _rebind(notebook: Path, ledger: Path) -> None:
    """Make the notebook's binding name the ledger as it is now (what a forger would do)."""
    entries = _lines(ledger)
    node = read_notebook(notebook)
    node.metadata[METADATA_KEY] = {
        **node.metadata[METADATA_KEY],
        "entries": entries[-1]["seq"],
        "head": entries[-1]["hash"],
    }
    write_notebook(node, notebook)


@pytest.fixture(scope="module")
def submissions(tmp_path_factory) -> Path:
    """The class folder, with one honest submission and six cheats applied to the files."""
    folder = tmp_path_factory.mktemp("course") / "submitted"
    notebooks = {}
    for student in ("honest", *CHEATS):
        notebook = folder / student / "lab1" / "lab1.ipynb"
        notebook.parent.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(), str(notebook))
        notebooks[student] = notebook

    def run(student, check, **options):
        return check_record(check, notebook=str(notebooks[student]), **options)

    run("honest", RIGHT), run("honest", OTHER)
    assert not run("widen", WRONG).passed
    widened = run("widen", {**WRONG, "tolerance": {"rtol": 0.5}}, justification="float rounding, surely")
    assert widened.passed
    failed = run("revise", WRONG)
    assert not failed.passed
    revised = run("revise", RIGHT)  # the same check (same function and inputs), a new expectation
    assert revised.passed and revised.record["id"] == failed.record["id"]
    assert not run("delete", WRONG).passed
    run("delete", OTHER)
    run("truncate", OTHER)
    assert not run("truncate", WRONG).passed
    run("swap", WRONG), run("swap", OTHER)
    assert not run("forge", WRONG).passed
    run("forge", OTHER)

    ledger = {student: notebook.with_name("lab1.gradcheck.jsonl") for student, notebook in notebooks.items()}
    for student, notebook in notebooks.items():  # each saved from JupyterLab, which binds it
        update_binding(notebook, Ledger(ledger[student]))
    # delete: the failed observation's line goes, the rest stays as written
    kept = [
        line
        for line in ledger["delete"].read_text().splitlines(keepends=True)
        if not ('"kind":"observation"' in line and '"passed":false' in line)
    ]
    assert len(kept) == len(ledger["delete"].read_text().splitlines()) - 1
    ledger["delete"].write_text("".join(kept))
    # truncate: back to the passing check before the failure
    ledger["truncate"].write_text("".join(ledger["truncate"].read_text().splitlines(keepends=True)[:3]))
    # swap: the honest student's ledger instead of one's own
    shutil.copyfile(ledger["honest"], ledger["swap"])
    # forge: the failed observation edited to pass, the chain and the binding recomputed
    entries = _lines(ledger["forge"])
    failed = next(e for e in entries if e["kind"] == "observation" and not e["data"]["passed"])
    forge_passed(failed, 5.0)
    _rewrite_chain(ledger["forge"], entries)
    _rebind(notebooks["forge"], ledger["forge"])
    return folder


def _section(report_lines: list[str], student: str) -> str:
    start = next(i for i, line in enumerate(report_lines) if f"/{student}/lab1/" in line and not line.startswith(" "))
    end = next(
        (i for i in range(start + 1, len(report_lines)) if not report_lines[i].startswith(" ")), len(report_lines)
    )
    return "\n".join(report_lines[start:end])


def test_verify_catches_each_cheat_and_passes_the_honest_work(submissions):
    """Given the class folder, when `jupyter gradcheck verify` runs over it, then it exits 1,
    passes the honest submission, flags the widening and the revision, and names the broken
    chain (deletion) and the binding that no longer matches (truncation, swap); the forgery
    passes hashing, and `verify --replay` on it exits 1 naming the value that does not
    reproduce."""
    code, out, err = _cli("verify", str(submissions))
    assert code == 1, err
    lines = out.splitlines()
    assert _section(lines, "honest").startswith("OK ")
    assert "widened_after_failure" in _section(lines, "widen")
    assert "expectation_revised_after_observation" in _section(lines, "revise")
    delete = _section(lines, "delete")
    assert delete.startswith("FAIL") and ("seq" in delete or "prev does not match" in delete), delete
    for student in ("truncate", "swap"):
        section = _section(lines, student)
        assert section.startswith("FAIL") and "binding" in section, section
    assert _section(lines, "forge").startswith("OK "), "the forgery was meant to pass hashing"

    code, out, err = _cli("verify", "--replay", str(submissions / "forge"))
    assert code == 1, err
    assert re.search(r"replay: line \d+ .*observed_gradient: recorded 5\.0, replayed 6\.0", out), out
    record("cheats detected by verify (widen, revise, delete, truncate, swap, forge with --replay)", "6 of 6")


def _csv_rows(text: str) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        rows.setdefault(row["student_id"], []).append(row)
    return rows


def _html_sections(text: str) -> dict[str, str]:
    sections = {}
    for chunk in text.split('<section class="submission">')[1:]:
        student = re.search(r"<h2>([^ <]+) / ", chunk).group(1)
        sections[student] = chunk
    return sections


#: How each cheat shows: (CSV column, its value when flagged, text of the HTML section).
SHOWN = {
    "widen": ("widened_after_failure", "true", 'data-flag="widened_after_failure"'),
    "revise": ("expectation_revised_after_observation", "true", 'data-flag="expectation_revised_after_observation"'),
    "delete": ("chain_ok", "false", "an entry is missing"),
    "truncate": ("binding_ok", "false", "the ledger was truncated"),
    "swap": ("binding_ok", "false", "the ledger was swapped"),
    "forge": ("replay_ok", "false", "observed_gradient: recorded 5.0, replayed 6.0"),
}


def _flagged(rows: list[dict], html: str, cheat: str) -> list[str]:
    """Where one student's cheat shows: "csv", "html", both or neither."""
    column, value, text = SHOWN[cheat]
    shown = ["csv"] if any(row.get(column) == value for row in rows) else []
    return shown + (["html"] if text in html else [])


def _export(submissions: Path, out: Path, *extra: str) -> tuple[dict, dict]:
    for kind in ("csv", "html"):
        code, _, err = _cli("export", str(submissions), "--format", kind, "-o", str(out / f"class.{kind}"), *extra)
        assert code == 0, err
    return (
        _csv_rows((out / "class.csv").read_text(encoding="utf-8")),
        _html_sections((out / "class.html").read_text(encoding="utf-8")),
    )


def test_the_four_cheats_hashing_sees_are_flagged_in_one_export(submissions, tmp_path):
    """Given the class folder, when it is exported to CSV and HTML, then the widening, the
    revision, the deletion, the truncation and the swap are each flagged in both, and the
    honest submission is flagged nowhere."""
    rows, sections = _export(submissions, tmp_path)
    assert sorted(rows) == sorted(("honest", *CHEATS)) == sorted(sections)
    for cheat in ("widen", "revise", "delete", "truncate", "swap"):
        assert _flagged(rows[cheat], sections[cheat], cheat) == ["csv", "html"], cheat
    assert _flagged(rows["forge"], sections["forge"], "forge") == [], "hashing alone cannot see the forgery"
    for row in rows["honest"]:
        assert (
            row["widened_after_failure"],
            row["expectation_revised_after_observation"],
            row["chain_ok"],
            row["binding_ok"],
        ) == ("false", "false", "true", "true")
    assert 'class="status bad"' not in sections["honest"] and "data-flag=" not in sections["honest"]


def test_all_five_cheats_are_flagged_in_one_export_with_replay(submissions, tmp_path):
    """Given the class folder, when it is exported to CSV and HTML with `--replay`, then all five
    cheats (six students) are flagged in that one export, the forgery by a `replay_ok` of false
    and its replay difference, and the honest submission is flagged nowhere."""
    rows, sections = _export(submissions, tmp_path, "--replay")
    flagged = {cheat: _flagged(rows[cheat], sections[cheat], cheat) for cheat in CHEATS}
    record(
        "cheats flagged in one CSV+HTML export with --replay",
        f"{sum(1 for v in flagged.values() if v == ['csv', 'html'])} of {len(CHEATS)} cheating students",
    )
    assert all(shown == ["csv", "html"] for shown in flagged.values()), flagged
    assert all(row["replay_ok"] == "true" for row in rows["honest"])
