"""Where a grader reads what the witness saw, and the key that proves the witness signed it.

The witness's private key may sit beside its log (`W.jsonl.key`), where a student who can write
to that folder could re-sign a rewritten log. So the grader never takes the key from there:

- `--witness URL`: the receipts come from `GET log` (the instructor's token in
  GRADCHECK_WITNESS_TOKEN) and the key from the witness itself (`GET public-key`);
- `--witness W.jsonl`: the key is pinned by the grader with `--witness-key`, either the key
  itself (base64 of its 32 raw bytes) or its fingerprint (`sha256:<hex>`, recorded when the
  course started), which is checked against the public key the witness wrote to `W.jsonl.pub`.

A log whose receipts are not all signed by the pinned key fails every submission held against
it (witness.log.log_problems names each bad line).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import urllib.request
from datetime import timedelta
from pathlib import Path

from ..core.errors import LedgerError, SpecError
from ..core.i18n import Message
from ..core.ledger.chain import add_error, settle_ok
from .client import TOKEN_VARIABLE, notebook_of
from .log import (
    CLOCK_SKEW_SECONDS,
    NO_NOTEBOOK,
    deduplicated,
    delay_seconds,
    is_failure,
    ledger_summaries,
    log_problems,
    parse_time,
    public_key_fingerprint,
    read_log,
)

# -------------------- witness source

#: The prefix of a key fingerprint, as `public_key_fingerprint` writes it.
FINGERPRINT_PREFIX = "sha256:"


def _fetch_json(url: str, token: str | None) -> dict:
    headers = {"Authorization": f"token {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
            body = json.loads(answer.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise LedgerError("cannot read the witness at {source}: {exc}", source=url, exc=exc) from None
    if not isinstance(body, dict):
        raise LedgerError("cannot read the witness at {source}: {exc}", source=url, exc="not a JSON object")
    return body


def raw_key(text: str) -> str:
    """A base64 Ed25519 public key, checked to be 32 bytes; SpecError naming --witness-key if not."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise SpecError(
            "--witness-key must be the witness's public key (base64 of 32 bytes) or its fingerprint "
            "(sha256:<64 hex digits>), got {value!r}",
            value=text[:80],
            field="witness_key",
        )
    return text.strip()


def _published_key(log: Path) -> str | None:
    """The public key the witness wrote beside its log (`W.jsonl.pub`: the base64 key, or a JSON
    object with `public_key`), or None when there is none."""
    published = log.with_name(log.name + ".pub")
    try:
        text = published.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if text.startswith("{"):
        try:
            text = str(json.loads(text).get("public_key") or "")
        except (ValueError, AttributeError):
            return None
    return text or None


def pinned_key(log: Path, witness_key: str | None) -> tuple[str | None, list]:
    """(the public key to check the log's signatures with, problems) for a witness log file.

    SpecError when no key is given (a log file without a pinned key proves nothing); a problem
    (the key is then None, so nothing counts as signed) when the fingerprint does not match the
    key published beside the log."""
    if not witness_key:
        raise SpecError(
            "a witness log needs --witness-key: the witness's public key or the fingerprint recorded "
            "when the course started (its key file beside the log is never read)",
            field="witness_key",
        )
    if not witness_key.startswith(FINGERPRINT_PREFIX):
        return raw_key(witness_key), []
    digest = witness_key[len(FINGERPRINT_PREFIX) :].lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raw_key(witness_key)  # raises, naming the bad value
    published = _published_key(log)
    if published is None:
        return None, [
            Message(
                "no public key beside the witness log ({name}) to check the fingerprint against", name=log.name + ".pub"
            )
        ]
    try:
        found = public_key_fingerprint(published)
    except (binascii.Error, ValueError):
        found = "?"
    if found != FINGERPRINT_PREFIX + digest:
        return None, [
            Message(
                "the witness key beside the log has fingerprint {found}, not the pinned {pinned}: the log was "
                "re-signed with another key",
                found=found[:23],
                pinned=witness_key[:23],
            )
        ]
    return published, []


