"""B9, structure and projection: sparse Jacobians coloured, dense ones projected, beside gradcheck.

Workloads, float64 on the CPU:

- banded `tanh(x[1:] * x[:-1]).sum()` and block-diagonal `(softmax(X.reshape(r, c), dim=1) * W).sum()`
  at n = 10^4 (quick: 10^3): ours is `core.check.numerical_verdict.numerical_verdict`, which
  learns the Jacobian's sparsity from the forward's operations, colours its columns
  (core/check/fd/coloured_path.py) and compares every element with autograd, naming the worst. Goals:
  >= 100x faster than gradcheck's slow mode and <= 1x its fast mode, ratios in the same run.
- dense `tanh(A @ x)` at n = 3,000 (quick: 300) in projected mode
  (`core.check.fd.projected.projected_verdict`): one random direction, a failure localised by
  halving. Goal: <= 1x gradcheck's fast mode; with a one-element bug planted, the element it
  names must be the planted one.
- detection power: the dense function at n = 1,000 (quick: 100) with a backward wrong at one
  Jacobian entry by e, for e from 1e-1 down to 1e-8, checked by the projected mode, gradcheck's
  fast mode and its slow mode (their default eps 1e-6, atol 1e-5, rtol 1e-3): which catch it,
  and whether ours names the planted element.
"""

from __future__ import annotations

import math

from . import format_seconds, graded, interleaved_medians, row, timed_once

SLOW_GOAL = 100.0
FAST_GOAL = 1.0
ERRORS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
WRONG_AT = 123
#: Operators (one sample each, every k-th of OpInfo's) whose mutations the projected mode is tried on.
OPINFO_OPS = 60
OPINFO_QUICK_OPS = 6
#: Elements at which the power sweep plants its bug, one at a time.
POSITIONS = (123, 7, 250, 41, 199, 88, 160, 290)


def banded(x):
    """A two-term band: element j of the body depends on x_j and x_{j+1}."""
    import torch

    return torch.tanh(x[1:] * x[:-1]).sum()


def block_diagonal(rows: int, columns: int):
    """Softmax of each row of X times fixed weights, summed: dense blocks of `columns` on the diagonal."""
    import torch

    weights = torch.rand(rows, columns, dtype=torch.float64, generator=torch.Generator().manual_seed(8))

    def function(x):
        return (torch.softmax(x.reshape(rows, columns), dim=1) * weights).sum()

    return function


def dense(n: int):
    """tanh(A x) with a dense A, and its v^T J by hand (for the planted-bug Function)."""
    import torch

    matrix = torch.randn(n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(9)) / math.sqrt(n)

    def function(x):
        return torch.tanh(matrix @ x)

    def gradient(x, grad):
        return matrix.T @ (grad * (1 - torch.tanh(matrix @ x) ** 2))

    return function, gradient


