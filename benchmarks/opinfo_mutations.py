"""Wrong backwards for OpInfo cases whose function is not a scalar: several outputs, or complex.

A scalar case's wrong backward can return a fixed wrong gradient times grad_output
(benchmarks/opinfo_sweep.py). A function with several outputs, or any non-scalar output, is
checked with a grad_output per output, and gradcheck calls the backward with many other
grad_outputs (one-hot rows of the Jacobian, complex ones for a complex function), so the wrong
backward has to be a backward of *some* wrong Jacobian: linear in grad_output. Here it is
autograd's own vector-Jacobian product plus a change that is linear in the grad_output `g_k`
of one output k and lands on one input:

- `x1.01`: element i of output k's part of the gradient, (J_k^H g_k)_i, scaled by 1.01: the
  derivative of every element of output k with respect to input element i is 1% off;
- `+1e-4`: element i moved by 1e-4 of the gradient's scale times g_k[j] / w_k[j], with j one
  drawn element of output k: one Jacobian entry off, by exactly 1e-4 of the scale at g = w.
  For a complex input the move has a phase drawn per case, so imaginary parts are changed too;
- `swap`: elements i and j of output k's part exchanged.

At g = w (the check's grad_output) each is wrong at exactly one or two elements of one input,
for one output, as the scalar mutations are. The elements and the output are drawn with a
fixed seed.
"""

from __future__ import annotations

import cmath
import random
from dataclasses import dataclass

#: Smallest part of the gradient (one output, one input) a mutation is drawn in, relative to the largest.
PART_FLOOR = 1e-3


@dataclass(frozen=True)
class Mutation:
    """Where and how one backward is wrong: output k, input `name`, flat elements, and the change."""

    kind: str
    output: int
    name: str
    i: int
    j: int = -1  #: the swapped element (swap) or the output element the move follows (+1e-4)
    shift: complex = 0.0  #: the move at g = w (+1e-4), a real number for a real input


def as_tuple(output) -> tuple:
    return tuple(output) if isinstance(output, (list, tuple)) else (output,)


def weights_of(grad_output) -> list:
    return list(grad_output) if isinstance(grad_output, list) else [grad_output]


def vjp(function, inputs: dict, grads, only: int | None = None) -> dict:
    """Autograd's gradient of sum_k <g_k, f_k> (or of output `only` alone), zeros where an input is unused."""
    import torch

    with torch.enable_grad():
        leaves = {n: t.detach().clone().requires_grad_(True) for n, t in inputs.items()}
        outputs = as_tuple(function(**leaves))
        pairs = [(o, g) for k, (o, g) in enumerate(zip(outputs, grads)) if only is None or k == only]
        pairs = [(o, g.to(o.dtype)) for o, g in pairs if o.requires_grad]
        found = (
            torch.autograd.grad([o for o, _ in pairs], list(leaves.values()), [g for _, g in pairs], allow_unused=True)
            if pairs
            else [None] * len(leaves)
        )
    return {n: (torch.zeros_like(t) if g is None else g.detach()) for (n, t), g in zip(leaves.items(), found)}


def per_output(function, inputs: dict, grad_output) -> list[dict]:
    """Autograd's gradient of each output k alone, weighted by its grad_output w_k."""
    weights = weights_of(grad_output)
    return [vjp(function, inputs, weights, only=k) for k in range(len(weights))]


def choose(parts: list[dict], grad_output, kind: str, seed: int) -> Mutation | None:
    """A mutation of `kind` drawn among outputs and inputs whose part of the gradient is not negligible; None where none applies.

    A part counts when its largest magnitude is at least PART_FLOOR of the largest part's: one that
    is zero up to rounding (an attention mask's 1e-76) leaves nothing to detect at 1e-4 of its scale."""
    import torch

    rng = random.Random(seed)
    sizes = {
        (k, n): float(g.abs().max())
        for k, part in enumerate(parts)
        for n, g in part.items()
        if g.numel() and bool(torch.isfinite(g).all())
    }
    largest = max(sizes.values(), default=0.0)
    pairs = [pair for pair, size in sizes.items() if size > 0 and size >= PART_FLOOR * largest]
    if not pairs:
        return None
    k, name = rng.choice(pairs)
    flat = parts[k][name].reshape(-1)
    magnitudes = flat.abs().tolist()
    scale = max(magnitudes)
    if kind == "x1.01":
        return Mutation(kind, k, name, rng.choice([i for i, m in enumerate(magnitudes) if m >= 0.1 * scale]))
    if kind == "+1e-4":
        i = rng.randrange(flat.numel())
        j = rng.randrange(weights_of(grad_output)[k].numel())
        phase = cmath.exp(1j * rng.uniform(0, 2 * cmath.pi)) if flat.is_complex() else 1.0
        return Mutation(kind, k, name, i, j, 1e-4 * scale * phase)
    values = flat.tolist()
    for _ in range(4000):
        i, j = rng.randrange(len(values)), rng.randrange(len(values))
        if i != j and abs(values[i] - values[j]) >= 0.1 * scale:
            return Mutation(kind, k, name, i, j)
    return None


def change(mutation: Mutation, part, g_k, w_k):
    """The change to input `name`'s gradient: linear in g_k (through `part` = J_k^H g_k, or g_k itself)."""
    import torch

    flat = part.reshape(-1)
    delta = torch.zeros_like(flat)
    i, j = mutation.i, mutation.j
    if mutation.kind == "x1.01":
        delta[i] = 0.01 * flat[i]
    elif mutation.kind == "swap":
        delta[i] = flat[j] - flat[i]
        delta[j] = flat[i] - flat[j]
    else:
        follow = g_k.reshape(-1)[j] / float(w_k.reshape(-1)[j])
        delta[i] = mutation.shift * follow.to(flat.dtype)
    return delta.reshape(part.shape)


def wrapped(function, names: list, mutation: Mutation, grad_output):
    """The case's function as a custom autograd.Function whose backward is autograd's, changed by `mutation`."""
    import torch

    weights = weights_of(grad_output)
    several = isinstance(grad_output, list)

    class WrongBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.save_for_backward(*args)
            with torch.no_grad():
                outputs = as_tuple(function(**dict(zip(names, args))))
            # a fresh tensor per output: a Function's output that is a view of its input is another kind of test
            outputs = tuple(o.clone() for o in outputs)
            return outputs if several else outputs[0]

        @staticmethod
        def backward(ctx, *grads):
            inputs = dict(zip(names, ctx.saved_tensors))
            total = vjp(function, inputs, grads)
            k = mutation.output
            part = vjp(function, inputs, grads, only=k)[mutation.name]
            total[mutation.name] = total[mutation.name] + change(mutation, part, grads[k], weights[k])
            return tuple(total[n] for n in names)

    def mutated(**inputs):
        return WrongBackward.apply(*(inputs[n] for n in names))

    return mutated
