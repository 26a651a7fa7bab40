"""The step sweep: finite-difference error against step, decade by decade, per dtype.

It shows why a step cannot be chosen without looking at the dtype: the error falls with the
step (truncation, ~h^2 for central differences) until rounding (~eps/h) takes over, so the
best step sits near eps^(1/3) with an error near eps^(2/3). The reference is the float64
autograd derivative at the same element. `sweep_svg.render` draws the data.
"""

from __future__ import annotations

from . import defaults
from .finite_difference import Probe, difference_quotient

#: Decades of step swept: 10^0 down to 10^-16.
DECADES = tuple(range(0, 17))


def step_sweep(function, values: dict, v, name: str, flat_index: int = 0, *,
               dtypes=("float32", "float64"), scheme: str = "central", chosen: dict | None = None) -> dict:
    """Error of `scheme` at one element for each decade of step, for each dtype."""
    import torch

    reference = _reference(function, values, v, name, flat_index)
    x_i = float(values[name].reshape(-1)[flat_index])
    scale = max(1.0, abs(x_i))
    relative = abs(reference) > 0
    series = []
    for dtype in dtypes:
        target = getattr(torch, defaults.FD_DTYPE[dtype])
        cast = {k: t.detach().to(target) for k, t in values.items()}
        probe = Probe(function, cast, v.detach().to(target), name)
        steps = [10.0 ** -k * scale for k in DECADES]
        index = torch.tensor([flat_index] * len(steps), device=cast[name].device)
        h = torch.tensor(steps, dtype=cast[name].dtype, device=cast[name].device)
        estimates = difference_quotient(probe, scheme, h, index).detach().to("cpu", torch.float64)
        errors = [abs(float(e) - reference) / (abs(reference) if relative else 1.0) for e in estimates]
        best = min(range(len(steps)), key=lambda k: errors[k])
        eps = defaults.EPS[defaults.FD_DTYPE[dtype]]
        series.append({
            "dtype": dtype,
            "steps": steps,
            "errors": errors,
            "chosen_step": (chosen or {}).get(dtype, defaults.fd_step(dtype, scheme) * scale),
            "floor_step": defaults.fd_step(dtype, scheme) * scale,
            "floor_error": defaults.fd_floor(dtype, scheme),
            "best_step": steps[best],
            "best_error": errors[best],
            "eps": eps,
        })
    return {
        "input": name,
        "flat_index": flat_index,
        "x": x_i,
        "scheme": scheme,
        "reference": reference,
        "error_kind": "relative" if relative else "absolute",
        "series": series,
    }


def _reference(function, values, v, name, flat_index) -> float:
    import torch

    leaves = {k: t.detach().to(torch.float64) for k, t in values.items()}
    leaves[name] = leaves[name].clone().requires_grad_(True)
    output = function(**leaves)
    (gradient,) = torch.autograd.grad(torch.sum(v.detach().to(torch.float64) * output), leaves[name])
    return float(gradient.reshape(-1)[flat_index])
