"""Forward mode and batched gradients of a function that goes through custom autograd Functions.

A custom `torch.autograd.Function` is used by more than `backward()`: forward-mode AD calls its
`jvp`, and `torch.func.vmap` over gradients (per-sample gradients, Jacobians by rows) calls its
`backward` batched. `torch.autograd.gradcheck` checks both (`check_forward_ad`,
`check_batched_grad`); so does a check of a Python callable whose graph holds a custom Function:

- `forward_ad`: the directional derivative J u along a fixed random direction u, by forward-mode
  AD (dual numbers), against central differences of f along u and against the backward's
  Jacobian (sum(v * J u) = grad . u, with grad from `backward`);
- `batched_grad`: `vmap` of `autograd.grad` over three grad_outputs, against the same three
  computed one at a time;
- `undefined_grad`: the backward with its output gradients undefined, which must not crash and
  must give None or zeros (core/check/autograd/undefined_grad.py), as `check_undefined_grad` does.

Forward mode and batched gradients are observed for a function of one output, with any number of
inputs (each input gets its own direction, drawn in the inputs' order, and its own batched
comparison), and for a function of several outputs (core/check/autograd/forward_and_batched_outputs.py);
undefined gradients for any.

Each is skipped, with the reason PyTorch gives, where it does not apply (a Function without a
`jvp`, a backward that vmap cannot batch): a note, not a failure.
"""

from __future__ import annotations

import torch

from ...i18n import Message
from ..compare.comparison import compare
from ..compare.complex_tensors import real_inner
from ..compare.tensors import describe
from ..fd.mode_tolerance import difference_bound, mode_tolerances
from .custom_op_registration import opcheck_registration
from .forward_and_batched_outputs import (
    along_u,
    backward_failed,
    batched_comparisons,
    batched_grad_outputs,
    dual_pairs,
    forward_ad_outputs,
    forward_refused,
    gradients_of,
    missing_tangent,
    vmap_skipped,
)
from .undefined_grad import undefined_grad

#: The observations of the block, in the record's order (`custom_op` only where the graph holds one).
MODES = ("forward_ad", "batched_grad", "undefined_grad", "custom_op")
#: The module of the autograd Function PyTorch generates for a torch.library.custom_op's register_autograd.
CUSTOM_OP_MODULE = "torch._library.autograd"

#: Seed of the direction u and of the batched grad_outputs: a record is reproducible.
SEED = 17


def _tolerances(leaves: dict) -> dict:
    """The modes' tolerances in the inputs' dtype and on their device (core/check/fd/mode_tolerance.py):
    forward AD against the backward's Jacobian and batched against one-at-a-time gradients differ by
    rounding alone ("exact"); central differences along u by their truncation and rounding ("differences")."""
    x = next(iter(leaves.values()))
    return mode_tolerances(x.dtype, x.device)


def _directions(leaves: dict) -> dict:
    """A standard normal direction per input, drawn in the inputs' order from one seeded generator
    (one input gets the draw it always got)."""
    generator = torch.Generator().manual_seed(SEED)
    return {n: torch.randn(x.shape, dtype=x.dtype, generator=generator).to(x.device) for n, x in leaves.items()}


def _label(leaves: dict) -> str:
    """The input a block's comparisons name: the input, or the inputs joined (they are compared together)."""
    return ", ".join(leaves)


def _direction_text(leaves: dict) -> str:
    """How the direction u was drawn, in words."""
    if len(leaves) == 1:
        return Message("u: standard normal, seed {seed}", seed=SEED)
    return Message(
        "u: standard normal for each input, drawn in the order {names}, seed {seed}", names=_label(leaves), seed=SEED
    )


