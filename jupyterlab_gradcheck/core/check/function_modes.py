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
  must give None or zeros (core/check/undefined_grad.py), as `check_undefined_grad` does.

Forward mode and batched gradients are observed for a function of one input and one output;
undefined gradients for any.

Each is skipped, with the reason PyTorch gives, where it does not apply (a Function without a
`jvp`, a backward that vmap cannot batch): a note, not a failure.
"""

from __future__ import annotations

from ..errors import exception_line
from ..i18n import Message
from .comparison import compare
from .complex_values import real_inner
from .tensors import describe
from .undefined_grad import undefined_grad

#: The observations of the block, in the record's order.
MODES = ("forward_ad", "batched_grad", "undefined_grad")

#: Seed of the direction u and of the batched grad_outputs: a record is reproducible.
SEED = 17
#: Tolerances (float64): forward AD against the backward's Jacobian differ by rounding alone
#: (1e-9 allows sums of 10^4 terms); central differences along u err by ~eps^(2/3) ~ 4e-11 times
#: the third derivative's scale (1e-6 allows 10^4); batched and one-at-a-time gradients run the
#: same kernels batched, equal to rounding (1e-9).
EXACT = {"rtol": 1e-9, "atol": 1e-9}
DIFFERENCES = {"rtol": 1e-6, "atol": 1e-6}



def _direction(x):
    import torch

    generator = torch.Generator().manual_seed(SEED)
    return torch.randn(x.shape, dtype=x.dtype, generator=generator).to(x.device)


def forward_ad(function, name: str, x, v, gradient) -> dict:
    """The `forward_ad` observation and its comparisons (or skipped, with the reason)."""
    import torch
    import torch.autograd.forward_ad as fwad

    u = _direction(x)
    try:
        with fwad.dual_level():
            output = function(**{name: fwad.make_dual(x.detach(), u)})
            tangent = fwad.unpack_dual(output).tangent
    except Exception as exc:  # no jvp, or an operation forward AD does not support: say so
        return {"status": "skipped", "reason": Message("forward-mode AD does not apply: {reason}", reason=exception_line(exc))}
    if tangent is None:
        tangent = torch.zeros_like(output)
    eps = torch.finfo(x.dtype).eps
    h = eps ** (1 / 3) * max(1.0, float(x.detach().abs().max()))
    with torch.no_grad():
        plus, minus = function(**{name: x.detach() + h * u}), function(**{name: x.detach() - h * u})
        fd = (plus - minus) / (2 * h)
    weights = torch.ones_like(tangent) if v is None else v.detach()
    along = real_inner(weights, tangent).reshape(1)  # sum(Re(conj(v) * J u)) for complex values
    backward_along = real_inner(gradient.detach(), u).reshape(1)
    comparisons = [
        compare("forward_ad_vs_finite_difference", name, fd.reshape(-1), tangent.detach().reshape(-1),
                left_label="finite_difference_along_u", right_label="forward_ad", **DIFFERENCES),
        compare("forward_ad_vs_backward", name, backward_along, along,
                left_label="grad . u (backward)", right_label="sum(v * J u) (forward_ad)", **EXACT),
    ]
    return {"status": "observed", "direction": Message("u: standard normal, seed {seed}", seed=SEED),
            "tangent": describe(tangent.detach()), "comparisons": comparisons}


def batched_grad(function, name: str, x, v) -> dict:
    """The `batched_grad` observation and its comparison (or skipped, with the reason)."""
    import torch

    with torch.enable_grad():
        leaf = x.detach().clone().requires_grad_(True)
        output = function(**{name: leaf})
        generator = torch.Generator().manual_seed(SEED)
        outputs = torch.randn((3, *output.shape), dtype=output.dtype, generator=generator).to(output.device)

        def grad_of(weights):
            return torch.autograd.grad(output, leaf, weights, retain_graph=True)[0]

        one_by_one = torch.stack([grad_of(w) for w in outputs])
        try:
            batched = torch.func.vmap(grad_of)(outputs)
        except Exception as exc:  # a backward vmap cannot batch: say so
            return {"status": "skipped", "reason": Message("vmap over grad_outputs does not apply: {reason}",
                                                           reason=exception_line(exc))}
    return {"status": "observed", "grad_outputs": 3, "gradients": describe(batched.detach()),
            "comparisons": [compare("batched_grad_vs_one_at_a_time", name, one_by_one.detach().reshape(-1),
                                    batched.detach().reshape(-1), left_label="one_at_a_time",
                                    right_label="vmap", **EXACT)]}


def function_modes(function, leaves: dict, v, gradients: dict | None, classes: list, *,
                   outputs: int | None = None) -> dict | None:
    """{"forward_ad", "batched_grad", "undefined_grad"} for a function whose graph holds custom Functions
    (`classes`, as the first forward pass found them), else None. Forward mode and batched gradients
    are observed for one input and one output (`outputs`: the count of a tuple or list of outputs),
    and recorded as skipped, with that reason, otherwise."""
    if not classes:
        return None
    block = {"input": None, "functions": [f"{c.__module__}.{c.__qualname__}" for c in classes]}
    if len(leaves) == 1 and outputs is None:
        (name, leaf), = leaves.items()
        block.update({"input": name, "forward_ad": forward_ad(function, name, leaf, v, gradients[name]),
                      "batched_grad": batched_grad(function, name, leaf, v)})
    else:
        for key in ("forward_ad", "batched_grad"):
            block[key] = {"status": "skipped", "reason": Message(
                "observed for a function of one input and one output; this one has {inputs} input(s) and {outputs} "
                "output(s)", inputs=len(leaves), outputs=outputs or 1)}
    block["undefined_grad"] = undefined_grad(function, leaves)
    return block
