"""Grading a submission's ledger: its verdict, the rubric that turns the verdict into a share
of a grade cell's points, the flags a grader is shown, and one row per student and assignment.

A ledger exists to be graded, and a grade must reward what the ledger proves: full marks only
for a ledger that verifies (chain, binding, attestations, replay) and whose failures were kept
honestly. The verdict reads the submission that `core.report.submissions` loads (its verify
report and check histories); nothing here re-verifies anything. The nbgrader surface
(`jupyterlab_gradcheck.nbgrader`) writes the verdict into the autograded notebook and scores it;
`jupyter gradcheck export --format submission-csv` writes the rows.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections import defaultdict

from ..i18n import Message
from .exports import cell_text, status_of, witnessed_of
from .submissions import renamed_rerun_flags

# -------------------- grading

WIDENED = "widened_after_failure"
REVISED = "expectation_revised_after_observation"
REPLAY_MISMATCH = "replay_mismatch"
WITNESS_GAP = "witness_gap"
RERUN_MISMATCH = "rerun_mismatch"
#: Entries the witness received late (an outage, delivered afterwards): shown, never penalised.
WITNESSED_LATE = "witnessed_late"
#: Entries the witness never received: the ledger is graded as one that does not verify.
UNWITNESSED = "unwitnessed"
#: An expectation revised after its check ran, with a written justification: the honest correction.
REVISION_JUSTIFIED = "revision_justified"
#: A ledger (id, entry, attestation or identical run) shared with another student's submission.
SHARED_WITH = "shared_with"
#: Every flag a verdict can carry, in the order they are shown.
FLAGS = (
    WIDENED,
    REVISED,
    REVISION_JUSTIFIED,
    SHARED_WITH,
    REPLAY_MISMATCH,
    WITNESS_GAP,
    WITNESSED_LATE,
    UNWITNESSED,
    RERUN_MISMATCH,
)
#: A submission's statuses from the worst to the best: a student's row shows the worst of its notebooks.
STATUS_ORDER = ("ledger_missing", "verify_failed", "no_checks", "ok")


@dataclasses.dataclass(frozen=True)
class Rubric:
    """Shares of a grade cell's points. A ledger that verifies starts at 1 and loses each flag's
    penalty once per check the flag names (never below 0); a ledger that does not verify (or is
    missing where the notebook ran checks) gets `unverified`, one with no checks `no_checks`.

    A replay mismatch has no penalty of its own: a ledger whose replay differs does not verify,
    so it gets `unverified`. Under a witness, entries it received late (an outage) cost nothing
    and are shown; entries it never received (`unwitnessed`) give the ledger `unverified`, as a
    ledger the witness never heard of; other witness findings (other ledgers of the notebook,
    private runs) cost `witness_gap` each.

    A justified revision (`revision_justified`) costs `revision_justified`, by default the
    cost of a second try: less than the test a wrong derivation fails, more than nothing, so an
    honest correction ranks between the student right first time and the one who stayed wrong.
    A ledger shared with another student's submission (`shared_with`) costs `shared_with`, unless
    the witness saw this student write it (then the other one copied)."""

    widened_after_failure: float = 0.5
    expectation_revised_after_observation: float = 0.25
    revision_justified: float = 0.1
    shared_with: float = 1.0
    witness_gap: float = 0.5
    rerun_mismatch: float = 1.0
    unverified: float = 0.0
    no_checks: float = 0.0

    def penalty(self, flag: str) -> float:
        """The share one occurrence of `flag` costs a verified ledger."""
        return 0.0 if flag in (REPLAY_MISMATCH, WITNESSED_LATE, UNWITNESSED) else float(getattr(self, flag))


def _seqs(seqs) -> str:
    return ", ".join(str(seq) for seq in seqs)


def _justified(submission: dict, check_id: str, seqs) -> list[dict]:
    """The expectation changes of `check_id` at `seqs`, when every one carries a justification."""
    changes = [
        change
        for change in ((submission.get("checks") or {}).get(check_id) or {}).get("expectation_changes") or []
        if change["seq"] in set(seqs)
    ]
    return changes if changes and all(str(c.get("justification") or "").strip() for c in changes) else []


def _revision_text(check_id: str, change: dict) -> Message:
    return Message(
        "{flag}: check {check_id!r}: expectation revised from {old!r} to {new!r} (ledger seq {seq}): {justification}",
        flag=REVISION_JUSTIFIED,
        check_id=check_id,
        old=str(change.get("old")),
        new=str(change.get("new")),
        seq=change["seq"],
        justification=str(change.get("justification")),
    )


def shared_flags(submission: dict) -> list[dict]:
    """One flag per other submission this one shares its ledger with (core.ledger.copies)."""
    return [
        {
            "flag": SHARED_WITH,
            "check_id": None,
            "text": Message(
                "{flag}: {student} ({notebook}) shares this ledger: {how}",
                flag=SHARED_WITH,
                student=other["student"] or other["path"],
                notebook=other["notebook"],
                how=", ".join(other["how"]),
            ),
        }
        for other in submission.get("shared_with") or []
    ]


def flags_of(submission: dict) -> list[dict]:
    """`{"flag", "check_id", "text"}` for every flag of one submission: the ledger's own
    (widened after a failure, expectation revised after the check ran), each replay difference,
    and each witness gap; `text` is a Message."""
    report = submission["verify"]
    found = []
    for item in (report.get("flags") or []) + renamed_rerun_flags(submission.get("checks") or {}):
        if item.get("after"):
            text = Message(
                "{flag}: check {check_id!r} re-runs the computation of {after!r}, which had failed, under a new id "
                "(ledger seq {seqs})",
                flag=item["flag"],
                check_id=item["check_id"],
                after=item["after"],
                seqs=_seqs(item["seqs"]),
            )
        elif item["flag"] == WIDENED:
            text = Message(
                "{flag}: check {check_id!r}: its tolerance was widened right after it failed (ledger seq {seqs})",
                flag=WIDENED,
                check_id=item["check_id"],
                seqs=_seqs(item["seqs"]),
            )
        elif item["flag"] == REVISED and _justified(submission, item["check_id"], item["seqs"]):
            for change in _justified(submission, item["check_id"], item["seqs"]):
                text = _revision_text(item["check_id"], change)
                found.append({"flag": REVISION_JUSTIFIED, "check_id": item["check_id"], "text": text})
            continue
        elif item["flag"] == REVISED:
            text = Message(
                "{flag}: check {check_id!r}: its expectation was revised after it had run (ledger seq {seqs})",
                flag=REVISED,
                check_id=item["check_id"],
                seqs=_seqs(item["seqs"]),
            )
        else:
            continue
        found.append({"flag": item["flag"], "check_id": item["check_id"], "text": text})
    for item in (report.get("replay") or {}).get("differs") or []:
        found.append(
            {
                "flag": REPLAY_MISMATCH,
                "check_id": item["check_id"],
                "text": Message(
                    "{flag}: check {check_id!r}: line {line} did not reproduce: {difference}",
                    flag=REPLAY_MISMATCH,
                    check_id=item["check_id"],
                    line=item["line"],
                    difference="; ".join(str(d) for d in item["differences"]),
                ),
            }
        )
    for item in (report.get("witness") or {}).get("flags") or []:
        flag = item["flag"] if item["flag"] in (WITNESSED_LATE, UNWITNESSED) else WITNESS_GAP
        text = (
            item["reason"]
            if flag != WITNESS_GAP
            else Message("{flag}: {what} ({count})", flag=flag, what=item["flag"], count=item["count"])
        )
        found.append({"flag": flag, "check_id": None, "text": text})
    return found + shared_flags(submission)


def own_ledger(submission: dict) -> bool:
    """Whether a witness saw this student write the ledger (so a submission sharing it copied it)."""
    witness = submission["verify"].get("witness") or {}
    return bool(witness.get("seen")) and bool(witness.get("witnessed")) and submission["verify"]["ok"]


def justification_lines(submission: dict) -> list[Message]:
    """One line per tolerance change the ledger justifies: the student's reason, for the grader
    and in the feedback (a justified revised expectation shows as `revision_justified`)."""
    return [
        Message(
            "justification: check {check_id!r}: tolerance {old} -> {new} (ledger seq {seq}): {justification}",
            check_id=check_id,
            old=_tolerance_text(change.get("old")),
            new=_tolerance_text(change.get("new")),
            seq=change["seq"],
            justification=str(change["justification"]),
        )
        for check_id, history in (submission.get("checks") or {}).items()
        for change in history.get("tolerance_history") or []
        if str(change.get("justification") or "").strip()
    ]


def _tolerance_text(tolerance) -> str:
    if not isinstance(tolerance, dict):
        return str(tolerance)
    return ", ".join(
        f"{key} {tolerance[key]:g}" if isinstance(tolerance[key], (int, float)) else f"{key} {tolerance[key]}"
        for key in sorted(tolerance)
    )


def rerun_flags(findings: list[dict]) -> list[dict]:
    """The flags of what the autograder's re-execution found (core.report.submissions)."""
    return [
        {
            "flag": RERUN_MISMATCH,
            "check_id": item["check_id"],
            "text": Message("{flag}: {problem}", flag=RERUN_MISMATCH, problem=item["problem"]),
        }
        for item in findings
    ]


