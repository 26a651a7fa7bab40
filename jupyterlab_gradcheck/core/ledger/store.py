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

This process keeps what it has read and written of each ledger (`light_histories`, below), so a
check's history and the head an append chains onto come from the lines added since, not
from the whole file; whatever another writer did to the file in between is noticed first.
The module also holds a line's canonical form and hash (`read_line`), the locks, and what an
append refuses before writing.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...witness import client as witness_client
from ..check.record.spec import refuse_meaningless_rtol
from ..errors import JustificationRequired, LedgerError, SpecError
from ..expr.parser import DEFAULT_LIMITS
from ..i18n import Message
from ..values.blobs import fsync_folder, store_dir_for, write_blobs

# -------------------- line format
# The byte layout of one ledger line, and the hash that chains the lines together.
#
# An entry is `{"seq", "time", "kind", "check_id", "data", "prev", "hash"}`. Its hash is the
# SHA-256 of the canonical JSON of the entry without `hash` (keys sorted, separators `,` and
# `:`, UTF-8 kept as is). The line on disk is exactly that canonical text with
# `,"hash":"<64 hex>"` inserted before the closing brace, so:
#
# - a reader can check the hash over the stored bytes without decoding the record, which keeps
#   `verify` fast on ledgers of 10^5 entries holding full check records;
# - the fields that chain the lines (`kind`, `prev`, `seq`, `time`, `hash`) sit at a fixed
#   place at the end of the line, and `check_id` at its start;
# - the line is still an ordinary JSON object that any JSON Lines reader can load.

# -------------------- chain hashing
# Checking the stored hash of every line of a ledger, on a second core while the first decodes.
#
# Hashing is most of the cost of verifying a ledger of full records. `hashed_ahead` hashes a few
# batches ahead in a thread (hashlib releases the GIL on large buffers); `hash_in_child` forks a
# process that hashes a whole large file, free of the interpreter lock altogether.

Lines = Iterable[tuple[int, bytes, bool]]
#: Lines hashed per batch, and how many batches the hashing thread may run ahead.
BATCH, AHEAD = 256, 4


def hash_batch(batch: list) -> list[bool]:
    return [complete and stored_hash_ok(raw) for _number, raw, complete in batch]


def hashed_ahead(lines: Lines) -> Iterator[tuple[list, list[bool]]]:
    """Batches of lines with their `hash_ok` flags, hashed a few batches ahead in a thread.

    Hashing is most of the cost of verifying a ledger of full records; hashlib releases the
    GIL on large buffers, so a second core hashes while this one decodes.
    """
    queue: collections.deque = collections.deque()
    with ThreadPoolExecutor(max_workers=1) as pool:
        batch: list = []
        for item in lines:
            batch.append(item)
            if len(batch) == BATCH:
                queue.append((batch, pool.submit(hash_batch, batch)))
                batch = []
                if len(queue) > AHEAD:
                    done, future = queue.popleft()
                    yield done, future.result()
        if batch:
            queue.append((batch, pool.submit(hash_batch, batch)))
        while queue:
            done, future = queue.popleft()
            yield done, future.result()


def hash_in_child(lines_of_file: Callable[[], Lines]) -> Callable[[], tuple[int, list[int]] | None]:
    """Fork a child that checks the stored hash of every complete line of a ledger file.

    On a large ledger a hashing thread still competes with the decoding loop for the
    interpreter lock (everything around each hashlib call holds it); a second process does
    not. Returns a function that waits for the child and gives `(last complete line, line
    numbers whose hash is wrong)`, or None when no child could run (the caller then verifies
    with hashing in a thread).
    """
    import json
    import os

    if not hasattr(os, "fork"):
        return lambda: None
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return lambda: None
    if pid == 0:  # the child: hash, report, and leave without running any cleanup
        status = 1
        try:
            os.close(read_end)
            upto, bad = 0, []
            for number, raw, complete in lines_of_file():
                if not complete:
                    break
                upto = number
                if not stored_hash_ok(raw):
                    bad.append(number)
            with os.fdopen(write_end, "w") as out:
                json.dump([upto, bad], out)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)

    def collect() -> tuple[int, list[int]] | None:
        with os.fdopen(read_end) as answer:
            text = answer.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not text:
            return None
        upto, bad = json.loads(text)
        return upto, bad

    return collect


