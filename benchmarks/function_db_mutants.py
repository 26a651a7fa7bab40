"""Wrong backwards (and jvps) of the custom-Function database's entries, each a subclass of the entry's Function.

A mutant is a subclass of the entry's outer `torch.autograd.Function` whose `backward` (or
`jvp`) calls the original and changes its result in one of MUTANTS' ways, so forward,
`setup_context`, the saved tensors and the inner Functions stay the entry's own:

- `x(1+1e-4)`: one element of the first input's gradient scaled by 1 + 1e-4 (an element whose
  gradient at an all-ones grad_output is at least a tenth of the largest);
- `forgot grad_output`: the backward called with ones in place of every floating grad_output;
- `wrong input`: the gradients of the first two inputs exchanged (summed or broadcast to the
  other's shape), where the entry has two differentiable inputs;
- `permutation`: the first input's gradient rolled by one element (two or more elements);
- `wrong double backward`: g + (g*g - (g*g).detach()) / 2 for the first input: the same value,
  but its derivative, the double backward, is wrong (entries whose backward is differentiable);
- `wrong jvp`: element 0 of the first output's tangent scaled by 1.01 in place (entries with a
  jvp and forward-mode support), so that a tangent that must be a view of the input's (a Function
  returning a view) or the input's own (`mark_dirty`) stays one;
- `needs_input_grad slip`: the first input's gradient returned only when the *next* argument
  needs a gradient (the index slip `needs_input_grad[1]` for `[0]`). With two differentiable
  inputs the second is held fixed (no gradient), as in a real call where only x is trained; with
  one input and a non-tensor argument (an index, a dim) that argument never needs one.

`expected element` is where the x(1+1e-4) mutant is wrong, so that a check can be asked to name it.
"""

from __future__ import annotations

from dataclasses import dataclass

MUTANTS = (
    "x(1+1e-4)",
    "forgot grad_output",
    "wrong input",
    "permutation",
    "wrong double backward",
    "wrong jvp",
    "needs_input_grad slip",
)


@dataclass
class Mutant:
    """A wrong subclass of an entry's Function, the input it is wrong for, and what is held fixed."""

    kind: str
    function_class: type
    target: str  #: the input whose gradient (or tangent) is wrong
    element: int | None = None  #: the flat index that is wrong (x(1+1e-4)), else None
    fixed: tuple = ()  #: names of inputs held without gradient (needs_input_grad slip)


def _as_list(grads) -> list:
    return list(grads) if isinstance(grads, tuple) else [grads]


def _returned(grads: list, original):
    return tuple(grads) if isinstance(original, tuple) else grads[0]


def _chosen_element(entry) -> int:
    """An element of the first input whose gradient at an all-ones grad_output is >= 0.1 of the largest."""
    import torch

    leaves = {n: t.clone().requires_grad_(True) for n, t in entry.inputs.items()}
    outputs = entry.function()(**leaves)
    outputs = [o for o in (outputs if isinstance(outputs, tuple) else (outputs,)) if getattr(o, "requires_grad", False)]
    first = next(iter(leaves))
    (grad,) = torch.autograd.grad(outputs, [leaves[first]], [torch.ones_like(o) for o in outputs], allow_unused=True)
    if grad is None:
        return 0
    flat = grad.detach().reshape(-1).abs()
    scale = float(flat.max())
    return next(i for i, m in enumerate(flat.tolist()) if m >= 0.1 * scale) if scale > 0 else 0


def _subclass(base, kind: str, **methods):
    return type(f"{base.__name__}Mutant", (base,), {k: staticmethod(v) for k, v in methods.items()})


