"""The verdict, the rubric and the per-submission rows (core.report.grading), on real ledgers.

Given submissions in nbgrader's layout `submitted/<student>/ps1/lab1.ipynb`, each written by the
real engine and then handled as a student might (kept as is, a tolerance widened after a
failure, an expectation revised after its run, a failure forged into a pass with every hash
recomputed, the ledger deleted), when they are collected with replay and graded, then each
verdict, share of the points and per-submission row says what the ledger proves.
"""

from __future__ import annotations

import csv
import io

import pytest
from traitlets.config import Config

from jupyterlab_gradcheck.core.ledger.binding import update_binding
from jupyterlab_gradcheck.core.report.grading import (
    SUBMISSION_COLUMNS,
    Rubric,
    score_of,
    submission_rows,
    to_submission_csv,
    verdict,
    verdict_lines,
)
from jupyterlab_gradcheck.core.report.submissions import collect, compare_rerun
from jupyterlab_gradcheck.core.run import run_and_record
from support.ledger import forge_passed, is_observation_of, notebook_with_three_checks, rechain


@pytest.fixture(scope="module")
def submitted(tmp_path_factory):
    root = tmp_path_factory.mktemp("course") / "submitted"

    def folder(student):
        return root / student / "ps1"

    notebook_with_three_checks(folder("kept_failure"), tolerance_change=False)
    notebook_with_three_checks(folder("widener"))
    notebook, ledger = notebook_with_three_checks(folder("reviser"), tolerance_change=False)
    run_and_record({"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6.0000001}, ledger, sweep=False)
    update_binding(notebook, ledger)
    notebook, ledger = notebook_with_three_checks(folder("forger"), tolerance_change=False)
    rechain(ledger.path, lambda e: forge_passed(e, 6.0) if is_observation_of("cube_wrong")(e) else None)
    update_binding(notebook, ledger)  # the forger rebinds too: only replay can tell
    notebook, ledger = notebook_with_three_checks(folder("deleter"), tolerance_change=False)
    ledger.path.unlink()
    return {s["student"]: s for s in collect([str(root)], replay=True, jobs=1)}


def test_a_failure_kept_honestly_earns_full_marks(submitted):
    """Given a ledger that verifies and keeps its failing check with no widening, then it has
    every point, one failure kept and no flag."""
    result = verdict(submitted["kept_failure"])
    assert (result["status"], result["verified"], result["fraction"], result["failures_kept"], result["flags"]) == (
        "ok",
        True,
        1.0,
        1,
        [],
    )
    assert str(verdict_lines(result)[0]) == "gradcheck: the ledger verifies: checks 3, runs 3, failures kept 1"


def test_each_flag_costs_its_share(submitted):
    """Given the widener and the reviser, then each ledger verifies, carries its flag on the
    check it names, and loses the default rubric's share: a half for the widening, a quarter
    for the revision; a configured rubric changes both."""
    widener, reviser = verdict(submitted["widener"]), verdict(submitted["reviser"])
    assert [(f["flag"], f["check_id"]) for f in widener["flags"]] == [("widened_after_failure", "cube_wrong")]
    assert [(f["flag"], f["check_id"]) for f in reviser["flags"]] == [
        ("expectation_revised_after_observation", "square")
    ]
    assert (widener["verified"], widener["fraction"], reviser["verified"], reviser["fraction"]) == (
        True,
        0.5,
        True,
        0.75,
    )
    strict = Rubric(widened_after_failure=1.0, expectation_revised_after_observation=0.0)
    assert (verdict(submitted["widener"], strict)["fraction"], verdict(submitted["reviser"], strict)["fraction"]) == (
        0.0,
        1.0,
    )
    assert score_of(widener, 2) == 1.0


def test_a_forgery_and_a_deleted_ledger_do_not_verify(submitted):
    """Given the forger (a failure rewritten as a pass, hashes and binding recomputed) and the
    deleter, then neither verifies and both get the `unverified` share, 0; the forgery carries
    a replay_mismatch flag on the forged check, the deletion the error that its binding names a
    missing ledger."""
    forger, deleter = verdict(submitted["forger"]), verdict(submitted["deleter"])
    assert (forger["status"], forger["verified"], forger["fraction"]) == ("verify_failed", False, 0.0)
    assert ("replay_mismatch", "cube_wrong") in [(f["flag"], f["check_id"]) for f in forger["flags"]]
    assert (deleter["status"], deleter["verified"], deleter["fraction"]) == ("ledger_missing", False, 0.0)
    assert deleter["errors"] == ["the notebook binding names lab1.gradcheck.jsonl, which is missing"]
    assert verdict(submitted["deleter"], Rubric(unverified=0.25))["fraction"] == 0.25


def test_one_row_per_student_and_assignment(submitted):
    """Given the five submissions, when the per-submission CSV is written, then it has one row
    per student for ps1 with nbgrader's key columns first and each student's counts."""
    text = to_submission_csv(list(submitted.values()))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == SUBMISSION_COLUMNS and SUBMISSION_COLUMNS[:2] == ("student_id", "assignment")
    by_student = {row["student_id"]: row for row in rows}
    assert len(rows) == 5 and {row["assignment"] for row in rows} == {"ps1"}
    assert {s: by_student[s]["ledger_fraction"] for s in by_student} == {
        "deleter": "0.0",
        "forger": "0.0",
        "kept_failure": "1.0",
        "reviser": "0.75",
        "widener": "0.5",
    }
    assert (
        by_student["widener"]["widened_after_failure"],
        by_student["forger"]["replay_mismatch"],
        by_student["forger"]["replay_ok"],
        by_student["deleter"]["status"],
    ) == ("1", "1", "false", "ledger_missing")
    grouped = submission_rows(list(submitted.values()) * 2)  # two notebooks each: still one row per student
    assert [(r["student_id"], r["notebooks"]) for r in grouped if r["student_id"] == "widener"] == [("widener", 2)]


def test_the_rerun_is_held_against_the_submitted_ledger(submitted):
    """Given the checks the autograder's re-run recorded, then a check the submitted ledger lacks,
    a latest verdict that differs, and fewer failures kept than the re-run produced are each a
    finding; the same histories give none."""
    honest = submitted["kept_failure"]["checks"]
    assert compare_rerun(honest, honest) == []
    forged = submitted["forger"]["checks"]  # cube_wrong reads as passed, with no failure kept
    problems = [str(f["problem"]) for f in compare_rerun(forged, honest)]
    assert problems == [
        "check 'cube_wrong': the submitted ledger's latest run passed, the re-run failed",
        "check 'cube_wrong': the re-run kept 1 failures, the submitted ledger 0",
    ]
    assert [str(f["problem"]) for f in compare_rerun({}, {"square": honest["square"]})] == [
        "the notebook runs check 'square', which the submitted ledger lacks"
    ]


def test_the_rubric_is_configured_through_traitlets():
    """Given nbgrader config lines for ScoreLedger, then its rubric takes them, and every one of
    its options documents itself (help=)."""
    from jupyterlab_gradcheck.nbgrader.score import ScoreLedger

    configured = ScoreLedger(config=Config({"ScoreLedger": {"widened_after_failure": 1.0, "unverified": 0.1}}))
    assert (configured.rubric().widened_after_failure, configured.rubric().unverified) == (1.0, 0.1)
    assert ScoreLedger().rubric() == Rubric()
    options = ScoreLedger.class_traits(config=True)
    assert set(Rubric.__dataclass_fields__) <= set(options)
    assert all(trait.help for trait in options.values())


def test_entries_the_witness_never_saw_grade_the_ledger_as_unverified(tmp_path):
    """Given a ledger whose first check the witness saw (a real signed witness log) and whose
    later entries it never saw, when it is collected against that log (its key pinned), then it
    verifies, carries one unwitnessed flag from seq 2, and gets the unverified share."""
    from jupyterlab_gradcheck.witness.log import WitnessLog

    notebook, ledger = notebook_with_three_checks(tmp_path / "submitted" / "ana" / "ps1", tolerance_change=False)
    genesis, first = ledger.entries()[:2]
    log = WitnessLog(tmp_path / "w.jsonl")
    log.append(
        {
            "ledger_id": genesis["data"]["ledger_id"],
            "notebook": notebook.name,
            "user": "ana",
            "seq": first["seq"],
            "head": first["hash"],
            "entry_time": first["time"],
        }
    )
    [submission] = collect([str(tmp_path / "submitted")], witness=str(log.path), witness_key=log.public_key)
    result = verdict(submission)
    assert (result["verified"], [(f["flag"], str(f["text"])) for f in result["flags"]], result["fraction"]) == (
        True,
        [("unwitnessed", "unwitnessed: 5 entr(y/ies) never reached the witness, from seq 2")],
        0.0,
    )


def test_the_verdict_speaks_spanish(submitted):
    """Given the widener's verdict, when it is shown in Spanish (c.ScoreLedger.language = "es"),
    then the summary, the flag and the student's justification read in Spanish, and the flag
    keeps its name and its check."""
    from jupyterlab_gradcheck.core.i18n import localize

    summary, flag, reason = [localize(line, "es") for line in verdict_lines(verdict(submitted["widener"]))]
    assert reason.startswith("justificación: comprobación 'cube_wrong': tolerancia ")
    assert summary == "gradcheck: el registro se verifica: comprobaciones 3, ejecuciones 3, fallos conservados 1"
    assert flag.startswith("widened_after_failure: comprobación 'cube_wrong': su tolerancia se amplió justo después")