def verdict(submission: dict, rubric: Rubric = Rubric(), rerun: list[dict] | None = None) -> dict:
    """The verdict on one submission (a notebook or a ledger from `submissions.load`), with the
    findings of the autograder's re-run when there was one.

    `{"status", "verified", "errors", "flags", "fraction", "checks", "runs", "failures_kept"}`:
    `errors` are the verify report's reasons, `fraction` the rubric's share of the points.
    """
    report = submission["verify"]
    status = status_of(submission)
    flags = flags_of(submission) + rerun_flags(rerun or [])
    checks = submission["checks"]
    if status in ("ledger_missing", "verify_failed"):
        fraction = rubric.unverified if status == "verify_failed" or report["errors"] else rubric.no_checks
    elif status == "no_checks":
        fraction = rubric.no_checks
    elif any(flag["flag"] == UNWITNESSED for flag in flags):
        fraction = rubric.unverified
    else:
        owner = own_ledger(submission)
        fraction = max(
            0.0,
            1.0 - sum(rubric.penalty(flag["flag"]) for flag in flags if not (owner and flag["flag"] == SHARED_WITH)),
        )
    return {
        "status": status,
        "verified": bool(report["ok"]) and status != "ledger_missing",
        "errors": [error["reason"] for error in report["errors"]],
        "flags": flags,
        "fraction": fraction,
        "checks": len(checks),
        "runs": sum(h.get("runs", 0) for h in checks.values()),
        "failures_kept": sum(len(h.get("failures_kept") or []) for h in checks.values()),
        "justifications": justification_lines(submission),
    }