def load_witness(source: str, witness_key: str | None = None) -> dict:
    """`{"receipts", "problems", "source", "public_key"}` from a witness's URL or its log file.

    A URL is read with the instructor's token (GRADCHECK_WITNESS_TOKEN) and gives its own key;
    a log file needs `witness_key` (see the module's docstring). `problems` are what is wrong
    with the log itself: a broken chain, a signature that is not the pinned key's."""
    if source.startswith(("http://", "https://")):
        base = source.rstrip("/")
        key = str(_fetch_json(base + "/public-key", None).get("public_key") or "")
        if witness_key:
            pinned = (
                witness_key
                if witness_key.startswith(FINGERPRINT_PREFIX)
                else public_key_fingerprint(raw_key(witness_key))
            )
            if not key or public_key_fingerprint(key) != pinned:
                raise LedgerError(
                    "the witness at {source} signs with key {found}, not the pinned {pinned}",
                    source=source,
                    found=public_key_fingerprint(key)[:23] if key else "none",
                    pinned=pinned[:23],
                )
        body = _fetch_json(base + "/log", os.environ.get(TOKEN_VARIABLE, ""))
        receipts, problems = body.get("receipts") or [], []
    else:
        path = Path(source)
        if not path.is_file():
            raise LedgerError("no witness log at {source}", source=source)
        key, problems = pinned_key(path, witness_key)
        receipts = read_log(path)
    problems += log_problems(receipts, key or None)
    return {"receipts": receipts, "problems": problems, "source": source, "public_key": key}


# -------------------- witness check
# Hold a submitted ledger against what the witness saw (witness.log).
#
# A ledger is witnessed when every entry from genesis on reached the witness, from the student
# who submits it, within `max_delay` seconds of the entry's own time: the way Certificate
# Transparency bounds a log's merge delay. For one submitted notebook or ledger:
#
# - errors (tampering): a receipt of this ledger from another student ("this ledger was witnessed
#   for ana; it is submitted as carol's"); an entry the witness saw that the ledger lacks
#   (truncated) or holds with another hash (rewritten; a failed observation removed); a ledger
#   id the witness never saw for that notebook while it saw another (fresh or swapped) or that
#   is not the newest it saw (an older run swapped in); a witnessed notebook whose ledger is
#   missing (deleted); an entry whose time lies after the witness received it (edited);
# - flags (no tampering shown, graded apart): `witnessed_late` (entries delivered after
#   `max_delay`: an outage, the client's queue delivering afterwards; count, first seq, largest
#   delay), `unwitnessed` (entries that never reached the witness; count, first seq: a ledger
#   the witness never heard of is unwitnessed, never clean), `other_ledgers_witnessed` (every
#   other ledger of that notebook the witness saw from that student, earlier or later, with its
#   entries and failures) and `private_runs_witnessed` (runs made with `ledger=False`, in that
#   notebook or in none).
#
# The submitting student is given (`verify --student`, or the path in nbgrader's layout); when it
# is not, the student is whoever the witness first saw for that ledger id.

__all__ = ["DEFAULT_MAX_DELAY", "apply_witness", "load_witness", "student_of", "witness_findings"]

#: Folders of nbgrader's layout whose next part is the student: `submitted/<student>/...`.
STUDENT_FOLDERS = ("submitted", "autograded", "feedback")
#: How long after an entry's own time its head may reach the witness and still count as on time.
DEFAULT_MAX_DELAY = 60.0


def _at(receipt: dict) -> str:
    return Message("seq {seq} (witnessed {time})", seq=receipt.get("seq"), time=receipt.get("time"))


def _flag(flag: str, count: int, reason: Message, **details) -> dict:
    return {"flag": flag, "count": count, "reason": reason, **details}


def _private_flag(receipts: list[dict], student: str | None, notebook: str) -> list[dict]:
    private = [
        r
        for r in receipts
        if r.get("private") and r.get("user") == student and r.get("notebook") in (notebook, NO_NOTEBOOK)
    ]
    if student is None or not private:
        return []
    without = sum(1 for r in private if r.get("notebook") == NO_NOTEBOOK)
    return [
        _flag(
            "private_runs_witnessed",
            len(private),
            Message(
                "the witness saw {count} run(s) by {student} made without a ledger: {in_notebook} in {notebook}, "
                "{without} in no notebook",
                count=len(private),
                student=student,
                in_notebook=len(private) - without,
                notebook=notebook,
                without=without,
            ),
            without_notebook=without,
        )
    ]


