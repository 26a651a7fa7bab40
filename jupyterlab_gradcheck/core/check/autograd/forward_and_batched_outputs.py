"""Forward mode and batched gradients of a custom Function with several outputs.

`torch.autograd.gradcheck` checks a tuple of outputs in forward mode and batched, as it checks one
(`check_forward_ad`, `check_batched_grad`): a Function that returns `(y, aux)` has a `jvp` giving a
tangent per output and a `backward` taking a gradient per output, and either can be wrong in one
output's part alone. For each differentiable output k (core/check/autograd/several_outputs.py `differentiable`):

- `forward_ad`: its tangent J_k u along the direction u of core/check/autograd/forward_and_batched.py (one
  standard normal direction per input, seed 17) against central differences of f_k along u, one
  comparison per output; and sum_k sum(v_k * J_k u) against grad . u, where grad is the backward's
  gradient of sum_k sum(v_k * f_k) with each output's grad_output v_k of the check;
- `batched_grad`: `vmap` of `autograd.grad` over three grad_output tuples (one draw per output, in
  the outputs' order, seed 17) against the same three computed one at a time, one comparison per
  input.
"""

from __future__ import annotations

import torch

from ...errors import exception_line
from ...i18n import Message
from ..compare.comparison import compare
from ..compare.complex_tensors import real_inner
from ..compare.tensors import describe
from ..fd.mode_tolerance import difference_bound
from .failures import event_failure