def verdict_lines(result: dict) -> list[Message]:
    """The verdict as lines a grader and a student read: the summary, each error, each flag."""
    if result["status"] == "ledger_missing" and not result["errors"]:
        lines = [Message("gradcheck: no ledger and no checker call: no checks to grade")]
    elif not result["verified"]:
        lines = [Message("gradcheck: the ledger does not verify (problems: {count})", count=len(result["errors"]))]
    elif result["status"] == "no_checks":
        lines = [Message("gradcheck: the ledger verifies but records no checks")]
    else:
        lines = [
            Message(
                "gradcheck: the ledger verifies: checks {checks}, runs {runs}, failures kept {failures}",
                checks=result["checks"],
                runs=result["runs"],
                failures=result["failures_kept"],
            )
        ]
    lines += [Message("error: {reason}", reason=reason) for reason in result["errors"]]
    lines += [flag["text"] for flag in result["flags"]]
    lines += result.get("justifications") or []
    return lines


#: The columns of the per-submission CSV; `student_id` and `assignment` are named as nbgrader's
#: `nbgrader export` names them, so the two files join on them directly.
SUBMISSION_COLUMNS = (
    "student_id",
    "assignment",
    "notebooks",
    "status",
    "verified",
    "chain_ok",
    "binding_ok",
    "replay_ok",
    "checks",
    "runs",
    "failures_kept",
    WIDENED,
    REVISED,
    REVISION_JUSTIFIED,
    REPLAY_MISMATCH,
    WITNESS_GAP,
    WITNESSED_LATE,
    UNWITNESSED,
    "errors",
    "error_reasons",
    "justifications",
    SHARED_WITH,
    "witnessed",
    "ledger_fraction",
)
#: The flags counted in a row, one column each.
COUNTED = (WIDENED, REVISED, REVISION_JUSTIFIED, REPLAY_MISMATCH, WITNESS_GAP, WITNESSED_LATE, UNWITNESSED)


