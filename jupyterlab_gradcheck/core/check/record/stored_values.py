"""Stored values: a tensor of more than `INLINE_ELEMENTS` elements in a record, by its hash.

A record keeps a large tensor (an input, an expectation, an observation's value) not as a nested
JSON list but as its *stored form*:

    {"stored": {"sha256": "<64 hex>", "shape": [100, 100], "dtype": "float64", "bytes": 80128},
     "summary": {"min": ..., "max": ..., "mean": ..., "norm": ..., "nonfinite": 0, "head": [...]}}

The bytes are a safetensors file holding one tensor named "value" (a complex tensor as its
`view_as_real` pair), kept in a content-addressed store beside the ledger
(core/ledger/blob_store.py) and named by the SHA-256 of the file. So a record and a ledger line
stay small whatever the tensors' size, and the chained line still covers the tensor through its
hash. Values of at most `INLINE_ELEMENTS` elements (the course's exercises) stay inline.

Between the check that produced a blob and the append that writes it, its bytes wait in this
process's pending cache (`PENDING`), bounded in bytes. Torch-free, so the server process can
validate the form and take a worker's blobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import struct
import threading
from collections import Counter, OrderedDict

from ...errors import LedgerError, SpecError
from ...expr.limits import DEFAULT_LIMITS, Limits

#: Values with more elements than this are stored; at most this many stay inline, as they always were.
INLINE_ELEMENTS = 256

#: Values of the summary's head: the first elements, flattened.
HEAD_ELEMENTS = 8

#: The dtypes a stored value may name, each with the safetensors dtype of its file and the
#: number of real values per element (2 for a complex dtype, stored as its `view_as_real` pair).
STORED_DTYPES = {"float64": ("F64", 1), "float32": ("F32", 1), "float16": ("F16", 1), "bfloat16": ("BF16", 1)}
STORED_DTYPES |= {"complex128": ("F64", 2), "complex64": ("F32", 2), "bool": ("BOOL", 1), "uint8": ("U8", 1)}
STORED_DTYPES |= {f"int{bits}": (f"I{bits}", 1) for bits in (8, 16, 32, 64)}
#: The safetensors dtypes a blob may hold.
FILE_DTYPES = {code for code, _ in STORED_DTYPES.values()}

#: The byte budget of the pending cache. The blobs of the check under way are pinned until its
#: append (`PendingBlobs.holding`), whatever their size; past the budget, older blobs are evicted,
#: so runs without a ledger (`check(..., ledger=False)`) cannot grow the cache forever.
PENDING_BUDGET_BYTES = int(os.environ.get("GRADCHECK_PENDING_BLOB_BYTES", 2 * 1024**3))

#: A blob's name: the SHA-256 of its bytes, in lowercase hex.
SHA_PATTERN = re.compile(r"[0-9a-f]{64}")
_STORED_KEYS = {"sha256", "shape", "dtype", "bytes"}
_SUMMARY_KEYS = {"min", "max", "mean", "norm", "nonfinite", "head"}


def is_stored_value(value) -> bool:
    """Whether a record value is in the stored form `{"stored": {...}, "summary": {...}}`."""
    return isinstance(value, dict) and "stored" in value and set(value) <= {"stored", "summary"}


def stored_sha(value) -> str:
    """The SHA-256 a stored value names."""
    return value["stored"]["sha256"]


def stored_shape(value, field: str = "value", limits: Limits = DEFAULT_LIMITS) -> list[int]:
    """The shape of a stored value after checking its form; SpecError naming the first problem.

    The rank limit applies as to a list; `record_values.shape_of` applies the element cap.
    """
    stored = value.get("stored")
    if not isinstance(stored, dict) or set(stored) != _STORED_KEYS:
        raise SpecError(
            '{where}: a stored value is {{"stored": {{"sha256", "shape", "dtype", "bytes"}}, "summary": {{...}}}}',
            where=field,
            field=field,
        )
    sha, shape, dtype, size = stored["sha256"], stored["shape"], stored["dtype"], stored["bytes"]
    if not isinstance(sha, str) or not SHA_PATTERN.fullmatch(sha):
        raise SpecError("{where}: a stored value's sha256 is 64 lowercase hex digits", where=field, field=field)
    if dtype not in STORED_DTYPES:
        raise SpecError(
            "{where}: a stored value's dtype {dtype} is not one of {names}",
            where=field,
            dtype=str(dtype)[:30],
            names=", ".join(STORED_DTYPES),
            field=field,
        )
    if (
        not isinstance(shape, list)
        or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 2**31 for n in shape)
        or not isinstance(size, int)
        or isinstance(size, bool)
        or size < 8
    ):
        raise SpecError(
            "{where}: a stored value's shape is a list of sizes and its bytes a file size", where=field, field=field
        )
    if len(shape) > limits.max_input_rank:
        raise SpecError(
            "{where}: a stored value of shape {shape} has more than {max_input_rank} dimensions",
            where=field,
            shape=shape[:8],
            max_input_rank=limits.max_input_rank,
            field=field,
        )
    summary = value.get("summary")
    if summary is not None and (not isinstance(summary, dict) or not set(summary) <= _SUMMARY_KEYS):
        raise SpecError(
            "{where}: a stored value's summary holds only min, max, mean, norm, nonfinite and head",
            where=field,
            field=field,
        )
    return list(shape)


def stored_values_in(data):
    """Every stored value anywhere in `data` (a record, an entry's data), in order of appearance.

    Lists of plain numbers (inline values) are skipped at C speed, so the walk costs little
    beside the canonical JSON of the same data.
    """
    found = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if is_stored_value(item) and isinstance(item.get("stored"), dict):
                found.append(item)
                continue
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            if item and set(map(type, item)) <= {float, int}:
                continue
            stack.extend(reversed(item))
    return found


def without_summaries(value):
    """`value` with each stored value reduced to its `stored` part (hash, shape, dtype, size): what
    names the tensor. A check's id and the comparison of two expectations read this, so a summary
    computed again (on another device, in another order) never makes the same tensor differ."""
    if isinstance(value, dict):
        if is_stored_value(value):
            return {"stored": value["stored"]}
        return {key: without_summaries(item) for key, item in value.items()}
    if isinstance(value, list) and value and not set(map(type, value)) <= {int, float}:
        return [without_summaries(item) for item in value]
    return value


def safetensors_blob(code: str, shape: list[int], raw: bytes) -> bytes:
    """A safetensors file holding one tensor named "value": an 8-byte little-endian header length, the
    JSON header (no metadata) padded with spaces to a multiple of 8 bytes, the raw little-endian data.
    Byte for byte what `safetensors.torch.save({"value": t})` writes (a test holds it to that), made
    here without the package and without a second copy of the data."""
    header = json.dumps(
        {"value": {"dtype": code, "shape": list(shape), "data_offsets": [0, len(raw)]}}, separators=(",", ":")
    ).encode("utf-8")
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + raw


def blob_header(blob: bytes) -> tuple[str, list[int], int, int]:
    """(safetensors dtype, shape, data start, data end) of the one tensor "value" in a blob; LedgerError
    when the bytes are not such a file."""
    if len(blob) < 8:
        raise LedgerError("a blob shorter than its header")
    (length,) = struct.unpack("<Q", blob[:8])
    if length > len(blob) - 8:
        raise LedgerError("a blob's header runs past its end")
    try:
        header = json.loads(blob[8 : 8 + length])
        entry = header["value"]
        begin, end = entry["data_offsets"]
        dtype, shape = entry["dtype"], list(entry["shape"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LedgerError("a blob's header does not describe one tensor named value") from exc
    start = 8 + length
    if dtype not in FILE_DTYPES or not 0 <= begin <= end <= len(blob) - start:
        raise LedgerError("a blob's header names dtype {dtype} or offsets past its end", dtype=str(dtype)[:10])
    return dtype, shape, start + begin, start + end


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of a blob's bytes, as its name in the store."""
    return hashlib.sha256(data).hexdigest()


class PendingBlobs:
    """Blob bytes produced in this process (or received from a worker) and not yet needed again,
    keyed by SHA-256, oldest evicted first past `budget` bytes.

    A blob that is pinned is never evicted: those a thread puts inside `holding()` (one check, from
    its inputs to its appends) until the block ends, and those put with `pin=True` (a worker's
    blobs in the server) until `discard`. So one check's blobs always wait for its append, whatever
    their size, while runs without a ledger cannot grow the cache past the budget. Thread-safe: the
    server's handlers and a kernel's background threads share it.
    """

    def __init__(self, budget: int = PENDING_BUDGET_BYTES):
        self.budget = budget
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._pinned: Counter[str] = Counter()
        self._holds = threading.local()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def holding(self):
        """Within the block, the blobs this thread puts are pinned (see the class)."""
        stack = self._holds.__dict__.setdefault("stack", [])
        held: set[str] = set()
        stack.append(held)
        try:
            yield
        finally:
            # By identity: a nested hold's set can equal this one's, and must not be removed for it.
            del stack[next(i for i, other in enumerate(stack) if other is held)]
            with self._lock:
                self._pinned.subtract(held)
                self._pinned = +self._pinned  # drop the counts that reached zero
                self._evict()

    def put(self, sha: str, data: bytes, *, verify: bool = False, pin: bool = False) -> None:
        """Keep `data` under `sha`; with `verify`, refuse bytes whose hash is not `sha` (bytes that
        crossed a process boundary); with `pin`, keep them until `discard`."""
        if verify and sha256_hex(data) != sha:
            raise SpecError("blob {sha}: its bytes do not hash to its name", sha=sha[:16])
        with self._lock:
            for held in self._holds.__dict__.get("stack", []):
                if sha not in held:
                    held.add(sha)
                    self._pinned[sha] += 1
            if pin:
                self._pinned[sha] += 1
            if sha in self._blobs:
                self._blobs.move_to_end(sha)
                return
            self._blobs[sha] = bytes(data)
            self._size += len(data)
            self._evict()

    def _evict(self) -> None:
        """Drop the oldest blobs that are not pinned while over the budget, keeping the newest."""
        for sha in list(self._blobs)[:-1]:
            if self._size <= self.budget:
                return
            if not self._pinned[sha]:
                self._size -= len(self._blobs.pop(sha))

    def get(self, sha: str) -> bytes | None:
        """The bytes kept under `sha`, or None."""
        with self._lock:
            data = self._blobs.get(sha)
            if data is not None:
                self._blobs.move_to_end(sha)
            return data

    def __contains__(self, sha: str) -> bool:
        with self._lock:
            return sha in self._blobs

    def pin(self, shas) -> None:
        """Keep the blobs named until as many `discard`s: a server request that parsed them, until its appends."""
        with self._lock:
            for sha in shas:
                if sha in self._blobs:
                    self._pinned[sha] += 1

    def discard(self, shas) -> None:
        """Release one pin of each blob named, and forget it once no pin is left (the server, once an append
        has written a worker's blobs): two requests holding the same bytes each keep them until their own."""
        with self._lock:
            for sha in shas:
                if self._pinned[sha] > 1:
                    self._pinned[sha] -= 1
                    continue
                data = self._blobs.pop(sha, None)
                self._size -= 0 if data is None else len(data)
                self._pinned.pop(sha, None)

    @property
    def size(self) -> int:
        """Bytes held now."""
        return self._size

    def clear(self) -> None:
        """Forget every blob (tests, and a worker after it has handed its blobs over)."""
        with self._lock:
            self._blobs.clear()
            self._pinned.clear()
            self._size = 0


#: The process-wide pending cache.
PENDING = PendingBlobs()
