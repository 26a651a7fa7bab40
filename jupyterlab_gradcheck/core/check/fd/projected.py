"""The projected comparison: finite differences against autograd along a random direction, then group testing.

For a dense Jacobian the exhaustive comparison costs two evaluations per input element. The
projected mode, like gradcheck's `fast_mode`, compares one number instead: the directional
difference D = (phi(x + s) - phi(x - s)) / 2 along s = h * u (u random signs over sqrt(n), h
each element's default step) against autograd's G = sum_i g_i s_i. Two evaluations, whatever n.

The tolerance is the one every element would have had, carried through the projection: if each
element satisfies |fd_i - g_i| <= atol + rtol |g_i|, then |D - G| <= sum_i |s_i| (atol + rtol |g_i|),
plus the rounding bound of the two sums differenced (core/check/fd/steps.py's BOUND_FACTOR x
eps (|phi+| + |phi-|) / 2, over |v_j f_j|). A direction that fails is taken again at 2s: the
central difference's truncation, |D(2s) - 2 D(s)| / 6, is allowed three times over before the
failure stands, so curvature along a long direction is not mistaken for a bug.

A failure is then localised by group testing: the index set is halved, the direction restricted
to each half compared the same way, and the half whose excess over its tolerance is larger kept,
down to one element, whose own central difference and autograd value are compared as the
exhaustive mode would: one bad element is named, with its index, in about 6 log2(n) + 4 more
evaluations. Its power (what one-element error it catches) is measured, not assumed:
benchmarks/bench_structure.py sweeps it beside gradcheck's fast and slow modes.
"""

from __future__ import annotations

import math

import torch

from ...i18n import Message
from ..compare.comparison import compare
from ..record import spec as defaults
from .steps import BOUND_FACTOR

#: Seed of the random direction: a record is reproducible, and a rerun draws the same direction.
SEED = 20
#: Multiple of the measured truncation allowed before a direction's failure stands.
TRUNCATION_MARGIN = 3.0


def requested(finite_difference: dict) -> str:
    """Why the spec asks for the projected mode ("" when it does not)."""
    return "requested: finite_difference.mode is projected" if finite_difference.get("mode") == "projected" else ""


class _Direction:
    """phi along one random direction restricted to a subset, compared with autograd."""

    def __init__(self, probe, autograd, rtol: float, atol: float, dtype: str):
        from .finite_difference import step_vector

        x = probe.values[probe.name]
        n = x.numel()
        generator = torch.Generator(device="cpu").manual_seed(SEED)
        signs = torch.randint(0, 2, (n,), generator=generator).to(x.device, x.dtype) * 2 - 1
        self.probe, self.n = probe, n
        self.h = step_vector(probe, None, dtype, "central")
        self.s = signs * self.h / math.sqrt(n)
        self.g = autograd.detach().reshape(-1).to(x.dtype)
        self.rtol, self.atol = rtol, atol
        self.evaluations = 0

    def _difference(self, shift):
        """((phi(x+shift) - phi(x-shift)) / 2, its rounding bound)."""
        x = self.probe.values[self.probe.name]
        outputs = torch.stack(
            [self.probe.output(x + shift.reshape(x.shape)), self.probe.output(x - shift.reshape(x.shape))]
        )
        self.evaluations += 2
        plus, minus = self.probe.contract(outputs)  # sum(v * f), or sum(Re(conj(v) f)) for a complex output
        magnitude = (outputs.reshape(2, -1).abs() * self.probe.v.reshape(-1).abs()).sum()
        eps = torch.finfo(plus.dtype).eps
        return float(plus - minus) / 2, eps * float(magnitude) / 2

    def test(self, subset=None) -> dict:
        """The direction (restricted to `subset`, flat indices) compared; with its excess over the tolerance."""
        s = self.s if subset is None else torch.zeros_like(self.s).index_copy_(0, subset, self.s[subset])
        difference, rounding = self._difference(s)
        reference = float((self.g * s).sum())
        tolerance = float((s.abs() * (self.atol + self.rtol * self.g.abs())).sum()) + BOUND_FACTOR * rounding
        result = {
            "finite_difference": difference,
            "autograd": reference,
            "tolerance": tolerance,
            "excess": abs(difference - reference) - tolerance,
        }
        if result["excess"] > 0:  # before a failure stands, allow for the truncation along this direction
            doubled, doubled_rounding = self._difference(2 * s)
            truncation = abs(doubled - 2 * difference) / 6
            result["truncation"] = truncation
            result["tolerance"] = tolerance + TRUNCATION_MARGIN * truncation + BOUND_FACTOR * doubled_rounding / 2
            result["excess"] = abs(difference - reference) - result["tolerance"]
        return result


def _element(direction: _Direction, index: int, name: str, shape, rtol: float, atol: float) -> dict:
    """The one element's central difference against autograd, as the exhaustive comparison reports it."""
    probe, h = direction.probe, float(direction.h[index])
    x = probe.values[probe.name]
    shift = torch.zeros(x.numel(), dtype=x.dtype, device=x.device)
    shift[index] = h
    value = x.reshape(-1)[index]
    width = float((value + h) - (value - h))  # the steps the arithmetic really takes
    difference, _ = direction._difference(shift)
    estimate = 2 * difference / width
    row = compare(
        "autograd_vs_finite_difference",
        name,
        torch.tensor([estimate], dtype=torch.float64),
        direction.g[index : index + 1].to(torch.float64),
        left_label="finite_difference",
        right_label="autograd_grad",
        rtol=rtol,
        atol=atol,
    )
    flat = int(index)
    unravelled = []
    for size in reversed(list(shape)):
        unravelled.append(flat % size)
        flat //= size
    row["worst"].update({"index": list(reversed(unravelled)), "flat_index": int(index)})
    return row


