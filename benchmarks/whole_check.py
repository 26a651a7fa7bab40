"""B9's whole-check rows: `jupyterlab_gradcheck.api.check` as a user calls it, beside gradcheck and the floor.

Each workload is timed in one run, interleaved (benchmarks.interleaved_medians): ours without a ledger
(`ledger=False`), ours appending to a fresh ledger in a temporary folder, gradcheck's fast mode, and the
evaluation floor: the check's own mandatory work done bare, 2 x colours + 1 evaluations of the function
(one by one, under no_grad), one backward and gradcheck's fast mode (which the check embeds). Gradcheck's
slow mode runs once. Every row names the record's JSON size and the bytes each check appends to the ledger
(and to its blob store, the first time a tensor is seen).

A goal row is graded on the ledgered check where it meets the goal, else on the check without a ledger,
and says which.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import format_seconds, graded, interleaved_medians, row, timed_once


@dataclass
class Workload:
    """A function of one input x, its size, and the goals its whole check is held to."""

    label: str
    function: object
    n: int
    fast_goal: float | None = None  #: ours / gradcheck fast at most this
    slow_goal: float | None = None  #: gradcheck slow / ours at least this
    floor_goal: float | None = None  #: ours / the evaluation floor at most this
    finite_difference: dict | None = None
    modes: bool = False  #: gradcheck slow with forward AD and batched gradients on (a custom Function's modes)
    slow_goal_ratio: float | None = None  #: ours / gradcheck slow (same modes) at most this


def _input(n: int):
    import torch

    return torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(7))


def autograd_gradient(function, x):
    """d sum(f(x)) / dx by autograd: the expectation a user who trusts autograd would write."""
    import torch

    leaf = x.clone().requires_grad_(True)
    output = function(leaf)
    (gradient,) = torch.autograd.grad(output.sum(), leaf)
    return gradient


def gradcheck(function, x, *, fast: bool, modes: bool = False) -> bool:
    import torch

    leaf = x.clone().requires_grad_(True)
    return bool(
        torch.autograd.gradcheck(
            function,
            (leaf,),
            fast_mode=fast,
            check_forward_ad=modes,
            check_batched_grad=modes,
            raise_exception=False,
        )
    )


def evaluation_floor(function, x, evaluations: int):
    """The check's mandatory work done bare: `evaluations` calls, one backward, gradcheck fast."""
    import torch

    def floor():
        with torch.no_grad():
            for _ in range(evaluations):
                function(x)
        leaf = x.clone().requires_grad_(True)
        function(leaf).sum().backward()
        gradcheck(function, x, fast=True)

    return floor


def colours_of(record: dict) -> int:
    """The colours the check's finite differences took (1 for every element shifted at once)."""
    info = record["observations"]["finite_difference"]["inputs"]["x"]
    if "colours" in info:
        return int(info["colours"])
    return 1 if info.get("structure", "general") not in ("general",) else int(info["forward_evaluations"]) // 2


def _sizes(check, ledger: Path) -> tuple[int, int, int]:
    """(record JSON bytes, ledger bytes one more check appends, blob bytes it adds) of one ledgered call."""
    store = ledger.with_name(ledger.name.replace(".jsonl", ".blobs"))

    def blob_bytes():
        return sum(p.stat().st_size for p in store.glob("*")) if store.exists() else 0

    before, blobs_before = (ledger.stat().st_size if ledger.exists() else 0), blob_bytes()
    result = check()
    record = json.dumps(result.record, default=str)
    return len(record), ledger.stat().st_size - before, blob_bytes() - blobs_before


