"""Conversions between record values and tensors, and the description of a tensor.

Every observed value is reported with its shape, dtype and device (principle 3); this module
is the one place that produces that description.
"""

from __future__ import annotations


def torch_dtype(name: str):
    """The torch dtype for a record's dtype name."""
    import torch

    return getattr(torch, name)


def to_tensor(value, dtype: str, device: str, *, requires_grad: bool = False):
    """A tensor holding a record value (number or nested list)."""
    import torch

    tensor = torch.tensor(value, dtype=torch_dtype(dtype), device=device)
    return tensor.requires_grad_(requires_grad)


def to_value(tensor):
    """A JSON value (float or nested list of floats) for a tensor."""
    import torch

    data = tensor.detach()
    if data._is_zerotensor():  # autograd's zero placeholder has no storage to read
        data = torch.zeros(data.shape, dtype=data.dtype, device=data.device)
    if data.is_complex():
        data = data.real
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
