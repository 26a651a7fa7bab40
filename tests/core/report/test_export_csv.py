"""CSV export of a folder of submissions in nbgrader's layout, read back with `csv`."""

from __future__ import annotations

import csv
import io
import json

import pytest

from jupyterlab_gradcheck.core.ledger.binding import update_binding
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.report.submissions import collect, nbgrader_identity
from jupyterlab_gradcheck.core.run import run_and_record
from support.ledger import THREE_CHECKS, lines_of, notebook_with_three_checks, rechain, write_lines

COLUMNS = [
    "student_id",
    "assignment_id",
    "notebook_id",
    "check_id",
    "function",
    "inputs",
    "dtype",
    "device",
    "analytical",
    "observed",
    "max_abs_err",
    "max_rel_err",
    "rtol",
    "atol",
    "passed",
    "runs",
    "failures_kept",
    "tolerance_edits",
    "widened_after_failure",
    "expectation_revised_after_observation",
    "chain_ok",
    "binding_ok",
    "status",
    "witnessed",
    "witness_flags",
]


@pytest.fixture
def course(tmp_path):
    """submitted/<student>/ps1/lab1.ipynb for three students:
    alice is honest; bob widened the failing check's tolerance after it failed and re-ran it;
    carol's ledger lost its last line after the notebook was saved."""
    root = tmp_path / "course" / "submitted"
    for student in ("alice", "bob", "carol"):
        notebook, ledger = notebook_with_three_checks(root / student / "ps1", tolerance_change=student == "bob")
        if student == "bob":
            run_and_record(THREE_CHECKS[2], ledger, sweep=False)
        if student == "carol":
            write_lines(ledger.path, lines_of(ledger.path)[:-1])
    return root


def test_nbgrader_identity_comes_from_the_path(tmp_path):
    """Given paths in and out of nbgrader's layout, then student and assignment come from
    submitted/<student>/<assignment>/, or from <root>/<student>/<assignment>/, else are empty."""
    assert nbgrader_identity(tmp_path / "submitted" / "ann" / "hw2" / "a.ipynb") == ("ann", "hw2")
    assert nbgrader_identity(tmp_path / "autograded" / "ann" / "hw2" / "a.ipynb") == ("ann", "hw2")
    assert nbgrader_identity(tmp_path / "x" / "ann" / "hw2" / "a.ipynb", tmp_path / "x") == ("ann", "hw2")
    assert nbgrader_identity(tmp_path / "a.ipynb") == ("", "")


def test_folder_of_three_students_exports_one_csv(course, tmp_path, gradcheck_cli):
    """Given the course folder, when `jupyter-gradcheck export submitted --format csv -o` runs,
    then it exits 0 and Python's csv module reads exactly the issue's columns, one row per
    check per student, with student and assignment from the path and the evidence in the
    right cells."""
    out = tmp_path / "grades.csv"
    code, _out, err = gradcheck_cli("export", str(course), "--format", "csv", "-o", str(out))
    assert code == 0, err
    reader = csv.DictReader(io.StringIO(out.read_text(encoding="utf-8")))
    assert reader.fieldnames == COLUMNS
    rows = list(reader)
    assert [(r["student_id"], r["assignment_id"], r["notebook_id"], r["check_id"]) for r in rows] == [
        (student, "ps1", "lab1.ipynb", check["id"]) for student in ("alice", "bob", "carol") for check in THREE_CHECKS
    ]
    row = {(r["student_id"], r["check_id"]): r for r in rows}

    square = row["alice", "square"]
    assert (square["function"], json.loads(square["inputs"]), square["dtype"], square["device"]) == (
        "x*x",
        {"x": 3},
        "float64",
        "cpu",
    )
    assert (json.loads(square["analytical"]), json.loads(square["observed"]), square["passed"]) == (6, 6.0, "true")
    assert (float(square["rtol"]), float(square["atol"])) == (1e-7, 1e-10)
    assert json.loads(row["alice", "vector_sum"]["observed"]) == [2.0, 4.0, 6.0]

    wrong = row["alice", "cube_wrong"]
    assert (wrong["passed"], wrong["runs"], wrong["failures_kept"], float(wrong["max_abs_err"])) == (
        "false",
        "1",
        "1",
        6.0,
    )
    assert wrong["widened_after_failure"] == "false"

    bob = row["bob", "cube_wrong"]  # widened to rtol 0.9 after failing, then re-ran and "passed"
    assert (bob["passed"], bob["runs"], bob["failures_kept"], bob["tolerance_edits"]) == ("true", "2", "1", "1")
    assert (bob["widened_after_failure"], float(bob["rtol"])) == ("true", 0.9)

    assert {r["chain_ok"] for r in rows if r["student_id"] != "carol"} == {"true"}
    assert {r["binding_ok"] for r in rows if r["student_id"] != "carol"} == {"true"}
    assert {(r["chain_ok"], r["binding_ok"]) for r in rows if r["student_id"] == "carol"} == {("true", "false")}


