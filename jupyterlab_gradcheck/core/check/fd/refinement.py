"""Re-estimate the elements a default finite difference could not resolve, before failing them.

A central difference at the default step has a truncation error ~h^2 |f'''| / 6 that no
tolerance written in advance can cover near a singularity (tan near pi/2, digamma near a
pole, logit near 0 or 1), and a rounding error that grows with the magnitude differenced. So
the elements of a finite-difference comparison that fail are estimated again,
and only fail if the better estimate fails too:

1. central differences of each such element at seven steps, 4h, 2h, h, h/2, ..., h/16
   (h the default step actually taken), in one batch;
2. Richardson extrapolation of each neighbouring pair, R_k = (4 D(h_k / 2) - D(h_k)) / 3,
   which cancels the h^2 term;
3. for each element, the pair of successive extrapolations that agree best: the later one is
   the refined estimate, and their difference, plus the rounding bound at that step, is its
   error estimate.

An element passes when |refined - autograd| <= atol + rtol |autograd| + REFINED_MARGIN x
(that error estimate). A wrong backward is not excused: the refined estimate converges to the
true derivative, so a backward wrong by 1e-4 of the gradient's scale stays 1e-4 away while
the error estimate of a smooth function falls to ~1e-10. The record's finite-difference
observation lists what was tried, for which elements, and what was kept.
"""

from __future__ import annotations

import torch

from ...i18n import Message
from .evaluations import Probe
from .finite_difference import signed_steps
from .richardson import MAX_ELEMENTS, REFINED_MARGIN, extrapolate
from .wide_steps import rejudge

#: Step multiples of the default step at which failing elements are re-estimated.
MULTIPLES = (4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 0.0625)
#: Multiple of the default step at which refinement looks for the outputs a failing element moves (about 6e-3
#: max(1, |x_i|) in float64): an output that moves there but not at the steps differenced changed by less than its
#: rounding at those steps, and counts in their bound; one that does not move even there has a derivative below
#: eps |f_j| / (WIDE h), a thousandth of what its rounding at h would allow.
WIDE = 1024.0


def touched_outputs(probe: Probe, h, failing) -> dict | None:
    """Flat element -> the outputs it moves at WIDE times its step (one central pair per failing element), or None
    where that evaluation cannot be made. An output that is not finite at the wide step says nothing and is left out."""
    from .finite_difference import tiled

    steps = signed_steps(probe, "central", h[failing] * WIDE, failing, exact=True)
    try:
        out = probe.outputs(
            probe.shifted(steps.reshape(-1), imaginary=probe.imaginary_shift, indices=tiled(failing, steps.shape[0]))
        )
    except Exception:  # the wide step left the function's domain: no outputs are added
        return None
    count = failing.numel()
    plus, minus = out[:count].reshape(count, -1), out[count : 2 * count].reshape(count, -1)
    moved = (plus != minus) & torch.isfinite(plus) & torch.isfinite(minus)
    return {int(i): row for i, row in zip(failing, moved)}


def refine(probe: Probe, h, autograd, estimate, bound, *, rtol: float, atol: float):
    """(estimate, bound, info) with the failing elements of one input re-estimated.

    `h` is the default step vector (flat, per element), `autograd`, `estimate` and `bound` flat
    tensors of the reference, the default estimate and its rounding allowance. Returns the flat
    tensors with the refined elements replaced, and the record's description of the refinement.
    On the general path the bounds also count the outputs each element moves at WIDE times its step
    (`touched_outputs`).
    """
    excess = (estimate - autograd).abs() - (atol + rtol * autograd.abs() + bound)
    excess = torch.where(torch.isnan(excess), torch.full_like(excess, float("inf")), excess)
    failing = torch.nonzero(excess > 0).reshape(-1)
    if failing.numel() == 0:
        return estimate, bound, None
    if failing.numel() > MAX_ELEMENTS:
        failing = failing[torch.argsort(excess[failing], descending=True)[:MAX_ELEMENTS]]
    count, k = failing.numel(), len(MULTIPLES)
    probe.track_rounding = True
    if not probe.structured:
        probe.touched = touched_outputs(probe, h, failing)
    refined, refined_error, best = extrapolate(probe, h, failing, MULTIPLES)
    new_estimate, new_bound = estimate.clone(), bound.clone()
    new_estimate[failing] = refined
    new_bound[failing] = REFINED_MARGIN * refined_error
    reference = autograd[failing]
    still = (
        (refined - reference).abs() > atol + rtol * reference.abs() + REFINED_MARGIN * refined_error
    ) | torch.isnan(refined)
    info = {
        "elements": int(count),
        "resolved": int(count - int(still.sum())),
        "still_failing": int(still.sum()),
        "flat_indices": [int(i) for i in failing[:16]],
        "tried": Message(
            "central differences at {count} steps from {first:g}h to {last:g}h, Richardson-extrapolated "
            "pair by pair; kept the later of the two successive extrapolations that agree best, with "
            "their difference plus the rounding bound as its error estimate",
            count=len(MULTIPLES),
            first=MULTIPLES[0],
            last=MULTIPLES[-1],
        ),
        "chosen_multiples": sorted({MULTIPLES[int(b) + 2] for b in best[:64]}),
        "forward_evaluations": (2 * k) if probe.structured else 2 * k * int(count),
    }
    if not probe.structured:
        info["wide_step"] = {
            "multiple": WIDE,
            "forward_evaluations": 2 * int(count),
            **(
                {"outputs_moved": int(sum(int(r.sum()) for r in probe.touched.values()))}
                if probe.touched is not None
                else {
                    "outputs_moved": None,
                    "reason": Message(
                        "the function could not be evaluated at the wide step (it "
                        "raised there): no outputs were added to the bound"
                    ),
                }
            ),
        }
    return new_estimate, new_bound, info