# -------------------- line format

GENESIS = "0" * 64
KINDS = ("expectation", "observation", "tolerance_change", "expectation_change", "note")
ENTRY_KEYS = frozenset(("seq", "time", "kind", "check_id", "data", "prev", "hash"))

#: Length of `,"hash":"<64 hex>"}` at the end of every line.
HASH_SUFFIX_LEN = 75
#: The longest possible tail from `,"kind":` to the end, so the tail is searched only there.
_TAIL_MAX = 400

_TAIL = re.compile(
    rb',"kind":"([a-z_]{1,40})","prev":"([0-9a-f]{64})","seq":(0|[1-9][0-9]{0,17}),'
    rb'"time":"([^"\\]{1,64})","hash":"([0-9a-f]{64})"\}\Z'
)
#: The start of a line, and for an observation the fixed front of its data. A check id without an
#: escape is matched by the first, faster alternative; the second takes the same ids and escaped ones.
_HEAD = re.compile(
    rb'\A\{"check_id":(null|"[^"\\]{0,4096}"|"(?:[^"\\]|\\.){0,4096}"),"data":\{'
    rb'(?:"expectation_seq":(0|[1-9][0-9]{0,17}),("failed_to_run":true,)?"passed":(true|false),)?'
)
_TOLERANCE_KEYS = (("tolerance", b'"tolerance":{'), ("finite_difference", b'"finite_difference":{'))
_ATOL_RTOL = re.compile(rb'"atol":([-0-9.eE+]{1,40}),"rtol":([-0-9.eE+]{1,40})[,}]')


#: The encoder `json.dumps` would build for these options on every call, built once.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(obj: Any) -> str:
    """The one serialisation that is hashed: sorted keys, no spaces, UTF-8 unescaped."""
    return _CANONICAL.encode(obj)


