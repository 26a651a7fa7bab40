"""Hold a submitted ledger against what the witness saw (core.ledger.witness_log).

The witness keys what it saw by user and notebook. For one submitted notebook or ledger:

- every head the witness saw for the submitted ledger id must be an entry of the ledger, with
  that hash at that seq: otherwise the ledger was rewritten after the witness saw it;
- the ledger must reach the witness's latest head for that id: otherwise it was truncated;
- a ledger id the witness never saw for that notebook, while it saw another, is a fresh or
  swapped ledger; an id that is not the newest the witness saw for the notebook is an older
  run swapped in; a witnessed notebook whose ledger is missing was deleted;
- an entry whose own time lies after the moment the witness received its head (beyond clock
  skew) had its time edited;
- runs the witness saw without a ledger (`ledger=False`, scratch notebooks) are flagged as
  private runs, with their count.

Each error names the witnessed seq and the time the witness received it.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

from ..errors import LedgerError
from ..i18n import Message
from .verify_chain import add_error, settle_ok
from .witness_client import TOKEN_VARIABLE, notebook_of
from .witness_log import CLOCK_SKEW_SECONDS, log_problems, parse_time, public_key_text, read_log

#: Folders of nbgrader's layout whose next part is the student: `submitted/<student>/...`.
STUDENT_FOLDERS = ("submitted", "autograded", "feedback")


def _at(receipt: dict) -> str:
    return Message("seq {seq} (witnessed {time})", seq=receipt.get("seq"), time=receipt.get("time"))


def witness_findings(
    receipts: list[dict],
    *,
    notebook: str,
    user: str | None,
    ledger_id: str | None,
    hashes: dict[int, str] | None,
    times: dict[int, str] | None,
) -> dict:
    """`{"witnessed", "errors", "flags", "seen"}` for one submission.

    `notebook` is the submitted notebook's file name; `user` the student when the submission
    says (nbgrader's layout), else None to take whoever the witness saw for that ledger id or
    notebook; `ledger_id`, `hashes` (seq -> hash) and `times` (seq -> entry time) describe the
    submitted ledger, all None when it is missing.
    """
    errors: list[str] = []
    flags: list[dict] = []
    of_id = [r for r in receipts if ledger_id is not None and r.get("ledger_id") == ledger_id and not r.get("private")]
    if of_id and user is None:
        user = of_id[-1].get("user")
    for_notebook = [r for r in receipts if r.get("notebook") == notebook and (user is None or r.get("user") == user)]
    ledgered = [r for r in for_notebook if not r.get("private")]
    private = [r for r in for_notebook if r.get("private")]
    if private:
        flags.append(
            {
                "flag": "private_runs_witnessed",
                "count": len(private),
                "reason": Message(
                    "the witness saw {count} run(s) of {notebook} made without a ledger",
                    count=len(private),
                    notebook=notebook,
                ),
            }
        )
    if hashes is None:
        if ledgered:
            last = ledgered[-1]
            errors.append(
                Message(
                    "the ledger of {notebook} is missing, but the witness saw it up to {at}: the ledger was deleted",
                    notebook=notebook,
                    at=_at(last),
                )
            )
        return {"witnessed": bool(ledgered) or None, "errors": errors, "flags": flags, "seen": len(ledgered)}
    if not of_id:
        if ledgered:
            others = sorted({str(r.get("ledger_id")) for r in ledgered})
            errors.append(
                Message(
                    "the witness never saw ledger {ledger} for {notebook}; it saw {others} up to "
                    "{at}: a fresh or swapped ledger",
                    ledger=str(ledger_id)[:12],
                    notebook=notebook,
                    others=", ".join(o[:12] for o in others),
                    at=_at(ledgered[-1]),
                )
            )
            return {"witnessed": False, "errors": errors, "flags": flags, "seen": len(ledgered)}
        return {"witnessed": False, "errors": [], "flags": flags, "seen": 0}
    newest = ledgered[-1] if ledgered else None
    if newest is not None and newest.get("ledger_id") != ledger_id:
        errors.append(
            Message(
                "the witness saw a newer ledger {ledger} of {notebook} at {at}: an older run was swapped in",
                ledger=str(newest.get("ledger_id"))[:12],
                notebook=notebook,
                at=_at(newest),
            )
        )
    for receipt in of_id:
        seq, head = receipt.get("seq"), receipt.get("head")
        found = hashes.get(seq)
        if found is None:
            errors.append(
                Message(
                    "the ledger has no entry at {at} that the witness saw (head {head}): the ledger was truncated",
                    at=_at(receipt),
                    head=str(head)[:12],
                )
            )
        elif found != head:
            errors.append(
                Message(
                    "the entry at {at} has hash {found}, but the witness saw {head}: the ledger was rewritten",
                    at=_at(receipt),
                    found=found[:12],
                    head=str(head)[:12],
                )
            )
        elif times is not None:
            entry, received = parse_time(times.get(seq)), parse_time(receipt.get("time"))
            if entry and received and entry > received + timedelta(seconds=CLOCK_SKEW_SECONDS):
                errors.append(
                    Message(
                        "the entry at {at} claims the time {time}, after the witness received it: its time was edited",
                        at=_at(receipt),
                        time=times.get(seq),
                    )
                )
    last_seen = max((r.get("seq") or 0) for r in of_id)
    unwitnessed = [s for s in hashes if s > last_seen]
    if unwitnessed:
        flags.append(
            {
                "flag": "entries_not_witnessed",
                "count": len(unwitnessed),
                "reason": Message(
                    "{count} entr(y/ies) after seq {last_seen} were not seen by the witness",
                    count=len(unwitnessed),
                    last_seen=last_seen,
                ),
            }
        )
    return {"witnessed": not errors, "errors": errors, "flags": flags, "seen": len(of_id)}


def load_witness(source: str) -> dict:
    """`{"receipts", "problems", "source"}` from a witness's URL (its `log` route, with the
    token in GRADCHECK_WITNESS_TOKEN) or its log file (checked against the key beside it)."""
    if source.startswith(("http://", "https://")):
        request = urllib.request.Request(
            source.rstrip("/") + "/log", headers={"Authorization": f"token {os.environ.get(TOKEN_VARIABLE, '')}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = json.loads(answer.read().decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise LedgerError("cannot read the witness at {source}: {exc}", source=source, exc=exc) from None
        receipts, key = body.get("receipts") or [], body.get("public_key")
    else:
        path = Path(source)
        if not path.is_file():
            raise LedgerError("no witness log at {source}", source=source)
        receipts = read_log(path)
        key_file = path.with_name(path.name + ".key")
        key = None
        if key_file.is_file():
            from cryptography.hazmat.primitives import serialization

            key = public_key_text(serialization.load_pem_private_key(key_file.read_bytes(), password=None))
    return {"receipts": receipts, "problems": log_problems(receipts, key), "source": source}


def student_of(path: str | os.PathLike) -> str | None:
    """The student a submission's path names in nbgrader's layout, else None."""
    parts = Path(path).parts
    for index, part in enumerate(parts[:-1]):
        if part in STUDENT_FOLDERS and index + 1 < len(parts) - 1:
            return parts[index + 1]
    return None


def apply_witness(report: dict, witness: dict) -> None:
    """Add what the witness saw to one verify report (call before its internals are dropped)."""
    notebook = report.get("notebook")
    name = Path(notebook).name if notebook else notebook_of(Path(str(report.get("ledger") or report["path"])), None)
    missing = report.get("ledger_missing") or report.get("ledger") is None
    found = witness_findings(
        witness["receipts"],
        notebook=name,
        user=student_of(report["path"]),
        ledger_id=report.get("ledger_id"),
        hashes=None if missing else report.get("_hashes", {}),
        times=None if missing else report.get("_times"),
    )
    for reason in witness["problems"] + found["errors"]:
        add_error(report, None, reason, scope="witness")
    report["witness"] = {"witnessed": found["witnessed"], "seen": found["seen"], "flags": found["flags"]}
    settle_ok(report)
