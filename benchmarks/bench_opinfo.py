"""B5, right on every op: PyTorch's OpInfo database, our check against torch.autograd.gradcheck.

Workload: every operator of `torch.testing._internal.common_methods_invocations.op_db` that
supports autograd on the CPU, its first SAMPLES_PER_OP samples with at most 2,000
differentiable elements, in three families (benchmarks/opinfo_samples.py): **float64**, each
sample reduced to a scalar by a fixed weighting; **float64, several outputs**, the samples
that return two or more differentiable outputs, checked output by output with the same
weights as grad_output; **complex128**, the OpInfo's complex samples with real weights as
grad_output. On each sample, in the same run: our full check (expectation = autograd's own
gradient, so only our finite differences are under test), gradcheck's slow mode and its fast
mode (benchmarks/opinfo_sweep.py). Then MUTATION_SAMPLES[family] samples of each family
wrapped in a custom Function whose backward is wrong at one element (x1.01, +1e-4 of the
gradient's scale, two elements swapped; for the non-scalar families one output's part of the
gradient, benchmarks/opinfo_mutations.py), through all three. Where the float64 family runs, its
**float32** twins follow: the samples both tools accept in float64, checked by ours in float32
(benchmarks/opinfo_float32.py: pass or precision_limited, probable_bug, x1.01 detection).

Goals (docs/accuracy.md), per family and over all of them:
- false failures (gradcheck slow accepts a correct op, we fail or crash) <= 1% of the samples
  slow mode accepts; operators PyTorch marks as having a wrong gradient are listed apart;
- detection of the +1e-4 error >= 90%, and of every kind >= gradcheck's slow mode;
- median cost per sample <= gradcheck's slow mode, timed in the same run (ours includes its
  own embedded gradcheck call, the step sweep and everything else a check records); graded on
  the float64 family, where it was set, and reported for the others.

`--quick` takes a subset: every 12th float64 operator and the operators of the bugs this
benchmark found, one sample each, a few operators of each other family (QUICK_FAMILY_OPS), and
QUICK_MUTATION_SAMPLES mutation samples per family. `python -m benchmarks.bench_opinfo` runs the
full sweep alone and writes benchmarks/opinfo.md with every disagreement; `--family NAME` (repeatable)
sweeps only the families named and writes nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

from . import graded, row

#: Every disagreement of a full run, per family (written by `run` and by `main`).
REPORT = Path(__file__).resolve().parent / "opinfo.md"
FALSE_FAILURE_GOAL = 0.01
DETECTION_GOAL = 0.90
COST_GOAL = 1.0
#: Mutated samples per family (the several-outputs family has fewer correct samples to draw from).
MUTATION_SAMPLES = {"float64": 240, "float64, several outputs": 120, "complex128": 120}
QUICK_MUTATION_SAMPLES = {"float64": 24, "float64, several outputs": 6, "complex128": 8}
FAMILIES = tuple(MUTATION_SAMPLES)
#: Samples per operator: one for complex128, whose 326 operators' gradcheck slow mode costs up to
#: 20 s a sample (the FFTs), so that `make bench` stays within minutes on two cores.
SAMPLES_PER_OP = {"float64": 3, "float64, several outputs": 3, "complex128": 1}
#: A non-scalar family's sample is mutated only where gradcheck's slow mode took at most this long
#: on the correct function: slow mode on a wrong backward that recomputes autograd costs ~5x more.
MUTATION_SLOW_LIMIT_S = 0.25
#: Operators of the bugs this benchmark found, always in the quick subset.
QUICK_OPS = (
    "as_strided",
    "as_strided_copy",
    "kron",
    "nn.functional.conv2d",
    "sgn",
    "nn.functional.batch_norm",
    "nn.functional.binary_cross_entropy",
    "norm",
    "linalg.norm",
    "logcumsumexp",
    "tan",
    "polygamma",
    "_softmax_backward_data",
    "nn.functional.prelu",
    "lu_solve",
    "mm",
    "fft.fft2",
)
#: A few operators of each non-scalar family for the quick subset: splits and views, statistics,
#: factorisations; complex elementwise, non-holomorphic, reductions, linear algebra and an FFT.
QUICK_FAMILY_OPS = {
    "float64, several outputs": (
        "split",
        "var_mean",
        "aminmax",
        "meshgrid.list_of_tensors",
        "linalg.slogdet",
        "linalg.eigh",
    ),
    "complex128": (
        "mul",
        "exp",
        "sum",
        "linalg.det",
        "matmul",
        "real",
        "view_as_real",
        "svd",
        "conj_physical",
        "linalg.inv",
    ),
}


def _family_cases(family: str, quick: bool) -> tuple[list, dict]:
    """The cases of one family: all of them, or the quick subset."""
    from .opinfo_samples import cases

    if not quick:
        return cases(family=family, samples_per_op=SAMPLES_PER_OP[family])
    if family != "float64":
        return cases(ops=list(QUICK_FAMILY_OPS[family]), samples_per_op=1, family=family)
    chosen, counts = cases(limit_ops=45, samples_per_op=1)
    extra, _ = cases(ops=list(QUICK_OPS), samples_per_op=1)
    seen = {c.label for c in chosen}
    return chosen + [c for c in extra if c.label not in seen], counts


def sweep(quick: bool, progress=None, families: tuple = FAMILIES) -> dict:
    """Every verdict, time and mutation result of the sweep, with the counts of what was left out."""
    import torch

    from .opinfo_float32 import sweep as float32_sweep
    from .opinfo_sweep import run_case, run_mutations

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    started = time.perf_counter()
    results, mutations, counts, seconds = [], [], {}, {}
    for family in families:
        begun = time.perf_counter()
        chosen, counts[family] = _family_cases(family, quick)
        done = []
        for k, case in enumerate(chosen):
            done.append(run_case(case))
            if progress and k % 100 == 0:
                progress(f"opinfo [{family}]: {k}/{len(chosen)} samples")
        wanted = (QUICK_MUTATION_SAMPLES if quick else MUTATION_SAMPLES)[family]
        eligible = [
            c
            for c, r in zip(chosen, done)
            if not c.marked_wrong
            and r["slow"]["accepts"]
            and r["ours"]["accepts"]
            and (family == "float64" or r["slow"]["seconds"] <= MUTATION_SLOW_LIMIT_S)
        ]
        stride = max(1, len(eligible) // wanted)
        for k, case in enumerate(eligible[::stride][:wanted]):
            mutations.append({"case": case.label, "family": family, **run_mutations(case, seed=k)})
        results += done
        seconds[family] = time.perf_counter() - begun
    float32 = float32_sweep(results, quick, progress) if "float64" in families else None
    return {
        "float32": float32,
        "results": results,
        "mutations": mutations,
        "counts": counts,
        "family_seconds": seconds,
        "seconds": time.perf_counter() - started,
    }


def of_family(data: dict, family: str | None) -> dict:
    """The sweep's data restricted to one family (None: all of them)."""
    if family is None:
        return data
    return {
        "results": [r for r in data["results"] if r.get("family", "float64") == family],
        "mutations": [m for m in data["mutations"] if m.get("family", "float64") == family],
        "counts": data["counts"].get(family, {}),
        "seconds": data.get("family_seconds", {}).get(family, 0.0),
    }