def jsonable(value: Any) -> Any:
    """A copy of `value` that canonical JSON accepts.

    Non-finite floats become the strings "NaN", "Infinity" and "-Infinity" (a gradient can be
    NaN, and strict JSON has no spelling for it); tuples become lists; anything else that JSON
    cannot hold is refused with a LedgerError naming its type.

    A check record is a few hundred plain dicts, lists, strings and numbers, so those exact
    types are handled first and their plain leaves copied without a call; every other value
    (subclasses included) goes through `_jsonable_other`.
    """
    kind = type(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise LedgerError(
                    "ledger data keys must be strings, got {type} {key!r}", type=type(key).__name__, key=key
                )
            item_kind = type(item)
            if (
                item_kind is str
                or item_kind is int
                or item_kind is bool
                or item is None
                or (item_kind is float and _isfinite(item))
            ):
                out[key] = item
            else:
                out[key] = jsonable(item)
        return out
    if kind is list:
        return [
            item if type(item) in _PLAIN_LEAVES and (type(item) is not float or _isfinite(item)) else jsonable(item)
            for item in value
        ]
    return _jsonable_other(value)


_PLAIN_LEAVES = frozenset((str, int, bool, float, type(None)))
_isfinite = math.isfinite


def _jsonable_other(value: Any) -> Any:
    """`jsonable` for everything but a plain dict or list."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise LedgerError(
                    "ledger data keys must be strings, got {type} {key!r}", type=type(key).__name__, key=key
                )
            out[key] = jsonable(item)
        return out
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if hasattr(value, "tolist") and callable(value.tolist):  # a numpy array or torch tensor
        return jsonable(value.tolist())
    raise LedgerError("ledger data cannot hold a value of type {type}", type=type(value).__name__)


#: The event of the note that opens every ledger, at seq 0, naming it with a random id.
GENESIS_EVENT = "genesis"
GENESIS_LINE_MAX = 1024


def genesis_entry(time: str) -> dict:
    """The entry (without its hash) that opens a new ledger: seq 0, a random `ledger_id`.

    Two ledgers of the same notebook are told apart by it, so a fresh ledger written after a
    deleted one is a new ledger, not the old one continued.
    """
    import secrets

    return {
        "seq": 0,
        "time": time,
        "kind": "note",
        "check_id": None,
        "prev": GENESIS,
        "data": {
            "event": GENESIS_EVENT,
            "ledger_id": secrets.token_hex(16),
            "text": "a new ledger; its id tells it apart from any other ledger of this notebook",
        },
    }


def is_genesis(info: LineInfo) -> bool:
    """Whether a read line is a genesis entry (seq 0, a note naming a ledger id)."""
    return (
        info.seq == 0
        and info.kind == "note"
        and isinstance(info.data, dict)
        and info.data.get("event") == GENESIS_EVENT
        and isinstance(info.data.get("ledger_id"), str)
    )


def genesis_id(raw: bytes) -> str | None:
    """The ledger id of a stored first line, or None when it is not a genesis entry."""
    try:
        info = read_line(raw)
    except LineError:
        return None
    return info.data["ledger_id"] if is_genesis(info) and info.prev == GENESIS else None


def make_line(entry_without_hash: dict) -> tuple[bytes, str]:
    """The stored line (with its newline) and the hash of an entry."""
    body = canonical_json(entry_without_hash).encode("utf-8")
    digest = hashlib.sha256(body).hexdigest()
    line = body[:-1] + b',"hash":"' + digest.encode("ascii") + b'"}\n'
    return line, digest


@dataclass(slots=True)
class LineInfo:
    """What a reader learns from one line without decoding its record.

    `data` is decoded for every kind except `observation`, whose record can be large; for an
    observation, `expectation_seq`, `passed` and `failed_to_run` are read from the fixed
    front of its data instead.
    """

    seq: int
    kind: str
    check_id: str | None
    prev: str
    time: str
    hash: str
    hash_ok: bool
    data: dict | None = None
    expectation_seq: int | None = None
    passed: bool | None = None
    failed_to_run: bool = False


class LineError(ValueError):
    """A line that is not a well-formed entry; the message says why."""


def stored_hash_ok(raw: bytes) -> bool:
    """Whether the hash at the end of a line is the SHA-256 of the canonical entry before it.

    Works on the stored bytes without copying them, so it can run in another thread
    (hashlib releases the GIL on large buffers) while the caller decodes the next lines.
    """
    if len(raw) <= HASH_SUFFIX_LEN:
        return False
    digest = hashlib.sha256(memoryview(raw)[:-HASH_SUFFIX_LEN])
    digest.update(b"}")
    return digest.hexdigest().encode("ascii") == raw[-66:-2]


def _expectation_tolerances(raw: bytes, start: int, end: int) -> dict | None:
    """`{"tolerance": {atol, rtol}, "finite_difference": {atol, rtol}}` read from an
    expectation's canonical data without decoding it, or None to decode it instead.

    In canonical JSON these two objects open with `"atol":..,"rtol":..`, and the quoted key
    cannot occur inside a string (its quotes would be escaped) nor as an input name with an
    object value (inputs and gradients are numbers, lists or strings).
    """
    found = {}
    find = raw.find
    for name, key in _TOLERANCE_KEYS:
        at = find(key, start, end)
        if at < 0 or find(key, at + 1, end) >= 0:
            return None
        match = _ATOL_RTOL.match(raw, at + len(key))
        if match is None:
            return None
        atol, rtol = match.groups()
        try:
            found[name] = {"rtol": _number(rtol), "atol": _number(atol)}
        except ValueError:
            return None
    return found


#: Numbers already read from tolerance fields: a ledger repeats a few values on every expectation.
_NUMBERS: dict[bytes, float] = {}


def _number(text: bytes) -> float:
    """float(text), remembered for the next expectation that writes the same tolerance."""
    value = _NUMBERS.get(text)
    if value is None:
        value = float(text)
        if len(_NUMBERS) >= 4096:  # a ledger of ever new values: start over rather than grow
            _NUMBERS.clear()
        _NUMBERS[text] = value
    return value


def read_line(raw: bytes, *, check_hash: bool = True, decode: bool = True) -> LineInfo:
    """Read the chaining fields of one stored line (without its newline).

    The hash is checked over the stored bytes unless `check_hash` is false (the caller
    checks it with `stored_hash_ok`); a line whose layout is not the canonical one raises
    LineError with the reason. With `decode=False` an expectation's data holds only its two
    tolerances (all that verify needs from it).
    """
    at = raw.rfind(b',"kind":"', max(0, len(raw) - _TAIL_MAX))
    tail = _TAIL.match(raw, at) if at >= 0 else None
    head = _HEAD.match(raw)
    if tail is None or head is None:
        raise LineError(_why_malformed(raw))
    kind, prev, seq, time, digest = tail.groups()
    quoted, expectation_seq, failed_to_run, passed = head.groups()
    check_id = quoted[1:-1].decode("utf-8") if b"\\" not in quoted and quoted != b"null" else json.loads(quoted)
    kind = kind.decode("ascii")
    info = LineInfo(
        int(seq),
        kind,
        check_id,
        prev.decode("ascii"),
        time.decode("utf-8"),
        digest.decode("ascii"),
        stored_hash_ok(raw) if check_hash else False,
    )
    if kind == "observation":
        if expectation_seq is None:
            raise LineError(Message("observation entry without expectation_seq and passed at the front of its data"))
        info.expectation_seq, info.failed_to_run, info.passed = (
            int(expectation_seq),
            failed_to_run is not None,
            passed == b"true",
        )
    else:
        data_start = head.end() - 1  # the optional observation front did not match: just past "data":
        if not decode and kind == "expectation":
            info.data = _expectation_tolerances(raw, data_start, tail.start())
            if info.data is not None:
                return info
        try:
            info.data = json.loads(raw[data_start : tail.start()])
        except ValueError as exc:
            raise LineError(Message("its data is not valid JSON ({exc})", exc=exc)) from None
    return info


def read_entry(raw: bytes) -> dict:
    """Decode a whole stored line into its entry dict, checking its keys."""
    try:
        entry = json.loads(raw)
    except ValueError as exc:
        raise LineError(Message("not valid JSON ({exc})", exc=exc)) from None
    if not isinstance(entry, dict) or set(entry) != ENTRY_KEYS:
        raise LineError(Message("not an entry object with exactly seq, time, kind, check_id, data, prev, hash"))
    return entry


def is_canonical(raw: bytes, entry: dict) -> bool:
    """Whether a stored line is byte for byte what the writer produces for its entry."""
    rest = {key: value for key, value in entry.items() if key != "hash"}
    try:
        line, _ = make_line(rest)
    except (ValueError, TypeError):
        return False
    return line[:-1] == raw


def _why_malformed(raw: bytes) -> str:
    """The most precise one-line reason a line does not have the canonical layout."""
    try:
        entry = json.loads(raw)
    except ValueError as exc:
        return Message("not valid JSON ({exc})", exc=exc)
    if not isinstance(entry, dict):
        return Message("not a JSON object")
    missing = sorted(ENTRY_KEYS - set(entry))
    extra = sorted(set(entry) - ENTRY_KEYS)
    if missing:
        return Message("missing {keys}", keys=", ".join(missing))
    if extra:
        return Message("unexpected key {keys}", keys=", ".join(extra))
    if entry.get("kind") not in KINDS:
        return Message("unknown kind {kind!r}", kind=entry.get("kind"))
    return Message("not in the canonical layout (keys sorted, no spaces, hash last): it was rewritten by hand")


# -------------------- reader
# Reading a ledger's lines, and what this process keeps of each ledger between uses.
#
# `run_and_record` (through `LedgeredRun.declare`) reads the check's history before every run (the ledger's current tolerance
# and expectation decide what is run and written), and every append chains onto the last
# entry. Decoding the whole file, or its end, each time costs time in proportion to the
# ledger, so this process keeps, per ledger file, the light history built so far, the last
# valid entry (the head) and the byte offset it has read or written up to: the next read
# decodes only the lines appended since, and the lines this process appends are folded in as
# they are written. The kept state is used only while it still describes the file:
#
# - the same file (device and inode): a ledger replaced by another file is read from the start;
# - not shorter than the offset: a truncated ledger is read from the start;
# - the bytes just before the offset (the end of the last line read, whose hash chains every
#   line before it) are unchanged: a ledger rewritten in place is read from the start;
# - when the size is unchanged but the modification or change time moved, the file was
#   rewritten without growing, and it is read from the start.
#
# A rewrite of earlier lines that keeps the size, the last line and both timestamps is not
# noticed here; such a file no longer verifies (the hash chain breaks), which `verify` reports.
# Lines are read under the caller's lock, so a cooperating writer is never seen half-written;
# bytes after the last newline (a torn tail) are left unread until a newline completes them.

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


# -------------------- store

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
