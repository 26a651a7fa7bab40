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
The locks are core.ledger.ledger_lock's; what an append refuses before writing,
core.ledger.entry_checks'.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..check.record.tolerance_fields import refuse_meaningless_rtol
from ..errors import LedgerError, SpecError
from ..expr.limits import DEFAULT_LIMITS
from . import witness_client
from .blob_store import fsync_folder, store_dir_for, write_blobs
from .entry_checks import check_id_of, check_kind, existing_check, require_justification
from .history import HISTORY_KEY, TARGETS, HistoryBuilder, direction
from .ledger_lock import LockedFd, LockedLedger
from .line_format import (
    GENESIS,
    GENESIS_LINE_MAX,
    LineError,
    LineInfo,
    genesis_entry,
    genesis_id,
    jsonable,
    make_line,
    read_entry,
    read_line,
)
from .reader import appended, fd_lines, known_head, light_entry, light_histories
from .tail import now_utc, read_head, seal_torn_tail, write_all

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
