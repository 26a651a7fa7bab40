"""Which devices torch reports here, and the resolution of a record's `device` field."""

from __future__ import annotations

from ...errors import DeviceUnavailable
from ...i18n import Message


def available_devices() -> list[dict]:
    """Every device kind with whether it is available, its name, and why not when absent."""
    import torch

    devices = [{"id": "cpu", "name": _cpu_name(), "available": True, "reason": ""}]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            devices.append(
                {
                    "id": f"cuda:{index}",
                    "name": torch.cuda.get_device_name(index),
                    "available": True,
                    "reason": "",
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


def _cpu_name() -> str:
    import platform

    return platform.processor() or platform.machine() or "cpu"


def resolve_device(requested: str, devices: list[dict] | None = None) -> str:
    """The concrete device for `requested`; DeviceUnavailable with the reason when absent."""
    devices = available_devices() if devices is None else devices
    present = [d["id"] for d in devices if d["available"]]
    if requested == "auto":
        for prefix in ("cuda", "mps"):
            match = next((d for d in present if d.startswith(prefix)), None)
            if match:
                return match
        return "cpu"
    if requested == "cuda":
        requested = "cuda:0"
    if requested in present:
        return requested
    kind = requested.split(":")[0]
    absent = next((d for d in devices if d["id"].split(":")[0] == kind and not d["available"]), None)
    reason = absent["reason"] if absent else Message("present devices are {present}", present=", ".join(present))
    raise DeviceUnavailable(
        "device {requested!r} is not available: {reason}", requested=requested, reason=reason, field="device"
    )
