"""Our check and `torch.autograd.gradcheck` on the same OpInfo samples, and on wrong backwards.

For each `Case` (benchmarks/opinfo_samples.py):

- **ours**: `core.check.engine.run_check` on the case's function with the expectation set to
  autograd's own gradient, so that only our finite differences are under test. A case with a
  grad_output is checked with it; one with several outputs is checked output by output, the
  expectation of output k being autograd's gradient of that output alone, weighted by w_k. Our verdict
  is "accepts" when no comparison failed (the embedded gradcheck's verdict is recorded in the
  record but is PyTorch's, not ours, so it does not count here); a raised exception is a crash.
  Its time is the whole check: four autograd passes, finite differences, comparisons,
  diagnosis, the step sweep and the embedded gradcheck call.
- **gradcheck slow** and **fast**: `torch.autograd.gradcheck` with its defaults
  (eps 1e-6, atol 1e-5, rtol 1e-3) and `fast_mode` off and on, on the same function (the
  tuple of outputs as it is: gradcheck checks every output's Jacobian, complex ones by its
  own Wirtinger convention).

A **mutation** wraps the case in a custom `torch.autograd.Function` whose forward is the case's
function and whose backward returns autograd's gradient wrong at one element, in one of three
ways: `x1.01` (one element scaled by 1.01), `+1e-4` (one element moved by 1e-4 of the
gradient's largest magnitude) and `swap` (two elements exchanged). The expectation given to
our check is the wrong backward's own output, so again only finite differences can find it.
The elements are drawn with a fixed seed per case; `x1.01` and `swap` draw among elements
whose change is at least a tenth of the gradient's scale, so that each mutation is a real
change of the gradient. A case that is not a scalar function gets the linear wrong backwards
of benchmarks/opinfo_mutations.py instead (one output's part of the gradient wrong at one
element of one input), with the wrong backward's own vector-Jacobian product at the check's
grad_output as our expectation.
"""

from __future__ import annotations

import random
import time

MUTATIONS = ("x1.01", "+1e-4", "swap")


def autograd_gradient(function, inputs: dict) -> dict:
    """d function / d input for every input, in float64 (zeros where an input is unused)."""
    import torch

    leaves = {n: t.clone().requires_grad_(True) for n, t in inputs.items()}
    output = function(**leaves)
    grads = torch.autograd.grad(output, list(leaves.values()), allow_unused=True)
    return {n: (torch.zeros_like(t) if g is None else g.detach()) for (n, t), g in zip(leaves.items(), grads)}


def _held(expectation: dict) -> dict:
    """An expectation for the record: input name -> a callable returning the tensor."""
    return {n: (lambda g: lambda **_: g)(g) for n, g in expectation.items()}


def run_ours(function, inputs: dict, expectation, *, dtype: str = "float64", grad_output=None) -> dict:
    """{"accepts": bool | None (crashed), "seconds", "failure", "error"} for our full check.

    `expectation` is one mapping input name -> gradient, or a list of them, one per output (then
    `grad_output` is a list of tensors, one per output)."""
    from jupyterlab_gradcheck.core.check.engine import run_check

    record = {"function": function, "inputs": dict(inputs), "dtype": dtype}
    if isinstance(expectation, list):
        record["analytical_gradient"] = {"outputs": [_held(e) for e in expectation]}
    else:
        record["analytical_gradient"] = _held(expectation)
    if grad_output is not None:
        record["grad_output"] = (
            [w.tolist() for w in grad_output] if isinstance(grad_output, list) else grad_output.tolist()
        )
    started = time.perf_counter()
    try:
        result = run_check(record)
    except Exception as exc:  # a crash is a finding of its own
        return {
            "accepts": None,
            "seconds": time.perf_counter() - started,
            "failure": None,
            "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
        }
    seconds = time.perf_counter() - started
    failure = result["failure"]
    return {"accepts": failure is None, "seconds": seconds, "failure": failure, "error": "", "record": result}


def run_gradcheck(function, inputs: dict, *, fast: bool, nondet_tol: float = 0.0) -> dict:
    """{"accepts": bool | None (gradcheck itself raised something else), "seconds", "error"}."""
    import torch

    names = list(inputs)
    leaves = tuple(inputs[n].clone().requires_grad_(True) for n in names)

    def positional(*args):
        return function(**dict(zip(names, args)))

    from torch.autograd.gradcheck import GradcheckError

    started = time.perf_counter()
    try:
        accepts = torch.autograd.gradcheck(positional, leaves, fast_mode=fast, nondet_tol=nondet_tol)
        error = ""
    except GradcheckError as exc:  # its verdict: the message says what differed
        accepts, error = False, " ".join(str(exc).split())[:200]
    except Exception as exc:  # gradcheck itself could not run this function
        accepts, error = None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return {"accepts": accepts, "seconds": time.perf_counter() - started, "error": error}


