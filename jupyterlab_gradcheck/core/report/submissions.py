"""Submissions to grade: each notebook or ledger found under the given paths, with its
student and assignment, its decoded entries, its check histories and its verify report.

A folder in nbgrader's layout (`submitted/<student>/<assignment>/*.ipynb`, or
`autograded/...`) gives the student and assignment from the path. Every export reads
submissions through `collect`, so CSV, JSON and HTML agree on what they show.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...witness.verify import DEFAULT_MAX_DELAY
from ..i18n import Message
from ..ledger.copies import mark_shared, shared_pairs
from ..ledger.store import LineError, build_history, read_entry
from ..ledger.verify import discover, ledger_lines, refused_report, verify_items, witness_for
from ..values.blobs import store_dir_for

# -------------------- submissions

NBGRADER_FOLDERS = ("submitted", "autograded")


def nbgrader_identity(path: str | os.PathLike, root: str | os.PathLike | None = None) -> tuple[str, str]:
    """(student, assignment) from `.../submitted/<student>/<assignment>/<file>`, else from
    `<root>/<student>/<assignment>/<file>`, else ("", "")."""
    parts = Path(path).resolve().parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in NBGRADER_FOLDERS and len(parts) - index == 4:
            return parts[index + 1], parts[index + 2]
    if root is not None:
        try:
            relative = Path(path).resolve().relative_to(Path(root).resolve()).parts
        except ValueError:
            relative = ()
        if len(relative) == 3:
            return relative[0], relative[1]
    return "", ""


def _decode(lines) -> list[dict]:
    entries = []
    for _number, raw, complete in lines:
        if not complete:
            continue
        try:
            entries.append(read_entry(raw))
        except LineError:
            continue
    return entries


def _blob_store(kind: str, path: Path, report: dict) -> str | None:
    """The path of the blob folder that holds the submission's stored values, when there is one."""
    if not report.get("ledger"):
        return None
    ledger = Path(str(report["ledger"]))
    if kind == "notebook" and report.get("embedded") or not ledger.is_absolute():
        ledger = path.parent / ledger.name  # an embedded ledger's blobs lie beside the notebook
    store = store_dir_for(ledger)
    return str(store) if store.is_dir() else None


def load(kind: str, path: Path, report: dict, root: str | os.PathLike | None = None) -> dict:
    """One submission: identity, entries, histories, and its verify report (from verify_items)."""
    student, assignment = nbgrader_identity(path, root)
    if kind == "notebook":
        notebook_name = path.name
    else:
        notebook_name = Path(report["notebook"]).name if report.get("notebook") else ""
    entries = [] if report.get("refused") else _decode(ledger_lines(kind, path))
    replay = report.get("replay")
    return {
        "student": student,
        "assignment": assignment,
        "notebook": notebook_name,
        "ledger": Path(str(report.get("ledger") or "")).name,
        "blob_store": _blob_store(kind, path, report),
        "path": str(path),
        "entries": entries,
        "checks": build_history(entries),
        "verify": report,
        "chain_ok": report["chain_ok"],
        "binding_ok": report["binding_ok"],
        "replay_ok": replay["ok"] if replay is not None and (replay["reproduced"] or replay["differs"]) else None,
    }


def collect(
    paths,
    *,
    replay: bool = False,
    jobs: int | None = 1,
    witness: str | None = None,
    witness_key: str | None = None,
    student: str | None = None,
    max_delay: float = DEFAULT_MAX_DELAY,
    refused: dict[str, str] | None = None,
    progress=None,
) -> list[dict]:
    """Every submission under `paths` (files or folders), in a stable order; with `replay`,
    each one's observations are re-run too (in `jobs` worker processes); with `witness` (a URL
    or a log file, its key pinned by `witness_key`) each is held against what the witness saw,
    as `student`'s or the student the path names, each entry due within `max_delay` seconds.
    The files named in `refused` are not read: each is a submission with no entries and the
    reason as its error. Each submission gets `shared_with`: the other students' submissions it
    shares a ledger with (core.ledger.copies); `progress(done, total)` hears of each one verified."""
    refused = refused or {}
    found = []
    for given in paths:
        root = given if Path(given).is_dir() else None
        found += [(kind, item, root) for kind, item in discover(given)]
    readable = [(kind, item) for kind, item, _root in found if str(item) not in refused]
    seen = witness_for(witness, witness_key, student, max_delay)
    if seen is not None and len(paths) == 1 and Path(paths[0]).is_dir():
        seen["root"] = str(paths[0])
    reports = iter(verify_items(readable, replay=replay, jobs=jobs, witness=seen, progress=progress))
    submissions = [
        load(
            kind, item, refused_report(kind, item, refused[str(item)]) if str(item) in refused else next(reports), root
        )
        for kind, item, root in found
    ]
    mark_shared(submissions)
    return submissions


# -------------------- class copies
# Copying across a class folder, as `verify` shows it: each pair of submissions of different
# students that share a ledger (core.ledger.copies), named by student and path.


def class_pairs(reports: list[dict], root) -> list[dict]:
    """`{"students", "paths", "how"}` for every pair of the verify `reports` under `root` that
    share a ledger."""
    submissions = [
        load("notebook" if str(r["path"]).endswith(".ipynb") else "ledger", Path(str(r["path"])), r, root)
        for r in reports
        if not r.get("refused")
    ]
    return [
        {
            "students": [submissions[p["a"]]["student"], submissions[p["b"]]["student"]],
            "paths": [submissions[p["a"]]["path"], submissions[p["b"]]["path"]],
            "how": p["how"],
        }
        for p in shared_pairs(submissions)
    ]


