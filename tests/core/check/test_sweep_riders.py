"""A passing check's step sweep is evaluated in the call of its finite differences
(core/check/fd/finite_difference.py). These stories pin that the sweep is the one drawn alone, that the call
is shared, and that every way the shared call can fail still gives the record of a sweep drawn alone.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.fd.finite_difference import CAST_NOTE, guarded_step_sweep
from jupyterlab_gradcheck.core.check.fd.steps import STEP_SCALE_CAP


def _banded(x):
    """A neighbour product: no elementwise chain, no matrix kernel whose rounding depends on the batch."""
    return torch.tanh(x[1:] * x[:-1]).sum()


def _banded_gradient(x):
    inner = 1 - torch.tanh(x[1:] * x[:-1]) ** 2
    gradient = torch.zeros_like(x)
    gradient[:-1] += inner * x[1:]
    gradient[1:] += inner * x[:-1]
    return gradient


class _Counted:
    """A function that counts its Python-level calls (a vmap call counts once per trace)."""

    def __init__(self, function):
        self.function, self.calls = function, 0

    def __call__(self, **inputs):
        self.calls += 1
        return self.function(**inputs)


def _check(function, x, **options):
    return run_check(
        {"function": function, "inputs": {"x": x.tolist()}, "analytical_gradient": _banded_gradient}, **options
    )


def _alone(function, x, record: dict) -> dict:
    """The record's step sweep drawn again on its own, nothing riding in the finite differences' call: at its element,
    with the check's step there and autograd's gradient as the reference, as the engine asks for it."""
    sweep, fd = record["step_sweep"], record["observations"]["finite_difference"]
    flat, info = sweep["flat_index"], fd["inputs"]["x"]
    scale = min(max(1.0, abs(float(x.reshape(-1)[flat]))), STEP_SCALE_CAP)
    reference = torch.tensor(record["observations"]["autograd_grad"]["gradients"]["x"]["value"], dtype=torch.float64)
    batching = info.get("batched_refused") or (
        "" if info.get("batched") and info.get("batch_check_evaluations") else None
    )
    return guarded_step_sweep(
        function,
        {"x": x},
        torch.ones((), dtype=torch.float64),
        "x",
        flat,
        chosen={"float64": fd["step"] * scale},
        reference=reference,
        batching=batching,
    )


def _series(record):
    return {s["dtype"]: (s["steps"], s["errors"]) for s in record["step_sweep"]["series"]}


def test_a_passing_check_shares_one_call_and_keeps_its_sweep():
    """Given a banded loss of 6 elements (12 shifted copies, few enough to be evaluated one by one on their own),
    when it is checked with its step sweep and without one,
    then it passes with the sweep drawn alone, step for step and error for error, and with fewer calls of the
    function than the check without a sweep makes: its 12 copies and the sweep's two series go through one vmap
    call with the batch guard's one separate evaluation."""
    x = torch.linspace(-1.0, 1.2, 6, dtype=torch.float64)
    riding, without, alone = (_Counted(lambda x: _banded(x)) for _ in range(3))
    after, bare = _check(riding, x), _check(without, x, sweep=False)

    assert after["passed"] and bare["passed"]
    assert _series(after) == _series({"step_sweep": _alone(alone, x, after)})
    assert set(_series(after)) == {"float32", "float64"}
    assert "note" not in after["step_sweep"]
    assert riding.calls < without.calls
    info = after["observations"]["finite_difference"]["inputs"]["x"]
    assert (info["forward_evaluations"], info["batch_check_evaluations"]) == (12, 1)


