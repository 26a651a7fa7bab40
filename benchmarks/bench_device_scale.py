"""B11, scale on the device: the whole check at n = 10^5, 10^6 and 10^7, beside gradcheck's fast mode.

Workloads, float64: elementwise `(sin(x) * x).sum()` and banded `tanh(x[1:] * x[:-1]).sum()`, each
with its derivative written by hand (no autograd in the expectation).

- ours: the whole check as a user calls it, `jupyterlab_gradcheck.api.check(f, grad=..., x=x,
  ledger=L)`: the expectation appended, the four backward observations, finite differences, the
  embedded gradcheck, the comparisons, the record and its observation appended, with the large
  values written to the ledger's blob store;
- gradcheck fast: `torch.autograd.gradcheck(f, (x,), fast_mode=True)`, timed in the same rounds.

Every row gives the record's size (its canonical JSON), the ledger bytes one check appends and the
blob bytes it writes. With `--device cuda` (scripts/gpu-check.sh) the sizes are 10^5, 10^6 and
10^7, and the goal is the issue's: n = 10^7 elementwise checked at <= 3x fast mode. On the CPU the
sizes are 10^5 and 10^6 (quick: 10^5), reported without a goal: there the limit is what memory and
the time a user waits allow (core/run.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from . import device, format_seconds, graded, interleaved_medians, row
from .bench_structure import banded
from .whole_check import elementwise

CUDA_SIZES = (10**5, 10**6, 10**7)
CPU_SIZES = (10**5, 10**6)
QUICK_SIZES = (10**5,)
#: The issue's goal at 10^7 on cuda: the whole check at most this many times gradcheck's fast mode.
FAST_GOAL = 3.0
#: Largest record (canonical JSON) and ledger append, blobs apart, at any n.
RECORD_GOAL_BYTES = 64 * 1024


def elementwise_gradient(x):
    import torch

    return torch.sin(x) + x * torch.cos(x)


def banded_gradient(x):
    """d/dx_j of sum_k tanh(x_k x_{k+1}): sech^2(x_j x_{j+1}) x_{j+1} + sech^2(x_{j-1} x_j) x_{j-1}."""
    import torch

    sech2 = 1 - torch.tanh(x[1:] * x[:-1]) ** 2
    gradient = torch.zeros_like(x)
    gradient[:-1] += sech2 * x[1:]
    gradient[1:] += sech2 * x[:-1]
    return gradient


WORKLOADS = {
    "elementwise (sin(x)*x).sum()": (elementwise, elementwise_gradient),
    "banded tanh(x[1:]*x[:-1]).sum()": (banded, banded_gradient),
}


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) if folder.exists() else 0


def measure(function, gradient, n: int, rounds: int) -> dict:
    """Whole-check and fast-mode medians at n, with the record's size and the bytes one check writes."""
    import torch

    from jupyterlab_gradcheck.api import check
    from jupyterlab_gradcheck.core.ledger.store import canonical_json, jsonable

    generator = torch.Generator().manual_seed(11)
    x = (torch.rand(n, dtype=torch.float64, generator=generator) * 4 - 2).to(device())
    expected = gradient(x)
    folder = Path(tempfile.mkdtemp(prefix="b11-"))
    ledger = folder / "scale.gradcheck.jsonl"
    leaf = x.clone().requires_grad_(True)
    ours = lambda: check(function, grad=expected, x=x, ledger=str(ledger), id=f"scale-{n}")  # noqa: E731
    fast = lambda: torch.autograd.gradcheck(function, (leaf,), fast_mode=True)  # noqa: E731
    first = ours()
    before_line, before_blobs = ledger.stat().st_size, _folder_bytes(folder) - ledger.stat().st_size
    again = ours()
    appended = ledger.stat().st_size - before_line
    blobs = _folder_bytes(folder) - ledger.stat().st_size - before_blobs
    times = interleaved_medians({"ours": ours, "fast": fast}, rounds, warmup=0)
    record_bytes = len(canonical_json(jsonable(again.record)).encode("utf-8"))
    for path in sorted(folder.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    folder.rmdir()
    return {
        "ours": times["ours"]["median"],
        "fast": times["fast"]["median"],
        "passed": first.passed and again.passed,
        "failure": (first.record.get("failure") or {}).get("reason", ""),
        "record_bytes": record_bytes,
        "appended": appended,
        "blob_bytes": blobs,
        "first_blob_bytes": before_blobs,
    }


def _note(m: dict, n: int) -> str:
    verdict = "passed" if m["passed"] else f"FAILED: {m['failure'][:160]}"
    return (
        f"on {device()}, n={n}: whole check {format_seconds(m['ours'])}, gradcheck fast {format_seconds(m['fast'])} "
        f"(medians, same rounds); {verdict}; record {m['record_bytes']} B, ledger append {m['appended']} B, "
        f"blobs {m['first_blob_bytes']} B written by the first check, {m['blob_bytes']} B by a repeat "
        "(content-addressed: identical values are not written twice)"
    )


def run(quick: bool) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    on_cuda = device().startswith("cuda")
    sizes = CUDA_SIZES if on_cuda else (QUICK_SIZES if quick else CPU_SIZES)
    rows = []
    for label, (function, gradient) in WORKLOADS.items():
        for n in sizes:
            rounds = 3 if quick or n >= 10**6 else 5
            m = measure(function, gradient, n, rounds)
            ratio = m["ours"] / m["fast"]
            name = f"B11 {label}, n={n}, {device()}: whole check / gradcheck fast"
            if on_cuda and n == 10**7 and function is elementwise:
                rows.append(
                    graded(
                        name,
                        round(ratio, 2),
                        "x",
                        f"<= {FAST_GOAL:g}x",
                        ratio <= FAST_GOAL and m["passed"],
                        _note(m, n),
                    )
                )
            else:
                rows.append(row(name, round(ratio, 2), "x", "-", "INFO", _note(m, n)))
            small = m["record_bytes"] <= RECORD_GOAL_BYTES and m["appended"] <= RECORD_GOAL_BYTES
            rows.append(
                graded(
                    f"B11 {label}, n={n}, {device()}: record / ledger append, blobs apart",
                    f"{m['record_bytes']} / {m['appended']}",
                    "B",
                    "<= 65536 each",
                    small,
                    _note(m, n),
                )
            )
    if not on_cuda:
        rows.append(
            row(
                "B11 n=10^7 on cuda",
                "-",
                "",
                f"<= {FAST_GOAL:g}x fast",
                "INFO",
                "runs with --device cuda (scripts/gpu-check.sh); no CUDA device here",
            )
        )
    return rows
