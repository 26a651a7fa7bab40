"""Holding a ledger under its OS lock: a shared lock to read, an exclusive one to append.

`LockedFd` opens the ledger (creating it and its folder for a writer) and takes an flock for a
`with` block; closing the fd releases it. `LockedLedger` keeps the exclusive lock across a
read of a check's history and the appends that follow from it (`run.declare`), so no other
writer comes in between.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import LedgerError
from .entry_checks import check_id_of, check_kind, require_justification
from .reader import histories_and_head


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