def _verdict(result: dict, who: str) -> str:
    accepts = result[who]["accepts"]
    return "crash" if accepts is None else ("accept" if accepts else "reject")


def summarise(data: dict) -> dict:
    """The figures: acceptance, the agreement matrix, false failures, detection, cost."""
    results = data["results"]
    counted = [r for r in results if not r["marked_wrong"]]
    apart = [r for r in results if r["marked_wrong"]]
    matrix: dict = {}
    for r in counted:
        key = (_verdict(r, "ours"), _verdict(r, "slow"))
        matrix[key] = matrix.get(key, 0) + 1
    slow_accepts = [r for r in counted if r["slow"]["accepts"]]
    false_failures = [r for r in slow_accepts if r["ours"]["accepts"] is not True]
    disagreements = [r for r in counted if _verdict(r, "ours") != _verdict(r, "slow")]
    detection = {}
    for kind in ("x1.01", "+1e-4", "swap"):
        applied = [m[kind] for m in data["mutations"] if m.get(kind)]
        detection[kind] = {
            who: (sum(m[who] for m in applied) / len(applied) if applied else float("nan"))
            for who in ("ours", "slow", "fast")
        }
        detection[kind]["samples"] = len(applied)
        detection[kind]["missed"] = [_name(m) for m in data["mutations"] if m.get(kind) and not m[kind]["ours"]]
    times = {who: [r[who]["seconds"] for r in results] for who in ("ours", "slow", "fast")}
    medians = {who: statistics.median(v) for who, v in times.items()}
    per_sample = [r["ours"]["seconds"] / r["slow"]["seconds"] for r in results if r["slow"]["seconds"] > 0]
    return {
        "samples": len(results),
        "ops": len({r["op"] for r in results}),
        "apart": apart,
        "matrix": matrix,
        "accepted": {
            who: sum(r[who]["accepts"] is True for r in counted) / max(1, len(counted))
            for who in ("ours", "slow", "fast")
        },
        "slow_accepts": len(slow_accepts),
        "false_failures": false_failures,
        "disagreements": disagreements,
        "detection": detection,
        "medians": medians,
        "median_ratio_per_sample": statistics.median(per_sample),
        "counted": len(counted),
    }


