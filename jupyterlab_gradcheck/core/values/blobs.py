"""The blob store beside a ledger: `lab1.gradcheck.jsonl` -> `lab1.gradcheck.blobs/<sha256>.safetensors`.

A record's stored values (core/values/form.py) name their tensors by the SHA-256
of a safetensors file. The append writes every blob a line references, fsynced, before the line
(`write_blobs`), so a line never names a blob that a crash lost; the store is content-addressed,
so a file already there is kept. Verify checks each referenced blob against its name
(`blob_problem`), and the server reads values out of a blob (`read_blob_values`) by parsing the
safetensors layout itself: an 8-byte little-endian header length, a JSON header, the raw bytes.

Torch-free and numpy-free: the jupyter server process uses all of it.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import sys
from array import array
from pathlib import Path

from ..errors import LedgerError, SpecError
from ..i18n import Message
from .form import PENDING, SHA_PATTERN, STORED_DTYPES, PendingBlobs, blob_header, sha256_hex, stored_values_in

# -------------------- blob store

#: The file name's suffix of a blob.
BLOB_SUFFIX = ".safetensors"

#: Bytes hashed per read when a blob is checked: a blob of any size is hashed in constant memory.
HASH_CHUNK = 1 << 20

#: safetensors dtype -> (array typecode, bytes per value); F16 and BF16 (no typecode) are decoded apart.
_ARRAY_CODES = {"F64": ("d", 8), "F32": ("f", 4), "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2)}
_ARRAY_CODES |= {"I8": ("b", 1), "U8": ("B", 1), "BOOL": ("B", 1), "F16": (None, 2), "BF16": (None, 2)}


def store_dir_for(ledger_path) -> Path:
    """The blob folder of a ledger: its name without `.jsonl`, plus `.blobs`."""
    path = Path(ledger_path)
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(stem + ".blobs")


def blob_path(store_dir, sha: str) -> Path:
    """The file of one blob."""
    return Path(store_dir) / f"{sha}{BLOB_SUFFIX}"


def referenced_shas(data) -> list[str]:
    """The distinct SHA-256s of the stored values anywhere in `data`, in order of first appearance."""
    shas: list[str] = []
    for value in stored_values_in(data):
        sha = value["stored"].get("sha256")
        if isinstance(sha, str) and SHA_PATTERN.fullmatch(sha) and sha not in shas:
            shas.append(sha)
    return shas


def write_blobs(store_dir, data, *, pending: PendingBlobs = PENDING) -> list[str]:
    """Write every blob that `data` references and the store lacks, from the pending cache: each to
    a temporary name, fsynced, renamed, and the folder fsynced. Returns the shas referenced.

    A referenced sha neither in the store nor pending is bad input (nothing is written for it, and
    the caller appends nothing): a line may not name a tensor nobody can read.
    """
    shas = referenced_shas(data)  # one walk of the data, for the check and the writes
    _require(store_dir, shas, pending)  # every one is there before any is written
    folder = Path(store_dir)
    wrote = False
    for sha in shas:
        target = blob_path(folder, sha)
        if target.exists():
            continue
        blob = pending.get(sha)
        if blob is None:  # evicted since require_blobs looked: refused all the same
            raise LedgerError("blob {sha} left the pending cache before it was written", sha=sha[:16])
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".{sha}.{os.getpid()}.tmp"
        try:
            with open(temporary, "wb") as handle:
                handle.write(blob)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, target)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise LedgerError("cannot write blob {sha}: {error}", sha=sha[:16], error=str(exc)) from exc
        wrote = True
    if wrote:
        fsync_folder(folder)
    return shas


def require_blobs(store_dir, data, *, pending: PendingBlobs = PENDING) -> None:
    """SpecError (bad input, nothing run or appended) for the first stored value in `data` whose blob is
    neither pending in this process nor in `store_dir` (None: no store)."""
    _require(store_dir, referenced_shas(data), pending)


def _require(store_dir, shas: list[str], pending: PendingBlobs) -> None:
    for sha in shas:
        if sha not in pending and (store_dir is None or not blob_path(store_dir, sha).is_file()):
            where = Path(store_dir).name if store_dir is not None else "no ledger's store"
            raise SpecError("stored value {sha}: no such blob in this process or in {store}", sha=sha[:16], store=where)


def blob_digest(store_dir, sha: str) -> str | None:
    """The SHA-256 of the file named `sha` in the store, hashed in chunks; None when it is absent."""
    try:
        handle = open(blob_path(store_dir, sha), "rb")
    except FileNotFoundError:
        return None
    digest = hashlib.sha256()
    with handle:
        for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def blob_problem(store_dir, sha: str, digests: dict | None = None) -> str | None:
    """ "missing" when the store has no file for `sha`, "changed" when the file's bytes hash to
    something else (edited, or another blob copied under this name), else None.

    `digests` (sha -> digest or None) lets one verify run hash each distinct blob once.
    """
    if digests is not None and sha in digests:
        digest = digests[sha]
    else:
        digest = blob_digest(store_dir, sha)
        if digests is not None:
            digests[sha] = digest
    if digest is None:
        return "missing"
    return None if digest == sha else "changed"


def blob_bytes(store_dir, sha: str, *, pending: PendingBlobs = PENDING) -> bytes | None:
    """A blob's bytes: from the pending cache, else from the store; None when neither has it."""
    data = pending.get(sha)
    if data is not None:
        return data
    try:
        return blob_path(store_dir, sha).read_bytes() if store_dir is not None else None
    except FileNotFoundError:
        return None