def pair_lines(pairs: list[dict]) -> list[str]:
    """One line per pair: `shared ledger: ana and ben (ledger_id, entry_hash): PATH, PATH`."""
    return [
        Message(
            "shared ledger: {first} and {second} ({how}): {first_path}, {second_path}",
            first=pair["students"][0] or "?",
            second=pair["students"][1] or "?",
            how=", ".join(pair["how"]),
            first_path=pair["paths"][0],
            second_path=pair["paths"][1],
        ).localized()
        for pair in pairs
    ]


# -------------------- renamed reruns
# A failed check re-run under a new id keeps its flag: the same computation is the same check.
#
# A check's flags (`widened_after_failure`, `expectation_revised_after_observation`) follow its
# id. Declaring the same computation (function, inputs, dtype, device, held arguments, grad_output)
# again under another id after it failed, with a wider tolerance or another expectation, would
# leave the failed check looking abandoned and the new one clean, and the grade would go back up.
# So the later check carries the flag the change would have raised under the first id.

#: The fields of an expectation that say what is computed (not what is expected of it).
COMPUTATION_FIELDS = ("function", "inputs", "dtype", "device", "fixed", "grad_output")
WIDENED = "widened_after_failure"
REVISED = "expectation_revised_after_observation"


def computation_key(expectation: dict | None) -> str | None:
    """The canonical JSON of what an expectation computes, or None without one."""
    if not isinstance(expectation, dict) or expectation.get("function") is None:
        return None
    fields = {name: expectation.get(name) for name in COMPUTATION_FIELDS}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)


def _wider(new: dict | None, old: dict | None) -> bool:
    if not isinstance(new, dict) or not isinstance(old, dict):
        return False
    try:
        return any(float(new[k]) > float(old[k]) for k in ("rtol", "atol"))
    except (KeyError, TypeError, ValueError):
        return False


def renamed_rerun_flags(checks: dict[str, dict]) -> list[dict]:
    """`{"check_id", "flag", "seqs", "after"}` for each check that re-runs, under a new id, a
    computation an earlier check failed: `widened_after_failure` when either tolerance is wider
    than the failed check's, else `expectation_revised_after_observation` when it expects
    another gradient. `after` names the failed check; `seqs` the new check's expectation."""
    failed: dict[str, dict] = {}
    flags = []
    ordered = sorted(
        (h for h in checks.values() if h.get("expectation_seq") is not None), key=lambda h: h["expectation_seq"]
    )
    for history in ordered:
        key = computation_key(history.get("expectation"))
        if key is None:
            continue
        earlier = failed.get(key)
        if earlier is not None and earlier["check_id"] != history["check_id"]:
            expectation = history["expectation"]
            widened = _wider(history.get("tolerance"), earlier.get("tolerance")) or _wider(
                history.get("finite_difference_tolerance"), earlier.get("finite_difference_tolerance")
            )
            revised = expectation.get("analytical_gradient") != earlier.get("analytical_gradient")
            if widened or revised:
                flags.append(
                    {
                        "check_id": history["check_id"],
                        "flag": WIDENED if widened else REVISED,
                        "seqs": [history["expectation_seq"]],
                        "after": earlier["check_id"],
                    }
                )
        if history.get("failures_kept") and key not in failed:
            failed[key] = history
    return flags


# -------------------- rerun comparison
# The autograder's re-run held against the submitted ledger.
#
# When nbgrader re-executes a submission, the notebook's checks run again into a ledger of their
# own (the student's ledger is never written). What the re-run recorded is then compared, check by
# check, with what the submitted ledger holds: a check the notebook runs that the ledger lacks, a
# latest verdict that differs, or fewer failures kept than the notebook produces when run again
# (a failure's entries removed and the chain recomputed) each become a finding. Extra runs in the
# submitted ledger are not findings: a student runs cells more often than "run all" does.


def _verdict(history: dict) -> bool | None:
    latest = history.get("latest_observation")
    return None if latest is None else bool((latest.get("data") or {}).get("passed"))


def _word(passed: bool | None) -> Message:
    if passed is None:
        return Message("never ran")
    return Message("passed") if passed else Message("failed")


def compare_rerun(submitted: dict[str, dict], rerun: dict[str, dict]) -> list[dict]:
    """`{"check_id", "problem"}` for each way the re-run's check histories (`rerun`) disagree
    with the submitted ledger's (`submitted`), both from `core.ledger.store.build_history`;
    `problem` is a Message."""
    findings = []
    for check_id, again in rerun.items():
        held = submitted.get(check_id)
        if held is None:
            findings.append(
                {
                    "check_id": check_id,
                    "problem": Message(
                        "the notebook runs check {check_id!r}, which the submitted ledger lacks", check_id=check_id
                    ),
                }
            )
            continue
        if _verdict(held) != _verdict(again):
            findings.append(
                {
                    "check_id": check_id,
                    "problem": Message(
                        "check {check_id!r}: the submitted ledger's latest run {held}, the re-run {again}",
                        check_id=check_id,
                        held=_word(_verdict(held)),
                        again=_word(_verdict(again)),
                    ),
                }
            )
        kept, produced = len(held.get("failures_kept") or []), len(again.get("failures_kept") or [])
        if kept < produced:
            findings.append(
                {
                    "check_id": check_id,
                    "problem": Message(
                        "check {check_id!r}: the re-run kept {produced} failures, the submitted ledger {kept}",
                        check_id=check_id,
                        produced=produced,
                        kept=kept,
                    ),
                }
            )
    return findings
