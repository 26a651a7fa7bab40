"""B2, Jacobian scale: our batched finite-difference comparison against gradcheck, n = 10..10^4.

Workload: an elementwise function, sin(x) * x, and a reduction, sum(tanh(x)^2), at n input
elements in float64, x evenly spaced in [-2, 2].

- ours: `core.check.first_order.numerical_verdict`: one backward for v^T J (v = ones), the central
  finite-difference estimate of each of its n elements, and the comparison that reports the
  worst element and its index. Both workloads are observed to be elementwise chains (the
  reduction's body feeds one full sum), so every element is shifted at once: three
  evaluations whatever n (core/check/fd/structure.py).
- ours, general path (`structured=False`): what a function that is not such a chain gets, one
  shifted copy per element evaluated with `torch.func.vmap` a chunk at a time. Reported next
  to the graded figure so that the cost without the structure stays visible.
- gradcheck slow mode: the full n x m numerical and analytical Jacobians, compared entry by
  entry (one backward per output, two forwards per input element).
- gradcheck fast mode: one random projection u^T J w each way; it cannot say which element
  is wrong.

Goal: ours >= 20x faster than slow mode at n = 10^4, and peak memory <= 1 GiB there. Slow
mode at 10^4 takes tens of seconds, so it is timed once in the full run; --quick stops at
n = 10^2.
"""

from __future__ import annotations

import math

from . import device, format_seconds, graded, interleaved_medians, peak_memory, profile_text, row

SPEEDUP_GOAL = 20.0
PEAK_GOAL_BYTES = 1 << 30
SIZES = (10, 100, 1000, 10000)
QUICK_SIZES = (10, 100)
#: Interleaved rounds of ours and fast mode, and calls of slow mode, per n.
ROUNDS = {10: 50, 100: 30, 1000: 6, 10000: 3}
SLOW_CALLS = {10: 10, 100: 5, 1000: 2, 10000: 1}
QUICK_ROUNDS = {10: 30, 100: 20}
QUICK_SLOW_CALLS = {10: 5, 100: 3}


def elementwise(x):
    """sin(x) * x: a diagonal Jacobian with n outputs."""
    import torch

    return torch.sin(x) * x


def reduction(x):
    """sum(tanh(x)^2): one output, a dense 1 x n Jacobian."""
    import torch

    return torch.sum(torch.tanh(x) ** 2)


FUNCTIONS = {"elementwise sin(x)*x": elementwise, "reduction sum(tanh(x)^2)": reduction}


def _mib(count) -> str:
    return "n/a" if count is None else f"{count / 2**20:.1f} MiB"


def measure(function, n: int, quick: bool) -> dict:
    """Times, peaks and our verdict for one function at n elements."""
    import torch

    from jupyterlab_gradcheck.core.check.first_order import numerical_verdict

    x = torch.linspace(-2.0, 2.0, n, dtype=torch.float64, device=device())
    leaf = x.clone().requires_grad_(True)
    ours = lambda: numerical_verdict(function, {"x": x})  # noqa: E731
    general = lambda: numerical_verdict(function, {"x": x}, structured=False)  # noqa: E731
    fast = lambda: torch.autograd.gradcheck(function, (leaf,), fast_mode=True)  # noqa: E731
    slow = lambda: torch.autograd.gradcheck(function, (leaf,))  # noqa: E731

    general()  # the first call pays for lazy imports and vmap's set-up, not for n
    ours_peak, _, _, verdict = peak_memory(ours)
    general_peak, _, _, general_verdict = peak_memory(general)
    rounds = (QUICK_ROUNDS if quick else ROUNDS)[n]
    times = interleaved_medians({"ours": ours, "general": general, "fast": fast}, rounds, warmup=1)
    slow_calls = (QUICK_SLOW_CALLS if quick else SLOW_CALLS)[n]
    slow_peak, slow_seconds, slow_cpu, slow_passed = peak_memory(slow)
    if slow_calls > 1:
        again = interleaved_medians({"slow": slow}, slow_calls - 1, warmup=0)["slow"]
        slow_seconds, slow_cpu = again["median"], again["cpu_median"]
    fast_peak, _, _, _ = peak_memory(fast)
    return {
        "n": n,
        "ours": times["ours"]["median"],
        "fast": times["fast"]["median"],
        "slow": slow_seconds,
        "general": times["general"]["median"],
        "general_peak": general_peak,
        "general_verdict": general_verdict,
        "ours_cpu": times["ours"]["cpu_median"],
        "slow_cpu": slow_cpu,
        "slow_calls": slow_calls,
        "rounds": rounds,
        "ours_peak": ours_peak,
        "slow_peak": slow_peak,
        "fast_peak": fast_peak,
        "verdict": verdict,
        "slow_passed": slow_passed,
    }


#: What bounds the general path's speed-up, per workload (docs/benchmarks.md, B2).
WHY_GENERAL = {
    "elementwise": "slow mode's cost is 2n forward calls plus one backward per output; the general path makes "
    "the same 2n forward evaluations batched, so its ratio is set by how much cheaper a batched "
    "evaluation is",
    "reduction": "with one output, slow mode needs a single backward, and both make 2n forward evaluations of "
    "an n-element function (O(n^2) work): without the observed structure a finite difference "
    "cannot skip it",
}