def _name(item: dict) -> str:
    """A sample's label with its family where that is not float64 (the same sample may be in two families)."""
    family = item.get("family", "float64")
    return item["case"] if family == "float64" else f"{item['case']} [{family}]"


def _reason(r: dict) -> str:
    """Why ours and slow mode disagree on one sample, from each side's own words."""
    ours = r["ours"]
    if ours["accepts"] is None:
        side = f"ours crashed: {ours['error']}"
    elif ours["failure"]:
        side = f"ours {ours['failure']['diagnosis']}: {ours['failure']['reason']}"
    else:
        side = "ours accepts"
    slow = r["slow"]
    other = (
        "slow accepts"
        if slow["accepts"]
        else f"slow {'crashed' if slow['accepts'] is None else 'rejects'}: {slow['error']}"
    )
    outputs = f", {r['outputs']} outputs" if r.get("outputs", 1) > 1 else ""
    return f"{_name(r)} ({r['numel']} elements{outputs}): {side} | {other}"


def _label(quick: bool, family: str | None) -> str:
    return f"B5 OpInfo [{family or 'all families'}]" + (" (quick subset)" if quick else "")


def _counts(data: dict, family: str | None) -> dict:
    """The sample counts of one family, or summed over all of them."""
    if family is not None:
        return data["counts"]
    total: dict = {}
    for counts in data["counts"].values():
        for key, value in counts.items():
            total[key] = total.get(key, 0) + value
    return total


def _detection_row(label: str, kind: str, found: dict) -> dict:
    ours, slow, fast = found["ours"], found["slow"], found["fast"]
    name = f"{label}: mutation {kind} detected, ours"
    if not found["samples"]:
        return row(name, "-", "%", "-", "INFO", "no sample of this family admits this mutation")
    goal_met = ours >= slow and (kind != "+1e-4" or ours >= DETECTION_GOAL)
    goal = f">= slow{' and >= 90%' if kind == '+1e-4' else ''}"
    return graded(
        name,
        round(100 * ours, 1),
        "%",
        goal,
        goal_met,
        f"slow {100 * slow:.1f}%, fast {100 * fast:.1f}% over {found['samples']} samples"
        + (f"; missed by ours: {', '.join(found['missed'])}" if found["missed"] else ""),
    )


