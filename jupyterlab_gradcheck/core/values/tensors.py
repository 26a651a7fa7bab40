"""Conversions between record values and tensors, and the description of a tensor.

Every observed value is reported with its shape, dtype and device (principle 3); this module
is the one place that produces that description.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from pathlib import Path

import torch

from .form import (
    HEAD_ELEMENTS,
    INLINE_ELEMENTS,
    PENDING,
    STORED_DTYPES,
    blob_header,
    is_complex_value,
    is_empty_value,
    is_stored_value,
    refuse_complex_grad_output,
    safetensors_blob,
    sha256_hex,
    stored_shape,
)

# -------------------- stored tensors
# Tensors to and from the stored form of a record value (core/values/form.py).
#
# A tensor of more than `INLINE_ELEMENTS` elements becomes a safetensors blob, named by its
# SHA-256 and kept in the pending cache until an append writes it beside the ledger; the record
# keeps the hash, the shape, the dtype and a summary. The summary (min, max, mean, norm, count of
# non-finite elements) is computed on the tensor's own device, and the tensor and its summary
# reach the host in one copy.
#
# Back: the bytes come from the pending cache first, else from the store folder that
# `reading_store` names (replay, or a run against a ledger's store), and are checked against
# their name before they are trusted.

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
    from ..errors import SpecError

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
        from ..errors import SpecError

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


# -------------------- complex tensors
# Complex tensors under the record's convention: to and from its `{"real", "imag"}` form, in the
# precision of a dtype, the real loss of a complex output and the real inner product.
#
# The convention and the record values' form are torch-free (core/values/form.py);
# what needs tensors lives here.


def complex_to_value(data):
    """A detached CPU complex tensor as `{"real": ..., "imag": ...}` of float64 values."""
    parts = {}
    for which, part in (("real", data.real), ("imag", data.imag)):
        part = part.to(torch.float64)
        parts[which] = part.item() if part.dim() == 0 else part.tolist()
    return parts


def complex_to_tensor(value, dtype, device: str):
    """A tensor of the torch `dtype` holding a record value in either form."""
    if isinstance(value, torch.Tensor):  # a tensor given through the API: copied, as torch.tensor would, silently
        return value.detach().to(device=device, dtype=dtype, copy=True)
    if is_stored_value(value):  # a large tensor, by its hash (core/values/form.py)
        return from_stored(value, dtype, device)
    if is_empty_value(value):  # an empty array, by its shape (core/values/form.py)
        return torch.zeros(value["shape"], dtype=dtype, device=device)
    if not is_complex_value(value):
        return torch.tensor(value, dtype=dtype, device=device)
    real_dtype = torch.empty((), dtype=dtype).real.dtype if dtype.is_complex else dtype
    real = torch.tensor(value["real"], dtype=real_dtype, device=device)
    imag = torch.tensor(value["imag"], dtype=real_dtype, device=device)
    return torch.complex(real, imag)


def with_complex_kept(tensor, dtype):
    """`tensor` in the precision of the torch `dtype`, complex exactly when `tensor` is.

    A complex grad_output of a real input's complex output is cast to the finite differences'
    precision without losing its imaginary part (a plain cast to a real dtype would drop it), and
    the real grad_output of a real output stays real when the inputs are complex.
    """
    pairs = {torch.float64: torch.complex128, torch.float32: torch.complex64}
    if tensor.is_complex() and not dtype.is_complex:
        dtype = pairs.get(dtype, torch.complex64)
    elif not tensor.is_complex() and dtype.is_complex:
        dtype = {pair: real for real, pair in pairs.items()}[dtype]
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def contract_real(outputs, v):
    """sum(Re(conj(v) * output)) for each output stacked along dimension 0: the real loss of a complex output."""
    rows = outputs.reshape(outputs.shape[0], -1)
    flat_v = v.reshape(-1)
    return (rows.real * flat_v.real).sum(1) + (rows.imag * flat_v.imag).sum(1)


def grad_output_tensor(value, output):
    """The record's grad_output as a tensor shaped as written, of the output's dtype and device."""
    refuse_complex_grad_output(value, output)
    if is_complex_value(value) or is_stored_value(value):
        return complex_to_tensor(value, output.dtype, output.device)
    return torch.as_tensor(value, dtype=output.dtype, device=output.device)


def real_inner(a, b):
    """sum(Re(conj(a) * b)): the real inner product that pairs a gradient with a direction (for real
    tensors exactly sum(a * b)), so that grad . u = sum(Re(conj(v) * J u)) holds under the convention."""
    if a.is_complex() and b.is_complex():
        return (a.real * b.real).sum() + (a.imag * b.imag).sum()
    return (a.real * b.real).sum()  # a real side: Re(conj(a) b) is the product of the real parts


# -------------------- tensors


def torch_dtype(name: str):
    """The torch dtype for a record's dtype name."""
    return getattr(torch, name)


