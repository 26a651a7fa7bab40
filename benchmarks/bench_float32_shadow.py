"""B14: what a float32 check sees with its float64 shadow, and what the shadow costs.

The eight hand-written Functions of benchmarks/float32_functions.py (layer norm, softmax cross-entropy,
GELU, attention, depthwise conv1d, rotary embedding, bias + SiLU, RMSNorm), each correct and with the
gradient of its first input off by 1e-4 of its value at its largest element, checked in float32 by
`api.check` with its float64 shadow (the default) and without it. The cost rows time, interleaved with
one torch thread, per Function: our float32 check with and without the shadow, our float64 check of the
same Function, and torch's gradcheck in float64 and in float32, so the shadow's extra time is read
against one float64 check in the same rounds.
"""

from __future__ import annotations

import statistics
import warnings

from . import graded, interleaved_medians, row

RELATIVE = 1e-4


def _verdicts(functions, check, torch) -> dict:
    """Per Function: passed (correct), caught (1e-4, at the planted element), caught without the shadow."""
    found = {"correct": 0, "caught": 0, "named": 0, "caught_alone": 0, "not_run": 0}
    for entry in functions:
        inputs = entry.inputs(torch.float32)
        correct = check(entry.make(0.0), dtype="float32", ledger=False, **inputs).record
        wrong = check(entry.make(RELATIVE), dtype="float32", ledger=False, **inputs).record
        alone = check(entry.make(RELATIVE), dtype="float32", ledger=False, shadow=False, **inputs).record
        first = next(iter(inputs))
        gradient = torch.tensor(correct["observations"]["autograd_grad"]["gradients"][first]["value"])
        planted = [int(i) for i in torch.unravel_index(gradient.abs().argmax(), gradient.shape)]
        failure = wrong.get("failure") or {}
        found["correct"] += correct["passed"]
        found["not_run"] += correct["float64_shadow"]["status"] != "observed"
        found["caught"] += not wrong["passed"]
        found["named"] += failure.get("input") == first and failure.get("index") == planted
        found["caught_alone"] += not alone["passed"]
    return found


def run(quick: bool) -> list[dict]:
    import torch

    from jupyterlab_gradcheck.api import check

    from .float32_functions import FUNCTIONS

    torch.set_num_threads(1)
    n = len(FUNCTIONS)
    found = _verdicts(FUNCTIONS, check, torch)
    rows = [
        graded(
            "B14 float32 shadow: correct Functions passed", found["correct"], f"of {n}", f"= {n}", found["correct"] == n
        ),
        graded(
            "B14 float32 shadow: 1e-4 one-element error caught, element named",
            found["named"],
            f"of {n}",
            ">= 7",
            found["named"] >= 7,
            f"caught {found['caught']}; without the shadow float32 alone catches {found['caught_alone']}; "
            f"shadow not run on {found['not_run']}",
        ),
    ]
    ratios, extras = [], {}
    for entry in FUNCTIONS:
        inputs32 = entry.inputs(torch.float32)
        inputs64 = entry.inputs(torch.float64)
        function = entry.make(0.0)
        tensors64 = tuple(t.detach().requires_grad_(True) for t in inputs64.values())
        tensors32 = tuple(t.detach().requires_grad_(True) for t in inputs32.values())
        names = list(inputs64)

        def positional(*tensors, function=function, names=names):
            return function(**dict(zip(names, tensors)))

        with warnings.catch_warnings():  # gradcheck warns that float32 inputs will likely fail: it is timed anyway
            warnings.simplefilter("ignore", UserWarning)
            medians = _timed(check, torch, function, positional, inputs32, inputs64, tensors32, tensors64, quick)
        median = {name: value["median"] for name, value in medians.items()}
        extra = median["shadowed"] - median["alone"]
        ratios.append(extra / median["float64"])
        extras[entry.name] = median
    return rows + _cost_rows(ratios, extras)


def _timed(check, torch, function, positional, inputs32, inputs64, tensors32, tensors64, quick: bool) -> dict:
    """The five candidates of one Function, interleaved."""
    return interleaved_medians(
        {
            "shadowed": lambda: check(function, dtype="float32", ledger=False, **inputs32),
            "alone": lambda: check(function, dtype="float32", ledger=False, shadow=False, **inputs32),
            "float64": lambda: check(function, dtype="float64", ledger=False, **inputs64),
            "gradcheck64": lambda: torch.autograd.gradcheck(positional, tensors64, raise_exception=False),
            "gradcheck32": lambda: torch.autograd.gradcheck(positional, tensors32, raise_exception=False),
        },
        rounds=3 if quick else 15,
        warmup=1 if quick else 3,
    )


def _cost_rows(ratios: list, extras: dict) -> list[dict]:
    """The shadow's extra time against one float64 check, and the whole against gradcheck."""
    worst = max(ratios)
    totals = {name: sum(m[name] for m in extras.values()) for name in next(iter(extras.values()))}
    return [
        graded(
            "B14 float32 shadow: its extra time / one float64 check, worst of the eight",
            round(worst, 2),
            "x",
            "<= 1.1",
            worst <= 1.1,
            f"median {statistics.median(ratios):.2f}, each: "
            + ", ".join(f"{name} {ratio:.2f}" for name, ratio in zip(extras, ratios))
            + "; summed over the eight (ms): float32 with shadow "
            f"{1e3 * totals['shadowed']:.0f}, without {1e3 * totals['alone']:.0f}, our float64 check "
            f"{1e3 * totals['float64']:.0f}, gradcheck float64 {1e3 * totals['gradcheck64']:.0f}, gradcheck float32 "
            f"{1e3 * totals['gradcheck32']:.0f}",
        ),
        row(
            "B14 float32 shadow: float32 check with shadow / gradcheck float64, summed",
            round(totals["shadowed"] / totals["gradcheck64"], 2),
            "x",
            "-",
            "INFO",
            "one thread, interleaved in the same rounds",
        ),
    ]