def build(entry, kind: str) -> Mutant | None:
    """The mutant of `kind` for `entry`, or None where that kind does not apply to it."""
    import torch

    base = entry.function_class
    names = list(entry.inputs)
    first, slot = names[0], entry.positions[0]

    def changed_backward(change):
        def backward(ctx, *grads):
            original = base.backward(ctx, *grads)
            found = _as_list(original)
            change(ctx, found)
            return _returned(found, original)

        return backward

    if kind == "x(1+1e-4)":
        element = _chosen_element(entry)

        def scale(ctx, found):
            flat = found[slot].reshape(-1).clone()
            flat[element] = flat[element] * (1 + 1e-4)
            found[slot] = flat.reshape(found[slot].shape)

        return Mutant(kind, _subclass(base, kind, backward=changed_backward(scale)), first, element)
    if kind == "forgot grad_output":

        def backward(ctx, *grads):
            ones = [torch.ones_like(g) if isinstance(g, torch.Tensor) and g.is_floating_point() else g for g in grads]
            return base.backward(ctx, *ones)

        return Mutant(kind, _subclass(base, kind, backward=backward), first)
    if kind == "wrong input":
        if len(names) < 2:
            return None
        other = entry.positions[1]
        shapes = (entry.inputs[names[0]].shape, entry.inputs[names[1]].shape)

        def exchange(ctx, found):
            a, b = found[slot], found[other]
            found[slot], found[other] = _fit(b, shapes[0]), _fit(a, shapes[1])

        return Mutant(kind, _subclass(base, kind, backward=changed_backward(exchange)), first)
    if kind == "permutation":
        if entry.inputs[first].numel() < 2:
            return None

        def roll(ctx, found):
            found[slot] = torch.roll(found[slot].reshape(-1), 1).reshape(found[slot].shape)

        return Mutant(kind, _subclass(base, kind, backward=changed_backward(roll)), first)
    if kind == "wrong double backward":
        if not entry.gradgrad or entry.once_differentiable:
            return None

        def bend(ctx, found):
            g = found[slot]
            found[slot] = g + 0.5 * (g * g - (g * g).detach())

        return Mutant(kind, _subclass(base, kind, backward=changed_backward(bend)), first)
    if kind == "wrong jvp":
        if not entry.forward_ad or "jvp" not in vars(base):
            return None

        def jvp(ctx, *tangents):
            original = base.jvp(ctx, *tangents)
            # in place, so that a tangent that must be a view (Select) or the input's own (mark_dirty) stays one
            _as_list(original)[0].view(-1)[0:1].mul_(1.01)
            return original

        return Mutant(kind, _subclass(base, kind, jvp=jvp), first)
    if kind == "needs_input_grad slip":
        if len(names) < 2 and entry.positions[0] + 1 >= _arguments(entry):
            return None

        def slip(ctx, found):
            if not ctx.needs_input_grad[slot + 1]:
                found[slot] = None

        fixed = (names[1],) if len(names) >= 2 else ()
        return Mutant(kind, _subclass(base, kind, backward=changed_backward(slip)), first, fixed=fixed)
    raise ValueError(f"no mutant kind {kind!r}")


def _arguments(entry) -> int:
    """How many arguments the entry's Function receives (forward's parameters that were given)."""
    import inspect

    leaves = {n: t.clone() for n, t in entry.inputs.items()}
    seen = []

    class Probe(entry.function_class):
        @staticmethod
        def forward(*args, **kwargs):
            seen.append(len(args))
            return entry.function_class.forward(*args, **kwargs)

    try:
        entry.function(Probe)(**leaves)
    except Exception:
        return len(inspect.signature(entry.function_class.forward).parameters)
    return seen[0] if seen else 1


def _fit(gradient, shape):
    """`gradient` made to `shape`: summed down or broadcast up, or reshaped where the sizes match."""
    import torch

    if gradient is None or tuple(gradient.shape) == tuple(shape):
        return gradient
    try:
        return gradient.sum_to_size(shape)
    except RuntimeError:
        pass
    try:
        return torch.broadcast_to(gradient, shape).clone()
    except RuntimeError:
        return gradient.reshape(-1)[: int(torch.Size(shape).numel())].reshape(shape)
