"""Stories of the element limit that follows memory (core/run.py).

A check's size is bounded by what its device's free memory holds, not by a CPU-sized constant:
a check estimated to need more is refused before anything runs or is written, with the numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from jupyterlab_gradcheck.core.run import (
    DTYPE_BYTES,
    INTERMEDIATE_COPIES,
    WORKING_COPIES,
    OverMemory,
    admit_memory,
    elements_that_fit,
    required_bytes,
)

GIB = 2**30


def _spec(elements: int, dtype: str = "float64", work: int = 1):
    return SimpleNamespace(shapes={"x": [elements]}, dtype=dtype, work_elements=work)


def test_the_estimate_counts_working_copies_of_the_inputs_and_of_the_largest_intermediate():
    """Given 10^6 float64 input elements and a function that builds 10^7-element intermediates,
    when the memory a check needs is estimated,
    then it is 8 bytes x (56 input-sized copies x 10^6 + 6 intermediate copies x 10^7)."""
    assert required_bytes(10**6, 10**7, "float64") == 8 * (WORKING_COPIES * 10**6 + INTERMEDIATE_COPIES * 10**7)
    assert required_bytes(10**6, 1, "float32") == 4 * (WORKING_COPIES + INTERMEDIATE_COPIES) * 10**6
    assert DTYPE_BYTES["complex128"] == 16


def test_a_card_with_139_gib_takes_ten_million_elements_and_a_small_cpu_does_not():
    """Given an H200's 139 GiB free and a CPU with 1 GiB free,
    when a float64 check of 10^7 elements is admitted on each,
    then the card admits it (it needs 4.62 GiB) and the CPU refuses it with one line naming the
    elements, the dtype, what it needs, what is free and how many elements would fit."""
    devices = [
        {"id": "cpu", "available": True, "free_bytes": GIB},
        {"id": "cuda:0", "available": True, "free_bytes": 139 * GIB},
    ]
    admit_memory(_spec(10**7), "cuda:0", devices)
    with pytest.raises(OverMemory) as refused:
        admit_memory(_spec(10**7), "cpu", devices)
    message = refused.value.message
    assert refused.value.code == "over_memory" and refused.value.field == "inputs"
    assert "10000000 elements in float64" in message and "4.62 GiB" in message and "cpu has 1.00 GiB" in message
    assert f"at most {elements_that_fit(GIB, 'float64')} elements fit" in message
    assert elements_that_fit(GIB, "float64") == GIB // (8 * 62) == 2164802
    assert "\n" not in message


def test_a_fraction_of_the_free_memory_and_an_unknown_size_are_honoured():
    """Given a CPU with 1 GiB free,
    when 1.5x10^6 float64 elements (0.69 GiB) are admitted with the whole memory, with half of it, with
    the estimate turned off (fraction 0), and on a device whose free memory is not known,
    then only the half refuses it."""
    devices = [{"id": "cpu", "free_bytes": GIB}, {"id": "mps"}]
    admit_memory(_spec(1_500_000), "cpu", devices, 1.0)
    with pytest.raises(OverMemory):
        admit_memory(_spec(1_500_000), "cpu", devices, 0.5)
    admit_memory(_spec(1_500_000), "cpu", devices, 0.0)
    admit_memory(_spec(1_500_000), "mps", devices)


def test_the_cpu_reports_its_free_memory_under_an_address_space_limit():
    """Given a process that caps its own address space at 300 MiB beyond what it holds,
    when it lists its devices, then the CPU's free memory is at most that headroom."""
    script = textwrap.dedent(
        """
        import json, resource
        import torch
        from jupyterlab_gradcheck.core.check.environment import available_devices, cpu_free_bytes
        before = cpu_free_bytes()
        with open("/proc/self/statm") as statm:
            held = int(statm.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (held + 300 * 2**20, resource.RLIM_INFINITY))
        cpu = available_devices()[0]
        print(json.dumps({"before": before, "after": cpu["free_bytes"]}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["before"] > 300 * 2**20
    assert 0 < figures["after"] <= 300 * 2**20


def test_the_api_refuses_a_check_its_memory_cannot_hold_and_writes_nothing(tmp_path):
    """Given a kernel that may take only 200 MiB more (RLIMIT_AS),
    when `check()` is asked for 10^6 float64 elements (about 0.34 GiB by the estimate), then it is
    refused with over_memory before the function runs and the ledger is not created; and a check of
    10^4 elements in the same process runs and passes."""
    ledger = tmp_path / "lab.gradcheck.jsonl"
    script = textwrap.dedent(
        f"""
        import json, resource
        import torch
        from jupyterlab_gradcheck.api import check
        from jupyterlab_gradcheck.core.errors import SpecError
        calls = []
        def f(x):
            calls.append(x.numel())
            return (torch.sin(x) * x).sum()
        def grad(x):
            return torch.sin(x) + x * torch.cos(x)
        with open("/proc/self/statm") as statm:
            held = int(statm.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (held + 200 * 2**20, resource.RLIM_INFINITY))
        x = torch.linspace(-2, 2, 10**6, dtype=torch.float64)
        try:
            check(f, grad=grad(x), x=x, ledger={str(ledger)!r})
            refused = None
        except SpecError as exc:
            refused = {{"code": exc.code, "message": exc.message}}
        import os
        exists = os.path.exists({str(ledger)!r})
        small = torch.linspace(-2, 2, 10**4, dtype=torch.float64)
        passed = check(f, grad=grad(small), x=small, ledger=False).passed
        print(json.dumps({{"refused": refused, "calls": calls, "ledger": exists, "passed": passed}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["refused"] is not None and outcome["refused"]["code"] == "over_memory", outcome
    assert "1000000 elements in float64" in outcome["refused"]["message"]
    assert outcome["ledger"] is False
    assert 10**6 not in outcome["calls"]  # the function never ran on the refused input
    assert outcome["passed"] is True


@pytest.mark.parametrize("workload", ["elementwise", "banded"])
@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's /proc/self/clear_refs")
def test_the_estimate_bounds_what_a_whole_check_really_takes(tmp_path, workload):
    """Given a fresh process that checks a float64 function of 2x10^6 elements with a ledger (the
    elementwise (sin(x)*x).sum(), or the banded tanh(x[1:]*x[:-1]).sum()),
    when its peak resident memory during the check is measured (the peak reset just before it),
    then the estimate is above it (so admission protects the device), and at most three times it
    (so admission does not refuse what would fit by a wide margin)."""
    n = 2 * 10**6
    script = textwrap.dedent(
        f"""
        import json, os
        import torch
        from jupyterlab_gradcheck.api import check
        def status(key):
            for line in open("/proc/self/status"):
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        x = torch.rand({n}, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 4 - 2
        if {workload!r} == "elementwise":
            f = lambda x: (torch.sin(x) * x).sum()
            grad = torch.sin(x) + x * torch.cos(x)
        else:
            f = lambda x: torch.tanh(x[1:] * x[:-1]).sum()
            s = 1 - torch.tanh(x[1:] * x[:-1]) ** 2
            grad = torch.zeros_like(x)
            grad[:-1] += s * x[1:]
            grad[1:] += s * x[:-1]
        with open("/proc/self/clear_refs", "w") as peak:
            peak.write("5")  # the peak resident size starts again from now (Linux)
        before = status("VmRSS")
        passed = check(f, grad=grad, x=x, ledger=os.path.join({str(tmp_path)!r}, "m.gradcheck.jsonl")).passed
        print(json.dumps({{"passed": passed, "used": status("VmHWM") - before}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["passed"] is True
    estimate = required_bytes(n, 1, "float64")
    assert outcome["used"] < estimate, (outcome["used"], estimate)
    assert estimate < 3 * outcome["used"], (outcome["used"], estimate)


def test_two_large_lists_are_no_longer_refused_by_a_total_and_an_instructor_cap_still_applies():
    """Given a record with two inputs of 60,000 elements each, written as lists (120,000 in all, over
    the old fixed total of 100,000),
    when it is validated with the default limits and with an instructor's cap of 100,000,
    then the default accepts it (memory decides, when it runs) and the cap refuses it in one line."""
    from jupyterlab_gradcheck.core.check.record.spec import parse_spec
    from jupyterlab_gradcheck.core.errors import SpecError
    from jupyterlab_gradcheck.core.expr.parser import Limits

    record = {
        "function": "x*y",
        "inputs": {"x": [0.5] * 60000, "y": [0.25] * 60000},
        "analytical_gradient": {"x": 1, "y": 1},
    }
    spec = parse_spec(dict(record))
    assert spec.shapes == {"x": [60000], "y": [60000]}
    with pytest.raises(SpecError) as capped:
        parse_spec(dict(record), limits=Limits(max_input_elements=100_000))
    assert capped.value.message == "inputs have 120000 elements; the limit is 100000"