def _others_flag(ledgered: list[dict], ledger_id: str | None, student: str | None, notebook: str) -> list[dict]:
    others = ledger_summaries([r for r in ledgered if r.get("ledger_id") != ledger_id])
    if not others:
        return []
    listed = "; ".join(
        Message(
            "{ledger} ({entries} entries, {failures} failed)",
            ledger=o["ledger_id"][:12],
            entries=o["entries"],
            failures=o["failures"],
        )
        for o in others
    )
    return [
        _flag(
            "other_ledgers_witnessed",
            len(others),
            Message(
                "the witness saw {count} other ledger(s) of {notebook} from {student}: {listed}",
                count=len(others),
                notebook=notebook,
                student=student,
                listed=listed,
            ),
            ledgers=others,
            failures=sum(o["failures"] for o in others),
        )
    ]


def _entry_flags(late: list[tuple[int, float]], unwitnessed: list[int], max_delay: float) -> list[dict]:
    flags = []
    if late:
        largest = max(delay for _seq, delay in late)
        flags.append(
            _flag(
                "witnessed_late",
                len(late),
                Message(
                    "witnessed late: {count} entr(y/ies) reached the witness more than {max_delay:g} s after "
                    "they were written, from seq {first} (largest delay {largest:.0f} s)",
                    count=len(late),
                    max_delay=max_delay,
                    first=late[0][0],
                    largest=largest,
                ),
                first_seq=late[0][0],
                largest_delay=round(largest, 3),
            )
        )
    if unwitnessed:
        flags.append(
            _flag(
                "unwitnessed",
                len(unwitnessed),
                Message(
                    "unwitnessed: {count} entr(y/ies) never reached the witness, from seq {first}",
                    count=len(unwitnessed),
                    first=unwitnessed[0],
                ),
                first_seq=unwitnessed[0],
            )
        )
    return flags


def _entry_errors(receipt: dict, found: str, entry_time: str | None) -> list:
    """The errors of one witnessed entry against the ledger's entry at its seq."""
    head = str(receipt.get("head"))
    if found != head:
        what = (
            Message("a failed observation was removed") if is_failure(receipt) else Message("the ledger was rewritten")
        )
        return [
            Message(
                "the entry at {at} has hash {found}, but the witness saw {head}: {what}",
                at=_at(receipt),
                found=found[:12],
                head=head[:12],
                what=what,
            )
        ]
    entry, received = parse_time(entry_time), parse_time(receipt.get("time"))
    if entry and received and entry > received + timedelta(seconds=CLOCK_SKEW_SECONDS):
        return [
            Message(
                "the entry at {at} claims the time {time}, after the witness received it: its time was edited",
                at=_at(receipt),
                time=entry_time,
            )
        ]
    return []