def _why_not_passed(function, verdict: dict, n: int) -> str:
    """The rounding bound of phi's own sum, next to the tolerance our verdict used."""
    import torch

    from jupyterlab_gradcheck.core.check.record import spec as defaults

    x = torch.linspace(-2.0, 2.0, n, dtype=torch.float64, device=device())
    magnitude = float(function(x).abs().sum())
    bound = defaults.EPS["float64"] * magnitude / verdict["step"]
    return (
        f"not passed: the function's own sum rounds by ~eps*|phi|/h = {bound:.2g}, above the default "
        f"tolerance {verdict['atol']:.2g}; the engine diagnoses this precision_limited"
    )


def _general_row(label: str, function, m: dict, n: int) -> dict:
    """The same comparison forced onto the general path: the cost without the observed structure."""
    general = m["general_verdict"]
    worst = general["worst"]
    note = (
        f"ours on the general path {format_seconds(m['general'])}, slow {format_seconds(m['slow'])}; "
        f"{general['finite_difference']['inputs']['x']['forward_evaluations']} forward evaluations, batched; "
        f"worst element x[{worst['index'][0] if worst['index'] else ''}] abs err {worst['abs_err']:.2g} "
        f"(passed={general['passed']}); peak {_mib(m['general_peak'])}; {WHY_GENERAL[function.__name__]}"
    )
    if not general["passed"]:
        note += "; " + _why_not_passed(function, general, n)
    return row(
        f"B2 {label}, n={n}: gradcheck slow / ours, general path",
        round(m["slow"] / m["general"], 1),
        "x",
        "-",
        "INFO",
        note,
    )


def _profile_ours(function, n: int) -> str:
    import torch

    from jupyterlab_gradcheck.core.check.first_order import numerical_verdict

    x = torch.linspace(-2.0, 2.0, n, dtype=torch.float64, device=device())
    return profile_text(
        lambda: numerical_verdict(function, {"x": x}), 1, f"B2 numerical_verdict on {function.__name__} at n={n}"
    )


def _growth(points: list[dict], key: str) -> str:
    """The exponent k in cost ~ n^k between the two largest sizes measured."""
    if len(points) < 2:
        return "n/a"
    a, b = points[-2], points[-1]
    return f"{math.log(b[key] / a[key]) / math.log(b['n'] / a['n']):.2f}"


def run(quick: bool) -> list[dict]:
    """B2 rows per function and n: speed-up over slow mode, and our peak memory."""
    sizes = QUICK_SIZES if quick else SIZES
    rows = []
    for label, function in FUNCTIONS.items():
        points = []
        for n in sizes:
            m = measure(function, n, quick)
            points.append(m)
            worst = m["verdict"]["worst"]
            speedup = m["slow"] / m["ours"]
            note = (
                f"ours {format_seconds(m['ours'])} (median of {m['rounds']}), slow {format_seconds(m['slow'])} "
                f"({m['slow_calls']} call{'s' if m['slow_calls'] > 1 else ''}), fast {format_seconds(m['fast'])}; "
                f"ours reports worst element x[{worst['index'][0] if worst['index'] else ''}] "
                f"abs err {worst['abs_err']:.2g} (passed={m['verdict']['passed']}), gradcheck slow "
                f"passed={m['slow_passed']}; fast mode takes {m['fast'] / m['ours']:.3g}x our time "
                f"and names no element; CPU-time ratio slow/ours {m['slow_cpu'] / max(m['ours_cpu'], 1e-9):.3g}"
            )
            info = m["verdict"]["finite_difference"]["inputs"]["x"]
            note += (
                f"; path: {info['structure']} ({info['forward_evaluations']} forward evaluations"
                f"{', every element shifted at once' if info['structure'] != 'general' else ''})"
            )
            if not m["verdict"]["passed"]:
                note += "; " + _why_not_passed(function, m["verdict"], n)
            name = f"B2 {label}, n={n}: gradcheck slow / ours"
            if n == 10000:
                note += (
                    f"; cost ~ n^{_growth(points, 'ours')} (ours), n^{_growth(points, 'general')} (ours, "
                    f"general path), n^{_growth(points, 'slow')} (slow) from 10^3 to 10^4"
                )
                met = speedup >= SPEEDUP_GOAL
                speed_row = graded(name, round(speedup, 1), "x", f">= {SPEEDUP_GOAL:g}x", met, note)
                if not met and not quick:
                    speed_row["profile"] = _profile_ours(function, n)
                rows.append(speed_row)
            else:
                rows.append(row(name, round(speedup, 1), "x", "-", "INFO", note))
            rows.append(_general_row(label, function, m, n))
            peak_note = (
                f"ours {_mib(m['ours_peak'])}, gradcheck slow {_mib(m['slow_peak'])}, fast {_mib(m['fast_peak'])}"
            )
            peak_name = f"B2 {label}, n={n}: peak memory (ours)"
            peak_value = "n/a" if m["ours_peak"] is None else round(m["ours_peak"] / 2**20, 1)
            if n == 10000:
                measured = m["ours_peak"] is not None
                rows.append(
                    graded(
                        peak_name,
                        peak_value,
                        "MiB",
                        "<= 1024 MiB",
                        measured and m["ours_peak"] <= PEAK_GOAL_BYTES,
                        peak_note if measured else "no peak-memory counter on this platform",
                    )
                )
            else:
                rows.append(row(peak_name, peak_value, "MiB", "-", "INFO", peak_note))
    return rows