def test_a_bare_ledger_has_no_binding_to_check(tmp_path):
    """Given a ledger exported without any notebook, then its rows say chain_ok true and
    leave binding_ok empty (nothing to compare with), rather than claiming either way."""
    ledger = Ledger(tmp_path / "loose.gradcheck.jsonl")
    run_and_record(THREE_CHECKS[0], ledger, sweep=False)
    from jupyterlab_gradcheck.core.report.exports import to_csv

    [row] = list(csv.DictReader(io.StringIO(to_csv(collect([ledger.path])))))
    assert (row["notebook_id"], row["chain_ok"], row["binding_ok"]) == ("loose.gradcheck.jsonl", "true", "")


def test_a_check_that_never_ran_has_an_empty_verdict(tmp_path):
    """Given a check whose expectation was written but which never ran, then its row has an
    empty passed cell and zero runs, and the expectation is still shown."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    ledger.record_expectation(
        {**THREE_CHECKS[0], "id": "declared", "inputs": {"x": 3}, "tolerance": {"rtol": 1e-7, "atol": 1e-10}}
    )
    from jupyterlab_gradcheck.core.report.exports import rows

    [row] = [r for r in rows(collect([tmp_path])) if r["check_id"] == "declared"]
    assert (row["passed"], row["runs"], row["analytical"], row["observed"]) == (None, 0, 6, None)


def test_export_with_replay_adds_a_replay_ok_column(tmp_path, gradcheck_cli):
    """Given two students, one of whom hand-edited an observed value and recomputed the chain
    and the binding (hashing cannot see it), when exported with --replay to CSV and HTML,
    then the CSV has the issue's columns plus replay_ok, false only for the forger's rows,
    and the HTML names the line and the value that did not reproduce."""
    root = tmp_path / "submitted"
    for student in ("eve", "fay"):
        notebook, ledger = notebook_with_three_checks(root / student / "ps1", tolerance_change=False)
        if student == "eve":
            rechain(
                ledger.path,
                lambda e: (
                    e["data"]["record"].update(observed_gradient=5.0)
                    if e["kind"] == "observation" and e["check_id"] == "square"
                    else None
                ),
            )
            update_binding(notebook, Ledger(ledger.path))
    csv_out, html_out = tmp_path / "grades.csv", tmp_path / "grades.html"
    for fmt, out in (("csv", csv_out), ("html", html_out)):
        code, _out, err = gradcheck_cli("export", str(root), "--format", fmt, "--replay", "--jobs", "1", "-o", str(out))
        assert code == 0, err
    reader = csv.DictReader(io.StringIO(csv_out.read_text(encoding="utf-8")))
    assert reader.fieldnames == COLUMNS + ["replay_ok"]
    rows = list(reader)
    assert {(r["student_id"], r["chain_ok"], r["binding_ok"], r["replay_ok"]) for r in rows} == {
        ("eve", "true", "true", "false"),
        ("fay", "true", "true", "true"),
    }
    html = html_out.read_text(encoding="utf-8")
    assert "observed_gradient: recorded 5.0, replayed 6.0 (rtol=1e-07, atol=1e-10)" in html
    assert html.count("replay <span") == 2


def test_a_deleted_ledger_is_a_row_with_its_status_and_a_failed_verify(course, tmp_path, gradcheck_cli):
    """Given the three students and a fourth, dave, whose notebook calls the checker but whose
    ledger was deleted, when the folder is exported to CSV and verified, then dave has exactly
    one row, with no check and the status ledger_missing, the others' rows say ok or
    verify_failed as their verify does, and verify exits 1 naming dave's deleted ledger."""
    import nbformat

    dave = course / "submitted" / "dave" / "ps1" / "lab1.ipynb"
    dave.parent.mkdir(parents=True)
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "from jupyterlab_gradcheck.api import check_record\ncheck_record({'function': 'x*x', 'x': 3, "
                "'analytical_gradient': 6})"
            )
        ]
    )
    nbformat.write(notebook, str(dave))
    out = tmp_path / "grades.csv"
    code, _out, err = gradcheck_cli("export", str(course), "--format", "csv", "-o", str(out))
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    mine = [r for r in rows if r["student_id"] == "dave"]
    assert [(r["check_id"], r["status"], r["runs"], r["chain_ok"]) for r in mine] == [
        ("", "ledger_missing", "0", "true")
    ]
    statuses = {r["student_id"]: r["status"] for r in rows if r["student_id"] != "dave"}
    assert statuses == {"alice": "ok", "bob": "ok", "carol": "verify_failed"}
    assert {r["witnessed"] for r in rows} == {""}  # exported without a witness
    code, out_text, _err = gradcheck_cli("verify", str(course))
    assert code == 1
    assert "the notebook calls the checker, but its ledger lab1.gradcheck.jsonl is missing" in out_text
