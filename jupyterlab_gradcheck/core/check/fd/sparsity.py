"""The sparsity pattern of a function's Jacobian, learned from the aten operations it runs.

One evaluation of the real function runs under a dispatch mode that carries, next to every
tensor derived from input x, a tensor of the flat indices of x each of its elements depends on
(shape: the tensor's shape plus one trailing dimension of width K, padded with -1). Each
operation's rule builds its output's index sets from its inputs':

- pointwise operations (aten's `pointwise` tag): the union of the broadcast inputs' sets;
- operations that only move values (views, slices, copies, cat, index_select, gather...): the same
  operation applied to the positions of the sets in one table (a reshape or cut of one tensor: to its sets);
- reductions along dimensions (sum, mean, amax, logsumexp...) and normalisations along one
  (softmax, log_softmax, cumsum): the union over the reduced slice;
- matrix products (mm, mv, dot, addmm, bmm): the union over the contracted dimension.

Any other operation, an in-place update, or indices computed from x leave the pattern unknown,
and the caller says so. The pattern comes from the forward operations alone, never from a
backward: a custom Function whose backward is wrong cannot hide its own error by teaching a
wrong pattern. It may be a superset of the true one (a product by a zero, a `where` branch not
taken), which costs colours but never correctness.

For a scalar loss the Jacobian worth colouring is that of the vector entering the last full
`sum` or `mean` (then scaled or shifted by constants only); `Learned.body_position` names that
operation, where later evaluations capture the same vector (`body_at`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .index_sets import DENSE, Unlearnable
from .sparsity_tracer import Tracer


@dataclass
class Learned:
    """What one traced evaluation showed about input x."""

    #: int64 (body shape, K): each body element's flat input indices, -1 padded: the pattern's rows, each set
    dependency: object  #: once where the tracer broadcast it over elements (a softmax's row: column_colouring.compact)
    body_kind: str  #: "output" (the function's output) or the final reduction's name
    body_position: int  #: index of the final reduction among the evaluation's operations (-1 for "output")
    factor: float  #: d output / d sum(body) for a reduction (1/N for a mean, times constants)
    operations: tuple  #: every operation's name, in order: later evaluations must repeat them
    body: object  #: the body's values at x (flat)


def learn(function, arguments: dict, name: str) -> Learned:
    """Trace function(**arguments) once and return what it showed about input `name`; Unlearnable if nothing."""
    x = arguments[name]
    tracer = Tracer(x)
    try:
        with torch.no_grad(), tracer:
            out = function(**arguments)
    except Unlearnable:
        raise
    except Exception as error:
        raise Unlearnable(f"tracing the function failed ({type(error).__name__})") from error
    if not isinstance(out, torch.Tensor) or tracer.dep(out) is None:
        raise Unlearnable("the output does not depend on the input through operations that could be traced")
    final = tracer.final.get(id(out))
    if final is not None and final[2] is out:
        position, factor, _ = final
        body = tracer.bodies[position]
        if not (body.is_floating_point() or body.is_complex()):
            raise Unlearnable("the vector entering the final reduction is not floating point")
        if tracer.dep(body) is DENSE:
            raise Unlearnable("the vector entering the final reduction depends on every input element")
        return Learned(
            tracer.dep(body),
            "sum" if tracer.operations[position] == "sum" else "mean",
            position,
            factor,
            tuple(tracer.operations),
            body.detach().reshape(-1).clone(),
        )
    if not (out.is_floating_point() or out.is_complex()):
        raise Unlearnable("the output is not floating point")
    if tracer.dep(out) is DENSE:
        raise Unlearnable(
            "a full reduction's result is not the function's output up to constant scales and "
            "shifts: the Jacobian is dense"
        )
    return Learned(tracer.dep(out), "output", -1, 1.0, tuple(tracer.operations), out.detach().reshape(-1).clone())


class Capture(TorchDispatchMode):
    """A light mode that records operation names and keeps the input of one of them."""

    @classmethod
    def _should_skip_dynamo(cls):
        return False

    def __init__(self, position: int):
        super().__init__()
        self.position, self.operations, self.captured = position, [], None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if len(self.operations) == self.position:
            self.captured = args[0]
        self.operations.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def body_at(function, arguments: dict, learned: Learned):
    """The body's values (flat) at these arguments, or None when the operations differ from the learned ones."""
    mode = Capture(learned.body_position)
    with torch.no_grad(), mode:
        out = function(**arguments)
    value = out if learned.body_kind == "output" else mode.captured
    if tuple(mode.operations) != learned.operations or value is None or value.numel() != learned.body.numel():
        return None
    return value.reshape(-1)


def bodies_at(function, arguments, xs, learned: Learned):
    """The body's values at each x stacked along dimension 0, from one `vmap` call; None where that fails.

    `arguments(x)` gives the function's keyword arguments for one x. Under vmap the operations reach the
    capture mode batched along dimension 0 (a loss's body is then the final reduction's input, (B, ...)):
    up to the body they must have the learned names in order, else None (the caller evaluates one by one)."""
    mode = Capture(learned.body_position)
    try:
        with torch.no_grad(), mode:
            out = torch.func.vmap(lambda x: function(**arguments(x)))(xs)
    except Exception:  # a function vmap cannot batch (a custom Function without a vmap rule)
        return None
    # up to the body, the operations must be the learned ones; after a loss's final reduction vmap
    # handles the per-copy scalars its own way (a select and a copy before a constant factor), and
    # those operations do not touch the body
    through = len(learned.operations) if learned.body_kind == "output" else learned.body_position + 1
    if tuple(mode.operations[:through]) != learned.operations[:through] or (
        learned.body_kind == "output" and len(mode.operations) != through
    ):
        return None
    value = out if learned.body_kind == "output" else mode.captured
    count, rows = xs.shape[0], learned.body.numel()
    if value is None or value.dim() == 0 or value.shape[0] != count or value.numel() != count * rows:
        return None
    return value.reshape(count, rows)