def _flat(tensors: list):
    """The tensors flattened and side by side, as one observation shows them."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def forward_skipped(exc) -> dict:
    """Forward mode recorded as not applying, with the reason PyTorch gave (no jvp, an operation without a
    forward-mode formula)."""
    return {
        "status": "skipped",
        "reason": Message("forward-mode AD does not apply: {reason}", reason=exception_line(exc)),
    }


def forward_failed(exc) -> dict:
    """Forward mode recorded as failed: the jvp (or an operation's forward-mode formula) raised, which
    `gradcheck(check_forward_ad=True)` fails too."""
    reason = Message(
        "forward-mode AD raised: {reason}: suspect the jvp, which gradcheck(check_forward_ad=True) fails too",
        reason=exception_line(exc),
    )
    return {"status": "failed", "reason": reason, "failures": [event_failure("forward_ad", reason)]}


def forward_refused(exc) -> dict:
    """A forward-mode pass that raised: skipped where PyTorch says forward mode is not implemented (a custom
    Function without a jvp, an operation without a formula), failed otherwise."""
    return forward_skipped(exc) if isinstance(exc, NotImplementedError) else forward_failed(exc)


def backward_failed(exc) -> dict:
    """Batched gradients recorded as failed: the backward itself raised under a random grad_output, one at a time
    (`gradcheck(check_batched_grad=True)` fails it too)."""
    reason = Message(
        "the backward raised under a random grad_output, one at a time: {reason}", reason=exception_line(exc)
    )
    return {"status": "failed", "reason": reason, "failures": [event_failure("batched_grad", reason)]}


def vmap_skipped(exc) -> dict:
    """Batched gradients recorded as not applying, with the reason PyTorch gave (a backward vmap cannot batch)."""
    return {
        "status": "skipped",
        "reason": Message("vmap over grad_outputs does not apply: {reason}", reason=exception_line(exc)),
    }


def dual_pairs(function, leaves: dict, directions: dict) -> list:
    """(primal, tangent) of each output of forward-mode AD along `directions` (one pair for a tensor output, a list
    for a tuple), a tangent forward AD leaves undefined as None; raises what forward AD raises.

    Each direction is handed to forward AD as a copy: a jvp returning a view of its input's tangent (a Function
    whose output is a view) may change it in place, and the finite differences along u must read u as drawn."""
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        found = function(**{n: fwad.make_dual(x.detach(), directions[n].clone()) for n, x in leaves.items()})
        pairs = [fwad.unpack_dual(o) for o in (found if isinstance(found, (tuple, list)) else [found])]
        pairs = [(p.primal, p.tangent) for p in pairs]
    return [(primal, None if tangent is None else tangent.detach()) for primal, tangent in pairs]


def missing_tangent(pairs: list, indices: list):
    """The forward_ad block skipped for the first differentiable output (of `indices`) without a tangent, else None."""
    for k in indices:
        if pairs[k][1] is None:
            reason = Message(
                "forward-mode AD does not apply: output {k} gets no tangent: an operation on its path has no "
                "forward-mode formula (a torch.library.custom_op registers none with register_autograd)",
                k=k,
            )
            return {"status": "skipped", "reason": reason}
    return None


def along_u(function, leaves: dict, directions: dict) -> tuple:
    """(f(x + h u), f(x - h u), 2h): central differences along u at h = eps^(1/3) max(1, max |x|)."""
    dtype = next(iter(leaves.values())).dtype
    h = torch.finfo(dtype).eps ** (1 / 3) * max(
        1.0, max(float(x.detach().abs().max()) if x.numel() else 0.0 for x in leaves.values())
    )
    with torch.no_grad():
        plus = function(**{n: x.detach() + h * directions[n] for n, x in leaves.items()})
        minus = function(**{n: x.detach() - h * directions[n] for n, x in leaves.items()})
    return plus, minus, 2 * h


def _gradient(function, leaves: dict, indices: list, weights: dict) -> dict:
    """The backward's gradient of sum_k sum(v_k * f_k) over the outputs `indices`, per input (zeros
    where an input reaches none of them)."""
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        found = function(**inputs)
        grads = torch.autograd.grad(
            [found[k] for k in indices],
            list(inputs.values()),
            [weights[k] for k in indices],
            allow_unused=True,
            materialize_grads=True,
        )
    return dict(zip(inputs, grads))


def forward_ad_outputs(function, leaves: dict, directions: dict, weights: dict, tolerances: tuple) -> dict:
    """The `forward_ad` observation of a function of several outputs (or skipped, with the reason):
    `weights` maps each differentiable output's index to its grad_output v_k; `tolerances` is
    (against finite differences, against the backward), as for one output."""
    indices = sorted(weights)
    try:
        pairs = dual_pairs(function, leaves, directions)
    except Exception as exc:  # no jvp (skipped), or a jvp that raised (failed)
        return forward_refused(exc)
    if (missing := missing_tangent(pairs, indices)) is not None:
        return missing
    tangents = {k: pairs[k][1] for k in indices}
    plus, minus, width = along_u(function, leaves, directions)
    label = ", ".join(leaves)
    differences, exact = tolerances
    comparisons = [
        {
            **compare(
                "forward_ad_vs_finite_difference",
                label,
                ((plus[k] - minus[k]) / width).reshape(-1),
                tangents[k].reshape(-1),
                left_label=f"finite_difference_along_u (output {k})",
                right_label=f"forward_ad (output {k})",
                **differences,
                bound=difference_bound(plus[k], minus[k], width).reshape(-1),
            ),
            "output": k,
        }
        for k in indices
    ]
    gradient = _gradient(function, leaves, indices, weights)
    along = sum(real_inner(weights[k], tangents[k]).reshape(1) for k in indices)
    backward_along = sum(real_inner(gradient[n], directions[n]).reshape(1) for n in leaves)
    comparisons.append(
        compare(
            "forward_ad_vs_backward",
            label,
            backward_along,
            along,
            left_label="grad . u (backward)",
            right_label="sum_k sum(v_k * J_k u) (forward_ad)",
            **exact,
        )
    )
    return {
        "status": "observed",
        "tangent": describe(_flat([tangents[k] for k in indices])),
        "note": Message(
            "the tangents of outputs {outputs}, each flattened, side by side", outputs=", ".join(map(str, indices))
        ),
        "comparisons": comparisons,
    }


def gradients_of(outputs, inputs: list, weights) -> tuple:
    """The backward's gradients of `outputs` under `weights`, the graph kept; zeros for an input the outputs do not
    reach or whose gradient the backward leaves out (a needs_input_grad slip): the first order's comparison against
    finite differences names such an element, the batched mode only needs a tensor."""
    return torch.autograd.grad(outputs, inputs, weights, retain_graph=True, allow_unused=True, materialize_grads=True)


def batched_grad_outputs(function, leaves: dict, indices: list, seed: int, tolerance: dict) -> dict:
    """The `batched_grad` observation of a function of several outputs, one comparison per input (or
    skipped, with the reason): three grad_output tuples over the differentiable outputs `indices`."""
    names = list(leaves)
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        found = function(**inputs)
        outputs = [found[k] for k in indices]
        generator = torch.Generator().manual_seed(seed)
        draws = [torch.randn((3, *o.shape), dtype=o.dtype, generator=generator).to(o.device) for o in outputs]

        def grad_of(*weights):
            return gradients_of(outputs, [inputs[n] for n in names], weights)

        try:
            one_by_one = [torch.stack(parts) for parts in zip(*(grad_of(*(d[i] for d in draws)) for i in range(3)))]
        except Exception as exc:  # a backward that runs only under some grad_outputs: the finding
            return backward_failed(exc)
        try:
            batched = torch.func.vmap(grad_of)(*draws)
        except Exception as exc:  # a backward vmap cannot batch: say so
            return vmap_skipped(exc)
    shown = torch.cat([b.reshape(b.shape[0], -1) for b in batched], dim=1)
    return {
        "status": "observed",
        "grad_outputs": 3,
        "gradients": describe(shown.detach()),
        "note": Message(
            "three grad_outputs for each of outputs {outputs}; the gradients of {names}, each flattened, side by side",
            outputs=", ".join(map(str, indices)),
            names=", ".join(names),
        ),
        "comparisons": batched_comparisons(names, one_by_one, batched, tolerance),
    }


def batched_comparisons(names, one_by_one, batched, tolerance: dict) -> list[dict]:
    """Each input's gradients under the three grad_outputs taken one at a time against vmap's batch of them,
    flattened, within `tolerance` (the dtype's exact tolerance)."""
    return [
        compare(
            "batched_grad_vs_one_at_a_time",
            name,
            one.detach().reshape(-1),
            together.detach().reshape(-1),
            left_label="one_at_a_time",
            right_label="vmap",
            **tolerance,
        )
        for name, one, together in zip(names, one_by_one, batched)
    ]
