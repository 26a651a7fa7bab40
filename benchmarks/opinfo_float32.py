"""B5's float32 family: the OpInfo samples whose float64 twins both tools accept, checked by ours in float32.

For each sample of the float64 family that gradcheck's slow mode and our check both accept (and
whose operator PyTorch does not mark as having a wrong gradient), its float32 twin is the same
sample index of `op.sample_inputs("cpu", torch.float32)` (benchmarks/opinfo_samples.py, family
"float32"), reduced to a scalar by the same weights. Our check runs on it with the expectation
set to autograd's own float32 gradient, so that only our finite differences, tolerances and
diagnosis are under test. gradcheck is not run: its defaults are float64's.

Figures (issue "Beyond float64", must-show 2):
- the share of twins that pass or fail only as `precision_limited`: goal >= 99%;
- the twins called `probable_bug`: goal 0 (each listed with its reason);
- x1.01 at one element (benchmarks/opinfo_sweep.py's `x1.01` on MUTATION_SAMPLES twins) found: goal >= 90%.
"""

from __future__ import annotations

import time

PASS_GOAL = 0.99
DETECTION_GOAL = 0.90
MUTATION_SAMPLES = 240
QUICK_MUTATION_SAMPLES = 12
#: Samples drawn per operator, as the float64 family draws them, so that the twins' indices match.
SAMPLES_PER_OP = 3


def outcome(result: dict) -> str:
    """pass | precision_limited | probable_bug | kink | ... | crash | failed without failure, of one run_ours result."""
    if result["accepts"] is None:
        return "crash"
    record = result.get("record") or {}
    if record.get("passed"):
        return "pass"
    failure = result["failure"]
    return failure.get("diagnosis") or "no diagnosis" if failure else "failed without failure"


def sweep(float64_results: list, quick: bool, progress=None) -> dict:
    """Our verdict on every float32 twin of the accepted float64 samples, and the x1.01 mutations."""
    import torch

    from .opinfo_samples import cases
    from .opinfo_sweep import autograd_gradient, mutated_gradient, run_ours, wrapped

    started = time.perf_counter()
    accepted = {
        r["case"]: r
        for r in float64_results
        if r.get("family", "float64") == "float64"
        and not r["marked_wrong"]
        and r["slow"]["accepts"]
        and r["ours"]["accepts"]
    }
    ops = sorted({r["op"] for r in accepted.values()})
    twins, _ = cases(ops=ops, samples_per_op=SAMPLES_PER_OP, family="float32")
    twins = [t for t in twins if t.label in accepted and not t.marked_wrong]
    results = []
    for k, twin in enumerate(twins):
        torch.manual_seed(0)
        try:
            gradient = autograd_gradient(twin.function, twin.inputs)
        except Exception:  # autograd itself cannot differentiate the float32 twin: outside the family
            continue
        result = run_ours(twin.function, twin.inputs, gradient, dtype="float32")
        results.append(
            {"case": twin.label, "op": twin.op, "numel": twin.numel, "outcome": outcome(result), **_said(result)}
        )
        if progress and k % 100 == 0:
            progress(f"opinfo [float32]: {k}/{len(twins)} samples")
    mutations = []
    passing = [t for t, r in zip(twins, results) if r["outcome"] == "pass"]
    wanted = QUICK_MUTATION_SAMPLES if quick else MUTATION_SAMPLES
    stride = max(1, len(passing) // wanted)
    for k, twin in enumerate(passing[::stride][:wanted]):
        gradient = autograd_gradient(twin.function, twin.inputs)
        wrong = mutated_gradient(gradient, "x1.01", seed=k * 7)
        if wrong is None:
            continue
        mutated = wrapped(twin.function, list(twin.inputs), wrong)
        result = run_ours(mutated, twin.inputs, wrong, dtype="float32")
        mutations.append({"case": twin.label, "detected": result["accepts"] is False, "outcome": outcome(result)})
    return {
        "results": results,
        "mutations": mutations,
        "eligible": len(accepted),
        "twins": len(twins),
        "seconds": time.perf_counter() - started,
    }


def _said(result: dict) -> dict:
    failure = result["failure"] or {}
    return {
        "comparison": failure.get("comparison"),
        "reason": " ".join(str(failure.get("reason") or result.get("error") or "").split())[:240],
    }


def summarise(data: dict) -> dict:
    results = data["results"]
    counts: dict = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    good = counts.get("pass", 0) + counts.get("precision_limited", 0)
    found = data["mutations"]
    return {
        "samples": len(results),
        "counts": counts,
        "good_rate": good / len(results) if results else float("nan"),
        "probable_bug": [r for r in results if r["outcome"] == "probable_bug"],
        "other": [r for r in results if r["outcome"] not in ("pass", "precision_limited", "probable_bug")],
        "detected": sum(m["detected"] for m in found),
        "mutations": len(found),
        "missed": [m["case"] for m in found if not m["detected"]],
    }


def _listed(items: list, limit: int = 8) -> str:
    text = "; ".join(f"{r['case']}: {r['comparison']}: {r['reason'][:140]}" for r in items[:limit])
    return text + (f"; and {len(items) - limit} more (benchmarks/opinfo.md)" if len(items) > limit else "")


def rows(data: dict, quick: bool) -> list[dict]:
    """The float32 family's rows, graded on must-show 2."""
    from . import graded
    from .figure_rows import count_row, share_row

    s = summarise(data)
    label = "B5 OpInfo [float32]" + (" (quick subset)" if quick else "")
    rate, detection = s["good_rate"], s["detected"] / max(1, s["mutations"])
    spread = ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items()))
    return [
        count_row(
            label,
            s["samples"],
            f"float32 twins of the {data['eligible']} float64 samples both tools accept ({data['twins']} found); "
            f"outcomes: {spread}; swept in {data['seconds']:.0f} s",
        ),
        share_row(
            f"{label}: pass or precision_limited",
            rate,
            PASS_GOAL,
            _listed(s["other"] + s["probable_bug"]) or "every twin",
        ),
        graded(
            f"{label}: called probable_bug",
            len(s["probable_bug"]),
            "samples",
            "0",
            not s["probable_bug"],
            _listed(s["probable_bug"]) or "none",
        ),
        graded(
            f"{label}: mutation x1.01 detected, ours",
            round(100 * detection, 1),
            "%",
            f">= {100 * DETECTION_GOAL:g}%",
            detection >= DETECTION_GOAL and s["mutations"] > 0,
            f"{s['detected']} of {s['mutations']}"
            + (f"; missed: {', '.join(s['missed'][:12])}" if s["missed"] else ""),
        ),
    ]


def section(data: dict) -> list[str]:
    """The float32 family's part of benchmarks/opinfo.md: every twin that did not pass, with ours' reason."""
    s = summarise(data)
    lines = [
        "## Family float32 (twins of the float64 samples both tools accept)",
        "",
        f"{s['samples']} samples, swept in {data['seconds']:.0f} s. Outcomes: "
        + ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items()))
        + f". x1.01 at one element found in {s['detected']} of {s['mutations']}.",
        "",
        "### Every twin that did not pass",
        "",
    ]
    lines += [
        f"- {r['case']} ({r['numel']} elements): {r['outcome']}, {r['comparison']}: {r['reason']}"
        for r in data["results"]
        if r["outcome"] != "pass"
    ] or ["- none"]
    lines += ["", "Missed x1.01 mutations: " + (", ".join(s["missed"]) or "none"), ""]
    return lines