def decode_values(blob: bytes, start: int = 0, stop: int | None = None) -> tuple[str, list[int], list]:
    """(safetensors dtype, file shape, the flat values `start:stop` as Python numbers) of a blob,
    torch-free; only the bytes of that slice are decoded."""
    dtype, shape, begin, end = blob_header(blob)
    code, width = _ARRAY_CODES[dtype]
    count = (end - begin) // width
    stop = count if stop is None else max(0, min(count, stop))
    start = max(0, min(start, stop))
    raw = blob[begin + start * width : begin + stop * width]
    if code is not None:
        values = array(code)
        values.frombytes(raw)
        if sys.byteorder != "little":
            values.byteswap()  # safetensors is little-endian
        out = values.tolist()
        return dtype, shape, [bool(v) for v in out] if dtype == "BOOL" else out
    halves = struct.unpack(f"<{len(raw) // 2}H", raw)
    if dtype == "F16":
        return dtype, shape, list(struct.unpack(f"<{len(halves)}e", raw))
    widened = struct.pack(f"<{len(halves)}I", *(h << 16 for h in halves))  # bfloat16: the top half of a float32
    return dtype, shape, list(struct.unpack(f"<{len(halves)}f", widened))


def read_blob_values(
    store_dir, sha: str, *, offset: int = 0, limit: int | None = None, dtype: str | None = None, pending=PENDING
) -> dict:
    """`{"shape", "dtype", "values", "offset", "total"}` of a stored tensor: its flat values from
    element `offset`, at most `limit` of them.

    A blob holds no metadata, so a complex tensor's file is its `view_as_real` float pair: pass the
    record's `dtype` ("complex128", "complex64") to read it back as complex, with `shape` the
    record's (no pair dimension) and each element an `[re, im]` pair. LedgerError when the blob
    is missing or its bytes do not match its name.
    """
    pending_blob = pending.get(sha)
    key = None if pending_blob is not None or store_dir is None else _file_key(blob_path(store_dir, sha))
    blob = pending_blob if pending_blob is not None else blob_bytes(store_dir, sha, pending=pending)
    if blob is None:
        raise LedgerError("blob {sha} is missing", sha=sha[:16])
    if key is None or key not in _VERIFIED:
        if sha256_hex(blob) != sha:
            raise LedgerError("blob {sha} is changed: its bytes do not hash to its name", sha=sha[:16])
        _remember(key)
    file_dtype, shape, begin, end = blob_header(blob)
    pairs = dtype is not None and STORED_DTYPES.get(dtype, ("", 1))[1] == 2 and bool(shape) and shape[-1] == 2
    per_element = 2 if pairs else 1
    total = (end - begin) // _ARRAY_CODES[file_dtype][1] // per_element
    offset = min(max(0, int(offset)), total)
    stop = total if limit is None else min(total, offset + max(0, int(limit)))
    _, _, values = decode_values(blob, offset * per_element, stop * per_element)
    if pairs:
        shape = shape[:-1]
        values = [values[i : i + 2] for i in range(0, len(values), 2)]
    return {
        "shape": shape,
        "dtype": _record_dtype(file_dtype, pairs),
        "values": values,
        "offset": offset,
        "total": total,
    }


def _record_dtype(file_dtype: str, pairs: bool) -> str:
    for name, (code, width) in STORED_DTYPES.items():
        if code == file_dtype and (width == 2) == pairs:
            return name
    return file_dtype


#: Store files already hashed to their name, by (path, inode, size, modification time): the next page of the
#: same unchanged file is not hashed again (the panel's "more" on a 10^7-element tensor would hash 80 MB each
#: time). A file rewritten since has another key, and is hashed again.
_VERIFIED: dict[tuple, None] = {}
_VERIFIED_MAX = 256


def _file_key(path: Path) -> tuple | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _remember(key: tuple | None) -> None:
    if key is None:
        return
    if len(_VERIFIED) >= _VERIFIED_MAX:
        _VERIFIED.pop(next(iter(_VERIFIED)))
    _VERIFIED[key] = None


def fsync_folder(folder: Path) -> None:
    """Fsync a folder, so that a file just created in it keeps its name after a crash."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the entry itself is on disk
    finally:
        os.close(fd)


# -------------------- blob checks
# Verify's check of the blobs each entry names: a changed, missing or swapped blob is an error of
# the entry that references it (its seq and check id), since the chain covers the blob's hash and not
# its bytes.
#
# The shas are read from the line's bytes without decoding it: canonical JSON sorts the keys of a
# stored value, so `"stored":{"bytes":N,"dtype":"...","sha256":"<hex>"` is its exact spelling, and a
# quote inside a JSON string is escaped, so no string can spell it. Each distinct blob is hashed once
# per verify run (`digests`).

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