def justifications_of(submission: dict) -> list[str]:
    """`check: justification` for every tolerance or expectation change the ledger justifies."""
    found = []
    for check_id, history in (submission.get("checks") or {}).items():
        for change in (history.get("tolerance_history") or []) + (history.get("expectation_changes") or []):
            if str(change.get("justification") or "").strip():
                found.append(f"{check_id}: {change['justification']}")
    return found


def _all(values) -> bool | None:
    """True when every value is true, False when one is false, None when none applies."""
    known = [value for value in values if value is not None]
    return None if not known else all(known)


def submission_rows(submissions: list[dict], rubric: Rubric = Rubric()) -> list[dict]:
    """One row per (student, assignment), its notebooks and ledgers aggregated, in the order
    they first appear; `ledger_fraction` is the mean of the notebooks' rubric shares."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for submission in submissions:
        groups[(submission["student"], submission["assignment"])].append(submission)
    rows = []
    for (student, assignment), members in groups.items():
        verdicts = [verdict(member, rubric) for member in members]
        counts = {flag: sum(1 for v in verdicts for f in v["flags"] if f["flag"] == flag) for flag in FLAGS}
        rows.append(
            {
                "student_id": student,
                "assignment": assignment,
                "notebooks": len(members),
                "status": min((v["status"] for v in verdicts), key=STATUS_ORDER.index),
                "verified": all(v["verified"] for v in verdicts),
                "chain_ok": _all(m["chain_ok"] for m in members),
                "binding_ok": _all(m["binding_ok"] for m in members),
                "replay_ok": _all(m.get("replay_ok") for m in members),
                "checks": sum(v["checks"] for v in verdicts),
                "runs": sum(v["runs"] for v in verdicts),
                "failures_kept": sum(v["failures_kept"] for v in verdicts),
                **{flag: counts[flag] for flag in COUNTED},
                "errors": sum(len(v["errors"]) for v in verdicts),
                "error_reasons": " | ".join(str(reason) for v in verdicts for reason in v["errors"]),
                "justifications": " | ".join(text for m in members for text in justifications_of(m)),
                SHARED_WITH: ";".join(
                    sorted({str(o["student"] or o["path"]) for m in members for o in m.get("shared_with") or []})
                ),
                "witnessed": _all(witnessed_of(m) for m in members),
                "ledger_fraction": sum(v["fraction"] for v in verdicts) / len(verdicts),
            }
        )
    return rows


def score_of(result: dict, points: float) -> float:
    """The grade cell's score: the verdict's share of `points`, rounded to 1/1000 of a point."""
    return round(result["fraction"] * float(points), 3)


def score_line(score: float, points: float) -> Message:
    """`gradcheck score: 1 of 2 points`."""
    return Message("gradcheck score: {score} of {points} points", score=f"{score:g}", points=f"{float(points):g}")


# -------------------- submission csv
# The per-submission CSV: one row per student and assignment, keyed as nbgrader keys its own.
#
# `nbgrader export` writes one row per student and assignment with the columns `assignment` and
# `student_id`; this file uses the same two names and the same grain, so a spreadsheet or
# `pandas.merge(grades, ledgers, on=["assignment", "student_id"])` joins them with no renaming and
# no aggregation. The rows come from `core.report.grading.submission_rows`.


def to_submission_csv(submissions: list[dict], rubric: Rubric = Rubric()) -> str:
    """The CSV text: a header, then one row per (student, assignment)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=SUBMISSION_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in submission_rows(submissions, rubric):
        writer.writerow({key: cell_text(value) for key, value in row.items()})
    return buffer.getvalue()