def rows_of(summary: dict, data: dict, quick: bool, family: str | None = "float64") -> list[dict]:
    """The benchmark rows of one family (None: over all families), graded where the issue sets a goal."""
    label = _label(quick, family)
    s = summary
    matrix = s["matrix"]
    matrix_text = "; ".join(f"ours {o} / slow {g}: {n}" for (o, g), n in sorted(matrix.items()))
    false_count = len(s["false_failures"])
    rate = false_count / max(1, s["slow_accepts"])
    left_out = _counts(data, family).get("outside_contract", 0)
    what = f"{family} CPU" if family else ", ".join(FAMILIES)
    out = [
        row(
            f"{label}: samples",
            s["samples"],
            "samples",
            "-",
            "INFO",
            f"{s['ops']} operators, {what}, <= 2000 elements; {left_out} samples with "
            f"empty or non-finite inputs left out (a record refuses them as bad input); {len(s['apart'])} samples of "
            f"operators PyTorch marks as having a wrong gradient listed apart; sweep took {data['seconds']:.0f} s",
        ),
        row(
            f"{label}: accepted, ours / slow / fast",
            round(100 * s["accepted"]["ours"], 1),
            "%",
            "-",
            "INFO",
            f"slow {100 * s['accepted']['slow']:.1f}%, fast {100 * s['accepted']['fast']:.1f}% of {s['counted']} samples",
        ),
        graded(
            f"{label}: false failures / samples slow mode accepts",
            round(100 * rate, 2),
            "%",
            f"<= {100 * FALSE_FAILURE_GOAL:g}%",
            rate <= FALSE_FAILURE_GOAL,
            f"{false_count} of {s['slow_accepts']}: " + (" ; ".join(_reason(r) for r in s["false_failures"]) or "none"),
            profile=("\n".join(_reason(r) for r in s["disagreements"]) or None) if family else None,
        ),
        row(
            f"{label}: verdict agreement matrix",
            len(s["disagreements"]),
            "disagreements",
            "-",
            "INFO",
            matrix_text + "; every disagreement with its reason is in the profile below and benchmarks/opinfo.md",
        ),
    ]
    if s["apart"] and family:
        out.append(
            row(
                f"{label}: operators PyTorch marks wrong (apart)",
                len(s["apart"]),
                "samples",
                "-",
                "INFO",
                "; ".join(
                    f"{_name(r)}: ours {_verdict(r, 'ours')}, slow {_verdict(r, 'slow')} ({r['marked_wrong']})"
                    for r in s["apart"]
                ),
            )
        )
    out += [_detection_row(label, kind, found) for kind, found in s["detection"].items()]
    medians = s["medians"]
    ratio = medians["ours"] / medians["slow"]
    note = (
        f"fast / slow {medians['fast'] / medians['slow']:.2f}x; median of per-sample ratios "
        f"ours/slow {s['median_ratio_per_sample']:.2f}x; ours includes its embedded gradcheck call "
        f"(fast mode), four autograd passes, the step sweep and the record"
    )
    name = f"{label}: median cost per sample, ours / gradcheck slow"
    if family == "float64":
        out.append(graded(name, round(ratio, 2), "x", f"<= {COST_GOAL:g}x", ratio <= COST_GOAL, note))
    else:  # the goal was set on the float64 family; here it is information
        out.append(row(name, round(ratio, 2), "x", "-", "INFO", note))
    return out


def all_rows(data: dict, quick: bool) -> list[dict]:
    """Every family's rows, then the rows over all families."""
    out = []
    for family in FAMILIES:
        part = of_family(data, family)
        if part["results"]:
            out += rows_of(summarise(part), part, quick, family)
    if data.get("float32"):  # the float32 twins (benchmarks/opinfo_float32.py), not part of "all families"
        from .opinfo_float32 import rows as float32_rows

        out += float32_rows(data["float32"], quick)
    return out + rows_of(summarise(data), data, quick, None)


def run(quick: bool) -> list[dict]:
    """B5 rows (see the module's docstring); a full run also writes benchmarks/opinfo.md from the same sweep."""
    data = sweep(quick, progress=lambda text: print(text, file=sys.stderr, flush=True))
    if not quick:
        REPORT.write_text(markdown(data), encoding="utf-8")
    return all_rows(data, quick)