def measure(workload: Workload, quick: bool) -> dict:
    """Medians of ours, ours ledgered, gradcheck fast and the floor; slow mode once; sizes."""
    from jupyterlab_gradcheck import api

    function, x = workload.function, _input(workload.n)
    grad = autograd_gradient(function, x)
    folder = tempfile.mkdtemp(prefix="b9-")
    ledger = Path(folder) / "b9.gradcheck.jsonl"
    options = {"finite_difference": workload.finite_difference} if workload.finite_difference else {}

    def ours():
        return api.check(function, grad=grad, x=x, ledger=False, **options)

    def ours_ledgered():
        return api.check(function, grad=grad, x=x, ledger=ledger, **options)

    first = ours()
    record = first.record
    evaluations = 2 * colours_of(record) + 1
    first_size = _sizes(ours_ledgered, ledger)  # the first append: expectation, observation and blobs
    candidates = {
        "ours": ours,
        "ledgered": ours_ledgered,
        "fast": lambda: gradcheck(function, x, fast=True),
        "floor": evaluation_floor(function, x, evaluations),
    }
    times = interleaved_medians(candidates, 5 if quick else 11, warmup=1)
    record_bytes, appended, blobs = _sizes(ours_ledgered, ledger)
    slow_seconds, _, slow_passed = timed_once(lambda: gradcheck(function, x, fast=False, modes=workload.modes))
    medians = {name: found["median"] for name, found in times.items()}
    cpu = {name: found["cpu_median"] for name, found in times.items()}
    return {
        "cpu": cpu,
        "passed": record["passed"],
        "record": record,
        "medians": medians,
        "slow": slow_seconds,
        "slow_passed": slow_passed,
        "evaluations": evaluations,
        "record_bytes": record_bytes,
        "appended": appended,
        "first_appended": first_size[1],
        "blobs": first_size[2] + blobs,
    }


def note_of(workload: Workload, found: dict) -> str:
    m, cpu = found["medians"], found["cpu"]
    info = found["record"]["observations"]["finite_difference"]["inputs"]["x"]
    path = info.get("structure", "projected" if "projection" in str(info) else "general")
    return (
        f"ours {format_seconds(m['ours'])} (ledgered {format_seconds(m['ledgered'])}), gradcheck fast "
        f"{format_seconds(m['fast'])}, slow {format_seconds(found['slow'])} (one call"
        f"{', forward AD and batched gradients on' if workload.modes else ''}), floor {format_seconds(m['floor'])} "
        f"({found['evaluations']} evaluations + backward + gradcheck fast); path {path}, "
        f"{info.get('forward_evaluations', '?')} forward evaluations; passed={found['passed']}; record "
        f"{found['record_bytes']} B of JSON, {found['appended']} ledger bytes appended per check "
        f"({found['first_appended']} the first time, with {found['blobs']} B of blobs); in this process's CPU "
        f"time, which a neighbour's load does not inflate: ours / fast {cpu['ours'] / cpu['fast']:.2f}x, "
        f"ledgered / fast {cpu['ledgered'] / cpu['fast']:.2f}x, ours / floor {cpu['ours'] / cpu['floor']:.2f}x"
    )


def _graded(name: str, ratios: dict, goal: str, meets, note: str, passed: bool) -> dict:
    """A goal row on the ledgered check where it meets the goal, else on the check without a ledger."""
    ledgered, plain = ratios["ledgered"], ratios["ours"]
    if meets(ledgered):
        value, which = ledgered, "ledgered check meets it"
    elif meets(plain):
        value, which = plain, f"only the check with ledger=False meets it (ledgered {ledgered:.2f}x)"
    else:
        value, which = ledgered, f"neither meets it (ledger=False {plain:.2f}x)"
    return graded(name, round(value, 2), "x", goal, meets(value) and passed, f"{which}; {note}")


def rows_of(workload: Workload, quick: bool) -> list[dict]:
    """The rows of one workload: each goal it has (INFO rows in the quick run)."""
    found = measure(workload, quick)
    m, note, passed = found["medians"], note_of(workload, found), found["passed"]
    name = f"B9 whole check {workload.label}, n={workload.n}"
    ratios = {
        "fast": {k: m[k] / m["fast"] for k in ("ours", "ledgered")},
        "slow": {k: found["slow"] / m[k] for k in ("ours", "ledgered")},
        "floor": {k: m[k] / m["floor"] for k in ("ours", "ledgered")},
        "slow_ratio": {k: m[k] / found["slow"] for k in ("ours", "ledgered")},
    }
    specs = [
        ("fast", f"{name}: ours / gradcheck fast", workload.fast_goal, lambda r, g: r <= g, "<= {g:g}x"),
        ("slow", f"{name}: gradcheck slow / ours", workload.slow_goal, lambda r, g: r >= g, ">= {g:g}x"),
        ("floor", f"{name}: ours / evaluation floor", workload.floor_goal, lambda r, g: r <= g, "<= {g:g}x"),
        (
            "slow_ratio",
            f"{name}: ours / gradcheck slow{' (same modes)' if workload.modes else ''}",
            workload.slow_goal_ratio,
            lambda r, g: r <= g,
            "<= {g:g}x",
        ),
    ]
    rows = []
    for key, title, goal, test, text in specs:
        if goal is None and key not in ("fast", "floor"):
            continue
        if quick or goal is None:
            value = ratios[key]["ledgered"]
            rows.append(
                row(title, round(value, 2), "x", "-", "INFO", f"ledger=False {ratios[key]['ours']:.2f}x; {note}")
            )
        else:
            rows.append(
                _graded(title, ratios[key], text.format(g=goal), lambda r, g=goal, t=test: t(r, g), note, passed)
            )
    return rows


