"""Complex tensors under the record's convention: to and from its `{"real", "imag"}` form, in the
precision of a dtype, the real loss of a complex output and the real inner product.

The convention and the record values' form are torch-free (core/check/record/complex_values.py);
what needs tensors lives here.
"""

from __future__ import annotations

import torch

from ..record.complex_values import is_complex_value, refuse_complex_grad_output
from ..record.empty_values import is_empty_value
from ..record.stored_values import is_stored_value
from .stored_tensors import from_stored


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
    if is_stored_value(value):  # a large tensor, by its hash (core/check/record/stored_values.py)
        return from_stored(value, dtype, device)
    if is_empty_value(value):  # an empty array, by its shape (core/check/record/empty_values.py)
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
