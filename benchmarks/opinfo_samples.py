"""Samples of PyTorch's OpInfo database, each turned into a function of named inputs.

`torch.testing._internal.common_methods_invocations.op_db` lists every operator PyTorch
tests, with sample inputs. For each operator that supports autograd in the family's dtype on
the CPU we take its first few samples whose differentiable tensors hold at most MAX_ELEMENTS
elements in all. A sample becomes a `Case`: a function of keyword inputs `x0, x1, ...` (the
sample's tensors that require grad); non-differentiable arguments are held by the closure.
Four families (FAMILIES):

- **float64**: the function reduces the operator's output(s) to one real number by a fixed
  weighting, w_j = 1 + sin(j) / 2 (never zero, never uniform, so that no element's gradient
  cancels by symmetry). A sample with several outputs is summed into that one number here.
- **float64, several outputs**: the samples whose output (after the OpInfo's
  `output_process_fn_grad`) holds two or more floating tensors that autograd tracks. The
  function returns that tuple, and the check's `grad_output` is the same weights, one tensor
  shaped like each output (numbered on from the previous output's last weight, so that equal
  outputs, as of `split` or `meshgrid`, are not weighted alike).
- **complex128**: `op.sample_inputs("cpu", torch.complex128)`; the inputs are the complex
  tensors that require grad, the function returns the output as it is (or the tuple of its
  tracked outputs) and `grad_output` is the real weights w shaped like each output, so the
  gradient is that of L = sum(w * Re(f)) by PyTorch's convention (as autograd gives it).

- **float32**: the float64 family's samples drawn in float32 (`op.sample_inputs("cpu",
  torch.float32)`, the same sample index as the float64 twin), reduced to a scalar the same way
  (benchmarks/opinfo_float32.py runs it on the twins both tools accept in float64).

Operators whose gradient PyTorch itself marks as wrong or untestable on the CPU in float64
(a `test_fn_grad` skip or expected failure in the OpInfo entry) are flagged `marked_wrong`,
so that the sweep lists them apart instead of counting them against anyone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import device

#: Largest number of differentiable elements in one sample (all inputs together).
MAX_ELEMENTS = 2000
#: Samples taken per operator (the first ones that fit).
SAMPLES_PER_OP = 3
#: The families of the sweep, by name: (dtype of the inputs, which outputs and how).
FAMILIES = {
    "float64": ("float64", "scalar"),
    "float64, several outputs": ("float64", "several"),
    "complex128": ("complex128", "as_is"),
    "float32": ("float32", "scalar"),
}


@dataclass
class Case:
    """One sample: a function of named inputs, the grad_output it is checked with, and where it came from."""

    op: str  #: the OpInfo name, with its variant after a dot
    index: int  #: which sample of the operator
    function: object  #: keyword inputs -> scalar tensor (float64), or the output(s) as they are
    inputs: dict  #: name -> detached tensor of the family's dtype
    marked_wrong: str = ""  #: why PyTorch marks this operator's gradient, or ""
    nondet_tol: float = 0.0  #: the OpInfo's own tolerance for nondeterminism (0 for most)
    extra: dict = field(default_factory=dict)
    family: str = "float64"  #: a key of FAMILIES
    #: None for a scalar function; a tensor (one output) or a list of tensors (several outputs)
    grad_output: object = None

    @property
    def dtype(self) -> str:
        return FAMILIES[self.family][0]

    @property
    def outputs(self) -> int:
        """How many outputs the function returns (1 unless it returns a tuple)."""
        return len(self.grad_output) if isinstance(self.grad_output, list) else 1

    @property
    def label(self) -> str:
        return f"{self.op}#{self.index}"

    @property
    def numel(self) -> int:
        return sum(t.numel() for t in self.inputs.values())


def _weights(n: int, dtype, device, start: int = 0):
    import torch

    return 1.0 + 0.5 * torch.sin(torch.arange(start, start + n, dtype=dtype, device=device))


def _tracked(parts) -> list[int]:
    """Indices of the non-empty floating or complex tensors among `parts` that autograd tracks.

    An empty output (a zero-size piece of a split, lstsq's residuals where they are not computed)
    has no gradient to check, and a record's values are non-empty (the contract that leaves
    samples with an empty input out), so it is not part of the function's tuple."""
    import torch

    return [
        k
        for k, part in enumerate(parts)
        if isinstance(part, torch.Tensor)
        and part.requires_grad
        and (part.is_floating_point() or part.is_complex())
        and part.numel() > 0
    ]


def weights_like(outputs) -> object:
    """grad_output for one output (a tensor) or several (a list): real float64 weights, numbered on."""
    import torch

    if isinstance(outputs, torch.Tensor):
        return _weights(outputs.numel(), torch.float64, outputs.device).reshape(outputs.shape)
    found, start = [], 0
    for part in outputs:
        found.append(_weights(part.numel(), torch.float64, part.device, start).reshape(part.shape))
        start += part.numel()
    return found


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