def planted_row(function, gradient, n: int, index: int, quick: bool) -> dict:
    """The whole check in projected mode on a Function with one wrong Jacobian entry: the element it names."""
    from jupyterlab_gradcheck import api

    from .bench_structure import wrong_at

    x = _input(n)
    buggy = wrong_at(function, gradient, index, 1e-3)
    seconds, _, result = timed_once(
        lambda: api.check(buggy, x=x, ledger=False, finite_difference={"mode": "projected"})
    )
    record = result.record
    failure = record.get("failure") or {}
    named = (failure.get("worst") or {}).get("index", failure.get("index"))
    note = (
        f"backward 1e-3 too high at Jacobian entry ({index}, {index}); passed={record['passed']}, named x{named} "
        f"in {format_seconds(seconds)}; failure {failure.get('comparison')}"
    )
    title = f"B9 whole check dense tanh(A @ x), n={n}, projected: planted one-element bug named"
    if quick:
        return row(title, str(named), "index", "-", "INFO", note)
    return graded(title, str(named), "index", f"[{index}]", not record["passed"] and named == [index], note)


def workloads(quick: bool) -> list[Workload]:
    """The workloads of the issue at n = 10^4 (dense: 3,000 projected, 1,000 auto); quick: smaller."""
    import torch

    from .bench_structure import banded, block_diagonal, dense

    n = 1000 if quick else 10000
    shape = (20, 50) if quick else (100, 100)
    dense_n = 300 if quick else 3000
    auto_n = 200 if quick else 1000
    weights = torch.rand(auto_n, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    projected_function, _ = dense(dense_n)
    return [
        Workload("elementwise (sin(x) * x).sum()", elementwise, n, fast_goal=3.0, slow_goal=100.0),
        Workload("banded tanh(x[1:] * x[:-1]).sum()", banded, n, fast_goal=3.0, slow_goal=100.0),
        Workload(
            f"block-diagonal (softmax(X.reshape{shape}, dim=1) * W).sum()",
            block_diagonal(*shape),
            n,
            slow_goal=100.0,
            floor_goal=1.5,
        ),
        Workload(
            "dense tanh(A @ x), projected",
            projected_function,
            dense_n,
            fast_goal=1.0,
            finite_difference={"mode": "projected"},
        ),
        Workload("dense (w * softmax(x)).sum(), auto", weighted_softmax(weights), auto_n, slow_goal_ratio=1.0),
        Workload(
            "dense (w * softmax(x)).sum() through a Function with a jvp, auto",
            weighted_softmax_function(weights),
            auto_n,
            slow_goal_ratio=1.0,
            modes=True,
        ),
    ]


def elementwise(x):
    import torch

    return (torch.sin(x) * x).sum()


def weighted_softmax(weights):
    import torch

    def function(x):
        return (weights * torch.softmax(x, 0)).sum()

    return function


def weighted_softmax_function(weights):
    """(w * softmax(x)).sum() as a custom Function with its own backward and jvp."""
    import torch

    class WeightedSoftmax(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return (weights * torch.softmax(x, 0)).sum()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            p = torch.softmax(x, 0)
            return grad * p * (weights - (weights * p).sum())

        @staticmethod
        def jvp(ctx, tangent):
            (x,) = ctx.saved_tensors
            p = torch.softmax(x, 0)
            return (tangent * p * (weights - (weights * p).sum())).sum()

    return WeightedSoftmax.apply


def run(quick: bool) -> list[dict]:
    """Every workload's rows, then the planted bug of the projected mode."""
    from .bench_structure import WRONG_AT, dense

    rows = []
    for workload in workloads(quick):
        rows += rows_of(workload, quick)
    function, gradient = dense(300 if quick else 3000)
    rows.append(planted_row(function, gradient, 300 if quick else 3000, WRONG_AT, quick))
    return rows