def forward_ad(function, leaves: dict, v, gradients: dict) -> dict:
    """The `forward_ad` observation and its comparisons (or skipped, with the reason): J u with one
    direction per input, u = (u_x, u_w, ...), against central differences along u and sum_i grad_i . u_i."""
    directions = _directions(leaves)
    try:
        pairs = dual_pairs(function, leaves, directions)
    except Exception as exc:  # no jvp (skipped), or a jvp that raised (failed)
        return forward_refused(exc)
    if (missing := missing_tangent(pairs, [0])) is not None:
        return missing
    ((_, tangent),) = pairs
    plus, minus, width = along_u(function, leaves, directions)
    fd = (plus - minus) / width
    weights = torch.ones_like(tangent) if v is None else v.detach()
    along = real_inner(weights, tangent).reshape(1)  # sum(Re(conj(v) * J u)) for complex values
    backward_along = sum(real_inner(gradients[n].detach(), directions[n]).reshape(1) for n in leaves)
    label = _label(leaves)
    tolerances = _tolerances(leaves)
    comparisons = [
        compare(
            "forward_ad_vs_finite_difference",
            label,
            fd.reshape(-1),
            tangent.detach().reshape(-1),
            left_label="finite_difference_along_u",
            right_label="forward_ad",
            **tolerances["differences"],
            bound=difference_bound(plus, minus, width).reshape(-1),
        ),
        compare(
            "forward_ad_vs_backward",
            label,
            backward_along,
            along,
            left_label="grad . u (backward)",
            right_label="sum(v * J u) (forward_ad)",
            **tolerances["exact"],
        ),
    ]
    return {
        "status": "observed",
        "direction": _direction_text(leaves),
        "tangent": describe(tangent.detach()),
        "comparisons": comparisons,
    }


def batched_grad(function, leaves: dict, v) -> dict:
    """The `batched_grad` observation and its comparisons, one per input (or skipped, with the reason)."""
    names = list(leaves)
    several = len(names) > 1
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        output = function(**inputs)
        generator = torch.Generator().manual_seed(SEED)
        outputs = torch.randn((3, *output.shape), dtype=output.dtype, generator=generator).to(output.device)

        def grad_of(weights):
            return gradients_of(output, [inputs[n] for n in names], weights)

        try:
            one_by_one = [torch.stack(parts) for parts in zip(*(grad_of(w) for w in outputs))]
        except Exception as exc:  # a backward that runs only under some grad_outputs: the finding
            return backward_failed(exc)
        try:
            batched = torch.func.vmap(grad_of)(outputs)
        except Exception as exc:  # a backward vmap cannot batch: say so
            return vmap_skipped(exc)
    shown = batched[0] if not several else torch.cat([b.reshape(b.shape[0], -1) for b in batched], dim=1)
    block = {
        "status": "observed",
        "grad_outputs": 3,
        "gradients": describe(shown.detach()),
        "comparisons": batched_comparisons(names, one_by_one, batched, _tolerances(leaves)["exact"]),
    }
    if several:
        block["note"] = Message("the gradients of {names}, each flattened, side by side", names=_label(leaves))
    return block


def function_modes(
    function,
    leaves: dict,
    v,
    gradients: dict | None,
    classes: list,
    *,
    outputs: int | None = None,
    weights: dict | None = None,
) -> dict | None:
    """{"forward_ad", "batched_grad", "undefined_grad"} for a function whose graph holds custom Functions
    (`classes`, as the first forward pass found them), else None. Forward mode and batched gradients
    are observed for one output, whatever the inputs; for a tuple or list of `outputs` (their count)
    they are observed over its differentiable outputs, `weights` mapping each one's index to its
    grad_output (core/check/autograd/forward_and_batched_outputs.py)."""
    if not classes:
        return None
    block = {"input": None, "functions": [f"{c.__module__}.{c.__qualname__}" for c in classes]}
    if outputs is None:
        block.update(
            {
                "input": _label(leaves),
                "forward_ad": forward_ad(function, leaves, v, gradients),
                "batched_grad": batched_grad(function, leaves, v),
            }
        )
    else:
        forward = forward_ad_outputs(
            function,
            leaves,
            _directions(leaves),
            weights,
            (_tolerances(leaves)["differences"], _tolerances(leaves)["exact"]),
        )
        if forward["status"] == "observed":
            forward["direction"] = _direction_text(leaves)
        block.update(
            {
                "input": _label(leaves),
                "forward_ad": forward,
                "batched_grad": batched_grad_outputs(
                    function, leaves, sorted(weights), SEED, _tolerances(leaves)["exact"]
                ),
            }
        )
    block["undefined_grad"] = undefined_grad(function, leaves)
    if any(c.__module__ == CUSTOM_OP_MODULE for c in classes):  # a torch.library.custom_op's generated Function
        block["custom_op"] = opcheck_registration(function, leaves)
    return block