def _marked_wrong(op, dtype) -> str:
    """The OpInfo's own skip or expected failure of its CPU gradient test in `dtype`, in words."""
    import unittest

    from torch.testing._internal.opinfo.core import DecorateInfo

    for info in list(op.skips) + list(op.decorators):
        if not isinstance(info, DecorateInfo) or info.test_name != "test_fn_grad" or not info.active_if:
            continue
        if info.device_type not in (None, "cpu") or (info.dtypes is not None and dtype not in info.dtypes):
            continue
        kinds = {"expectedFailure" if d is unittest.expectedFailure else "skip" for d in info.decorators}
        return f"OpInfo {', '.join(sorted(kinds))} of test_fn_grad ({str(dtype).split('.')[-1]}, cpu)"
    return ""


def _differentiable(sample, dtype=None) -> list:
    """The sample's tensors of `dtype` (float64 by default) that require grad, in the order the operator receives them."""
    import torch

    dtype = dtype or torch.float64
    found = []

    def visit(value):
        if isinstance(value, torch.Tensor):
            if value.requires_grad and value.dtype == dtype:
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


def _make_function(op, sample, tensors: list, names: list, shape: str = "scalar", kept: list | None = None):
    """The sample as a function of named inputs: reduced to a scalar, or the outputs at `kept` (a tuple), or as is."""
    keys = [id(t) for t in tensors]

    def function(**inputs):
        replacements = dict(zip(keys, (inputs[n] for n in names)))
        args = _substitute((sample.input, *sample.args), replacements)
        kwargs = {k: _substitute(v, replacements) for k, v in sample.kwargs.items()}
        output = sample.output_process_fn_grad(op(*args, **kwargs))
        if shape == "scalar":
            return _reduce(output)
        if kept is None:
            return output
        return tuple(output[k] for k in kept) if len(kept) > 1 else output[kept[0]]

    return function


def _shaped(op, sample, tensors: list, names: list, inputs: dict, shape: str):
    """(function, grad_output) for a non-scalar family, or None where the sample does not belong to it."""
    import torch

    probe_function = _make_function(op, sample, tensors, names, "as_is")
    output = probe_function(**{n: t.clone().requires_grad_(True) for n, t in inputs.items()})
    if isinstance(output, (list, tuple)):
        kept = _tracked(output)
        if len(kept) < (2 if shape == "several" else 1):
            return None
        function = _make_function(op, sample, tensors, names, shape, kept)
        if len(kept) == 1:  # one tracked output of several: the function returns that tensor alone
            return function, weights_like(output[kept[0]].detach())
        return function, weights_like([output[k].detach() for k in kept])
    if shape == "several" or not isinstance(output, torch.Tensor) or not _tracked([output]):
        return None
    return probe_function, weights_like(output.detach())


def cases(
    *,
    ops: list[str] | None = None,
    limit_ops: int | None = None,
    samples_per_op: int = SAMPLES_PER_OP,
    max_elements: int = MAX_ELEMENTS,
    family: str = "float64",
) -> tuple[list[Case], dict]:
    """(cases, counts) of one family over op_db; `ops` picks operators by name, `limit_ops` takes every k-th one."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    dtype_name, shape = FAMILIES[family]
    dtype = getattr(torch, dtype_name)
    chosen = [op for op in op_db if op.supports_autograd and dtype in op.supported_dtypes("cpu")]
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
            samples = op.sample_inputs(device(), dtype, requires_grad=True)  # cpu unless --device
            for index, sample in enumerate(samples):
                if taken >= samples_per_op:
                    break
                tensors = _differentiable(sample, dtype)
                total = sum(t.numel() for t in tensors)
                if not tensors or total == 0 or total > max_elements:
                    continue
                names = [f"x{k}" for k in range(len(tensors))]
                inputs = {n: t.detach().clone() for n, t in zip(names, tensors)}
                grad_output = None
                shaped = None
                if shape != "scalar":  # membership first, so that only this family's samples are counted below
                    try:
                        shaped = _shaped(op, sample, tensors, names, inputs, shape)
                    except Exception:
                        continue
                    if shaped is None:
                        continue
                if any(t.numel() == 0 or not torch.isfinite(t).all() for t in tensors):
                    # a check record's inputs are non-empty and finite (the record contract): such a
                    # sample is refused as bad input before anything runs, by ours and by design
                    counts["outside_contract"] += 1
                    continue
                if shaped is not None:
                    function, grad_output = shaped
                else:
                    function = _make_function(op, sample, tensors, names)
                    try:
                        probe = function(**{n: t.clone().requires_grad_(True) for n, t in inputs.items()})
                    except Exception:
                        continue
                    if probe is None or not probe.requires_grad:
                        continue
                result.append(
                    Case(
                        _name(op),
                        index,
                        function,
                        inputs,
                        _marked_wrong(op, dtype),
                        float(getattr(op, "gradcheck_nondet_tol", 0.0) or 0.0),
                        family=family,
                        grad_output=grad_output,
                    )
                )
                taken += 1
        except Exception:
            counts["sample_errors"] += 1
        counts["ops"] += 1 if taken else 0
        counts["skipped_no_sample"] += 0 if taken else 1
    return result, counts


def _name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