def localise(direction: _Direction) -> tuple[int, list]:
    """The flat index whose half kept the larger excess at every split, and the steps taken."""
    x = direction.probe.values[direction.probe.name]
    subset = torch.arange(direction.n, device=x.device)
    steps = []
    while subset.numel() > 1:
        half = subset.numel() // 2
        first, second = subset[:half], subset[half:]
        a, b = direction.test(first), direction.test(second)
        subset = first if a["excess"] >= b["excess"] else second
        steps.append({"elements": int(subset.numel()), "excess": max(a["excess"], b["excess"])})
    return int(subset[0]), steps


def compare_inputs(
    function,
    values: dict,
    v,
    autograd: dict,
    *,
    dtype: str,
    rtol: float,
    atol: float,
    reason: str,
    work_elements: int = 1,
) -> tuple[dict, dict]:
    """(comparison row by input, the finite_difference observation's fields) in projected mode.

    Each row is the engine's `autograd_vs_finite_difference` row: on a pass, `worst` holds the
    projected values (its index null: no element was singled out); on a failure, the localised
    element as the exhaustive comparison would report it. `projection` says what was compared.
    """
    from .finite_difference import Probe

    rows, inputs = {}, {}
    for name, x in values.items():
        probe = Probe(function, values, v, name, work=work_elements, structured=False)
        direction = _Direction(probe, autograd[name], rtol, atol, dtype)
        whole = direction.test()
        projection = {"directions": 1, "seed": SEED, **whole}
        if whole["excess"] <= 0:
            row = {
                "name": "autograd_vs_finite_difference",
                "input": name,
                "left": "finite_difference",
                "right": "autograd_grad",
                "max_abs_err": abs(whole["finite_difference"] - whole["autograd"]),
                "max_rel_err": None,
                "rtol": rtol,
                "atol": atol,
                "passed": True,
                "worst": {
                    "index": None,
                    "flat_index": None,
                    "left": whole["finite_difference"],
                    "right": whole["autograd"],
                    "abs_err": abs(whole["finite_difference"] - whole["autograd"]),
                    "rel_err": None,
                },
            }
        else:
            index, steps = localise(direction)
            row = _element(direction, index, name, x.shape, rtol, atol)
            row["passed"] = False  # the direction failed: the check fails even where the element alone passes
            projection["localisation"] = {
                "splits": len(steps),
                "element": int(index),
                "element_alone_passed": bool(
                    row["worst"]["abs_err"] is not None
                    and row["worst"]["abs_err"] <= atol + rtol * abs(row["worst"]["right"])
                ),
            }
        row["mode"] = "projected"
        row["projection"] = projection
        rows[name] = row
        inputs[name] = {
            "step": defaults.fd_step(dtype, "central"),
            "batched": False,
            "structure": "projected",
            "forward_evaluations": direction.evaluations,
        }
    info = {
        "scheme": "central",
        "fd_dtype": defaults.FD_DTYPE[dtype],
        "mode": "projected",
        "mode_reason": reason,
        "description": Message(
            "central difference of sum(grad_output * f) along one random direction against "
            "autograd's projection; a failure localised by halving the index set"
        ),
        "note": f"projected mode ({reason}): one random direction compared, not every element.",
        "step": defaults.fd_step(dtype, "central"),
        "step_kind": "relative to min(max(1, |x|), 16), times a random sign over sqrt(n) per element",
        "inputs": inputs,
    }
    return rows, info


def projected_verdict(
    function, inputs: dict, *, grad_output=None, rtol: float | None = None, atol: float | None = None
) -> dict:
    """`numerical_verdict`'s answer in projected mode: one direction compared, a failure localised.

    Returns `{"passed", "dtype", "rtol", "atol", "comparisons", "worst", "finite_difference"}`.
    """
    from ..compare.forward_pass import forward, grad_output_for

    dtype = str(next(iter(inputs.values())).dtype).replace("torch.", "")
    leaves = {name: t.detach().clone().requires_grad_(True) for name, t in inputs.items()}
    output = forward(function, leaves)
    v = grad_output_for(output, grad_output)
    grads = torch.autograd.grad(output, tuple(leaves.values()), v, allow_unused=True)
    autograd = {name: torch.zeros_like(leaf) if g is None else g for (name, leaf), g in zip(leaves.items(), grads)}
    fd_dtype = getattr(torch, defaults.FD_DTYPE[dtype])
    tolerance = defaults.fd_tolerance(dtype, "central")
    rtol = tolerance["rtol"] if rtol is None else rtol
    atol = tolerance["atol"] if atol is None else atol
    rows, info = compare_inputs(
        function,
        {n: t.detach().to(fd_dtype) for n, t in inputs.items()},
        v.detach().to(fd_dtype),
        autograd,
        dtype=dtype,
        rtol=rtol,
        atol=atol,
        reason="requested",
    )
    failing = [row for row in rows.values() if not row["passed"]]
    chosen = failing[0] if failing else next(iter(rows.values()))
    return {
        "passed": not failing,
        "dtype": dtype,
        "rtol": rtol,
        "atol": atol,
        "comparisons": list(rows.values()),
        "worst": {"input": chosen["input"], **chosen["worst"]},
        "finite_difference": info,
    }
