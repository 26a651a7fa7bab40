"""A stored value from a tensor on its device: the summary is computed where the tensor lives, and the
tensor and its summary reach the host in one copy.

The CPU story runs everywhere; the CUDA one (marked) needs a card and counts the device-to-host copies
with torch's profiler.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.values import tensors as stored_tensors
from jupyterlab_gradcheck.core.values.tensors import from_stored, to_stored

N = 100_000


def _summary_devices(monkeypatch) -> list[str]:
    """Spy on the summary: the devices of the tensors it was computed from and computed on."""
    seen: list[str] = []
    original = stored_tensors.summary_on_device

    def spy(data):
        stats = original(data)
        seen.extend([str(data.device), str(stats.device)])
        return stats

    monkeypatch.setattr(stored_tensors, "summary_on_device", spy)
    return seen


def test_a_cpu_tensor_is_summarised_and_stored_exactly(monkeypatch):
    """Given 10^5 float32 values on the CPU, when stored, then the summary is computed on the CPU and says
    the exact min and max, and the blob reads back bit for bit."""
    seen = _summary_devices(monkeypatch)
    tensor = torch.arange(N, dtype=torch.float32) - 5.0
    value = to_stored(tensor)
    assert seen == ["cpu", "cpu"]
    assert (value["summary"]["min"], value["summary"]["max"]) == (-5.0, N - 6.0)
    assert torch.equal(from_stored(value).view(torch.int32), tensor.view(torch.int32))


@pytest.mark.cuda
def test_a_cuda_tensor_is_stored_with_one_device_to_host_copy(monkeypatch):
    """Given 10^5 float64 values on cuda, when stored, then the summary is computed on cuda, the profiler
    sees exactly one device-to-host copy, and the blob holds the same bits as the tensor."""
    seen = _summary_devices(monkeypatch)
    tensor = torch.randn(N, dtype=torch.float64, device="cuda")
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        value = to_stored(tensor)
        torch.cuda.synchronize()
    copies = [event for event in profile.events() if "Memcpy DtoH" in event.name]
    assert len(copies) == 1, [event.name for event in copies]
    assert seen == ["cuda:0", "cuda:0"]
    back = from_stored(value, device="cuda")
    assert torch.equal(back.view(torch.int64), tensor.view(torch.int64))
    assert value["summary"]["max"] == tensor.max().item()
