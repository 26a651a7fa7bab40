"""CSV export for grading: one row per check, one file for a whole folder of submissions.

A submission with no check (its ledger deleted, or never used) still has one row, with an
empty check id and its `status`, so no student disappears from the grade sheet. `status` is
`ok`, `verify_failed`, `ledger_missing` or `no_checks`; `witnessed` is whether the witness
saw this ledger (empty when the export was made without `--witness`), and `witness_flags` names
what it saw besides, with counts (`private_runs_witnessed:3`).

Values that are not plain scalars (inputs, gradients) are written as compact JSON, so a
spreadsheet shows them and a script can `json.loads` them back. Booleans are `true`/`false`;
an empty cell means "does not apply" (a check that never ran has no `passed`; a ledger
exported without its notebook has no `binding_ok`).
"""

from __future__ import annotations

import csv
import io
import json

from ..check.record.stored_values import is_stored_value
from .renamed_reruns import renamed_rerun_flags
from .stored_display import stored_text, with_stored_as_text

COLUMNS = (
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
)
#: Added after COLUMNS when the export replayed the observations (`export --replay`).
REPLAY_COLUMN = "replay_ok"


def cell_text(value) -> str:
    """A CSV cell: empty for None, `true`/`false`, numbers as Python writes them, else compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value) if not isinstance(value, float) else repr(value)
    if is_stored_value(value):  # a large tensor: its dtype, shape, summary and hash (report/stored_display.py)
        return stored_text(value)
    return json.dumps(with_stored_as_text(value), separators=(",", ":"), ensure_ascii=False)


def latest_record(history: dict) -> dict | None:
    """The record of the check's latest observation, or None when it never ran."""
    latest = history.get("latest_observation")
    if not latest:
        return None
    record = (latest.get("data") or {}).get("record")
    return record if isinstance(record, dict) else None


def worst_errors(record: dict | None) -> tuple:
    """(max_abs_err, max_rel_err) over the analytical comparisons of a record.

    These measure the expectation against autograd, which is what the check is graded on;
    the pass-to-pass and finite-difference comparisons stay in the JSON and HTML exports.
    """
    if not record:
        return None, None
    rows = [c for c in record.get("comparisons") or [] if c.get("left") == "analytical"]
    abs_errs = [c["max_abs_err"] for c in rows if isinstance(c.get("max_abs_err"), (int, float))]
    rel_errs = [c["max_rel_err"] for c in rows if isinstance(c.get("max_rel_err"), (int, float))]
    return (max(abs_errs) if abs_errs else None), (max(rel_errs) if rel_errs else None)


def observed_device(record: dict | None) -> str | None:
    """The device the latest observation ran on (from its values), else the one requested."""
    if not record:
        return None
    gradients = ((record.get("observations") or {}).get("backward_pass_1") or {}).get("gradients") or {}
    for description in gradients.values():
        if isinstance(description, dict) and description.get("device"):
            return description["device"]
    return record.get("device")


def check_row(submission: dict, history: dict) -> dict:
    """The CSV row of one check of one submission."""
    record = latest_record(history)
    expectation = history.get("expectation") or {}
    source = record or expectation
    tolerance = history.get("tolerance") or {}
    latest = history.get("latest_observation")
    passed = None if latest is None else bool((latest.get("data") or {}).get("passed"))
    max_abs, max_rel = worst_errors(record)
    return {
        "student_id": submission["student"],
        "assignment_id": submission["assignment"],
        "notebook_id": submission["notebook"] or submission["ledger"],
        "check_id": history["check_id"],
        "function": source.get("function"),
        "inputs": source.get("inputs"),
        "dtype": source.get("dtype"),
        "device": observed_device(record) or expectation.get("device"),
        "analytical": history.get("analytical_gradient"),
        "observed": record.get("observed_gradient") if record else None,
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "rtol": tolerance.get("rtol"),
        "atol": tolerance.get("atol"),
        "passed": passed,
        "runs": history.get("runs", 0),
        "failures_kept": len(history.get("failures_kept") or []),
        "tolerance_edits": len(history.get("tolerance_history") or []),
        "widened_after_failure": bool(history.get("widened_after_failure")),
        "expectation_revised_after_observation": bool(history.get("expectation_revised_after_observation")),
        "chain_ok": submission["chain_ok"],
        "binding_ok": submission["binding_ok"],
        "status": status_of(submission),
        "witnessed": witnessed_of(submission),
        "witness_flags": witness_flags_of(submission),
        REPLAY_COLUMN: submission.get("replay_ok"),
    }


def witness_flags_of(submission: dict) -> str | None:
    """`flag:count` for each witness flag of the submission, `;`-separated; None without a witness."""
    witness = submission["verify"].get("witness")
    if witness is None:
        return None
    return ";".join(f"{flag['flag']}:{flag['count']}" for flag in witness.get("flags") or [])


def status_of(submission: dict) -> str:
    """`ledger_missing`, `verify_failed`, `no_checks` or `ok` for one submission."""
    report = submission["verify"]
    if report.get("ledger_missing"):
        return "ledger_missing"
    if not report["ok"]:
        return "verify_failed"
    return "ok" if submission["checks"] else "no_checks"


def witnessed_of(submission: dict) -> bool | None:
    """Whether the witness saw this submission's ledger; None without a witness."""
    witness = submission["verify"].get("witness")
    return None if witness is None else bool(witness.get("witnessed"))


def submission_row(submission: dict) -> dict:
    """The one row of a submission that has no check: who, where, and its status."""
    return {
        "student_id": submission["student"],
        "assignment_id": submission["assignment"],
        "notebook_id": submission["notebook"] or submission["ledger"],
        "runs": 0,
        "failures_kept": 0,
        "chain_ok": submission["chain_ok"],
        "binding_ok": submission["binding_ok"],
        "status": status_of(submission),
        "witnessed": witnessed_of(submission),
        "witness_flags": witness_flags_of(submission),
        REPLAY_COLUMN: submission.get("replay_ok"),
    }


def rows(submissions: list[dict]) -> list[dict]:
    """Every check row of every submission, in submission then ledger order; a submission
    without checks gets one row with its status. A check that re-runs a failed computation
    under a new id carries the flag it would have carried under the first id."""
    found = []
    for submission in submissions:
        renamed = {(f["check_id"], f["flag"]) for f in renamed_rerun_flags(submission["checks"])}
        for history in submission["checks"].values():
            row = check_row(submission, history)
            for check_id, flag in renamed:
                if check_id == history["check_id"]:
                    row[flag] = True
            found.append(row)
        if not submission["checks"]:
            found.append(submission_row(submission))
    return found


def to_csv(submissions: list[dict]) -> str:
    """The CSV text (header, then one row per check); `replay_ok` is the last column when the
    submissions were replayed."""
    replayed = any(s.get("replay_ok") is not None for s in submissions)
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=COLUMNS + ((REPLAY_COLUMN,) if replayed else ()), lineterminator="\n", extrasaction="ignore"
    )
    writer.writeheader()
    for row in rows(submissions):
        writer.writerow({key: cell_text(value) for key, value in row.items()})
    return buffer.getvalue()
