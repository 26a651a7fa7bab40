"""Reading a ledger's lines, and what this process keeps of each ledger between uses.

`run_and_record` (through `LedgeredRun.declare`) reads the check's history before every run (the ledger's current tolerance
and expectation decide what is run and written), and every append chains onto the last
entry. Decoding the whole file, or its end, each time costs time in proportion to the
ledger, so this process keeps, per ledger file, the light history built so far, the last
valid entry (the head) and the byte offset it has read or written up to: the next read
decodes only the lines appended since, and the lines this process appends are folded in as
they are written. The kept state is used only while it still describes the file:

- the same file (device and inode): a ledger replaced by another file is read from the start;
- not shorter than the offset: a truncated ledger is read from the start;
- the bytes just before the offset (the end of the last line read, whose hash chains every
  line before it) are unchanged: a ledger rewritten in place is read from the start;
- when the size is unchanged but the modification or change time moved, the file was
  rewritten without growing, and it is read from the start.

A rewrite of earlier lines that keeps the size, the last line and both timestamps is not
noticed here; such a file no longer verifies (the hash chain breaks), which `verify` reports.
Lines are read under the caller's lock, so a cooperating writer is never seen half-written;
bytes after the last newline (a torn tail) are left unread until a newline completes them.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from .line_format import GENESIS, LineError, LineInfo, read_line

# -------------------- history
# Per-check history read from a ledger: what each check expects now, and how it got there.
#
# The same builder serves the reading API (`Ledger.checks()`), the exports and `verify`, which
# uses it to re-derive the flags a writer recorded (`after_failure`, `widened`,
# `after_observation`) and to notice a tolerance that changed without a justified entry.

#: Each tolerance target of a check, and the key its history keeps the current value under.
HISTORY_KEY = {"tolerance": "tolerance", "finite_difference": "finite_difference_tolerance"}
TARGETS = tuple(HISTORY_KEY)


def tolerance_of(spec: dict, target: str) -> dict | None:
    """`{rtol, atol}` of one tolerance target of a normalised spec, or None when absent."""
    block = spec.get(target) if isinstance(spec, dict) else None
    if not isinstance(block, dict) or "rtol" not in block or "atol" not in block:
        return None
    return {"rtol": block["rtol"], "atol": block["atol"]}


def direction(old: dict, new: dict) -> dict:
    """Whether going from `old` to `new` widened and/or tightened the tolerance."""
    widened = any(_num(new[k]) > _num(old[k]) for k in ("rtol", "atol"))
    tightened = any(_num(new[k]) < _num(old[k]) for k in ("rtol", "atol"))
    return {"widened": widened, "tightened": tightened}


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else float("nan")


def new_check(check_id: str) -> dict:
    """An empty history for a check that has not been seen yet."""
    return {
        "check_id": check_id,
        "expectation": None,
        "expectation_seq": None,
        "analytical_gradient": None,
        "tolerance": None,
        "finite_difference_tolerance": None,
        "runs": 0,
        "observation_seqs": [],
        "failures_kept": [],
        "latest_observation": None,
        "tolerance_history": [],
        "expectation_changes": [],
        "unjustified_tolerance_changes": [],
        "widened_after_failure": False,
        "expectation_revised_after_observation": False,
    }


class HistoryBuilder:
    """Consumes entries in ledger order and keeps every check's history current.

    Entries are dicts with `seq`, `time`, `kind`, `check_id` and `data`. An observation's
    data may be the light form `{"expectation_seq", "passed", "failed_to_run"}` without its
    record; the history then keeps everything except the record itself.
    """

    def __init__(self) -> None:
        self.checks: dict[str, dict] = {}
        self.kinds_by_seq: dict[int, tuple[str, str | None]] = {}
        self.notes: list[dict] = []

    def check(self, check_id: str) -> dict:
        """The history of `check_id`, created empty on first use."""
        if check_id not in self.checks:
            self.checks[check_id] = new_check(check_id)
        return self.checks[check_id]

    def latest_failed(self, check_id: str) -> bool:
        """Whether the check's latest observation ran and failed a comparison."""
        latest = self.checks.get(check_id, {}).get("latest_observation")
        if not latest:
            return False
        data = latest["data"]
        return data.get("passed") is False and not data.get("failed_to_run", False)

    def has_observation(self, check_id: str) -> bool:
        return bool(self.checks.get(check_id, {}).get("runs"))

    def add(self, entry: dict) -> None:
        """Fold one entry into the history."""
        kind, check_id, data = entry["kind"], entry.get("check_id"), entry.get("data") or {}
        self.kinds_by_seq[entry["seq"]] = (kind, check_id)
        if kind == "note" or check_id is None:
            self.notes.append(entry)
            return
        history = self.check(check_id)
        if kind == "expectation":
            self._expectation(history, entry, data)
        elif kind == "observation":
            self._observation(history, entry, data)
        elif kind == "tolerance_change":
            self._tolerance_change(history, entry, data)
        elif kind == "expectation_change":
            self._expectation_change(history, entry, data)

    def _expectation(self, history: dict, entry: dict, data: dict) -> None:
        for target, key in HISTORY_KEY.items():
            new = tolerance_of(data, target)
            old = history[key]
            if old is not None and new is not None and new != old:
                history["unjustified_tolerance_changes"].append(
                    {"seq": entry["seq"], "target": target, "old": old, "new": new}
                )
            if new is not None:
                history[key] = new
        history["expectation"] = dict(data)  # a later expectation_change edits this copy only
        history["expectation_seq"] = entry["seq"]
        history["analytical_gradient"] = data.get("analytical_gradient")

    def _observation(self, history: dict, entry: dict, data: dict) -> None:
        history["runs"] += 1
        history["observation_seqs"].append(entry["seq"])
        history["latest_observation"] = entry
        if data.get("passed") is False:
            record = data.get("record") if isinstance(data.get("record"), dict) else {}
            history["failures_kept"].append(
                {
                    "seq": entry["seq"],
                    "time": entry.get("time"),
                    "expectation_seq": data.get("expectation_seq"),
                    "failed_to_run": bool(data.get("failed_to_run", False)),
                    "reason": data.get("reason"),
                    "failures": record.get("failures") or [],
                    "entry": entry,
                }
            )

    def _tolerance_change(self, history: dict, entry: dict, data: dict) -> None:
        target = data.get("target", "tolerance")
        key = HISTORY_KEY[target]
        item = {
            "seq": entry["seq"],
            "time": entry.get("time"),
            "target": target,
            "old": data.get("old"),
            "new": data.get("new"),
            "justification": data.get("justification"),
            "widened": bool(data.get("widened")),
            "tightened": bool(data.get("tightened")),
            "after_failure": bool(data.get("after_failure")),
        }
        history["tolerance_history"].append(item)
        if item["widened"] and item["after_failure"]:
            history["widened_after_failure"] = True
        if isinstance(data.get("new"), dict):
            history[key] = dict(data["new"])

    def _expectation_change(self, history: dict, entry: dict, data: dict) -> None:
        item = {
            "seq": entry["seq"],
            "time": entry.get("time"),
            "old": data.get("old"),
            "new": data.get("new"),
            "justification": data.get("justification"),
            "after_observation": bool(data.get("after_observation")),
            "via": data.get("via", "change"),
        }
        history["expectation_changes"].append(item)
        if item["after_observation"]:
            history["expectation_revised_after_observation"] = True
        history["analytical_gradient"] = data.get("new")
        if isinstance(history["expectation"], dict):
            history["expectation"]["analytical_gradient"] = data.get("new")


