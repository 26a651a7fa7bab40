"""The checks a server has started and not finished, kept on disk so a crash leaves a trace.

Between the expectation a check writes to its ledger and the observation that completes it,
the server may die (killed, out of memory, the machine rebooted). The ledger then holds an
expectation with no outcome, and nothing says why. Each server process keeps a journal in the
Jupyter runtime folder: one line when a check's expectation is written, one when its outcome
is. A server that starts finds the journals of the processes gone before it (same root, a pid
no longer alive), and for every check they left open whose ledger still has no outcome it
appends a note saying the server stopped while the check ran. `verify` names these checks too.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from ..core.ledger.store import Ledger
from ..core.ledger.verify import verify_ledger_file

#: The note's event name in the ledger.
INTERRUPTED_EVENT = "interrupted"


def journal_folder(runtime_dir: str | os.PathLike) -> Path:
    """Where the journals live (created on demand)."""
    return Path(runtime_dir) / "jupyterlab_gradcheck"


def _prefix(root: str | os.PathLike) -> str:
    return "inflight-" + hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogatepass")).hexdigest()[:16]


class InFlightJournal:
    """This server process's journal of started and finished checks."""

    def __init__(self, runtime_dir: str | os.PathLike, root: str | os.PathLike):
        self.folder = journal_folder(runtime_dir)
        self.prefix = _prefix(root)
        self.path = self.folder / f"{self.prefix}-{os.getpid()}.jsonl"
        self._lock = threading.Lock()
        self._open: set[tuple[str, int]] = set()

    def started(self, ledger_path: str | os.PathLike, seq: int, check_id: str) -> None:
        """A check's expectation is in its ledger; its outcome is not yet."""
        self._write({"op": "start", "ledger": str(ledger_path), "seq": int(seq), "check_id": check_id})
        self._open.add((str(ledger_path), int(seq)))

    def finished(self, ledger_path: str | os.PathLike, seq: int) -> None:
        """The check's outcome (observation or failed-to-run) is in its ledger."""
        self._write({"op": "end", "ledger": str(ledger_path), "seq": int(seq)})
        self._open.discard((str(ledger_path), int(seq)))

    def close(self) -> None:
        """A clean stop: the journal goes, unless a check is still open (its outcome could not
        be written), which the next server to start will then note."""
        with self._lock:
            if not self._open:
                self.path.unlink(missing_ok=True)

    def _write(self, item: dict) -> None:
        line = (json.dumps(item) + "\n").encode("utf-8", "surrogatepass")
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as handle:
                handle.write(line)

    def recover(self) -> list[dict]:
        """Notes for the checks that servers gone before this one left open (see the module
        docstring); returns what was noted, and removes the journals it read."""
        noted = []
        for journal in sorted(self.folder.glob(f"{self.prefix}-*.jsonl")) if self.folder.is_dir() else []:
            pid = journal.stem.rsplit("-", 1)[-1]
            if journal == self.path or not pid.isdigit() or _alive(int(pid)):
                continue
            for item in _open_items(journal):
                noted += _note_if_open(item, int(pid))
            journal.unlink(missing_ok=True)
        return noted


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_items(journal: Path) -> list[dict]:
    """The starts in a journal with no end (lines cut short by the crash are skipped)."""
    open_items: dict[tuple[str, int], dict] = {}
    for line in journal.read_bytes().splitlines():
        try:
            item = json.loads(line)
            key = (item["ledger"], int(item["seq"]))
        except (ValueError, KeyError, TypeError):
            continue
        if item.get("op") == "start":
            open_items[key] = item
        else:
            open_items.pop(key, None)
    return list(open_items.values())


def _note_if_open(item: dict, pid: int) -> list[dict]:
    """The note appended for one open check, if its ledger still has no outcome for it."""
    path = Path(item["ledger"])
    try:
        report = verify_ledger_file(path, with_notebook=False)
    except Exception:  # a ledger removed or unreadable since: verify will say so itself
        return []
    if not any(entry["seq"] == item["seq"] for entry in report.get("interrupted", [])):
        return []
    note = Ledger(path, bind=False).note(
        f"the server (process {pid}) stopped while this check ran (expectation seq {item['seq']}); "
        "its outcome was never recorded",
        item.get("check_id"),
        event=INTERRUPTED_EVENT,
        expectation_seq=item["seq"],
    )
    return [note]
