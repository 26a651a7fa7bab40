"""The environment a check ran in, recorded beside every observation (principle 6)."""

from __future__ import annotations

import platform
import sys


def capture_environment(device: str) -> dict:
    """torch and python versions, platform, the device's name, and CUDA's version when used."""
    import torch

    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        device_name = torch.cuda.get_device_name(index)
        cuda = torch.version.cuda
    else:
        device_name = "cpu" if device == "cpu" else device
        cuda = None
    return {
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "executable_bits": 64 if sys.maxsize > 2**32 else 32,
        "device": device,
        "device_name": device_name,
        "cuda": cuda,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }
