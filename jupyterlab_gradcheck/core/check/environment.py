"""The environment a check runs in: the devices torch reports here, and what is recorded beside every
observation (principle 6)."""

from __future__ import annotations

import platform
import sys

from ..i18n import Message


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
        **math_modes(device),
    }


def math_modes(device: str) -> dict:
    """The settings that decide float32's accuracy and a backward's reproducibility: the float32
    matmul precision always; on a CUDA device also TF32 for matrix products and convolutions, cuDNN's
    deterministic and benchmark modes, and `float32_precision`, the precision a float32 check's rounding
    bounds assume there ("tf32" where any TF32 setting is on, core/check/fd/steps.py)."""
    import torch

    modes = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    if device.startswith("cuda"):
        from .fd.steps import tf32_settings

        modes.update(
            {
                "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "float32_precision": "tf32" if tf32_settings() else "float32",
            }
        )
    return modes


def available_devices() -> list[dict]:
    """Every device kind with whether it is available, its name, and why not when absent.

    torch is imported here, not at the top: the CLI and the panel import this module at start."""
    import torch

    devices = [{"id": "cpu", "name": _cpu_name(), "available": True, "reason": "", "free_bytes": cpu_free_bytes()}]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            devices.append(
                {
                    "id": f"cuda:{index}",
                    "name": torch.cuda.get_device_name(index),
                    "available": True,
                    "reason": "",
                    "free_bytes": int(torch.cuda.mem_get_info(index)[0]),
                }
            )
    else:
        reason = (
            Message("this torch build has no CUDA support")
            if torch.version.cuda is None
            else Message("torch.cuda.is_available() is False: no CUDA device is visible")
        )
        devices.append({"id": "cuda", "name": "", "available": False, "reason": reason})
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append({"id": "mps", "name": "Apple Metal (MPS)", "available": True, "reason": ""})
    else:
        devices.append(
            {
                "id": "mps",
                "name": "",
                "available": False,
                "reason": Message("torch.backends.mps.is_available() is False: not an Apple GPU"),
            }
        )
    return devices


def cpu_free_bytes() -> int | None:
    """Memory this process may still take: the system's available memory, capped by the headroom
    under an address-space limit (a server's worker sets one); None where neither can be read."""
    import os
    import resource

    free = None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
    except OSError:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as statm:
                held = int(statm.read().split()[0]) * resource.getpagesize()
        except OSError:
            held = 0
        headroom = max(0, soft - held)
        free = headroom if free is None else min(free, headroom)
    return free


def _cpu_name() -> str:
    return platform.processor() or platform.machine() or "cpu"
