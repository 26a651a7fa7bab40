"""Conversions between record values and tensors, and the description of a tensor.

Every observed value is reported with its shape, dtype and device (principle 3); this module
is the one place that produces that description.
"""

from __future__ import annotations

import torch

from .complex_tensors import complex_to_tensor, complex_to_value
from .stored_tensors import should_store, to_stored


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
    `{"real": ..., "imag": ...}` of those (core/check/record/complex_values.py); above
    INLINE_ELEMENTS elements, the stored form in the tensor's own dtype
    (core/check/record/stored_values.py)."""
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
