"""A grad_output that sees more: the backward of a custom Function compared again under a seeded random grad_output.

A check's default grad_output is all ones, and under it two common backward bugs vanish: a gradient
permuted between elements that happen to share a value, and a backward that never multiplies by its
grad_output (ones times anything is that thing). `torch.autograd.gradcheck` finds them because it
builds the whole Jacobian; a check of v^T J with v = 1 cannot. So, for a function whose graph goes
through a custom Function, the gradient of sum(r * f) for a standard normal r (seed SEED) is taken
by autograd and by finite differences (the same path, error bounds and refinement as the first
order, core/check/differences.py), compared element by element, and each failure diagnosed. The
record keeps the seed and r itself (its values when small, and always a hash of its bytes).
"""

from __future__ import annotations

import hashlib

import torch

from ..errors import exception_line
from ..i18n import Message
from .autograd.failures import event_failure
from .compare.comparison import compare
from .compare.tensors import describe
from .differences import as_dtype, finite_differences
from .first_order import diagnosed_failures
from .record.spec import CheckSpec

#: Seed of the random grad_output: a record is reproducible.
SEED = 29
#: Elements of r up to which the record keeps its values (beyond: the shape and the hash only).
SHOWN_ELEMENTS = 1000
#: The comparison's name in the record.
NAME = "random_grad_output_vs_finite_difference"


def draw(output) -> torch.Tensor:
    """The random grad_output r for `output`: standard normal in its dtype, drawn on the CPU from SEED."""
    generator = torch.Generator().manual_seed(SEED)
    return torch.randn(output.shape, dtype=output.dtype, generator=generator).to(output.device)


def digest(tensor) -> str:
    """sha256 of the tensor's bytes (contiguous, on the CPU), so that a record names r exactly at any size."""
    return hashlib.sha256(tensor.detach().cpu().contiguous().numpy().tobytes()).hexdigest()


def _gradients(function, leaves: dict, r) -> dict:
    """The backward's gradient of sum(r * f) per input (zeros where the backward leaves one out)."""
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        grads = torch.autograd.grad(
            function(**inputs), list(inputs.values()), r, allow_unused=True, materialize_grads=True
        )
    return {n: g.detach() for n, g in zip(inputs, grads)}


def random_grad_output(spec: CheckSpec, function, leaves: dict, v, raw: dict) -> dict:
    """The `random_grad_output` block: seed, r, one comparison per input against finite differences, the failures
    and the verdict; skipped, with the reason, for a complex output or when the finite differences were projected."""
    if v.is_complex():
        return {"status": "skipped", "reason": Message("a complex output: the random grad_output is drawn real only")}
    r = draw(v)
    try:
        autograd = _gradients(function, leaves, r)
    except Exception as exc:  # a backward that only runs under all ones: the finding
        reason = Message(
            "the backward raised under a random grad_output (seed {seed}): {error}",
            seed=SEED,
            error=exception_line(exc),
        )
        return {"status": "failed", "seed": SEED, "failures": [event_failure(NAME, reason)], "passed": False}
    diffs = finite_differences(spec, function, leaves, {**raw, "autograd_grad": autograd}, r, sweep=False)
    if diffs.projected_rows:
        return {
            "status": "skipped",
            "reason": Message("the finite differences were projected (over their time budget): no element to compare"),
        }
    fd = {n: as_dtype(g, leaves[n].dtype) for n, g in diffs.estimates.items()}
    rows = [
        compare(
            NAME,
            name,
            fd[name],
            autograd[name],
            left_label="finite_difference",
            right_label="autograd_grad",
            rtol=spec.finite_difference["rtol"],
            atol=spec.finite_difference["atol"],
            bound=diffs.bounds[name] if diffs.bounds else None,
        )
        for name in leaves
    ]
    failures = diagnosed_failures(
        spec, function, leaves, diffs, {"autograd_grad": autograd, "finite_difference": fd}, rows
    )
    shown = describe(r) if r.numel() <= SHOWN_ELEMENTS else {"shape": list(r.shape), "dtype": describe(r[:0])["dtype"]}
    return {
        "status": "observed",
        "description": Message(
            "the backward's gradient of sum(r * f) for a standard normal r (seed {seed}) against finite "
            "differences: an all-ones grad_output hides a permuted gradient and a forgotten grad_output",
            seed=SEED,
        ),
        "seed": SEED,
        "grad_output": {**shown, "sha256": digest(r)},
        "comparisons": rows,
        "failures": failures,
        "passed": not failures,
    }


def by_output(blocks: dict) -> dict:
    """One block per differentiable output k of a function of several (`blocks`: k -> block), as one block: each
    output's under `outputs`, and their failures, each naming its output."""
    failures = [{**found, "output": k} for k, block in blocks.items() for found in block.get("failures", [])]
    return {
        "status": "observed",
        "outputs": {str(k): block for k, block in blocks.items()},
        "failures": failures,
        "passed": not failures,
    }