def build_history(entries) -> dict[str, dict]:
    """Every check's history from an iterable of entries in ledger order."""
    builder = HistoryBuilder()
    for entry in entries:
        builder.add(entry)
    return builder.checks


def public_history(history: dict) -> dict:
    """A history for export: observations named by seq instead of repeated in full."""
    result = {key: value for key, value in history.items() if key not in ("latest_observation", "failures_kept")}
    latest = history.get("latest_observation")
    result["latest_observation_seq"] = latest["seq"] if latest else None
    result["failures_kept"] = [{k: v for k, v in item.items() if k != "entry"} for item in history["failures_kept"]]
    return result


# -------------------- reader

CHUNK = 1 << 16
#: Ledger files whose history this process keeps (least recently read are dropped first).
KEPT_LEDGERS = 16
#: Bytes before the offset compared to notice an in-place rewrite (more than the hash suffix).
_TAIL_BYTES = 128


def fd_lines(fd: int, offset: int = 0, number: int = 0) -> Iterator[tuple[int, bytes, bool]]:
    """`(line number, bytes, complete)` of a file read in large blocks from `offset`.

    Each block starts where the last complete line ended: a partial line at a block's end is read
    again with the next block instead of being joined to it, which would copy every block once more
    into freshly mapped memory (half the cost of reading a ledger of 10^5 full records). A line
    longer than a block doubles the block until it fits; a last line without its newline (a torn
    write) comes out with `complete` false.
    """
    size = CHUNK * 64
    while True:
        block = os.pread(fd, size, offset)
        if not block:
            return
        parts = block.split(b"\n")
        partial = parts.pop()  # b"" when the block ends with a newline
        if not parts:  # no newline in the block
            if len(block) < size:
                yield number + 1, block, False
                return
            size *= 2
            continue
        for raw in parts:
            number += 1
            yield number, raw, True
        offset += len(block) - len(partial)


