"""The precision a computation really runs in: its dtype's, or TF32's on a CUDA device that allows it.

On an NVIDIA card from Ampere on, torch may run float32 matrix products and convolutions in TF32,
whose mantissa has 10 bits (eps = 2^-10 ~ 9.8e-4, float16's) instead of float32's 23 (eps ~ 1.2e-7).
Three settings decide it: `torch.backends.cuda.matmul.allow_tf32` (matrix products),
`torch.backends.cudnn.allow_tf32` (convolutions; True by default) and
`torch.get_float32_matmul_precision()` ("high" or "medium" allow TF32 or bfloat16 passes for
products). A check cannot see which operations a function performs, so where any of them is on,
a float32 function on cuda is bounded with TF32's eps: a bound from float32's eps would blame the
backward for TF32's rounding. The environment (core/check/environment.py) records the settings.
"""

from __future__ import annotations

import torch

#: Unit roundoff of TF32's 10-bit mantissa: 2^-10, float16's.
TF32_EPS = 2.0**-10
#: The dtypes whose matrix products and convolutions TF32 may replace.
TF32_DTYPES = (torch.float32, torch.complex64)


def tf32_settings() -> list[str]:
    """The settings that let float32 run in TF32 on cuda, as written in Python (empty: none is on)."""
    on = []
    if torch.backends.cuda.matmul.allow_tf32:
        on.append("torch.backends.cuda.matmul.allow_tf32")
    if torch.backends.cudnn.allow_tf32:
        on.append("torch.backends.cudnn.allow_tf32")
    if torch.get_float32_matmul_precision() != "highest":
        on.append(f"torch.get_float32_matmul_precision() == {torch.get_float32_matmul_precision()!r}")
    return on


def runs_in_tf32(dtype, device) -> bool:
    """Whether a `dtype` computation on `device` may run in TF32 (float32 or complex64 on cuda with a
    TF32 setting on)."""
    return dtype in TF32_DTYPES and str(device).startswith("cuda") and bool(tf32_settings())


def working_eps(dtype, device) -> float:
    """eps of the precision a `dtype` computation on `device` runs in: the dtype's (a complex dtype's
    parts'), or TF32's where `runs_in_tf32`."""
    eps = torch.finfo(dtype).eps
    return max(eps, TF32_EPS) if runs_in_tf32(dtype, device) else eps


def precision_name(dtype, device) -> str:
    """The name of that precision, as a record writes it: "tf32", or the dtype's name."""
    return "tf32" if runs_in_tf32(dtype, device) else str(dtype).replace("torch.", "")
