"""Stories of reading a stored tensor page by page from the store (core/values/blobs.py `read_blob_values`)."""

from __future__ import annotations

import os
from array import array

import pytest

from jupyterlab_gradcheck.core.errors import LedgerError
from jupyterlab_gradcheck.core.values import blobs as blob_store
from jupyterlab_gradcheck.core.values.blobs import blob_path, read_blob_values
from jupyterlab_gradcheck.core.values.form import PendingBlobs, safetensors_blob, sha256_hex


def _store_one(folder, values):
    blob = safetensors_blob("F64", [len(values)], array("d", values).tobytes())
    sha = sha256_hex(blob)
    folder.mkdir(exist_ok=True)
    blob_path(folder, sha).write_bytes(blob)
    return sha


def test_later_pages_of_an_unchanged_file_are_not_hashed_again_and_a_rewritten_one_is(tmp_path, monkeypatch):
    """Given a stored tensor of 5,000 float64 values in a ledger's store, read page by page,
    when the first page is read, then the second and the third,
    then the file is hashed once (the panel's "more" does not hash the whole file again), the pages hold
    the right values; and when the file is rewritten with other bytes, the next page is hashed again
    and reported changed."""
    store = tmp_path / "lab.gradcheck.blobs"
    values = [float(i) / 7 for i in range(5000)]
    sha = _store_one(store, values)
    hashed = []
    real = blob_store.sha256_hex
    monkeypatch.setattr(blob_store, "sha256_hex", lambda data: hashed.append(len(data)) or real(data))
    empty = PendingBlobs()

    pages = [read_blob_values(store, sha, offset=o, limit=1000, pending=empty) for o in (0, 1000, 2000)]

    assert [p["values"] for p in pages] == [values[0:1000], values[1000:2000], values[2000:3000]]
    assert pages[0]["total"] == 5000 and len(hashed) == 1
    path = blob_path(store, sha)
    path.write_bytes(path.read_bytes()[:-8] + array("d", [99.0]).tobytes())
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a later write, whatever the clock's grain
    with pytest.raises(LedgerError, match="is changed"):
        read_blob_values(store, sha, offset=3000, limit=1000, pending=empty)
    assert len(hashed) == 2
