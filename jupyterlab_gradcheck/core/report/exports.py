"""Stored values as a grader reads them in a CSV cell: the dtype and shape, the summary, and the blob's
hash, where the tensor itself lies in the blob store beside the ledger
(core/values/form.py). The JSON export keeps stored values as written, so its hashes
can be recomputed, and says where the store is.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

from ..errors import LedgerError, SpecError
from ..ledger.binding import METADATA_KEY, binding_for, read_notebook, write_notebook
from ..ledger.store import Ledger, now_utc, public_history
from ..values.blobs import blob_path, line_shas, store_dir_for
from ..values.form import is_stored_value
from .submissions import renamed_rerun_flags

# -------------------- stored display

#: Hex digits of a blob's SHA-256 shown beside its summary.
SHA_SHOWN = 12


#: Hex digits of the blob's hash a cell shows: enough to find the file, short enough to read.


def stored_text(value: dict) -> str:
    """`float64[1000,100] min -3.1 max 2.9 mean 0.01 norm 99.2 nonfinite 0 sha256 7ec2e7e8a159...`."""
    stored, summary = value["stored"], value.get("summary") or {}
    shape = ",".join(str(n) for n in stored.get("shape") or [])
    parts = [f"{stored.get('dtype')}[{shape}]"]
    for key in ("min", "max", "mean", "norm", "nonfinite"):
        if key in summary:
            number = summary[key]
            parts.append(f"{key} {number:.6g}" if isinstance(number, float) else f"{key} {number}")
    parts.append(f"sha256 {str(stored.get('sha256'))[:SHA_SHOWN]}...")
    return " ".join(parts)


def with_stored_as_text(value):
    """A copy of `value` with every stored value in it replaced by its `stored_text`; anything else as is."""
    if is_stored_value(value):
        return stored_text(value)
    if isinstance(value, dict):
        return {key: with_stored_as_text(item) for key, item in value.items()}
    if isinstance(value, list) and value and not set(map(type, value)) <= {int, float}:
        return [with_stored_as_text(item) for item in value]
    return value


# -------------------- csv export
# CSV export for grading: one row per check, one file for a whole folder of submissions.
#
# A submission with no check (its ledger deleted, or never used) still has one row, with an
# empty check id and its `status`, so no student disappears from the grade sheet. `status` is
# `ok`, `verify_failed`, `ledger_missing` or `no_checks`; `witnessed` is whether the witness
# saw this ledger (empty when the export was made without `--witness`), and `witness_flags` names
# what it saw besides, with counts (`private_runs_witnessed:3`).
#
# Values that are not plain scalars (inputs, gradients) are written as compact JSON, so a
# spreadsheet shows them and a script can `json.loads` them back. Booleans are `true`/`false`;
# an empty cell means "does not apply" (a check that never ran has no `passed`; a ledger
# exported without its notebook has no `binding_ok`).

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
    if is_stored_value(value):  # a large tensor: its dtype, shape, summary and hash (report/exports.py)
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


# -------------------- json export
# JSON export: everything, for a grading script to read.
#
# Per submission: the student and assignment, its status and whether the witness saw it (as in
# the CSV), the verify report (chain, binding, flags, witness findings), each
# check's history and every ledger entry exactly as written, so a reader can recompute the
# hashes itself. Tensors above 256 elements stay in their stored form (a SHA-256, a shape, a dtype
# and a summary); `blob_store` is the folder beside the ledger whose `<sha256>.safetensors` files
# hold them (null when the ledger has none).

FORMAT = "jupyterlab-gradcheck-export"
VERSION = 1


def export_document(submissions: list[dict]) -> dict:
    """The export as a JSON-ready dict."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "generated": now_utc(),
        "submissions": [
            {
                "student": s["student"],
                "assignment": s["assignment"],
                "notebook": s["notebook"],
                "ledger": s["ledger"],
                "blob_store": s.get("blob_store"),
                "chain_ok": s["chain_ok"],
                "binding_ok": s["binding_ok"],
                "replay_ok": s.get("replay_ok"),
                "status": status_of(s),
                "witnessed": witnessed_of(s),
                "verify": s["verify"],
                "checks": {check_id: public_history(h) for check_id, h in s["checks"].items()},
                "entries": s["entries"],
            }
            for s in submissions
        ],
    }


def to_json(submissions: list[dict]) -> str:
    """The export as indented JSON text."""
    return json.dumps(export_document(submissions), indent=2, ensure_ascii=False) + "\n"


# -------------------- notebook export
# Notebook export: a copy of the notebook that carries its whole ledger, for single-file
# submission.
#
# The ledger lines are embedded in `metadata.gradcheck.embedded.lines` exactly as written
# (each line's text, without its newline), beside the usual binding, so `verify` checks the
# same hashes over the same bytes as it would on the ledger file. The blobs its lines name (tensors
# above 256 elements) are copied into `<ledger name>.blobs` beside the copy, which
# `embedded.blob_store` names; verify checks them there.


def export_notebook(notebook_path: str | os.PathLike, out_path: str | os.PathLike) -> dict:
    """Write the copy with the embedded ledger; return its `metadata.gradcheck`."""
    source = Path(notebook_path)
    if source.suffix != ".ipynb":
        raise SpecError("--format notebook needs a notebook (.ipynb), got {name}", name=source.name, field="path")
    out = Path(out_path)
    if out.resolve() == source.resolve():
        raise SpecError("the notebook export must not overwrite the notebook itself: choose another -o", field="output")
    notebook = read_notebook(source)
    meta = notebook.metadata.get(METADATA_KEY)
    ledger_name = meta.get("ledger") if isinstance(meta, dict) and meta.get("ledger") else None
    ledger = Ledger(source.parent / ledger_name) if ledger_name else Ledger.for_notebook(source)
    if not ledger.path.is_file():
        raise LedgerError(
            "{name} has no ledger ({ledger_name} is missing)", name=source.name, ledger_name=ledger.path.name
        )
    complete, torn = ledger.raw_lines()
    try:
        lines = [raw.decode("utf-8") for raw in complete]
        torn_text = torn.decode("utf-8", errors="replace") if torn else None
    except UnicodeDecodeError as exc:
        raise LedgerError("{name} is not UTF-8 text: {exc}", name=ledger.path.name, exc=exc) from None
    recorded = dict(meta) if isinstance(meta, dict) else binding_for(ledger, source)
    recorded["embedded"] = {"ledger": ledger.path.name, "lines": lines, "torn_tail": torn_text}
    out.parent.mkdir(parents=True, exist_ok=True)
    store = copy_store(ledger.path, out.parent, lines)
    if store is not None:
        recorded["embedded"]["blob_store"] = store
    notebook.metadata[METADATA_KEY] = recorded
    write_notebook(notebook, out)
    return recorded


def copy_store(ledger_path: Path, folder: Path, lines: list[str]) -> str | None:
    """Copy the blobs the ledger's lines name into the blob folder the embedded ledger has beside the
    copy (`<ledger name>.blobs` in `folder`, as verify looks for it); its name, or None when the lines
    name no blob. A blob already there is kept: it is named by its hash."""
    shas = list(dict.fromkeys(sha for text in lines for sha in line_shas(text.encode("utf-8"))))
    if not shas:
        return None
    source, target = store_dir_for(ledger_path), store_dir_for(folder / ledger_path.name)
    if source.resolve() != target.resolve():
        target.mkdir(parents=True, exist_ok=True)
        for sha in shas:
            if blob_path(source, sha).is_file() and not blob_path(target, sha).exists():
                shutil.copyfile(blob_path(source, sha), blob_path(target, sha))
    return target.name
