"""The blob store beside a ledger, and the stored form of a large tensor, on their own.

Each story builds a stored value from a real tensor, so the bytes are what a check writes.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from jupyterlab_gradcheck.core.errors import LedgerError, SpecError
from jupyterlab_gradcheck.core.values.blobs import (
    blob_path,
    blob_problem,
    read_blob_values,
    referenced_shas,
    store_dir_for,
    write_blobs,
)
from jupyterlab_gradcheck.core.values.form import INLINE_ELEMENTS, PENDING, PendingBlobs, is_stored_value, stored_shape
from jupyterlab_gradcheck.core.values.tensors import from_stored, reading_store, to_stored


def test_the_store_sits_beside_the_ledger(tmp_path):
    """Given the ledger lab1.gradcheck.jsonl, when its store is named, then it is lab1.gradcheck.blobs beside it."""
    assert store_dir_for(tmp_path / "lab1.gradcheck.jsonl") == tmp_path / "lab1.gradcheck.blobs"
    assert store_dir_for(tmp_path / "odd-name") == tmp_path / "odd-name.blobs"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.complex128, torch.complex64])
def test_a_blob_round_trips_bitwise(tmp_path, dtype):
    """Given 10^4 random elements of a dtype (one planted NaN and -0.0), when stored, written beside a
    ledger, forgotten by the process and read back from the store, then every bit is the same, the
    file is named by its SHA-256 and its size is the form's `bytes`."""
    torch.manual_seed(0)
    tensor = torch.randn(100, 100, dtype=dtype)
    tensor.view(-1)[7] = float("nan")
    tensor.view(-1)[8] = -0.0
    value = to_stored(tensor)
    store = store_dir_for(tmp_path / "lab.gradcheck.jsonl")
    assert write_blobs(store, {"observations": {"x": {"value": value}}}) == [value["stored"]["sha256"]]
    path = blob_path(store, value["stored"]["sha256"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == value["stored"]["sha256"]
    assert path.stat().st_size == value["stored"]["bytes"]
    assert value["stored"]["dtype"] == str(dtype).replace("torch.", "")
    PENDING.clear()
    with reading_store(store):
        back = from_stored(value)
    assert back.dtype == dtype
    as_bits = (lambda t: torch.view_as_real(t).view(-1)) if dtype.is_complex else (lambda t: t.view(-1))
    width = {torch.float64: torch.int64, torch.complex128: torch.int64}.get(dtype, torch.int32)
    assert torch.equal(as_bits(back).view(width), as_bits(tensor).view(width))


def test_the_summary_is_over_the_finite_values(tmp_path):
    """Given 0..299 as float64 with element 5 set to infinity, when stored, then the summary counts one
    non-finite element, takes min, max and mean over the other 299, has no norm (it is infinite) and
    heads with the first 8 values."""
    tensor = torch.arange(300, dtype=torch.float64)
    tensor[5] = float("inf")
    summary = to_stored(tensor)["summary"]
    finite = [float(v) for v in range(300) if v != 5]
    assert summary["nonfinite"] == 1
    assert summary["min"] == 0.0 and summary["max"] == 299.0
    assert summary["mean"] == pytest.approx(
        sum(finite) / 299, rel=1e-15
    )  # float64 sums of 299 integers: exact to rounding
    assert summary["norm"] is None
    assert summary["head"] == [0.0, 1.0, 2.0, 3.0, 4.0, float("inf"), 6.0, 7.0]


def test_read_blob_values_pages_through_a_blob_without_torch_types(tmp_path):
    """Given a stored complex128 tensor of 300 elements, when the values are read from offset 298 with a
    limit of 5, then two [re, im] pairs of plain floats come back with the total 300."""
    tensor = torch.complex(torch.arange(300.0, dtype=torch.float64), -torch.arange(300.0, dtype=torch.float64))
    value = to_stored(tensor)
    store = tmp_path / "lab.gradcheck.blobs"
    write_blobs(store, value)
    PENDING.clear()
    page = read_blob_values(store, value["stored"]["sha256"], offset=298, limit=5, dtype="complex128")
    assert page == {
        "shape": [300],
        "dtype": "complex128",
        "values": [[298.0, -298.0], [299.0, -299.0]],
        "offset": 298,
        "total": 300,
    }
    assert all(type(part) is float for pair in page["values"] for part in pair)


def test_a_changed_a_missing_and_a_swapped_blob_are_named(tmp_path):
    """Given two blobs in a store, when one is edited, one deleted and one replaced by a copy of the
    other, then blob_problem says "changed", "missing" and "changed", and an intact one None."""
    store = tmp_path / "lab.gradcheck.blobs"
    first, second, third = (to_stored(torch.full((300,), float(k), dtype=torch.float64)) for k in (1, 2, 3))
    write_blobs(store, [first, second, third])
    sha = [v["stored"]["sha256"] for v in (first, second, third)]
    assert [blob_problem(store, s) for s in sha] == [None, None, None]
    raw = bytearray(blob_path(store, sha[0]).read_bytes())
    raw[-1] ^= 1
    blob_path(store, sha[0]).write_bytes(bytes(raw))
    blob_path(store, sha[1]).unlink()
    blob_path(store, sha[2]).write_bytes(blob_path(store, sha[0]).read_bytes())
    assert [blob_problem(store, s) for s in sha] == ["changed", "missing", "changed"]


def test_a_blob_neither_pending_nor_stored_is_bad_input(tmp_path):
    """Given a stored value whose bytes this process forgot, when an append would write it, then it is
    refused as bad input and nothing is written."""
    value = to_stored(torch.ones(300, dtype=torch.float64) * 3)
    PENDING.clear()
    with pytest.raises(SpecError, match="no such blob"):
        write_blobs(tmp_path / "lab.gradcheck.blobs", {"x": value})
    assert not (tmp_path / "lab.gradcheck.blobs").exists()
    with pytest.raises(SpecError, match="no such blob"):
        from_stored(value)
    with pytest.raises(LedgerError, match="missing"):
        read_blob_values(tmp_path / "lab.gradcheck.blobs", value["stored"]["sha256"])


def test_the_form_is_validated():
    """Given stored forms with a bad hash, an unknown dtype and a shape too deep, when validated, then each
    is one line naming the field; a good one gives its shape."""
    good = to_stored(torch.zeros(17, 17, dtype=torch.float32))
    assert is_stored_value(good) and stored_shape(good, "x") == [17, 17]
    bad_sha = {**good, "stored": {**good["stored"], "sha256": "ABC"}}
    bad_dtype = {**good, "stored": {**good["stored"], "dtype": "float128"}}
    deep = {**good, "stored": {**good["stored"], "shape": [1] * 40}}
    for value, words in ((bad_sha, "sha256"), (bad_dtype, "float128"), (deep, "dimensions")):
        with pytest.raises(SpecError, match=words) as caught:
            stored_shape(value, "inputs.x")
        assert "inputs.x" in str(caught.value) and "\n" not in str(caught.value)


def test_values_of_at_most_256_elements_are_never_stored():
    """Given the inline limit, then it is 256 elements, as the format fixes it."""
    assert INLINE_ELEMENTS == 256


def test_the_pending_cache_is_bounded_and_keeps_the_newest():
    """Given a cache of 1000 bytes, when three blobs of 400 bytes arrive, then the oldest is evicted and the
    size stays within the budget; a single blob over the budget is still kept (its append needs it)."""
    cache = PendingBlobs(budget=1000)
    for key in "abc":
        cache.put(key * 64, bytes(400))
    assert ("a" * 64) not in cache and ("b" * 64) in cache and ("c" * 64) in cache
    assert cache.size == 800
    cache.put("d" * 64, bytes(5000))
    assert ("d" * 64) in cache and cache.size == 5000


def test_referenced_shas_walks_a_record_once_per_sha():
    """Given a record naming one blob twice and another once, beside inline lists, then the two shas come
    back in order of first appearance."""
    first = to_stored(torch.zeros(300))
    second = to_stored(torch.ones(300))
    record = {"inputs": {"x": first, "y": [1.0, 2.0]}, "observations": {"a": {"value": second}, "b": {"value": first}}}
    assert referenced_shas(json.loads(json.dumps(record))) == [first["stored"]["sha256"], second["stored"]["sha256"]]


def test_a_summary_computed_again_does_not_change_the_check_id():
    """Given the same stored input twice, once with its summary's mean computed in another order (the last
    bit differs), when the check id is made, then it is the same: a tensor is named by its hash."""
    from jupyterlab_gradcheck.core.check.record.spec import make_check_id

    value = to_stored(torch.linspace(0, 1, 300, dtype=torch.float64))
    again = {**value, "summary": {**value["summary"], "mean": value["summary"]["mean"] + 2**-52}}
    assert make_check_id("sum(x)", {"x": value}, "float64", "cpu") == make_check_id(
        "sum(x)", {"x": again}, "float64", "cpu"
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.complex64, torch.int64])
def test_blobs_are_byte_for_byte_what_safetensors_writes(dtype):
    """Given a 300-element tensor, when stored, then the blob is exactly the bytes safetensors.torch.save
    writes for {"value": tensor} (a complex one as its real pair), and safetensors reads it back equal;
    skipped where the package is not installed (the project writes and reads the format itself)."""
    safetensors_torch = pytest.importorskip("safetensors.torch")
    tensor = (torch.arange(300) - 150).to(dtype) / (1 if dtype == torch.int64 else 7)
    value = to_stored(tensor)
    blob = PENDING.get(value["stored"]["sha256"])
    pair = torch.view_as_real(tensor) if dtype.is_complex else tensor
    assert blob == safetensors_torch.save({"value": pair.contiguous()})
    assert torch.equal(safetensors_torch.load(blob)["value"], pair)


def test_a_checks_blobs_are_pinned_until_it_ends_and_a_workers_until_discarded():
    """Given a cache of 1000 bytes, when a check (a holding block) puts three blobs of 400 bytes, then all
    three stay while it runs (1200 bytes); once it ends, the next blob evicts the oldest unpinned ones.
    A worker's blob put with pin=True outlives any budget until it is discarded."""
    cache = PendingBlobs(budget=1000)
    with cache.holding():
        for key in "abc":
            cache.put(key * 64, bytes(400))
        assert cache.size == 1200 and all(key * 64 in cache for key in "abc")
    assert cache.size == 800  # the end of the check lets the budget apply again: "a" goes
    cache.put("w" * 64, bytes(900), pin=True)
    cache.put("d" * 64, bytes(400))
    assert "w" * 64 in cache and "d" * 64 in cache and "b" * 64 not in cache and "c" * 64 not in cache
    cache.discard(["w" * 64])
    assert "w" * 64 not in cache and cache.size == 400