def refine_inputs(
    function,
    values: dict,
    v,
    *,
    dtype: str,
    autograd: dict,
    estimates: dict,
    bounds: dict,
    rtol: float,
    atol: float,
    structures: dict,
    work_elements: int = 1,
) -> dict:
    """Refine every input's failing elements in place (flat views of `estimates`, `bounds`); info by input.

    `structures` names the path each input's estimate took ("general" or a diagonal chain). A complex
    input is refined part by part (refine_complex).
    """
    from .finite_difference import step_vector

    report = {}
    for name, estimate in estimates.items():
        reference = autograd[name].detach().reshape(estimate.shape).to(estimate.dtype)
        if bool(((estimate - reference).abs() <= atol + rtol * reference.abs()).all()):
            continue  # every element passes without its bound: nothing to refine (NaN compares False)
        if values[name].is_complex():
            info = refine_complex(
                function,
                values,
                v,
                name,
                dtype=dtype,
                autograd=reference,
                estimates=estimates,
                bounds=bounds,
                rtol=rtol,
                atol=atol,
                work_elements=work_elements,
            )
            if info is not None:
                report[name] = info
            continue
        probe = Probe(
            function,
            values,
            v,
            name,
            work=work_elements,
            structured=structures.get(name, "general") != "general",
        )
        h = step_vector(probe, None, dtype, "central")
        flat_estimate, flat_bound = estimate.reshape(-1), bounds[name].reshape(-1)
        reference = reference.reshape(-1)
        new_estimate, new_bound, info = refine(probe, h, reference, flat_estimate, flat_bound, rtol=rtol, atol=atol)
        # the elements that pass only inside their bound, the default one or the refinement's
        new_estimate, new_bound, wide = rejudge(
            probe, h, reference, new_estimate, new_bound, rtol=rtol, atol=atol, default_bound=flat_bound
        )
        if info is not None or wide is not None:
            estimates[name] = new_estimate.reshape(estimate.shape)
            bounds[name] = new_bound.reshape(estimate.shape)
            report[name] = wide if info is None else {**info, **({"wide_steps": wide} if wide is not None else {})}
    return report


def refine_complex(
    function,
    values: dict,
    v,
    name: str,
    *,
    dtype: str,
    autograd,
    estimates: dict,
    bounds: dict,
    rtol: float,
    atol: float,
    work_elements: int = 1,
) -> dict | None:
    """Refine a complex input's failing elements part by part; its report, or None when nothing failed.

    A complex element's estimate is d_re + i d_im, each part the central difference along that part
    (core/check/fd/finite_difference.py), so each part is re-estimated as a real element is, against
    autograd's part of the same element. The element's new error estimate is the sum of its parts'
    (|d| <= |d_re| + |d_im|), a part left as it was keeping the default rounding bound.
    """
    from .finite_difference import step_vector

    estimate, bound = estimates[name], bounds[name]
    flat_estimate, flat_bound = estimate.reshape(-1), bounds[name].reshape(-1)
    reference = autograd.reshape(-1)
    parts, infos = [], []
    for imaginary in (False, True):
        probe = Probe(
            function,
            values,
            v,
            name,
            work=work_elements,
            structured=False,
            imaginary_shift=imaginary,
        )
        h = step_vector(probe, None, dtype, "central")
        pick = (lambda t: t.imag) if imaginary else (lambda t: t.real)
        new_part, new_bound, info = refine(
            probe, h, pick(reference), pick(flat_estimate), flat_bound, rtol=rtol, atol=atol
        )
        parts.append(
            (
                new_part,
                torch.where(new_bound != flat_bound, new_bound, torch.zeros_like(new_bound)),
                new_bound != flat_bound,
            )
        )
        if info is not None:
            infos.append(info)
    if not infos:
        return None
    (real, real_bound, real_changed), (imag, imag_bound, imag_changed) = parts
    changed = real_changed | imag_changed
    summed = torch.where(real_changed, real_bound, flat_bound) + torch.where(imag_changed, imag_bound, flat_bound)
    estimates[name] = torch.complex(real, imag).reshape(estimate.shape)
    bounds[name] = torch.where(changed, summed, flat_bound).reshape(bound.shape)
    return {
        "elements": sum(i["elements"] for i in infos),
        "resolved": sum(i["resolved"] for i in infos),
        "still_failing": sum(i["still_failing"] for i in infos),
        "flat_indices": sorted({k for i in infos for k in i["flat_indices"]})[:16],
        "tried": infos[0]["tried"],
        "chosen_multiples": sorted({m for i in infos for m in i["chosen_multiples"]}),
        "forward_evaluations": sum(i["forward_evaluations"] for i in infos),
    }
