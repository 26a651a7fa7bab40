"""B10, the peer's test set: PyTorch's custom-Function database, our check against gradcheck and gradgradcheck.

Workload: every entry of `torch.testing._internal.autograd_function_db` and every sample of it
(benchmarks/function_db_cases.py), in float64 and float32, on the benchmark's device (cpu, or
cuda with `--device cuda`). On each: our `check()` with the Function's own backward as the
expectation, and gradcheck + gradgradcheck as PyTorch's own tests call them
(benchmarks/function_db_runs.py). Then, on each entry and dtype that both tools accept as
written, the mutants of benchmarks/function_db_mutants.py through both.

Figures (issue "Beyond float64", must-show 1):
- crashes of our check (an exception out of `check`): goal 0, each listed with its message;
- agreement of our verdict with gradcheck's, entry by entry, per dtype: goal 100%;
- detection per mutant kind, ours against gradcheck: goal ours >= gradcheck on every kind;
- the element named by our failure: goal >= 90% of the mutants ours detects;
- failed records without a `failure`: goal 0.
Entries PyTorch's file itself gets wrong are listed apart, with the reason.

`--quick` takes QUICK_ENTRIES in float64 only. `python -m benchmarks.bench_function_db` runs the
full set alone and writes benchmarks/function_db.md.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from . import device, graded, row

REPORT = Path(__file__).resolve().parent / "function_db.md"
DTYPES = ("float64", "float32")
QUICK_ENTRIES = ("NumpyMul", "Select", "NumpyCube")
NAMED_GOAL = 0.90


def run_mutant(entry, mutant) -> dict:
    """Ours and gradcheck on one mutant: detected by each, and the element ours names."""
    from .function_db_runs import run_gradcheck, run_ours

    function = entry.function(mutant.function_class)
    inputs = {n: t for n, t in entry.inputs.items() if n not in mutant.fixed}
    fixed = {n: entry.inputs[n] for n in mutant.fixed}
    ours = run_ours(entry, function, inputs, fixed=fixed or None)
    theirs = run_gradcheck(entry, function, inputs, fixed=fixed or None)
    failure = ours["failure"] or {}
    index = failure.get("index")
    right = None
    if mutant.element is not None and index is not None and failure.get("input") == mutant.target:
        import numpy

        shape = entry.inputs[mutant.target].shape
        right = int(numpy.ravel_multi_index(tuple(index), tuple(shape))) == mutant.element if shape else True
    return {
        "entry": entry.label,
        "dtype": entry.dtype,
        "kind": mutant.kind,
        "ours": ours,
        "gradcheck": theirs,
        "detected": {"ours": ours["verdict"] == "reject", "gradcheck": theirs["verdict"] == "reject"},
        "named": index is not None and ours["verdict"] == "reject",
        "right_element": right,
    }


def sweep(quick: bool, where: str | None = None, progress=None) -> dict:
    """Every verdict of the correct entries and of their mutants."""
    import warnings

    import torch

    from .function_db_cases import entries
    from .function_db_mutants import MUTANTS, build
    from .function_db_runs import run_entry

    warnings.filterwarnings("ignore")
    where = where or device()
    started = time.perf_counter()
    results, mutants = [], []
    for dtype in ("float64",) if quick else DTYPES:
        for entry in entries(dtype=dtype, device=where, names=list(QUICK_ENTRIES) if quick else None):
            torch.manual_seed(0)
            result = run_entry(entry)
            results.append(result)
            if progress:
                progress(f"function_db [{dtype}]: {entry.label} ours {result['ours']['verdict']}")
            if entry.apart or result["ours"]["verdict"] != "accept" or result["gradcheck"]["verdict"] != "accept":
                continue
            for kind in MUTANTS:
                try:
                    mutant = build(entry, kind)
                except Exception as exc:  # the mutant could not be built: a limit of this benchmark, listed
                    mutants.append({"entry": entry.label, "dtype": dtype, "kind": kind, "build_error": repr(exc)})
                    continue
                if mutant is not None:
                    mutants.append(run_mutant(entry, mutant))
    return {"results": results, "mutants": mutants, "seconds": time.perf_counter() - started, "device": where}


def summarise(data: dict) -> dict:
    """Crashes, the agreement matrix per dtype, detection per mutant kind, failed records without a failure."""
    from .function_db_mutants import MUTANTS

    results = data["results"]
    counted = [r for r in results if not r["apart"]]
    runs = [r["ours"] for r in results] + [m["ours"] for m in data["mutants"] if "ours" in m]
    labelled = [(r["entry"], r["dtype"], r["ours"]) for r in results] + [
        (f"{m['entry']} {m['kind']}", m["dtype"], m["ours"]) for m in data["mutants"] if "ours" in m
    ]
    matrix: dict = {}
    for r in counted:
        key = (r["dtype"], r["ours"]["verdict"], r["gradcheck"]["verdict"])
        matrix[key] = matrix.get(key, 0) + 1
    detection = {}
    for kind in MUTANTS:
        found = [m for m in data["mutants"] if m.get("kind") == kind and "ours" in m]
        caught = [m for m in found if m["detected"]["ours"]]
        detection[kind] = {
            "mutants": len(found),
            "ours": sum(m["detected"]["ours"] for m in found),
            "gradcheck": sum(m["detected"]["gradcheck"] for m in found),
            "named": sum(m["named"] for m in caught),
            "right_element": sum(bool(m["right_element"]) for m in caught),
            "crashes": sum(m["ours"]["verdict"] == "crash" for m in found),
        }
    caught_all = [m for m in data["mutants"] if "ours" in m and m["detected"]["ours"]]
    return {
        "entries": len({r["name"] for r in results}),
        "results": len(results),
        "counted": counted,
        "apart": [r for r in results if r["apart"]],
        "matrix": matrix,
        "agree": sum(r["ours"]["verdict"] == r["gradcheck"]["verdict"] for r in counted),
        "disagreements": [r for r in counted if r["ours"]["verdict"] != r["gradcheck"]["verdict"]],
        "crashes": [(label, dtype, run["error"]) for label, dtype, run in labelled if run["verdict"] == "crash"],
        "no_failure": [
            (label, dtype, run["error"]) for label, dtype, run in labelled if run["error"].startswith("failed")
        ],
        "detection": detection,
        "named_rate": sum(m["named"] for m in caught_all) / len(caught_all) if caught_all else float("nan"),
        "build_errors": [m for m in data["mutants"] if "build_error" in m],
        "ours_runs": len(runs),
    }


def rows_of(s: dict, data: dict, quick: bool) -> list[dict]:
    """The benchmark rows, graded on must-show 1."""
    from .figure_rows import count_row, share_row
    from .function_db_report import agreement_by_dtype, disagreement_text

    label = "B10 Function db" + (" (quick subset)" if quick else "")
    where = data["device"]
    agree_rate = s["agree"] / max(1, len(s["counted"]))
    per_dtype = agreement_by_dtype(s["counted"])
    out = [
        count_row(
            label,
            s["results"],
            f"{s['entries']} entries x {'float64' if quick else ', '.join(DTYPES)} on {where}, "
            f"{len(data['mutants'])} mutants; {len(s['apart'])} samples PyTorch's file gets wrong listed apart; "
            f"swept in {data['seconds']:.0f} s",
        ),
        graded(
            f"{label}: crashes of our check",
            len(s["crashes"]),
            "crashes",
            "0",
            not s["crashes"],
            f"over {s['ours_runs']} checks; "
            + ("; ".join(f"{e} [{d}]: {m}" for e, d, m in s["crashes"][:6]) or "none"),
        ),
        graded(
            f"{label}: verdict agrees with gradcheck + gradgradcheck",
            round(100 * agree_rate, 1),
            "%",
            "100%",
            agree_rate == 1.0,
            f"{s['agree']} of {len(s['counted'])} ({per_dtype}); "
            + (disagreement_text(s["disagreements"])[:600] or "no disagreement"),
        ),
        graded(
            f"{label}: failed records without a failure",
            len(s["no_failure"]),
            "records",
            "0",
            not s["no_failure"],
            "; ".join(f"{e} [{d}]" for e, d, _ in s["no_failure"][:8]) or "none",
        ),
    ]
    for kind, found in s["detection"].items():
        if not found["mutants"]:
            out.append(row(f"{label}: mutant {kind} detected, ours", "-", "%", "-", "INFO", "no entry admits it"))
            continue
        ours, theirs = found["ours"], found["gradcheck"]
        out.append(
            graded(
                f"{label}: mutant {kind} detected, ours",
                round(100 * ours / found["mutants"], 1),
                "%",
                ">= gradcheck",
                ours >= theirs,
                f"ours {ours}, gradcheck+gradgradcheck {theirs} of {found['mutants']}; element named in "
                f"{found['named']} of ours' {ours}"
                + (f"; ours crashed on {found['crashes']}" if found["crashes"] else ""),
            )
        )
    out.append(
        share_row(
            f"{label}: element named in ours' detections",
            s["named_rate"],
            NAMED_GOAL,
            "a failure with an input and an index, over every mutant ours rejects",
        )
    )
    return out


def run(quick: bool) -> list[dict]:
    """B10 rows; a full run also writes benchmarks/function_db.md from the same sweep."""
    from .function_db_report import markdown

    data = sweep(quick)
    summary = summarise(data)
    if not quick and device() == "cpu":
        REPORT.write_text(markdown(data, summary), encoding="utf-8")
    return rows_of(summary, data, quick)


def main() -> int:
    import torch

    from . import __main__ as runner
    from .function_db_report import markdown

    torch.set_num_threads(1)
    quick = "--quick" in sys.argv
    where = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    data = sweep(quick, where, progress=lambda text: print(text, file=sys.stderr, flush=True))
    summary = summarise(data)
    print(runner.table(rows_of(summary, data, quick)))
    if not quick and where == "cpu":
        REPORT.write_text(markdown(data, summary), encoding="utf-8")
        print(f"wrote {REPORT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
