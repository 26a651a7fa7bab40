"""The audit ledger: an append-only, hash-chained JSON Lines file beside each notebook.

It is what makes a gradient check evidence rather than a claim: the expectation is written
before the observation, failures stay in the file, and a tolerance changes only through an
entry that carries a written justification. Lines are appended under an exclusive OS lock,
flushed and fsynced, and never rewritten.

Torn tail policy (an append interrupted by a crash): bytes after the last newline are a torn
tail. Readers and `verify` report it and never drop it. The next append, under the lock,
keeps the bytes where they are: when they are a complete entry that chains onto the head,
it only adds the missing newline; otherwise it ends them with a newline and appends a
`note` entry (`event: "torn_tail_sealed"`) naming their line, length and SHA-256, then the
new entry. `verify` then lists the sealed write as a warning, not an error. A complete line
that is not a valid entry and is not followed by such a note is corruption: appends are
refused with a LedgerError until someone looks at it.

This process keeps what it has read and written of each ledger (`core.ledger.reader`), so a
check's history and the head an append chains onto come from the lines added since, not
from the whole file; whatever another writer did to the file in between is noticed first.
The locks are core.ledger.store's; what an append refuses before writing,
core.ledger.store'.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from ...witness import client as witness_client
from ..check.record.spec import refuse_meaningless_rtol
from ..errors import JustificationRequired, LedgerError, SpecError
from ..expr.parser import DEFAULT_LIMITS
from ..values.blobs import fsync_folder, store_dir_for, write_blobs
from .line_format import (
    GENESIS,
    GENESIS_LINE_MAX,
    KINDS,
    LineError,
    LineInfo,
    genesis_entry,
    genesis_id,
    jsonable,
    make_line,
    read_entry,
    read_line,
)
from .reader import (
    HISTORY_KEY,
    TARGETS,
    HistoryBuilder,
    appended,
    count_lines,
    direction,
    fd_lines,
    histories_and_head,
    known_head,
    light_entry,
    light_histories,
)

# -------------------- tail
# The end of a ledger file: its head, the torn tail policy, and durable writes.
#
# An append needs the last valid entry (the head) to chain onto. `read_head` reads backwards
# from the end of the file only as far as that entry, so an append costs the same on a ledger
# of 10 entries as on one of 10^5; `seal_torn_tail` applies the torn tail policy described in
# `core.ledger.store` to what it finds after the head; `write_all` writes and fsyncs.

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


# -------------------- entry checks
# What an append refuses before anything is written: an unknown kind, a missing check id or
# justification, a change to a check the ledger does not hold. Each is bad input (SpecError, or
# JustificationRequired), and the ledger is left as it was.


def check_kind(kind: str, check_id: str | None, data: dict) -> None:
    if kind not in KINDS:
        raise SpecError(
            "unknown ledger entry kind {kind!r}: one of {choices}",
            kind=kind,
            choices=", ".join(KINDS),
            field="kind",
        )
    if kind != "note" and not (isinstance(check_id, str) and check_id):
        raise SpecError("a {kind} entry needs a check id", kind=kind, field="check_id")
    if not isinstance(data, dict):
        raise SpecError("ledger entry data must be a JSON object", field="data")


def check_id_of(record: dict) -> str:
    check_id = record.get("id") if isinstance(record, dict) else None
    if not isinstance(check_id, str) or not check_id:
        raise SpecError("the record has no check id; parse it with core.check.record.spec first", field="id")
    return check_id


def require_justification(justification) -> str:
    if not isinstance(justification, str) or not justification.strip():
        raise JustificationRequired(
            "a written justification is required (--justification TEXT): the change is refused and nothing was written",
            field="justification",
        )
    return justification.strip()


def existing_check(builder: HistoryBuilder, check_id: str, path: Path) -> dict:
    if check_id not in builder.checks:
        known = ", ".join(sorted(builder.checks)) or "none"
        raise SpecError(
            "no check {check_id!r} in {name} (checks: {known})",
            check_id=check_id,
            name=path.name,
            known=known,
            field="check_id",
        )
    return builder.checks[check_id]


# -------------------- ledger lock
# Holding a ledger under its OS lock: a shared lock to read, an exclusive one to append.
#
# `LockedFd` opens the ledger (creating it and its folder for a writer) and takes an flock for a
# `with` block; closing the fd releases it. `LockedLedger` keeps the exclusive lock across a
# read of a check's history and the appends that follow from it (`run.declare`), so no other
# writer comes in between.


class LockedFd:
    """An fd of a ledger under a shared or exclusive flock for the `with` block."""

    __slots__ = ("path", "exclusive", "fd")

    def __init__(self, path: Path, exclusive: bool):
        self.path, self.exclusive, self.fd = path, exclusive, None

    def __enter__(self) -> int | None:
        try:
            if self.exclusive:
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
                except OSError:  # perhaps no folder yet: make it, then open (or fail) once more
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            else:
                fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            if self.exclusive:
                raise LedgerError("cannot create the ledger {path}: its folder is missing", path=self.path) from None
            return None
        except OSError as exc:
            raise LedgerError(
                "cannot open the ledger {path}: {strerror}", path=self.path, strerror=exc.strerror
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return fd

    def __exit__(self, *exc_info) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing releases the lock


class LockedLedger:
    """A ledger held under its exclusive lock (`with ledger.locked() as held:`): what `history`
    reads cannot change before the entries appended through it are written."""

    def __init__(self, ledger):  # a core.ledger.store.Ledger (which imports this module)
        self.ledger, self._fd = ledger, LockedFd(ledger.path, True)
        self.fd: int | None = None
        self._head: tuple[int, str] | None = None  # as read with the history, until a write

    def __enter__(self) -> LockedLedger:
        self.fd = self._fd.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self.fd = self._head = None
        self._fd.__exit__(*exc_info)

    def history(self, check_id: str, *, copy: bool = True) -> dict | None:
        """One check's light history, as `Ledger.history` reads it; `copy=False` gives the
        kept one itself, to read (never to edit) before this `with` block ends."""
        histories, self._head = histories_and_head(self.fd, check_id, copy=copy)
        return histories.get(check_id)

    def change_expectation(
        self, check_id: str, analytical_gradient, *, justification: str | None = None, via: str = "change"
    ) -> dict:
        """`Ledger.change_expectation` under the lock already held."""
        if via == "change":
            justification = require_justification(justification)
        self._head = None
        return self.ledger.change_expectation_locked(self.fd, check_id, analytical_gradient, justification, via)

    def record_expectation(self, spec_dict: dict) -> dict:
        """`Ledger.record_expectation` under the lock already held."""
        check_id = check_id_of(spec_dict)
        check_kind("expectation", check_id, spec_dict)
        known, self._head = self._head, None
        return self.ledger.append_locked(self.fd, "expectation", check_id, spec_dict, known)


# -------------------- store

__all__ = ["LEDGER_SUFFIX", "Ledger", "LockedLedger", "ledger_path_for"]

LEDGER_SUFFIX = ".gradcheck.jsonl"


def ledger_path_for(notebook_path: str | os.PathLike) -> Path:
    """`lab1.ipynb` -> `lab1.gradcheck.jsonl`, in the same folder."""
    path = Path(notebook_path)
    return path.with_name(path.stem + LEDGER_SUFFIX)


class Ledger:
    """One ledger file. Every write goes through `append`; every read takes a shared lock."""

    def __init__(self, path: str | os.PathLike, *, notebook: str | os.PathLike | None = None, bind: bool = True):
        self.path = Path(path)
        #: The notebook this ledger belongs to (for the binding in its metadata), if known.
        self.notebook = Path(notebook) if notebook is not None else None
        #: Whether ledger-aware writers (run_and_record, the CLI) update the notebook binding.
        self.bind = bind

    @classmethod
    def for_notebook(cls, notebook_path: str | os.PathLike, *, bind: bool = True) -> Ledger:
        """The ledger beside a notebook; `bind=False` leaves its metadata to the caller."""
        return cls(ledger_path_for(notebook_path), notebook=notebook_path, bind=bind)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # ----------------------------------------------------------------- locking and I/O
    def locked_fd(self, exclusive: bool) -> LockedFd:
        """`with` an fd of the ledger under a shared or exclusive lock (None if it does not exist)."""
        return LockedFd(self.path, exclusive)

    def locked(self) -> LockedLedger:
        """`with` this ledger under its exclusive lock, for reading a check's history and
        appending what follows from it, with no other writer in between (`ledgered_run.declare`)."""
        return LockedLedger(self)

    def raw_lines(self) -> tuple[list[bytes], bytes]:
        """All complete lines (without newlines) and the torn tail (b"" when none)."""
        complete, torn = [], b""
        for _number, raw, done in self.iter_raw_lines():
            if done:
                complete.append(raw)
            else:
                torn = raw
        return complete, torn

    def iter_raw_lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """Stream `(line number, bytes, complete)` under a shared lock; the last may be torn."""
        with self.locked_fd(exclusive=False) as fd:
            if fd is not None:
                yield from fd_lines(fd)

    def ledger_id(self) -> str | None:
        """The random id its genesis entry gave this ledger; None for a ledger without one
        (missing, empty, or written before ledgers had ids)."""
        try:
            with open(self.path, "rb") as handle:
                first = handle.readline(GENESIS_LINE_MAX)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LedgerError(
                "cannot read the ledger {path}: {strerror}", path=self.path, strerror=exc.strerror
            ) from None
        return genesis_id(first.rstrip(b"\n"))

    # -------------------------------------------------------------------- the head
    def _head_locked(self, fd: int) -> tuple[int, str, list[bytes], bytes]:
        """(head seq, head hash, unsealed invalid lines before a torn tail, torn tail bytes)."""
        return read_head(fd, self.path)

    def head(self) -> dict:
        """`{"entries", "head"}`: the number of entries and the hash of the last one."""
        with self.locked_fd(exclusive=False) as fd:
            if fd is None:
                return {"entries": 0, "head": GENESIS}
            seq, digest, _, _ = self._head_locked(fd)
            return {"entries": seq, "head": digest}

    # -------------------------------------------------------------------- writing
    def append(self, kind: str, check_id: str | None, data: dict) -> dict:
        """Append one entry under an exclusive lock, flushed and fsynced; return it."""
        check_kind(kind, check_id, data)
        with self.locked_fd(exclusive=True) as fd:
            return self.append_locked(fd, kind, check_id, data)

    def append_locked(
        self, fd: int, kind: str, check_id: str | None, data: dict, known: tuple[int, str] | None = None
    ) -> dict:
        if known is None:  # else the caller has just read it under this same lock
            known = known_head(fd)  # this process read or wrote every line, and the last is valid
        if known is not None:
            seq, prev = known
        else:
            seq, prev, invalid, torn = self._head_locked(fd)
            if torn or invalid:
                seq, prev = seal_torn_tail(fd, self.path, seq, prev, invalid, torn)
        time = now_utc()
        opening = b""
        if seq == 0 and prev == GENESIS:  # a new ledger: its genesis entry names it first
            opening, prev = make_line(genesis_entry(time))
        entry = {"seq": seq + 1, "time": time, "kind": kind, "check_id": check_id, "data": jsonable(data), "prev": prev}
        line, digest = make_line(entry)
        write_blobs(store_dir_for(self.path), entry["data"])  # fsynced before the line that names them
        write_all(fd, opening + line, self.path)
        if opening:
            fsync_folder(self.path.parent)  # the new file's name is durable too
        appended(fd, opening + line)
        entry["hash"] = digest
        if witness_client.client() is not None:
            witness_client.report_entry(self, entry, self.ledger_id())
        return entry

    # ---------------------------------------------------------- the entry kinds
    def record_expectation(self, spec_dict: dict) -> dict:
        """The expectation, written before the check runs."""
        return self.append("expectation", check_id_of(spec_dict), spec_dict)

    def record_observation(self, record: dict, expectation_seq: int) -> dict:
        """The completed record of a run, referring to its expectation's seq."""
        data = {"expectation_seq": int(expectation_seq), "passed": bool(record.get("passed")), "record": record}
        return self.append("observation", check_id_of(record), data)

    def record_failed_to_run(self, spec_dict: dict, expectation_seq: int, reason: str) -> dict:
        """A run that did not complete (crash, timeout): kept as a failed observation."""
        data = {
            "expectation_seq": int(expectation_seq),
            "failed_to_run": True,
            "passed": False,
            "reason": str(reason),
            "record": spec_dict,
        }
        return self.append("observation", check_id_of(spec_dict), data)

    def note(self, text: str, check_id: str | None = None, **extra) -> dict:
        """A free-text note, optionally about one check."""
        return self.append("note", check_id, {"text": str(text), **extra})

    def change_tolerance(
        self,
        check_id: str,
        *,
        rtol=None,
        atol=None,
        target: str = "tolerance",
        justification: str | None = None,
        max_rtol: float = DEFAULT_LIMITS.max_rtol,
    ) -> dict:
        """Record a tolerance change; refused (nothing written) without a justification, or when
        the new rtol is `max_rtol` or more (it would check nothing)."""
        if target not in TARGETS:
            raise SpecError(
                "unknown tolerance target {target!r}: tolerance or finite_difference", target=target, field="target"
            )
        if rtol is None and atol is None:
            raise SpecError("a tolerance change needs --rtol or --atol", field="rtol")
        for name, value in (("rtol", rtol), ("atol", atol)):
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not value >= 0
                or value == float("inf")
            ):
                raise SpecError(
                    "{name} must be a finite number >= 0, got {value!r}", name=name, value=value, field=name
                )
        if rtol is not None:
            refuse_meaningless_rtol(rtol, "rtol", max_rtol)
        justification = require_justification(justification)
        with self.locked_fd(exclusive=True) as fd:
            builder = self.history_from_first_line()
            history = existing_check(builder, check_id, self.path)
            key = HISTORY_KEY[target]
            old = history[key]
            if old is None:
                raise SpecError(
                    "check {check_id!r} has no recorded {target} tolerance",
                    check_id=check_id,
                    target=target,
                    field="target",
                )
            new = {"rtol": old["rtol"] if rtol is None else rtol, "atol": old["atol"] if atol is None else atol}
            if new == old:
                raise SpecError(
                    "the {target} tolerance of {check_id!r} is already rtol={rtol} atol={atol}: nothing to change",
                    target=target,
                    check_id=check_id,
                    rtol=old["rtol"],
                    atol=old["atol"],
                    field="rtol",
                )
            data = {
                "target": target,
                "old": old,
                "new": new,
                "justification": justification,
                **direction(old, new),
                "after_failure": builder.latest_failed(check_id),
            }
            return self.append_locked(fd, "tolerance_change", check_id, data)

    def change_expectation(
        self, check_id: str, analytical_gradient, *, justification: str | None = None, via: str = "change"
    ) -> dict:
        """Record a new analytical gradient for a check; refused without a justification."""
        if via == "change":
            justification = require_justification(justification)
        with self.locked_fd(exclusive=True) as fd:
            return self.change_expectation_locked(fd, check_id, analytical_gradient, justification, via)

    def change_expectation_locked(self, fd: int, check_id: str, analytical_gradient, justification, via) -> dict:
        builder = self.history_from_first_line()
        history = existing_check(builder, check_id, self.path)
        old = history["analytical_gradient"]
        if old == analytical_gradient:
            raise SpecError(
                "check {check_id!r} already expects {old!r}: nothing to change",
                check_id=check_id,
                old=old,
                field="analytical_gradient",
            )
        data = {
            "old": old,
            "new": analytical_gradient,
            "justification": justification,
            "after_observation": builder.has_observation(check_id),
            "via": via,
        }
        return self.append_locked(fd, "expectation_change", check_id, data)

    # -------------------------------------------------------------------- reading
    def history_from_first_line(self) -> HistoryBuilder:
        """Every check's history built from the file's first line, ignoring what this process
        kept. Call it with the ledger locked (`locked_fd`), as the appends do."""
        builder = HistoryBuilder()
        for info in self._iter_light_unlocked():
            builder.add(light_entry(info))
        return builder

    def _iter_light_unlocked(self) -> Iterator[LineInfo]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            for _number, raw, complete in fd_lines(fd):
                if complete:
                    try:
                        yield read_line(raw)
                    except LineError:
                        continue
        finally:
            os.close(fd)

    def entries(self) -> list[dict]:
        """Every valid entry, decoded, in order (invalid and torn lines are left to verify)."""
        result = []
        for _number, raw, complete in self.iter_raw_lines():
            if not complete:
                continue
            try:
                result.append(read_entry(raw))
            except LineError:
                continue
        return result

    def checks(self, *, records: bool = True) -> dict[str, dict]:
        """Each check's history; `records=False` skips decoding observation records (faster,
        and only the lines appended since this process last read the file are decoded)."""
        if not records:
            with self.locked_fd(exclusive=False) as fd:
                return {} if fd is None else light_histories(fd)
        builder = HistoryBuilder()
        for entry in self.entries():
            builder.add(entry)
        return builder.checks

    def history(self, check_id: str) -> dict | None:
        """One check's light history (`checks(records=False).get(check_id)`), or None."""
        with self.locked_fd(exclusive=False) as fd:
            return None if fd is None else light_histories(fd, check_id).get(check_id)
