"""Copying across a class: submissions of different students that share a ledger.

A ledger is one student's record: its genesis gives it a random id, every entry's hash chains
all the entries before it, and a notebook's attestations name entries of its own ledger. Two
submissions of different students that share any of these share a history, which only a copy
explains:

- `ledger_id`: the same genesis id;
- `entry_hash`: an entry with the same hash (the same chain up to that entry);
- `attestation`: a notebook output attesting the same ledger entry;
- `identical_run`: the same entries (kind, check, expectation, inputs) written at the same
  instants, a copy re-hashed under a fresh ledger id;
- `witnessed_for`: a ledger the witness saw written by the other student.

Each key is indexed once, so a class of n submissions is compared in O(n) (every pair sharing a
key is found, none other is compared).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from itertools import combinations
from pathlib import Path

from .binding import notebook_attestations

#: The ways two submissions can share a ledger, in the order they are named.
WAYS = ("ledger_id", "entry_hash", "attestation", "identical_run", "witnessed_for")


def _run_key(entries: list[dict]) -> str | None:
    """A digest of what was run and when (genesis excluded); None for a ledger with no entries."""
    shape = []
    for entry in entries:
        if entry.get("seq", 0) < 1 or entry.get("kind") == "note":
            continue
        data = entry.get("data") or {}
        shape.append(
            [
                entry.get("time"),
                entry.get("kind"),
                entry.get("check_id"),
                data.get("analytical_gradient"),
                data.get("inputs"),
                data.get("passed"),
            ]
        )
    if not shape:
        return None
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()


def keys_of(submission: dict) -> dict[str, set[str]]:
    """{way: keys} of one submission (from `core.report.submissions.load`)."""
    entries = submission.get("entries") or []
    keys: dict[str, set[str]] = {way: set() for way in WAYS}
    for entry in entries:
        data = entry.get("data") or {}
        if entry.get("seq") == 0 and data.get("ledger_id"):
            keys["ledger_id"].add(str(data["ledger_id"]))
        elif entry.get("seq", 0) >= 1 and entry.get("hash"):
            keys["entry_hash"].add(str(entry["hash"]))
    path = Path(submission.get("path") or "")
    if path.suffix == ".ipynb" and path.is_file():
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = {}
        keys["attestation"] = {f"{a.get('ledger_id')}:{a['seq']}:{a['hash']}" for a in notebook_attestations(document)}
    run = _run_key(entries)
    if run is not None:
        keys["identical_run"].add(run)
    return keys


def _witnessed_for(submission: dict) -> str | None:
    """The student the witness saw write this ledger, when that is not the submitting student."""
    witness = submission.get("verify", {}).get("witness") or {}
    for error in submission.get("verify", {}).get("errors") or []:
        reason = error.get("reason")
        fields = getattr(reason, "params", None) or {}
        if (
            error.get("scope") == "witness"
            and fields.get("witnessed")
            and fields.get("witnessed") != witness.get("student")
        ):
            return str(fields["witnessed"])
    return None


def shared_pairs(submissions: list[dict]) -> list[dict]:
    """`{"a", "b", "how"}` (indices into `submissions`, a < b, the ways they share) for every
    pair of submissions of different students, within one assignment and notebook, that share a
    ledger."""
    index: dict[tuple, list[int]] = defaultdict(list)
    for number, submission in enumerate(submissions):
        for way, keys in keys_of(submission).items():
            for key in keys:
                index[(submission.get("assignment"), way, key)].append(number)
    how: dict[tuple[int, int], set[str]] = defaultdict(set)
    for (_assignment, way, _key), members in index.items():
        if len(members) > 1:
            for a, b in combinations(sorted(set(members)), 2):
                if submissions[a].get("student") != submissions[b].get("student"):
                    how[(a, b)].add(way)
    by_student = defaultdict(list)
    for number, submission in enumerate(submissions):
        by_student[(submission.get("assignment"), submission.get("student"))].append(number)
    for a, submission in enumerate(submissions):
        author = _witnessed_for(submission)
        for b in by_student.get((submission.get("assignment"), author), []) if author else []:
            how[(min(a, b), max(a, b))].add("witnessed_for")
    return [{"a": a, "b": b, "how": [w for w in WAYS if w in ways]} for (a, b), ways in sorted(how.items())]


def mark_shared(submissions: list[dict]) -> list[dict]:
    """Give each submission its `shared_with` list (`{"student", "notebook", "path", "how"}`);
    returns the pairs (see `shared_pairs`)."""
    pairs = shared_pairs(submissions)
    for submission in submissions:
        submission["shared_with"] = []
    for pair in pairs:
        for mine, other in ((pair["a"], pair["b"]), (pair["b"], pair["a"])):
            theirs = submissions[other]
            submissions[mine]["shared_with"].append(
                {
                    "student": theirs.get("student"),
                    "notebook": theirs.get("notebook"),
                    "path": theirs.get("path"),
                    "how": pair["how"],
                }
            )
    return pairs
