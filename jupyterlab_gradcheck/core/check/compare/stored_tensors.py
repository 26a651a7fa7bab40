"""Tensors to and from the stored form of a record value (core/check/record/stored_values.py).

A tensor of more than `INLINE_ELEMENTS` elements becomes a safetensors blob, named by its
SHA-256 and kept in the pending cache until an append writes it beside the ledger; the record
keeps the hash, the shape, the dtype and a summary. The summary (min, max, mean, norm, count of
non-finite elements) is computed on the tensor's own device, and the tensor and its summary
reach the host in one copy.

Back: the bytes come from the pending cache first, else from the store folder that
`reading_store` names (replay, or a run against a ledger's store), and are checked against
their name before they are trusted.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from pathlib import Path

import torch

from ..record.stored_values import (
    HEAD_ELEMENTS,
    INLINE_ELEMENTS,
    PENDING,
    STORED_DTYPES,
    blob_header,
    safetensors_blob,
    sha256_hex,
    stored_shape,
)

#: The store folder that stored values are read from when their bytes are not pending.
_STORE = contextvars.ContextVar("gradcheck_blob_store", default=None)

#: Summary statistics, in this order, as float64 beside the tensor's bytes.
_STATS = ("min", "max", "mean", "norm", "nonfinite")


def should_store(tensor) -> bool:
    """Whether a tensor is written as a stored value (more than INLINE_ELEMENTS elements)."""
    return tensor.numel() > INLINE_ELEMENTS


@contextlib.contextmanager
def reading_store(store_dir):
    """Within the block, stored values not pending are read from `store_dir` (a ledger's blob folder)."""
    token = _STORE.set(None if store_dir is None else Path(store_dir))
    try:
        yield
    finally:
        _STORE.reset(token)


def to_stored(tensor) -> dict:
    """The stored form of a tensor; its blob's bytes go to the pending cache.

    The tensor keeps its dtype (float32 stays float32); a complex tensor is written as its
    `view_as_real` pair and the form names the complex dtype.
    """
    data = tensor.detach()
    if data._is_zerotensor():  # autograd's zero placeholder has no storage to read
        data = torch.zeros(data.shape, dtype=data.dtype, device=data.device)
    data = data.contiguous()
    stats = summary_on_device(data)
    flat_bytes = (torch.view_as_real(data) if data.is_complex() else data).reshape(-1).view(torch.uint8)
    # the one device -> host copy: the statistics first (40 bytes, so the data stays 8-byte aligned)
    both = torch.cat([stats.view(torch.uint8), flat_bytes]).cpu()
    split = stats.numel() * 8
    host = both[split:].view(data.dtype if not data.is_complex() else _real_dtype(data.dtype))
    host_stats = both[:split].view(torch.float64).tolist()
    name = str(data.dtype).replace("torch.", "")
    file_shape = [*data.shape, 2] if data.is_complex() else list(data.shape)
    blob = safetensors_blob(STORED_DTYPES[name][0], file_shape, both[split:].numpy().tobytes())
    sha = sha256_hex(blob)
    PENDING.put(sha, blob)
    summary = dict(zip(_STATS, host_stats))
    summary["nonfinite"] = int(summary["nonfinite"])
    for key in ("min", "max", "mean", "norm"):
        if not math.isfinite(summary[key]):
            summary[key] = None  # JSON has no NaN or infinity: no finite value to summarise, or an infinite norm
    summary["head"] = [float(v) for v in host[: HEAD_ELEMENTS * (2 if data.is_complex() else 1)].tolist()]
    return {
        "stored": {
            "sha256": sha,
            "shape": list(data.shape),
            "dtype": name,
            "bytes": len(blob),
        },
        "summary": summary,
    }


def from_stored(value, dtype=None, device="cpu"):
    """The tensor of a stored value, on `device`, in the torch `dtype` (the stored dtype when None).

    SpecError when its bytes are neither pending nor in the store being read, or do not hash to
    its name: a record may not name a tensor nobody can read.
    """
    from ...errors import SpecError

    shape = stored_shape(value)
    sha = value["stored"]["sha256"]
    blob = PENDING.get(sha)
    if blob is None:
        folder = _STORE.get()
        path = None if folder is None else folder / f"{sha}.safetensors"
        if path is not None and path.exists():
            blob = path.read_bytes()
            if sha256_hex(blob) != sha:
                raise SpecError("stored value {sha}: the blob's bytes do not hash to its name", sha=sha[:16])
    if blob is None:
        raise SpecError("stored value {sha}: no such blob in this process or in the ledger's store", sha=sha[:16])
    tensor = _tensor_of(blob, value["stored"]["dtype"])
    if list(tensor.shape) != shape:
        raise SpecError(
            "stored value {sha}: the blob holds shape {found}, the record names {shape}",
            sha=sha[:16],
            found=list(tensor.shape),
            shape=shape,
        )
    return tensor.to(device=device, dtype=dtype if dtype is not None else tensor.dtype)


def _tensor_of(blob: bytes, name: str):
    """The tensor a blob holds, in the record's dtype `name` (a complex one from its real pair)."""
    code, shape, begin, end = blob_header(blob)
    real = _real_dtype(torch_dtype_of(name)) if STORED_DTYPES.get(name, ("", 1))[1] == 2 else torch_dtype_of(name)
    if STORED_DTYPES.get(name, ("",))[0] != code:
        from ...errors import SpecError

        raise SpecError("stored value of dtype {name}: its blob holds {code}", name=name, code=code)
    tensor = torch.frombuffer(bytearray(blob[begin:end]), dtype=real) if end > begin else torch.empty(0, dtype=real)
    tensor = tensor.reshape(shape)
    return torch.view_as_complex(tensor) if real is not torch_dtype_of(name) else tensor


def torch_dtype_of(name: str):
    """The torch dtype of a record's dtype name."""
    return getattr(torch, name)


def _real_dtype(dtype):
    return torch.empty((), dtype=dtype).real.dtype


def summary_on_device(data):
    """min, max, mean over the finite values, the 2-norm and the count of non-finite elements, as one
    float64 tensor on the data's device (a complex tensor's statistics are over its real pair)."""
    values = torch.view_as_real(data) if data.is_complex() else data
    if not values.is_floating_point():
        values = values.to(torch.float64)
    finite = torch.isfinite(values)
    count = finite.sum(dtype=torch.float64)
    inf = torch.tensor(math.inf, dtype=values.dtype, device=values.device)
    low = torch.where(finite, values, inf).min().to(torch.float64)
    high = torch.where(finite, values, -inf).max().to(torch.float64)
    total = torch.where(finite, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum(
        dtype=torch.float64
    )
    mean = torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, math.nan))
    norm = torch.linalg.vector_norm(values, dtype=torch.float64)
    bad = (~finite).reshape(-1, 2).any(-1).sum() if data.is_complex() else (~finite).sum()
    no_finite = count == 0
    low = torch.where(no_finite, torch.full_like(low, math.nan), low)
    high = torch.where(no_finite, torch.full_like(high, math.nan), high)
    return torch.stack([low, high, mean, norm, bad.to(torch.float64)])
