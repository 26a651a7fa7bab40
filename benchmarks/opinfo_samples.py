"""Samples of PyTorch's OpInfo database, each turned into one scalar function of named inputs.

`torch.testing._internal.common_methods_invocations.op_db` lists every operator PyTorch
tests, with sample inputs. For each operator that supports autograd in float64 on the CPU we
take its first few samples whose differentiable tensors hold at most MAX_ELEMENTS elements in
all. A sample becomes a `Case`: a function of keyword inputs `x0, x1, ...` (the sample's
tensors that require grad) that calls the operator and reduces its output(s) to one real
number by a fixed weighting, w_j = 1 + sin(j) / 2 (never zero, never uniform, so that no
element's gradient cancels by symmetry). Non-differentiable arguments are held by the closure.

Operators whose gradient PyTorch itself marks as wrong or untestable on the CPU in float64
(a `test_fn_grad` skip or expected failure in the OpInfo entry) are flagged `marked_wrong`,
so that the sweep lists them apart instead of counting them against anyone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Largest number of differentiable elements in one sample (all inputs together).
MAX_ELEMENTS = 2000
#: Samples taken per operator (the first ones that fit).
SAMPLES_PER_OP = 3


@dataclass
class Case:
    """One sample: a scalar function of named float64 inputs, and where it came from."""

    op: str  #: the OpInfo name, with its variant after a dot
    index: int  #: which sample of the operator
    function: object  #: keyword inputs -> scalar tensor
    inputs: dict  #: name -> detached float64 tensor
    marked_wrong: str = ""  #: why PyTorch marks this operator's gradient, or ""
    nondet_tol: float = 0.0  #: the OpInfo's own tolerance for nondeterminism (0 for most)
    extra: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.op}#{self.index}"

    @property
    def numel(self) -> int:
        return sum(t.numel() for t in self.inputs.values())


def _weights(n: int, dtype, device):
    import torch

    return 1.0 + 0.5 * torch.sin(torch.arange(n, dtype=dtype, device=device))


def _reduce(output):
    """sum_j w_j * out_j over every floating output (real and imaginary parts apart)."""
    import torch

    parts = output if isinstance(output, (list, tuple)) else (output,)
    total = None
    for part in parts:
        if not isinstance(part, torch.Tensor) or not (part.is_floating_point() or part.is_complex()):
            continue
        flat = torch.view_as_real(part).reshape(-1) if part.is_complex() else part.reshape(-1)
        term = torch.sum(_weights(flat.numel(), flat.dtype, flat.device) * flat)
        total = term if total is None else total + term
    return total


def _marked_wrong(op) -> str:
    """The OpInfo's own skip or expected failure of its float64 CPU gradient test, in words."""
    import unittest

    from torch.testing._internal.opinfo.core import DecorateInfo

    import torch

    for info in list(op.skips) + list(op.decorators):
        if not isinstance(info, DecorateInfo) or info.test_name != "test_fn_grad" or not info.active_if:
            continue
        if info.device_type not in (None, "cpu") or (info.dtypes is not None and torch.float64 not in info.dtypes):
            continue
        kinds = {"expectedFailure" if d is unittest.expectedFailure else "skip" for d in info.decorators}
        return f"OpInfo {', '.join(sorted(kinds))} of test_fn_grad (float64, cpu)"
    return ""


def _differentiable(sample) -> list:
    """The sample's tensors that require grad, in the order the operator receives them."""
    import torch

    found = []

    def visit(value):
        if isinstance(value, torch.Tensor):
            if value.requires_grad and value.dtype == torch.float64:
                found.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)

    visit(sample.input)
    for arg in sample.args:
        visit(arg)
    for value in sample.kwargs.values():
        visit(value)
    return found


def _substitute(value, replacements: dict):
    """The sample's structure with each differentiable tensor replaced (by identity)."""
    import torch

    if isinstance(value, torch.Tensor):
        return replacements.get(id(value), value.detach())
    if isinstance(value, tuple):
        return tuple(_substitute(v, replacements) for v in value)
    if isinstance(value, list):
        return [_substitute(v, replacements) for v in value]
    return value


def _make_function(op, sample, tensors: list, names: list):
    keys = [id(t) for t in tensors]

    def function(**inputs):
        replacements = dict(zip(keys, (inputs[n] for n in names)))
        args = _substitute((sample.input, *sample.args), replacements)
        kwargs = {k: _substitute(v, replacements) for k, v in sample.kwargs.items()}
        output = op(*args, **kwargs)
        return _reduce(sample.output_process_fn_grad(output))

    return function


def cases(*, ops: list[str] | None = None, limit_ops: int | None = None, samples_per_op: int = SAMPLES_PER_OP,
          max_elements: int = MAX_ELEMENTS) -> tuple[list[Case], dict]:
    """(cases, counts) over op_db; `ops` picks operators by name, `limit_ops` takes every k-th one."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    chosen = [op for op in op_db if op.supports_autograd and torch.float64 in op.supported_dtypes("cpu")]
    if ops:
        wanted = set(ops)
        chosen = [op for op in chosen if op.name in wanted or _name(op) in wanted]
    if limit_ops:
        stride = max(1, len(chosen) // limit_ops)
        chosen = chosen[::stride][:limit_ops]
    result, counts = [], {"ops": 0, "skipped_no_sample": 0, "sample_errors": 0, "outside_contract": 0}
    for op in chosen:
        torch.manual_seed(0)
        taken = 0
        try:
            samples = op.sample_inputs("cpu", torch.float64, requires_grad=True)
            for index, sample in enumerate(samples):
                if taken >= samples_per_op:
                    break
                tensors = _differentiable(sample)
                total = sum(t.numel() for t in tensors)
                if not tensors or total == 0 or total > max_elements:
                    continue
                if any(t.numel() == 0 or not torch.isfinite(t).all() for t in tensors):
                    # a check record's inputs are non-empty and finite (the record contract): such a
                    # sample is refused as bad input before anything runs, by ours and by design
                    counts["outside_contract"] += 1
                    continue
                names = [f"x{k}" for k in range(len(tensors))]
                function = _make_function(op, sample, tensors, names)
                inputs = {n: t.detach().clone() for n, t in zip(names, tensors)}
                try:
                    probe = function(**{n: t.clone().requires_grad_(True) for n, t in inputs.items()})
                except Exception:
                    continue
                if probe is None or not probe.requires_grad:
                    continue
                result.append(Case(_name(op), index, function, inputs, _marked_wrong(op),
                                   float(getattr(op, "gradcheck_nondet_tol", 0.0) or 0.0)))
                taken += 1
        except Exception:
            counts["sample_errors"] += 1
        counts["ops"] += 1 if taken else 0
        counts["skipped_no_sample"] += 0 if taken else 1
    return result, counts


def _name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