def witness_findings(
    receipts: list[dict],
    *,
    notebook: str,
    user: str | None,
    ledger_id: str | None,
    hashes: dict[int, str] | None,
    times: dict[int, str] | None,
    max_delay: float = DEFAULT_MAX_DELAY,
    unreported: frozenset[int] = frozenset(),
) -> dict:
    """`{"witnessed", "errors", "flags", "seen", "student"}` for one submission.

    `notebook` is the submitted notebook's file name; `user` the submitting student, or None to
    take whoever the witness first saw for that ledger id; `ledger_id`, `hashes` (seq -> hash)
    and `times` (seq -> entry time) describe the submitted ledger, all None when it is missing;
    `unreported` are seqs of entries no client reports on their own (a `witness_pending` note,
    a torn-write seal), covered by the next entry's head. `witnessed` is True when every other
    entry reached the witness from that student and nothing contradicts the ledger.
    """
    receipts = deduplicated(receipts)
    errors: list = []
    of_id = [r for r in receipts if ledger_id is not None and r.get("ledger_id") == ledger_id and not r.get("private")]
    student = user if user is not None else (of_id[0].get("user") if of_id else None)
    for other in sorted({str(r.get("user")) for r in of_id if r.get("user") != student}):
        errors.append(
            Message(
                "this ledger was witnessed for {witnessed}; it is submitted as {student}'s",
                witnessed=other,
                student=student,
            )
        )
    mine = [r for r in of_id if r.get("user") == student]
    ledgered = [
        r for r in receipts if not r.get("private") and r.get("notebook") == notebook and r.get("user") == student
    ]
    flags = _private_flag(receipts, student, notebook) + _others_flag(ledgered, ledger_id, student, notebook)
    found = {"errors": errors, "flags": flags, "seen": len(mine), "student": student}
    if hashes is None:
        if ledgered:
            errors.append(
                Message(
                    "the ledger of {notebook} is missing, but the witness saw it up to {at}: the ledger was deleted",
                    notebook=notebook,
                    at=_at(ledgered[-1]),
                )
            )
        return {**found, "witnessed": bool(ledgered) or None}
    entries = sorted(seq for seq in hashes if seq >= 1)
    if not mine:
        if ledgered:
            errors.append(
                Message(
                    "the witness never saw ledger {ledger} for {notebook}; it saw {others} up to "
                    "{at}: a fresh or swapped ledger",
                    ledger=str(ledger_id)[:12],
                    notebook=notebook,
                    others=", ".join(sorted({str(r.get("ledger_id"))[:12] for r in ledgered})),
                    at=_at(ledgered[-1]),
                )
            )
        flags += _entry_flags([], [seq for seq in entries if seq not in unreported], max_delay)
        return {**found, "witnessed": False}
    if ledgered and ledgered[-1].get("ledger_id") != ledger_id:
        errors.append(
            Message(
                "the witness saw a newer ledger {ledger} of {notebook} at {at}: an older run was swapped in",
                ledger=str(ledgered[-1].get("ledger_id"))[:12],
                notebook=notebook,
                at=_at(ledgered[-1]),
            )
        )
    by_seq: dict[int, list[dict]] = {}
    for receipt in mine:
        by_seq.setdefault(receipt.get("seq"), []).append(receipt)
    for seq in sorted(s for s in by_seq if isinstance(s, int) and s not in hashes):
        receipt = by_seq[seq][-1]
        errors.append(
            Message(
                "the ledger has no entry at {at} that the witness saw (head {head}): the ledger was truncated",
                at=_at(receipt),
                head=str(receipt.get("head"))[:12],
            )
        )
    late, unwitnessed = [], []
    for seq in entries:
        seen = by_seq.get(seq)
        if not seen:
            if seq not in unreported:  # a note no client reports on its own is covered by the next head
                unwitnessed.append(seq)
            continue
        matching = [r for r in seen if r.get("head") == hashes[seq]]
        entry_time = (times or {}).get(seq)
        errors.extend(_entry_errors(matching[0] if matching else seen[0], hashes[seq], entry_time))
        delay = delay_seconds(entry_time, matching[0].get("time")) if matching else None
        if delay is not None and delay > max_delay:
            late.append((seq, delay))
    flags += _entry_flags(late, unwitnessed, max_delay)
    return {**found, "witnessed": not errors and not unwitnessed}


def student_of(path: str | Path, root: str | Path | None = None) -> str | None:
    """The student a submission's path names in nbgrader's layout (`submitted/<student>/...`),
    else the first folder under `root` (a folder of `<student>/<assignment>/<file>`), else None."""
    parts = Path(path).parts
    for index, part in enumerate(parts[:-1]):
        if part in STUDENT_FOLDERS and index + 1 < len(parts) - 1:
            return parts[index + 1]
    if root is not None:
        try:
            relative = Path(path).resolve().relative_to(Path(root).resolve()).parts
        except ValueError:
            return None
        return relative[0] if len(relative) == 3 else None
    return None


def apply_witness(report: dict, witness: dict) -> None:
    """Add what the witness saw to one verify report (call before its internals are dropped).

    `witness` is `load_witness`'s answer, with optionally `student` (the submitting student,
    from `verify --student`; else the path names it, see `student_of`, under `root`) and
    `max_delay`."""
    notebook = report.get("notebook")
    name = Path(notebook).name if notebook else notebook_of(Path(str(report.get("ledger") or report["path"])), None)
    missing = report.get("ledger_missing") or report.get("ledger") is None
    found = witness_findings(
        witness["receipts"],
        notebook=name,
        user=witness.get("student") or student_of(report["path"], witness.get("root")),
        ledger_id=report.get("ledger_id"),
        hashes=None if missing else report.get("_hashes", {}),
        times=None if missing else report.get("_times"),
        max_delay=float(witness.get("max_delay", DEFAULT_MAX_DELAY)),
        unreported=frozenset(report.get("_unreported") or ()),
    )
    for reason in witness["problems"] + found["errors"]:
        add_error(report, None, reason, scope="witness")
    report["witness"] = {
        "witnessed": found["witnessed"],
        "seen": found["seen"],
        "student": found["student"],
        "flags": found["flags"],
    }
    settle_ok(report)
