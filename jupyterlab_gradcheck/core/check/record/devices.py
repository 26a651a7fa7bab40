"""The resolution of a record's `device` field against the devices present (core/check/environment.py
`available_devices` lists them where torch runs; the server asks its workers)."""

from __future__ import annotations

from ...errors import DeviceUnavailable
from ...i18n import Message


def resolve_device(requested: str, devices: list[dict]) -> str:
    """The concrete device for `requested`; DeviceUnavailable with the reason when absent."""
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