def count_lines(fd: int) -> int:
    """Complete lines in the file (used only when sealing a torn write)."""
    count, offset = 0, 0
    while True:
        chunk = os.pread(fd, CHUNK * 16, offset)
        if not chunk:
            return count
        count += chunk.count(b"\n")
        offset += len(chunk)


def light_entry(info: LineInfo) -> dict:
    """An entry dict from a LineInfo; an observation's data has no record."""
    if info.kind == "observation":
        data = {"expectation_seq": info.expectation_seq, "passed": info.passed, "failed_to_run": info.failed_to_run}
    else:
        data = info.data
    return {
        "seq": info.seq,
        "time": info.time,
        "kind": info.kind,
        "check_id": info.check_id,
        "data": data,
        "prev": info.prev,
        "hash": info.hash,
    }


def fresh_copy(value):
    """A copy of nested dicts and lists (their leaves are immutable), so callers may edit it."""
    kind = type(value)
    if kind is dict:
        return {key: fresh_copy(item) for key, item in value.items()}
    if kind is list:
        return [fresh_copy(item) for item in value]
    return value


class _Kept:
    """What this process knows of one ledger file: the light history of its complete lines
    up to `offset`, the last valid entry among them (the head), and how the file looked."""

    __slots__ = ("offset", "size", "mtime_ns", "ctime_ns", "tail", "builder", "head", "invalid_after_head")

    def __init__(self) -> None:
        self.offset, self.size, self.mtime_ns, self.ctime_ns, self.tail = 0, 0, 0, 0, b""
        self.builder = HistoryBuilder()
        self.head: tuple[int, str] = (0, GENESIS)
        self.invalid_after_head = False

    def still_describes(self, fd: int, stat: os.stat_result) -> bool:
        """Whether the file behind `fd` (with `stat`) is still the one read, up to `offset`."""
        if stat.st_size < self.offset:
            return False
        if stat.st_size == self.size and (stat.st_mtime_ns != self.mtime_ns or stat.st_ctime_ns != self.ctime_ns):
            return False
        return not self.tail or os.pread(fd, len(self.tail), self.offset - len(self.tail)) == self.tail

    def read_on(self, fd: int, stat: os.stat_result) -> None:
        """Fold the complete lines after `offset` into the history."""
        offset = self.offset
        for _number, raw, complete in fd_lines(fd, offset) if stat.st_size > offset else ():
            if not complete:
                break
            offset += len(raw) + 1
            self._fold(raw)
        if offset != self.offset:
            start = max(0, offset - _TAIL_BYTES)
            self.tail = os.pread(fd, offset - start, start)
            self.offset = offset
        self._saw(stat)

    def _fold(self, raw: bytes) -> None:
        try:
            info = read_line(raw, check_hash=False)  # neither the history nor the head uses hash_ok
        except LineError:
            self.invalid_after_head = True  # left to verify and to the next append's torn tail policy
            return
        self.builder.add(light_entry(info))
        self.head, self.invalid_after_head = (info.seq, info.hash), False

    def _saw(self, stat: os.stat_result) -> None:
        self.size, self.mtime_ns, self.ctime_ns = stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