def test_a_function_holding_float64_tensors_gets_its_float32_series_cast_in_the_shared_call():
    """Given a banded loss scaled by a float64 tensor the function holds (its float32 evaluation raises
    on the mixed matrix product), when it is checked,
    then the shared call is made once more with every float64 operand cast, the float32 series says
    so as the sweep alone says it, and both series equal the sweep drawn alone."""
    scale = torch.linspace(0.5, 1.5, 5, dtype=torch.float64)

    def held(x):
        return torch.tanh((x[1:] * x[:-1]).unsqueeze(0) @ scale)[0]

    def gradient(x):
        inner = (1 - torch.tanh((x[1:] * x[:-1]) @ scale) ** 2) * scale
        out = torch.zeros_like(x)
        out[:-1] += inner * x[1:]
        out[1:] += inner * x[:-1]
        return out

    x = torch.linspace(-1.0, 1.2, 6, dtype=torch.float64)
    after = run_check({"function": held, "inputs": {"x": x.tolist()}, "analytical_gradient": gradient})
    alone = _alone(held, x, after)

    assert after["passed"]
    assert after["step_sweep"]["note"] == "float32: " + CAST_NOTE.format(dtype="float32")
    assert after["step_sweep"]["note"] == alone["note"]
    assert _series(after) == _series({"step_sweep": alone})


def test_a_failing_check_draws_its_sweep_at_the_failure():
    """Given the banded loss with an expectation wrong at element 3, when it is checked,
    then it fails there, and the sweep is drawn at element 3 (not at element 0, which the shared call
    evaluated in advance), as a sweep drawn alone at that element is."""
    x = torch.linspace(-1.0, 1.2, 6, dtype=torch.float64)

    def wrong(x):
        gradient = _banded_gradient(x)
        gradient[3] += 0.01
        return gradient

    after = run_check({"function": _banded, "inputs": {"x": x.tolist()}, "analytical_gradient": wrong})
    assert not after["passed"] and after["failure"]["index"] == [3]
    assert after["step_sweep"]["flat_index"] == 3
    assert _series(after) == _series({"step_sweep": _alone(_banded, x, after)})


def test_a_step_outside_the_domain_leaves_the_finite_differences_as_they_were():
    """Given a binary cross-entropy whose probabilities a step of 1 pushes out of [0, 1] (the function
    raises there), when it is checked with its sweep and without one,
    then the shared call fails, the finite differences are evaluated on their own with the values the
    check without a sweep gives, and the sweep leaves those steps out with the reason, as it does alone."""
    target = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0], dtype=torch.float64)

    def loss(x):
        return torch.nn.functional.binary_cross_entropy(x, target)

    def gradient(x):
        return (x - target) / (x * (1 - x)) / x.numel()

    x = torch.tensor([0.2, 0.7, 0.4, 0.3, 0.9], dtype=torch.float64)
    declared = {"function": loss, "inputs": {"x": x.tolist()}, "analytical_gradient": gradient}
    bare, after = run_check(declared, sweep=False), run_check(declared)

    assert bare["passed"] and after["passed"]
    fd = [r["observations"]["finite_difference"]["gradients"]["x"]["value"] for r in (bare, after)]
    assert fd[0] == fd[1]
    assert "left out: the function raised there" in after["step_sweep"]["note"]
    assert _series(after) == _series({"step_sweep": _alone(loss, x, after)})


def test_only_an_input_whose_copies_fit_the_limit_gets_riders():
    """Given inputs of 256 and 257 elements (512 and 514 central-difference copies against a limit of 512),
    when the sweep's riders are asked for, then the first gets one per dtype and the second none: its
    riders could not ride, and holding their tensors would only be in the allocator's way."""
    from jupyterlab_gradcheck.core.check.fd.finite_difference import RIDE_MAX_COPIES, sweep_riders

    v = torch.ones((), dtype=torch.float64)
    fits = sweep_riders(_banded, {"x": torch.zeros(256, dtype=torch.float64)}, v, "x", 0)
    too_large = sweep_riders(_banded, {"x": torch.zeros(257, dtype=torch.float64)}, v, "x", 0)
    assert RIDE_MAX_COPIES == 512
    assert [r.dtype for r in fits] == ["float32", "float64"] and too_large == []