def mutated_gradient(gradient: dict, kind: str, seed: int) -> dict | None:
    """autograd's gradient made wrong at one element of one input, or None where `kind` cannot change it."""
    import torch

    rng = random.Random(seed)
    name = max(gradient, key=lambda n: float(gradient[n].abs().max()) if gradient[n].numel() else 0.0)
    flat = gradient[name].reshape(-1).clone()
    scale = float(flat.abs().max()) if flat.numel() else 0.0
    if scale == 0.0 or not torch.isfinite(flat).all():
        return None
    if kind == "x1.01":
        candidates = [i for i in range(flat.numel()) if abs(float(flat[i])) >= 0.1 * scale]
        i = rng.choice(candidates)
        flat[i] = flat[i] * 1.01
    elif kind == "+1e-4":
        i = rng.randrange(flat.numel())
        flat[i] = flat[i] + 1e-4 * scale
    else:
        values = flat.tolist()
        pairs = (
            [
                (i, j)
                for i in range(len(values))
                for j in range(i + 1, len(values))
                if abs(values[i] - values[j]) >= 0.1 * scale
            ]
            if len(values) <= 200
            else None
        )
        if pairs is None:  # large: draw until a pair differs enough
            pairs = []
            for _ in range(2000):
                i, j = rng.randrange(len(values)), rng.randrange(len(values))
                if i != j and abs(values[i] - values[j]) >= 0.1 * scale:
                    pairs.append((i, j))
                    break
        if not pairs:
            return None
        i, j = rng.choice(pairs)
        flat[i], flat[j] = values[j], values[i]
    wrong = dict(gradient)
    wrong[name] = flat.reshape(gradient[name].shape)
    return wrong


def wrapped(function, names: list, wrong: dict):
    """The case's function as a custom autograd.Function whose backward returns `wrong` (times grad_output)."""
    import torch

    class WrongBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            with torch.no_grad():
                return function(**dict(zip(names, args)))

        @staticmethod
        def backward(ctx, grad_output):
            return tuple(grad_output * wrong[n] for n in names)

    def mutated(**inputs):
        return WrongBackward.apply(*(inputs[n] for n in names))

    return mutated


def expectation_of(function, inputs: dict, grad_output):
    """What ours is given: autograd's gradient (scalar), at grad_output (one output), or per output (several)."""
    from .opinfo_mutations import per_output, vjp

    if grad_output is None:
        return autograd_gradient(function, inputs)
    if isinstance(grad_output, list):
        return per_output(function, inputs, grad_output)
    return vjp(function, inputs, [grad_output])


def run_case(case, *, with_timing: bool = True) -> dict:
    """Verdicts (and times) of ours, gradcheck slow and fast on one correct case."""
    gradient = expectation_of(case.function, case.inputs, case.grad_output)
    # the order rotates with the case, so that load from elsewhere lands on all three alike
    order = ["ours", "slow", "fast"]
    shift = case.index % 3
    order = order[shift:] + order[:shift]
    out = {
        "case": case.label,
        "op": case.op,
        "numel": case.numel,
        "marked_wrong": case.marked_wrong,
        "family": case.family,
        "outputs": case.outputs,
    }
    for who in order:
        if who == "ours":
            out["ours"] = run_ours(case.function, case.inputs, gradient, dtype=case.dtype, grad_output=case.grad_output)
        else:
            out[who] = run_gradcheck(case.function, case.inputs, fast=who == "fast", nondet_tol=case.nondet_tol)
    return out


def _detected(ours: dict, slow: dict, fast: dict) -> dict:
    return {
        "ours": ours["accepts"] is False,
        "ours_crashed": ours["accepts"] is None,
        "ours_diagnosis": (ours["failure"] or {}).get("diagnosis"),
        "slow": slow["accepts"] is False,
        "fast": fast["accepts"] is False,
    }


def run_shaped_mutations(case, seed: int) -> dict:
    """run_mutations for a case with a grad_output: linear wrong backwards (benchmarks/opinfo_mutations.py)."""
    from .opinfo_mutations import choose, per_output, wrapped

    parts = per_output(case.function, case.inputs, case.grad_output)
    names = list(case.inputs)
    result = {}
    for k, kind in enumerate(MUTATIONS):
        mutation = choose(parts, case.grad_output, kind, seed * 7 + k)
        if mutation is None:
            result[kind] = None
            continue
        function = wrapped(case.function, names, mutation, case.grad_output)
        wrong = expectation_of(function, case.inputs, case.grad_output)
        ours = run_ours(function, case.inputs, wrong, dtype=case.dtype, grad_output=case.grad_output)
        slow = run_gradcheck(function, case.inputs, fast=False)
        fast = run_gradcheck(function, case.inputs, fast=True)
        result[kind] = {**_detected(ours, slow, fast), "output": mutation.output}
    return result


def run_mutations(case, seed: int) -> dict:
    """For each mutation kind: whether ours, slow and fast detect it (None where it does not apply)."""
    if case.grad_output is not None:
        return run_shaped_mutations(case, seed)
    gradient = autograd_gradient(case.function, case.inputs)
    names = list(case.inputs)
    result = {}
    for k, kind in enumerate(MUTATIONS):
        wrong = mutated_gradient(gradient, kind, seed * 7 + k)
        if wrong is None:
            result[kind] = None
            continue
        function = wrapped(case.function, names, wrong)
        ours = run_ours(function, case.inputs, wrong)
        slow = run_gradcheck(function, case.inputs, fast=False)
        fast = run_gradcheck(function, case.inputs, fast=True)
        result[kind] = _detected(ours, slow, fast)
    return result
