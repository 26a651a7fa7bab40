"""Finite-difference estimates of v^T J, one input element at a time, batched.

For input element i the estimate is a difference quotient of the scalar
phi(x) = sum(v * f(x)) along e_i. Perturbed copies of the input are stacked and evaluated
with `torch.func.vmap` in chunks, so that n elements cost a few batched forward passes
instead of 2n Python-level calls; a function vmap cannot trace falls back to a loop.

Schemes (docs/tolerances.md explains their error floors):
`central` (phi(x+h) - phi(x-h)) / 2h, `forward` (phi(x+h) - phi(x)) / h,
`richardson` (4 D(h/2) - D(h)) / 3 on central differences, and `complex_step`
Im phi(x + ih) / h, valid only through complex-analytic functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import defaults

#: Elements (batch x input numel) evaluated per vmap call: bounds peak memory per chunk.
CHUNK_ELEMENTS = 1 << 22
#: Below this many input elements a plain loop is cheaper than vmap's tracing.
LOOP_BELOW = 9


@dataclass
class Probe:
    """phi(x) = sum(v * f(inputs with `name` replaced by x)), evaluable on batches of x."""

    function: object
    values: dict  #: detached inputs, already in the finite-difference dtype
    v: object  #: grad_output, in the finite-difference dtype
    name: str
    batched: bool = True
    stats: dict = field(default_factory=lambda: {"forward_evaluations": 0})

    def phi(self, x):
        """phi at one point (any dtype, real or complex)."""
        import torch

        others = {
            k: (t.to(x.dtype) if x.is_complex() and not t.is_complex() else t)
            for k, t in self.values.items() if k != self.name
        }
        output = self.function(**others, **{self.name: x})
        v = self.v.to(output.dtype) if output.is_complex() else self.v
        return torch.sum(v * output)

    def phi_batch(self, xs):
        """phi for each x stacked along dimension 0."""
        import torch

        count = xs.shape[0]
        self.stats["forward_evaluations"] += count
        if self.batched and count >= LOOP_BELOW:
            try:
                chunk = max(1, CHUNK_ELEMENTS // max(1, xs[0].numel()))
                mapped = torch.func.vmap(self.phi)
                return torch.cat([mapped(xs[i:i + chunk]) for i in range(0, count, chunk)])
            except Exception:  # a callable vmap cannot trace: fall back, and say so
                self.batched = False
        return torch.stack([self.phi(x) for x in xs])

    def shifted(self, steps, *, imaginary: bool = False, indices=None):
        """Copies of x, copy k shifted by steps[k] at flat element indices[k]."""
        import torch

        x = self.values[self.name]
        flat = x.reshape(-1)
        indices = torch.arange(flat.numel(), device=x.device) if indices is None else indices
        base = flat.to(_complex_of(flat.dtype)) if imaginary else flat
        stack = base.unsqueeze(0).repeat(len(indices), 1)
        rows = torch.arange(len(indices), device=x.device)
        shift = steps.to(stack.dtype) * (1j if imaginary else 1)
        stack[rows, indices] = stack[rows, indices] + shift
        return stack.reshape(len(indices), *x.shape)


def _complex_of(dtype):
    import torch

    return {torch.float64: torch.complex128, torch.float32: torch.complex64}[dtype]


def step_vector(probe: Probe, step, dtype: str, scheme: str, indices=None):
    """Absolute step per element: relative to max(1, |x|) by default, else the fixed step."""
    import torch

    flat = probe.values[probe.name].reshape(-1)
    if indices is not None:
        flat = flat[indices]
    if step is None:
        return defaults.fd_step(dtype, scheme) * torch.clamp(flat.abs(), min=1.0)
    return torch.full_like(flat, float(step))


def difference_quotient(probe: Probe, scheme: str, h, indices=None):
    """The scheme's estimate of d phi / d x_i for every (or the given) flat element i."""
    if scheme == "complex_step":
        return probe.phi_batch(probe.shifted(h, imaginary=True, indices=indices)).imag / h
    if scheme == "forward":
        base = probe.phi(probe.values[probe.name])
        return (probe.phi_batch(probe.shifted(h, indices=indices)) - base) / h
    central = _central(probe, h, indices)
    if scheme == "richardson":
        half = _central(probe, h / 2, indices)
        return (4 * half - central) / 3
    return central


def _central(probe: Probe, h, indices):
    plus = probe.phi_batch(probe.shifted(h, indices=indices))
    minus = probe.phi_batch(probe.shifted(-h, indices=indices))
    return (plus - minus) / (2 * h)


def adaptive(probe: Probe, scheme: str, dtype: str):
    """Pick the step with the smallest estimated error; return it with the telemetry.

    The estimate at step h is |D(h) - D(h/2)| (truncation) plus eps*|phi|/h (rounding).
    The rounding term matters: at tiny steps D(h) and D(h/2) can coincide by quantisation,
    which alone would look like a perfect step.
    """
    import math

    import torch

    eps = defaults.EPS[defaults.FD_DTYPE[dtype]]
    x = probe.values[probe.name]
    scale = torch.clamp(x.reshape(-1).abs(), min=1.0)
    magnitude = float(torch.sum((probe.v * probe.function(**probe.values)).abs()))
    telemetry, best = [], None
    for k in range(1, int(-math.log10(eps)) + 1):
        relative = 10.0 ** -k
        h = relative * scale
        estimate = difference_quotient(probe, scheme, h)
        halved = difference_quotient(probe, scheme, h / 2)
        truncation = float((estimate - halved).abs().max())
        rounding = eps * magnitude / relative
        total = truncation + rounding
        telemetry.append({"step": relative, "change_when_halved": truncation,
                          "rounding_estimate": rounding, "error_estimate": total})
        if best is None or total < best[0]:
            best = (total, relative, halved)
    total, relative, estimate = best
    return estimate, relative, {
        "rule": "step minimising |D(h) - D(h/2)| + eps*|phi|/h over decades; the estimate at h/2 is kept",
        "candidates": telemetry,
        "chosen_step": relative,
        "error_estimate": total,
    }


def fd_gradients(function, values: dict, v, *, dtype: str, scheme: str, step) -> tuple[dict, dict]:
    """Finite-difference gradient per input (in the values' dtype) and what was done."""
    grads, info = {}, {"scheme": scheme, "fd_dtype": defaults.FD_DTYPE[dtype], "inputs": {}}
    for name, x in values.items():
        probe = Probe(function, values, v, name)
        telemetry = None
        if step == "adaptive":
            flat, used, telemetry = adaptive(probe, scheme, dtype)
            kind = "adaptive"
        else:
            h = step_vector(probe, step, dtype, scheme)
            flat = difference_quotient(probe, scheme, h)
            used = defaults.fd_step(dtype, scheme) if step is None else float(step)
            kind = "relative to max(1, |x|)" if step is None else "fixed"
        grads[name] = flat.reshape(x.shape).real
        info["inputs"][name] = {
            "step": used, "step_kind": kind, "batched": probe.batched,
            "forward_evaluations": probe.stats["forward_evaluations"],
            **({"telemetry": telemetry} if telemetry else {}),
        }
    first = next(iter(info["inputs"].values()))
    info["step"], info["step_kind"] = first["step"], first["step_kind"]
    return grads, info
