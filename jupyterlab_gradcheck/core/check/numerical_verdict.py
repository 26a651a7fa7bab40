"""The numerical verdict alone: finite differences against autograd, the question gradcheck answers.

`numerical_verdict` is the fast path for a Python callable when only that question matters
(a loop over many functions, a large input): one forward and one `torch.autograd.grad`
for v^T J, the batched finite-difference estimate of the same vector, and one comparison
per input that keeps the worst element with its index. It writes no ledger and makes none of
the other observations; `engine.run_check` is the full record.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..errors import SpecError
from .compare.comparison import compare
from .compare.complex_tensors import with_complex_kept
from .compare.forward_pass import forward, grad_output_for
from .fd.finite_difference import FdOptions, fd_gradients
from .record import defaults


def _dtype_name(tensor) -> str:
    name = str(tensor.dtype).replace("torch.", "")
    if name not in defaults.DTYPES:
        raise SpecError(
            "input dtype {name} is not one of {choices}", name=name, choices=", ".join(defaults.DTYPES), field="inputs"
        )
    return name


def numerical_verdict(
    function: Callable,
    inputs: dict,
    *,
    grad_output=None,
    scheme: str = "central",
    step=None,
    rtol: float | None = None,
    atol: float | None = None,
    structured: bool = True,
) -> dict:
    """Whether finite differences of `function` agree with autograd at `inputs`.

    `inputs` maps keyword names to floating-point tensors (all of one dtype). The tolerance
    defaults to the dtype's finite-difference tolerance for `scheme` (core/check/record/defaults.py).
    Returns `{"passed", "dtype", "scheme", "step", "rtol", "atol", "comparisons", "worst"}`,
    where each comparison is the engine's `autograd_vs_finite_difference` row for one input
    and `worst` is the worst element of the first failing input (else of the largest error).
    `structured=False` forces the general finite-difference path even for an elementwise chain
    (core/check/fd/diagonal.py).
    """
    if scheme not in defaults.SCHEMES:
        raise SpecError(
            "scheme {scheme!r} is not one of {choices}",
            scheme=scheme,
            choices=", ".join(defaults.SCHEMES),
            field="scheme",
        )
    if not inputs:
        raise SpecError("numerical_verdict needs at least one input", field="inputs")
    dtypes = {_dtype_name(t) for t in inputs.values()}
    if len(dtypes) != 1:
        raise SpecError("inputs mix dtypes {dtypes}: give them one dtype", dtypes=sorted(dtypes), field="inputs")
    dtype = dtypes.pop()
    leaves = {name: t.detach().clone().requires_grad_(True) for name, t in inputs.items()}
    output = forward(function, leaves)
    v = grad_output_for(output, grad_output)
    grads = torch.autograd.grad(output, tuple(leaves.values()), v, allow_unused=True)
    autograd = {name: torch.zeros_like(leaf) if g is None else g for (name, leaf), g in zip(leaves.items(), grads)}

    fd_dtype = getattr(torch, defaults.FD_DTYPE[dtype])
    fd_values = {name: t.detach().to(fd_dtype) for name, t in inputs.items()}
    fd_v = with_complex_kept(v.detach(), fd_dtype)  # a complex output's grad_output stays complex, a real one real
    fd_raw, info, _ = fd_gradients(
        function, fd_values, fd_v, FdOptions(dtype=dtype, scheme=scheme, step=step, structured=structured)
    )
    tolerance = defaults.fd_tolerance(dtype, scheme)
    rtol = tolerance["rtol"] if rtol is None else rtol
    atol = tolerance["atol"] if atol is None else atol
    rows = [
        compare(
            "autograd_vs_finite_difference",
            name,
            fd_raw[name].to(autograd[name].dtype),
            autograd[name],
            left_label="finite_difference",
            right_label="autograd_grad",
            rtol=rtol,
            atol=atol,
        )
        for name in leaves
    ]
    failing = [row for row in rows if not row["passed"]]
    chosen = failing[0] if failing else max(rows, key=lambda row: row["worst"]["abs_err"] or 0.0)
    return {
        "passed": not failing,
        "dtype": dtype,
        "scheme": scheme,
        "step": info["step"],
        "step_kind": info["step_kind"],
        "rtol": rtol,
        "atol": atol,
        "comparisons": rows,
        "worst": {"input": chosen["input"], **chosen["worst"]},
        "finite_difference": info,
    }