def wrong_at(forward, gradient, index: int, error: float):
    """A Function computing `forward(x)` whose backward, `gradient(x, grad_output)`, is wrong at one element.

    For a vector output the Jacobian is `error` too high at diagonal entry `index` (the backward
    stays linear in grad_output); for a scalar output, v^T J is `error` (times v) too high at `index`.
    The tests of core/check use it too."""
    import torch

    class WrongAt(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return forward(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            result = gradient(x, grad)
            result[index] += error * (grad if grad.dim() == 0 else grad[index])
            return result

    return WrongAt.apply


def _gradcheck(function, x, fast: bool) -> bool:
    import torch

    leaf = x.clone().requires_grad_(True)
    return bool(torch.autograd.gradcheck(function, (leaf,), fast_mode=fast, raise_exception=False))


def _input(n: int):
    import torch

    return torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(7))


def sparse_rows(label: str, function, n: int, quick: bool) -> list[dict]:
    """Slow/ours and ours/fast for one coloured workload, with the path and its evaluations."""
    from jupyterlab_gradcheck.core.check.numerical_verdict import numerical_verdict

    x = _input(n)
    ours = lambda: numerical_verdict(function, {"x": x})  # noqa: E731
    fast = lambda: _gradcheck(function, x, True)  # noqa: E731
    verdict = ours()
    times = interleaved_medians({"ours": ours, "fast": fast}, 5 if quick else 15, warmup=1)
    slow_seconds, _, slow_passed = timed_once(lambda: _gradcheck(function, x, False))
    info = verdict["finite_difference"]["inputs"]["x"]
    worst = verdict["worst"]
    note = (
        f"ours {format_seconds(times['ours']['median'])}, "
        f"gradcheck fast {format_seconds(times['fast']['median'])}, "
        f"slow {format_seconds(slow_seconds)} (one call, passed={slow_passed}); path {info['structure']}"
        f"{', ' + str(info.get('colours')) + ' colours' if 'colours' in info else ''}, "
        f"{info['forward_evaluations']} forward evaluations for {n} elements, every one compared; worst "
        f"x[{worst['index'][0]}] abs err {worst['abs_err']:.2g} (passed={verdict['passed']})"
    )
    slow_ratio = slow_seconds / times["ours"]["median"]
    fast_ratio = times["ours"]["median"] / times["fast"]["median"]
    name = f"B9 {label}, n={n}"
    if quick:
        return [
            row(f"{name}: gradcheck slow / ours", round(slow_ratio, 1), "x", "-", "INFO", note),
            row(f"{name}: ours / gradcheck fast", round(fast_ratio, 2), "x", "-", "INFO", note),
        ]
    return [
        graded(
            f"{name}: gradcheck slow / ours",
            round(slow_ratio, 1),
            "x",
            f">= {SLOW_GOAL:g}x",
            slow_ratio >= SLOW_GOAL and verdict["passed"],
            note,
        ),
        graded(
            f"{name}: ours / gradcheck fast",
            round(fast_ratio, 2),
            "x",
            f"<= {FAST_GOAL:g}x",
            fast_ratio <= FAST_GOAL and verdict["passed"],
            note,
        ),
    ]


def projected_rows(n: int, quick: bool) -> list[dict]:
    """The projected mode on the dense function: its time against fast mode, and a planted bug named."""
    from jupyterlab_gradcheck.core.check.fd.projected import projected_verdict

    function, gradient = dense(n)
    x = _input(n)
    ours = lambda: projected_verdict(function, {"x": x})  # noqa: E731
    fast = lambda: _gradcheck(function, x, True)  # noqa: E731
    verdict = ours()
    times = interleaved_medians({"ours": ours, "fast": fast}, 5 if quick else 15, warmup=1)
    ratio = times["ours"]["median"] / times["fast"]["median"]
    note = (
        f"ours {format_seconds(times['ours']['median'])} (passed={verdict['passed']}, "
        f"{verdict['finite_difference']['inputs']['x']['forward_evaluations']} forward evaluations), "
        f"gradcheck fast {format_seconds(times['fast']['median'])}"
    )
    name = f"B9 dense tanh(A @ x), n={n}, projected mode"
    rows = [
        row(f"{name}: ours / gradcheck fast", round(ratio, 2), "x", "-", "INFO", note)
        if quick
        else graded(
            f"{name}: ours / gradcheck fast",
            round(ratio, 2),
            "x",
            f"<= {FAST_GOAL:g}x",
            ratio <= FAST_GOAL and verdict["passed"],
            note,
        )
    ]
    buggy = wrong_at(function, gradient, WRONG_AT, 1e-3)
    seconds, _, found = timed_once(lambda: projected_verdict(buggy, {"x": x}))
    named = found["worst"]["index"]
    localisation = found["comparisons"][0]["projection"].get("localisation", {})
    note = (
        f"backward 1e-3 too high at Jacobian entry ({WRONG_AT}, {WRONG_AT}); ours passed={found['passed']}, named "
        f"x{named} in {format_seconds(seconds)}, "
        f"{found['finite_difference']['inputs']['x']['forward_evaluations']} "
        f"forward evaluations ({localisation.get('splits', 0)} halvings of {n} elements)"
    )
    rows.append(
        graded(
            f"{name}: planted one-element bug named",
            str(named),
            "index",
            f"[{WRONG_AT}]",
            not found["passed"] and named == [WRONG_AT],
            note,
        )
    )
    return rows


def power_rows(n: int) -> list[dict]:
    """Per one-element error size: how often ours catches (and names) it, how often gradcheck's modes catch it.

    Ours and fast mode are random projections, so each is tried with the bug planted at each of
    POSITIONS (fast mode drawing its own random vectors each call); slow mode compares every
    Jacobian entry, so one position tells its answer (and costs 2n evaluations).
    """
    from jupyterlab_gradcheck.core.check.fd.projected import projected_verdict

    function, gradient = dense(n)
    x = _input(n)
    rows, smallest = [], {"ours": None, "fast": None, "slow": None}
    for error in ERRORS:
        ours = named = fast = 0
        for position in POSITIONS:
            buggy = wrong_at(function, gradient, position, error)
            verdict = projected_verdict(buggy, {"x": x})
            ours += not verdict["passed"]
            named += verdict["worst"]["index"] == [position]
            fast += not _gradcheck(buggy, x, True)
        slow = not _gradcheck(wrong_at(function, gradient, WRONG_AT, error), x, False)
        for mode, hit in (("ours", ours == len(POSITIONS)), ("fast", fast == len(POSITIONS)), ("slow", slow)):
            if hit:
                smallest[mode] = error
        rows.append(
            row(
                f"B9 power, dense n={n}, one Jacobian entry off by {error:g}: caught by ours",
                f"{ours}/{len(POSITIONS)}",
                "",
                "-",
                "INFO",
                f"projected mode caught {ours} and named the planted element {named} of {len(POSITIONS)} "
                "times; "
                f"gradcheck fast caught {fast} of {len(POSITIONS)}; gradcheck slow "
                f"{'caught' if slow else 'missed'} it (at x[{WRONG_AT}])",
            )
        )
    rows.append(
        row(
            f"B9 power, dense n={n}: smallest error caught every time (ours / fast / slow)",
            " / ".join("none" if smallest[m] is None else f"{smallest[m]:g}" for m in ("ours", "fast", "slow")),
            "",
            "-",
            "INFO",
            "of " + ", ".join(f"{e:g}" for e in ERRORS) + f"; positions {list(POSITIONS)}",
        )
    )
    return rows


def _changed(gradient: dict, wrong: dict) -> set:
    """(input, flat index) of every element a mutation changed."""
    return {
        (name, int(i))
        for name in gradient
        for i in (gradient[name].reshape(-1) != wrong[name].reshape(-1)).nonzero().reshape(-1)
    }


def opinfo_rows(quick: bool) -> list[dict]:
    """The projected mode on B5's OpInfo samples and their one-element mutations, beside gradcheck's modes."""
    from jupyterlab_gradcheck.core.check.fd.projected import projected_verdict

    from .opinfo_samples import cases
    from .opinfo_sweep import MUTATIONS, autograd_gradient, mutated_gradient, run_gradcheck, wrapped

    chosen, _ = cases(limit_ops=OPINFO_QUICK_OPS if quick else OPINFO_OPS, samples_per_op=1)
    chosen = [case for case in chosen if not case.marked_wrong]  # PyTorch's own known-wrong gradients aside
    tally = {kind: {"applied": 0, "ours": 0, "named": 0, "fast": 0, "slow": 0} for kind in MUTATIONS}
    correct = {"samples": 0, "passed": 0, "crashed": 0}
    for k, case in enumerate(chosen):
        names = list(case.inputs)
        try:
            correct["passed"] += projected_verdict(case.function, case.inputs)["passed"]
        except Exception:  # a crash is counted, not hidden
            correct["crashed"] += 1
        correct["samples"] += 1
        gradient = autograd_gradient(case.function, case.inputs)
        for j, kind in enumerate(MUTATIONS):
            wrong = mutated_gradient(gradient, kind, k * 7 + j)
            if wrong is None:
                continue
            function = wrapped(case.function, names, wrong)
            counts = tally[kind]
            counts["applied"] += 1
            try:
                verdict = projected_verdict(function, case.inputs)
            except Exception:
                verdict = None
            if verdict is not None and not verdict["passed"]:
                counts["ours"] += 1
                worst = verdict["worst"]
                counts["named"] += (worst["input"], worst["flat_index"]) in _changed(gradient, wrong)
            counts["fast"] += run_gradcheck(function, case.inputs, fast=True)["accepts"] is False
            counts["slow"] += run_gradcheck(function, case.inputs, fast=False)["accepts"] is False
    rows = [
        row(
            "B9 OpInfo, projected mode: correct samples passed",
            f"{correct['passed']}/{correct['samples']}",
            "samples",
            "-",
            "INFO",
            f"{len(chosen)} OpInfo samples, one per operator taken (PyTorch's "
            f"known-wrong ones aside), unmutated; crashed {correct['crashed']}",
        )
    ]
    for kind, counts in tally.items():
        applied = max(counts["applied"], 1)
        rows.append(
            row(
                f"B9 OpInfo, projected mode: mutation {kind} detected",
                round(100 * counts["ours"] / applied, 1),
                "%",
                "-",
                "INFO",
                f"{counts['ours']} of {counts['applied']} detected, {counts['named']} with a changed element "
                f"named; gradcheck fast {counts['fast']}, slow {counts['slow']} of {counts['applied']}",
            )
        )
    return rows


def run(quick: bool) -> list[dict]:
    """B9 rows: the coloured workloads, the projected mode, and the detection-power table."""
    n = 1000 if quick else 10000
    rows = sparse_rows("banded tanh(x[1:] * x[:-1]).sum()", banded, n, quick)
    shape = (20, 50) if quick else (100, 100)
    rows += sparse_rows(
        f"block-diagonal (softmax(X.reshape{shape}, dim=1) * W).sum()", block_diagonal(*shape), n, quick
    )
    rows += projected_rows(300 if quick else 3000, quick)
    rows += power_rows(300 if quick else 1000)
    rows += opinfo_rows(quick)
    return rows
