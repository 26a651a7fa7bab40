"""How many elements a check may have: what its device's memory holds, not a CPU-sized constant.

A check keeps several tensors the size of its inputs at once: the inputs and their leaves, the
expectation, four backward observations and the finite-difference estimate, the shifted copies and
outputs of the evaluations in flight, the embedded gradcheck's own, and the comparisons' temporaries,
plus the stored copies of the large values on their way to the ledger's blob store. `WORKING_COPIES`
counts them (measured: see tests/core/check/test_memory_admission.py); the largest tensor the
function builds (`work_elements`, from the written expression's shapes) is held a few times over as
well. A check whose estimate exceeds the free memory of its device is refused before anything runs or
is written, with the numbers, so a card with 139 GiB takes 10^7 elements and a laptop refuses what
would swap.

Torch-free: the free memory comes with the device list (core/check/environment.py
`available_devices` where torch runs; the server asks its workers).
"""

from __future__ import annotations

import math

from ...errors import SpecError
from .devices import resolve_device

#: Input-sized tensors alive at the peak of a check (see the module docstring). Measured peaks of a
#: whole ledgered check at 2-3x10^6 float64 elements: 32-36 copies (elementwise) and 48-49 (banded);
#: this bound leaves a quarter more.
WORKING_COPIES = 56
#: Copies of the largest intermediate the function builds that a check holds at once (the base and
#: shifted evaluations, and autograd's saved tensors).
INTERMEDIATE_COPIES = 6
#: Bytes per element of each dtype a record may name.
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


class OverMemory(SpecError):
    """A check that would not fit in its device's free memory: bad input, refused before it runs."""

    code = "over_memory"


def required_bytes(elements: int, work_elements: int, dtype: str) -> int:
    """Bytes a check of `elements` input elements, building tensors of up to `work_elements`, holds at its peak."""
    size = DTYPE_BYTES.get(dtype, 8)
    return size * (WORKING_COPIES * elements + INTERMEDIATE_COPIES * max(work_elements, elements))


def elements_that_fit(free_bytes: int, dtype: str) -> int:
    """The most input elements of an elementwise check that `free_bytes` holds."""
    size = DTYPE_BYTES.get(dtype, 8)
    return max(0, free_bytes // (size * (WORKING_COPIES + INTERMEDIATE_COPIES)))


def admit_memory(spec, device: str, devices: list[dict], fraction: float = 1.0) -> None:
    """OverMemory when `spec`, run on `device`, needs more than `fraction` of that device's free memory.

    A device entry without `free_bytes` (a kind whose memory torch cannot read), or a fraction of 0,
    admits anything: the run itself then fails with torch's out-of-memory error, kept as a failed
    attempt like any other."""
    entry = next((d for d in devices if d.get("id") == device), None)
    free = None if entry is None else entry.get("free_bytes")
    if free is None or fraction <= 0:
        return
    free = int(free * fraction)
    elements = sum(math.prod(shape) for shape in spec.shapes.values())
    needed = required_bytes(elements, getattr(spec, "work_elements", 1), spec.dtype)
    if needed > free:
        raise OverMemory(
            "inputs have {elements} elements in {dtype}: the check needs about {needed} at once, and {device} "
            "has {free} free (at most {fit} elements fit)",
            elements=elements,
            dtype=spec.dtype,
            needed=_gib(needed),
            device=device,
            free=_gib(free),
            fit=elements_that_fit(free, spec.dtype),
            field="inputs",
        )


def resolve_and_admit(spec, devices: list[dict], fraction: float = 1.0) -> str:
    """The concrete device of `spec` (core/check/record/devices.py), once `fraction` of its free memory is
    known to hold the check."""
    device = resolve_device(spec.device, devices)
    admit_memory(spec, device, devices, fraction)
    return device


def _gib(count: int) -> str:
    return f"{count / 2**30:.2f} GiB"
