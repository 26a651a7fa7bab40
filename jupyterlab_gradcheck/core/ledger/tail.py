"""The end of a ledger file: its head, the torn tail policy, and durable writes.

An append needs the last valid entry (the head) to chain onto. `read_head` reads backwards
from the end of the file only as far as that entry, so an append costs the same on a ledger
of 10 entries as on one of 10^5; `seal_torn_tail` applies the torn tail policy described in
`core.ledger.store` to what it finds after the head; `write_all` writes and fsyncs.
"""

from __future__ import annotations

import errno
import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path

from ..errors import LedgerError
from .line_format import GENESIS, LineError, LineInfo, make_line, read_line
from .reader import count_lines

#: Bytes read from the end for the head: one entry of a scalar check fits (the read doubles if not).
HEAD_CHUNK = 1 << 13
#: How many unsealed invalid lines before a torn tail one seal may cover (an interrupted seal).
MAX_SEAL_RUN = 16


def now_utc() -> str:
    """The entry timestamp: ISO 8601 in UTC."""
    return datetime.now(timezone.utc).isoformat()


def line_sha(raw: bytes) -> str:
    """SHA-256 (hex) of a kept line's bytes, as a seal note names them."""
    return hashlib.sha256(raw).hexdigest()


def read_head(fd: int, path: Path) -> tuple[int, str, list[bytes], bytes]:
    """(head seq, head hash, unsealed invalid lines before a torn tail, torn tail bytes).

    Reads backwards from the end only as far as the last valid entry, so an append costs
    the same on a ledger of 10 entries as on one of 10^5.
    """
    size = os.fstat(fd).st_size
    buffer, start, chunk = b"", size, HEAD_CHUNK
    found: LineInfo | None = None
    invalid: list[bytes] = []
    torn = b""
    while start > 0:
        read_from = max(0, start - chunk)
        buffer = os.pread(fd, start - read_from, read_from) + buffer
        start, chunk = read_from, chunk * 2
        last_newline = buffer.rfind(b"\n")
        torn = buffer[last_newline + 1 :]
        complete = buffer[: last_newline + 1].split(b"\n")[:-1]
        judged = complete if start == 0 else complete[1:]  # the first may be cut off
        invalid = []
        for raw in reversed(judged):
            try:
                found = read_line(raw, check_hash=False)  # the head is its stored hash
                break
            except LineError:
                invalid.append(raw)
                if len(invalid) > MAX_SEAL_RUN:
                    break
        if found is not None or len(invalid) > MAX_SEAL_RUN:
            break
    invalid.reverse()
    if invalid and (not torn or len(invalid) > MAX_SEAL_RUN):
        raise LedgerError(
            "the last line of {name} is not a valid entry and is not a torn write: run `jupyter "
            "gradcheck verify` on it; appends are refused",
            name=path.name,
        )
    if found is None:
        return 0, GENESIS, invalid, torn
    return found.seq, found.hash, invalid, torn


def seal_torn_tail(fd: int, path: Path, seq: int, prev: str, invalid: list[bytes], torn: bytes) -> tuple[int, str]:
    """Apply the torn tail policy; return the new head (seq, hash).

    Called by a writer that read the head from the file, not from its own last append: one that
    restarted after the interrupted write. The seal records so (`restart: true`); verify accepts
    a seal only so, right after the bytes it names."""
    if not invalid:
        try:
            info = read_line(torn)
        except LineError:
            info = None
        if info is not None and info.hash_ok and info.prev == prev and info.seq == seq + 1:
            write_all(fd, b"\n", path)  # a complete entry missing only its newline
            return info.seq, info.hash
    first_number = count_lines(fd) - len(invalid) + 1
    pieces = invalid + ([torn] if torn else [])
    sealed = [{"line": first_number + i, "bytes": len(raw), "sha256": line_sha(raw)} for i, raw in enumerate(pieces)]
    note = {
        "seq": seq + 1,
        "time": now_utc(),
        "kind": "note",
        "check_id": None,
        "data": {
            "event": "torn_tail_sealed",
            "lines": sealed,
            "restart": True,
            "text": "an interrupted write left these bytes; they are kept in place",
        },
        "prev": prev,
    }
    line, digest = make_line(note)
    write_all(fd, (b"\n" if torn else b"") + line, path)
    return seq + 1, digest


def write_all(fd: int, payload: bytes, path: Path) -> None:
    """Write every byte, then fsync; a short write leaves a torn tail for the policy."""
    view = memoryview(payload)
    try:
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        reason = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror
        raise LedgerError("cannot write the ledger {path}: {reason}", path=path, reason=reason) from None