def _section(s: dict, data: dict, title: str) -> list[str]:
    """One family's (or all families') part of the report."""
    lines = [
        f"## {title}",
        "",
        f"{s['samples']} samples of {s['ops']} operators, swept in {data['seconds']:.0f} s.",
        "",
        "### Verdict agreement (operators PyTorch marks wrong excluded)",
        "",
        "| ours \\ gradcheck slow | " + " | ".join(("accept", "reject", "crash")) + " |",
        "|---|---|---|---|",
    ]
    for ours in ("accept", "reject", "crash"):
        lines.append(
            f"| {ours} | "
            + " | ".join(str(s["matrix"].get((ours, g), 0)) for g in ("accept", "reject", "crash"))
            + " |"
        )
    rate = len(s["false_failures"]) / max(1, s["slow_accepts"])
    lines += [
        "",
        f"False failures: {len(s['false_failures'])} of the {s['slow_accepts']} samples slow mode accepts "
        f"({100 * rate:.2f}%, goal <= {100 * FALSE_FAILURE_GOAL:g}%).",
        "",
        "### Every disagreement, with each side's reason",
        "",
    ]
    lines += [f"- {_reason(r)}" for r in s["disagreements"]] or ["- none"]
    lines += ["", "### Operators whose gradient PyTorch marks wrong (not counted)", ""]
    lines += [f"- {_reason(r)} — {r['marked_wrong']}" for r in s["apart"]] or ["- none"]
    lines += ["", "### Mutations", "", "| kind | samples | ours | slow | fast |", "|---|---|---|---|---|"]
    for kind, found in s["detection"].items():
        lines.append(
            f"| {kind} | {found['samples']} | {100 * found['ours']:.1f}% | {100 * found['slow']:.1f}% | "
            f"{100 * found['fast']:.1f}% |"
        )
    missed = [f"{m} {kind}" for kind, found in s["detection"].items() for m in found["missed"]]
    lines += [
        "",
        "Missed by ours: " + (", ".join(missed) or "none"),
        "",
        "### Cost per sample (medians)",
        "",
        f"ours / slow {s['medians']['ours'] / s['medians']['slow']:.2f}x, fast / slow "
        f"{s['medians']['fast'] / s['medians']['slow']:.2f}x (ratios in the same run)",
        "",
    ]
    return lines


def markdown(data: dict) -> str:
    """The full report: per family and over all, the matrix, every disagreement, the operators apart, detection and cost."""
    lines = [
        "# OpInfo sweep: every disagreement",
        "",
        f"{len(data['results'])} samples in {len(FAMILIES)} families ({', '.join(FAMILIES)}), swept in "
        f"{data['seconds']:.0f} s. Generated by `python -m benchmarks.bench_opinfo`; see docs/accuracy.md.",
        "",
    ]
    for family in FAMILIES:
        part = of_family(data, family)
        if part["results"]:
            lines += _section(summarise(part), part, f"Family {family}")
    if data.get("float32"):
        from .opinfo_float32 import section

        lines += section(data["float32"])
    lines += _section(summarise(data), data, "All families")
    return "\n".join(lines).rstrip() + "\n"


def _plain_data(data: dict) -> dict:
    """The sweep's data without the records (they hold the cases' functions)."""
    results = [{**r, "ours": {k: v for k, v in r["ours"].items() if k != "record"}} for r in data["results"]]
    return {**data, "results": results}


def main() -> int:
    import torch

    from . import __main__ as runner

    torch.set_num_threads(1)
    quick = "--quick" in sys.argv
    named = tuple(sys.argv[k + 1] for k, arg in enumerate(sys.argv[:-1]) if arg == "--family")
    unknown = [f for f in named if f not in FAMILIES]
    if unknown:
        print(
            f"bench_opinfo: no family {', '.join(map(repr, unknown))} (families: {', '.join(FAMILIES)})",
            file=sys.stderr,
        )
        return 2
    data = sweep(quick, progress=lambda text: print(text, file=sys.stderr, flush=True), families=named or FAMILIES)
    if "--save" in sys.argv:  # the raw verdicts, for a look at one family's disagreements
        import pickle

        Path(sys.argv[sys.argv.index("--save") + 1]).write_bytes(pickle.dumps(_plain_data(data)))
    print(runner.table(all_rows(data, quick)))
    if not quick and not named:
        REPORT.write_text(markdown(data), encoding="utf-8")
        print(f"wrote {REPORT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
