"""B9, structure and projection: the whole check beside gradcheck, and the projected mode's power.

The whole check, `jupyterlab_gradcheck.api.check(f, grad=..., x=tensor)` as a user calls it, with and
without a ledger, float64 on the CPU, beside gradcheck's fast and slow modes and the evaluation floor
(2 x colours + 1 evaluations, one backward and gradcheck's fast mode, timed in the same run), with the
record's JSON size and the ledger bytes each check appends (benchmarks/whole_check.py):

- elementwise `(sin(x) * x).sum()` and banded `tanh(x[1:] * x[:-1]).sum()` at n = 10^4 (quick: 10^3):
  <= 3x gradcheck's fast mode, >= 100x faster than its slow mode;
- block-diagonal `(softmax(X.reshape(100, 100), dim=1) * W).sum()`: <= 1.5x its evaluation floor,
  >= 100x faster than slow mode;
- dense `tanh(A @ x)` at n = 3,000 (quick: 300) in projected mode: <= 1x fast mode, and with a
  one-element bug planted, the element it names must be the planted one;
- dense `(w * softmax(x)).sum()` at n = 1,000 (quick: 200) in mode auto, as a plain callable and
  through a custom Function with a jvp: <= 1x gradcheck's slow mode with the same modes on.

Detection power: the dense function at n = 1,000 (quick: 100) with a backward wrong at one Jacobian
entry by e, for e from 1e-1 down to 1e-8, checked by the projected mode, gradcheck's fast mode and its
slow mode (their default eps 1e-6, atol 1e-5, rtol 1e-3): which catch it, and whether ours names the
planted element; and the projected mode on B5's OpInfo samples and their mutations."""

from __future__ import annotations

import math

from . import row

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


def power_rows(n: int) -> list[dict]:
    """Per one-element error size: how often ours catches (and names) it, how often gradcheck's modes catch it.

    Ours and fast mode are random projections, so each is tried with the bug planted at each of
    POSITIONS (fast mode drawing its own random vectors each call); slow mode compares every
    Jacobian entry, so one position tells its answer (and costs 2n evaluations).
    """
    from jupyterlab_gradcheck.core.check.fd.finite_difference import projected_verdict

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
    from jupyterlab_gradcheck.core.check.fd.finite_difference import projected_verdict

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
    """B9 rows: the whole check on each workload (benchmarks/whole_check.py), and the detection-power tables."""
    from .whole_check import run as whole_check_rows

    rows = whole_check_rows(quick)
    rows += power_rows(300 if quick else 1000)
    rows += opinfo_rows(quick)
    return rows
