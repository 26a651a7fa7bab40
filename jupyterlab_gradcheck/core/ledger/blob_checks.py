"""Verify's check of the blobs each entry names: a changed, missing or swapped blob is an error of
the entry that references it (its seq and check id), since the chain covers the blob's hash and not
its bytes.

The shas are read from the line's bytes without decoding it: canonical JSON sorts the keys of a
stored value, so `"stored":{"bytes":N,"dtype":"...","sha256":"<hex>"` is its exact spelling, and a
quote inside a JSON string is escaped, so no string can spell it. Each distinct blob is hashed once
per verify run (`digests`).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..i18n import Message
from .blob_store import blob_problem

#: A stored value's hash as canonical JSON spells it in a line.
STORED_SHA = re.compile(rb'"stored":\{"bytes":\d+,"dtype":"[a-z0-9]+","sha256":"([0-9a-f]{64})"')


def line_shas(raw: bytes) -> list[str]:
    """The distinct shas of the stored values a line names, in order."""
    if b'"stored":{' not in raw:
        return []
    return list(dict.fromkeys(match.decode("ascii") for match in STORED_SHA.findall(raw)))


def blob_errors(raw: bytes, seq: int, check_id, store_dir: Path, digests: dict) -> list[tuple[dict, Message]]:
    """`({"seq", "check_id", "sha", "problem"}, message)` for each blob the line names that is missing
    from `store_dir` or whose bytes do not hash to its name."""
    found = []
    for sha in line_shas(raw):
        problem = blob_problem(store_dir, sha, digests)
        if problem is None:
            continue
        if problem == "missing":
            message = Message(
                "entry seq {seq} ({check_id}): blob {sha} is missing from {store}",
                seq=seq,
                check_id=check_id,
                sha=sha,
                store=Path(store_dir).name,
            )
        else:
            message = Message(
                "entry seq {seq} ({check_id}): blob {sha} is changed: its bytes do not hash to its name",
                seq=seq,
                check_id=check_id,
                sha=sha,
            )
        found.append(({"seq": seq, "check_id": check_id, "sha": sha, "problem": problem}, message))
    return found
