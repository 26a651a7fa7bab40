"""The byte layout of one ledger line, and the hash that chains the lines together.

An entry is `{"seq", "time", "kind", "check_id", "data", "prev", "hash"}`. Its hash is the
SHA-256 of the canonical JSON of the entry without `hash` (keys sorted, separators `,` and
`:`, UTF-8 kept as is). The line on disk is exactly that canonical text with
`,"hash":"<64 hex>"` inserted before the closing brace, so:

- a reader can check the hash over the stored bytes without decoding the record, which keeps
  `verify` fast on ledgers of 10^5 entries holding full check records;
- the fields that chain the lines (`kind`, `prev`, `seq`, `time`, `hash`) sit at a fixed
  place at the end of the line, and `check_id` at its start;
- the line is still an ordinary JSON object that any JSON Lines reader can load.
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import LedgerError
from ..i18n import Message

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
