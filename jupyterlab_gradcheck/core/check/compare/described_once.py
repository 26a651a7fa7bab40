"""Descriptions of one record's tensors, each set of bits stored once.

A record describes several tensors that are often equal bit for bit: `after_clear_none` and
`autograd_grad` repeat `backward_pass_1` for a deterministic backward, and `observed_gradient` is
pass 1 again. Above INLINE_ELEMENTS a description is a stored form (core/check/compare/stored_tensors.py),
whose summary, safetensors bytes and SHA-256 cost far more than comparing the bits: a tensor whose bits,
shape and dtype equal one already described gets a copy of that value, the very form `describe` would
give it, without computing it again. Small tensors are described as before (inline, cheap).
"""

from __future__ import annotations

import torch

from .stored_tensors import should_store
from .tensors import describe, to_value

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