def to_tensor(value, dtype: str, device: str, *, requires_grad: bool = False):
    """A tensor holding a record value (number or nested list, the complex form {"real", "imag"}, or a
    stored value read from its blob)."""
    tensor = complex_to_tensor(value, torch_dtype(dtype), device)
    return tensor.requires_grad_(requires_grad)


def to_value(tensor):
    """A JSON value for a tensor: a float or nested list of floats, or for a complex tensor
    `{"real": ..., "imag": ...}` of those (core/values/form.py); above
    INLINE_ELEMENTS elements, the stored form in the tensor's own dtype
    (core/values/form.py)."""
    if should_store(tensor):
        return to_stored(tensor)
    data = tensor.detach()
    if data._is_zerotensor():  # autograd's zero placeholder has no storage to read
        data = torch.zeros(data.shape, dtype=data.dtype, device=data.device)
    if data.is_complex():
        return complex_to_value(data.cpu())
    data = data.to("cpu", torch.float64)
    return data.item() if data.dim() == 0 else data.tolist()


def describe(tensor) -> dict:
    """`{value, shape, dtype, device}` of a tensor, as every observation reports it."""
    return {
        "value": to_value(tensor),
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).replace("torch.", ""),
        "device": str(tensor.device),
    }


# -------------------- described once
# Descriptions of one record's tensors, each set of bits stored once.
#
# A record describes several tensors that are often equal bit for bit: `after_clear_none` and
# `autograd_grad` repeat `backward_pass_1` for a deterministic backward, and `observed_gradient` is
# pass 1 again. Above INLINE_ELEMENTS a description is a stored form (core/values/tensors.py),
# whose summary, safetensors bytes and SHA-256 cost far more than comparing the bits: a tensor whose bits,
# shape and dtype equal one already described gets a copy of that value, the very form `describe` would
# give it, without computing it again. Small tensors are described as before (inline, cheap).

#: The integer dtype of each element width, to compare elements bit for bit.
_BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


def same_bits(first, second) -> bool:
    """Whether two tensors hold the same bits in the same shape and dtype on the same device (-0.0 and 0.0
    differ, a NaN equals the same NaN): what makes their stored forms identical."""
    if first.shape != second.shape or first.dtype != second.dtype or first.device != second.device:
        return False
    if first._is_zerotensor() or second._is_zerotensor():
        return first._is_zerotensor() and second._is_zerotensor()
    a, b = first.detach().contiguous(), second.detach().contiguous()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    bits = _BITS.get(a.element_size(), torch.uint8)  # an integer of the element's width: one comparison each
    return torch.equal(a.reshape(-1).view(bits), b.reshape(-1).view(bits))


class Descriptions:
    """Describes tensors for one record, reusing the value of a tensor with the same bits described before."""

    def __init__(self):
        self._seen: list[tuple[object, object]] = []  # (tensor, its value), stored forms only

    def value(self, tensor):
        """`to_value(tensor)`, a copy of an earlier stored value where the bits are the same."""
        if not should_store(tensor):
            return to_value(tensor)
        for earlier, value in self._seen:
            if same_bits(earlier, tensor):
                return copied(value)
        value = to_value(tensor)
        self._seen.append((tensor.detach(), value))
        return copied(value)

    def describe(self, tensor) -> dict:
        """`describe(tensor)`, its value reused as `value` does."""
        if not should_store(tensor):
            return describe(tensor)
        return {"value": self.value(tensor), **describe_metadata(tensor)}


def copied(value):
    """A copy of a JSON value (dicts, lists, numbers, strings): each record field a value of its own."""
    if isinstance(value, dict):
        return {key: copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copied(item) for item in value]
    return value


def describe_metadata(tensor) -> dict:
    """shape, dtype and device of a tensor, as `describe` writes them."""
    return {
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).replace("torch.", ""),
        "device": str(tensor.device),
    }