_kept: OrderedDict[tuple[int, int], _Kept] = OrderedDict()
_kept_lock = threading.Lock()


def _current(fd: int, stat: os.stat_result, *, create: bool) -> _Kept | None:
    """The kept state of `fd`'s file brought up to date (call with `_kept_lock` held); None
    when there is none and `create` is false."""
    key = (stat.st_dev, stat.st_ino)
    kept = _kept.pop(key, None)  # put back last, as the most recently used
    if kept is not None and not kept.still_describes(fd, stat):
        kept = None
    if kept is None:
        if not create:
            return None
        kept = _Kept()
    kept.read_on(fd, stat)  # on an error the state is dropped, not kept
    _kept[key] = kept
    if len(_kept) > KEPT_LEDGERS:
        _kept.popitem(last=False)
    return kept


def light_histories(fd: int, check_id: str | None = None) -> dict[str, dict]:
    """Every check's light history in the locked ledger `fd` (only `check_id`'s when given),
    as copies, reading only the lines appended since the last read of the same file."""
    return histories_and_head(fd, check_id)[0]


def histories_and_head(
    fd: int, check_id: str | None = None, *, copy: bool = True
) -> tuple[dict[str, dict], tuple[int, str] | None]:
    """`light_histories`, and the head as `known_head` gives it at the same moment.

    `copy=False` hands out the kept histories themselves: only for reading, and only while
    the caller holds the ledger's exclusive lock (no read can change them until then)."""
    stat = os.fstat(fd)
    with _kept_lock:
        kept = _current(fd, stat, create=True)
        checks = kept.builder.checks
        copied = fresh_copy if copy else _same
        if check_id is not None:
            histories = {check_id: copied(checks[check_id])} if check_id in checks else {}
        else:
            histories = {name: copied(history) for name, history in checks.items()}
        return histories, _head_of(kept, stat)


def _same(value):
    return value


def known_head(fd: int) -> tuple[int, str] | None:
    """(seq, hash) of the last entry of the ledger `fd`, locked for an append, when this
    process has read the whole file and it ends in a valid entry; else None, and the caller
    reads the head from the file's end. Never starts a read from the first line."""
    stat = os.fstat(fd)
    with _kept_lock:
        return _head_of(_current(fd, stat, create=False), stat)


def _head_of(kept: _Kept | None, stat: os.stat_result) -> tuple[int, str] | None:
    if kept is None or kept.offset != stat.st_size or kept.invalid_after_head:
        return None  # a torn tail or invalid lines: the torn tail policy decides
    return kept.head


def appended(fd: int, line: bytes) -> None:
    """Fold a line this process has just written and fsynced at the end of the locked `fd`
    into the kept state, when that state ended exactly where the line starts."""
    stat = os.fstat(fd)
    with _kept_lock:
        key = (stat.st_dev, stat.st_ino)
        kept = _kept.get(key)
        if kept is None or kept.offset + len(line) != stat.st_size:
            return
        for raw in line[:-1].split(b"\n"):  # canonical JSON holds no raw newline
            kept._fold(raw)
        kept.offset = stat.st_size
        kept.tail = (kept.tail + line)[-_TAIL_BYTES:]
        kept._saw(stat)


def kept_count() -> int:
    """How many ledger files this process keeps a history of (at most KEPT_LEDGERS)."""
    with _kept_lock:
        return len(_kept)


def forget_histories() -> None:
    """Drop every kept history (the next read of each ledger starts from its first line)."""
    with _kept_lock:
        _kept.clear()
