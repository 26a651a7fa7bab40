"""Second order: the Hessian of phi = sum(grad_output * f) with respect to one input, three ways.

A hand-written `backward` is used twice over in training code that differentiates a gradient
(a penalty on it, a Hessian-vector product, meta-learning): it must itself be differentiable.
`check(..., hessian=H)` writes the expected Hessian first and then observes

- `autograd`: the gradient taken with `create_graph=True`, then each of its elements
  differentiated again (the double backward);
- `finite_difference`: central differences of autograd's *gradient* along each input element,
  at the step eps^(1/3) * max(1, |x_i|), which tests the double backward against the backward;
- `torch_gradgradcheck`: `torch.autograd.gradgradcheck` on the same function, recorded beside.

The expectation is a matrix (n x n for an input of n elements), a callable of the inputs giving
one, or "double_backward" for a custom Function's own double backward (autograd's, through the
Function), written in the record as that text. A backward that is not differentiable (a
`.detach()` inside it, a value computed outside autograd) gives a gradient with no graph: that
is a failure with that reason, not a crash.
"""

from __future__ import annotations

import math

from ..errors import SpecError
from ..i18n import Message
from .comparison import compare
from .record_values import shape_of
from .tensors import describe, to_tensor

#: The expectation text of "the custom Function's own double backward".
DOUBLE_BACKWARD = "double_backward"
#: Tolerance of the finite differences of a gradient (central, step eps^(1/3) max(1, |x|)): their
#: truncation and rounding are each ~eps^(2/3) ~ 4e-11 times the scale of the third derivative and
#: of the gradient, in float64; 1e-6 allows for scales up to 10^4 and is still far below a wrong
#: second derivative's error.
FD_TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}


def parse_hessian(raw, names: list[str], numel: int):
    """The record's `hessian` expectation, validated before anything runs (None when the check has none);
    `numel` is the input's number of elements."""
    if raw is None:
        return None
    if len(names) != 1:
        raise SpecError("hessian checks the second derivative with respect to one input, not {count}; hold "
                        "the others with fixed=", count=len(names), field="hessian")
    if isinstance(raw, list):  # rectangular and numeric, as any record value (SpecError naming the problem)
        count = math.prod(shape_of(raw, "hessian"))
        if count != numel * numel:
            _wrong_size(names[0], count, numel)
    if raw == DOUBLE_BACKWARD or callable(raw) or isinstance(raw, list):
        return raw
    raise SpecError("hessian must be a matrix, a callable of the inputs or \"double_backward\"", field="hessian")


def _gradient(function, x, name: str, values: dict, v, *, create_graph: bool):
    import torch

    with torch.enable_grad():
        leaf = x.detach().clone().requires_grad_(True)
        output = function(**{**values, name: leaf})
        weights = torch.ones_like(output) if v is None else v
        (gradient,) = torch.autograd.grad(output, leaf, weights, create_graph=create_graph, allow_unused=True)
    return leaf, (torch.zeros_like(leaf) if gradient is None else gradient)


def autograd_hessian(function, x, name: str, values: dict, v):
    """(n x n Hessian by double backward, or None, and why it is None)."""
    import torch

    with torch.enable_grad():
        leaf, gradient = _gradient(function, x, name, values, v, create_graph=True)
        if not gradient.requires_grad:
            return None, Message("the backward is not differentiable: the gradient of {name} it returns carries no "
                                 "graph (a .detach() inside it, or a value computed outside autograd)", name=name)
        flat = gradient.reshape(-1)
        rows = []
        for i in range(flat.numel()):
            (row,) = torch.autograd.grad(flat[i], leaf, retain_graph=True, allow_unused=True)
            rows.append(torch.zeros_like(leaf).reshape(-1) if row is None else row.reshape(-1))
    return torch.stack(rows).detach(), ""


def finite_difference_hessian(function, x, name: str, values: dict, v):
    """n x n: column i is the central difference of autograd's gradient along element i."""
    import torch

    eps = torch.finfo(x.dtype).eps
    flat = x.detach().reshape(-1)
    columns = []
    for i in range(flat.numel()):
        h = eps ** (1 / 3) * max(1.0, abs(float(flat[i])))
        plus, minus = flat.clone(), flat.clone()
        plus[i] += h
        minus[i] -= h
        taken = float(plus[i] - minus[i])
        g_plus = _gradient(function, plus.reshape(x.shape), name, values, v, create_graph=False)[1]
        g_minus = _gradient(function, minus.reshape(x.shape), name, values, v, create_graph=False)[1]
        columns.append(((g_plus - g_minus) / taken).reshape(-1).detach())
    return torch.stack(columns, dim=1)


def _gradgradcheck(function, x, name: str, values: dict) -> dict:
    import torch

    settings = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}
    if x.dtype != torch.float64:
        return {"status": "skipped", "verdict": None, "settings": settings,
                "reason": Message("gradgradcheck needs double precision")}
    try:
        torch.autograd.gradgradcheck(lambda leaf: function(**{**values, name: leaf}),
                                     (x.detach().clone().requires_grad_(True),), **settings)
    except Exception as exc:  # its verdict, or it could not run: the reason says which
        first = " ".join(str(exc).split("\n")[0].split())[:300]
        failed = type(exc).__name__ == "GradcheckError"
        return {"status": "failed" if failed else "error", "verdict": False if failed else None,
                "settings": settings, "reason": first if failed else f"{type(exc).__name__}: {first}"}
    return {"status": "passed", "verdict": True, "settings": settings, "reason": Message("gradgradcheck passed")}


def expected_hessian(written, function, x, name: str, values: dict, v, autograd):
    """The expectation as an n x n tensor (None with `autograd` None for "double_backward")."""
    import torch

    n = x.numel()
    if written == DOUBLE_BACKWARD:
        return autograd
    if callable(written):
        with torch.no_grad():
            value = torch.as_tensor(written(**{**values, name: x.detach()}), dtype=x.dtype, device=x.device)
    else:
        value = to_tensor(written, str(x.dtype).replace("torch.", ""), str(x.device))
    if value.numel() != n * n:
        _wrong_size(name, value.numel(), n)
    return value.reshape(n, n)


def _wrong_size(name: str, count: int, n: int):
    raise SpecError("hessian for {name!r} has {count} elements; an input of {n} elements has an {n} x {n} "
                    "Hessian", name=name, count=count, n=n, field="hessian")


def second_order(function, leaves: dict, v, written, tolerance: dict) -> dict:
    """The record's `second_order` block: observations, comparisons and failures."""
    (name, leaf), = leaves.items()
    x, values = leaf.detach(), {}
    weights = None if v is None else v.detach()
    autograd, reason = autograd_hessian(function, x, name, values, weights)
    fd = finite_difference_hessian(function, x, name, values, weights)
    if autograd is None and float(fd.abs().max()) <= FD_TOLERANCE["atol"]:
        # a gradient that does not depend on x (a linear function) has no graph to differentiate
        # either: its finite differences say the Hessian is 0, so the backward is not at fault
        autograd = fd.new_zeros(fd.shape)
        reason = Message("the gradient carries no graph and its finite differences are 0: a constant "
                         "gradient, whose Hessian is 0")
    observations = {
        "autograd": {"name": "hessian_autograd", "note": reason,
                     "description": Message("autograd.grad of each element of autograd.grad(..., create_graph=True)"),
                     **({"hessian": describe(autograd)} if autograd is not None else {})},
        "finite_difference": {"name": "hessian_finite_difference", "hessian": describe(fd),
                              "description": Message("central differences of autograd's gradient along each "
                                                     "input element, step eps^(1/3) max(1, |x_i|)")},
        "torch_gradgradcheck": {"name": "torch_gradgradcheck", **_gradgradcheck(function, x, name, values)},
    }
    expected = expected_hessian(written, function, x, name, values, weights, autograd)
    comparisons, failures = [], []
    if autograd is None:
        failures.append({"comparison": "hessian_autograd", "input": name, "index": None,
                         "left_label": "hessian_autograd", "right_label": "", "left": None, "right": None,
                         "abs_err": None, "rel_err": None, "rtol": None, "atol": None,
                         "diagnosis": "probable_bug", "reason": reason})
    else:
        if expected is not None and written != DOUBLE_BACKWARD:
            comparisons.append(compare("hessian_analytical_vs_autograd", name, expected, autograd,
                                       left_label="analytical", right_label="hessian_autograd", **tolerance))
        comparisons.append(compare("hessian_autograd_vs_finite_difference", name, fd, autograd,
                                   left_label="hessian_finite_difference", right_label="hessian_autograd",
                                   **FD_TOLERANCE))
    for row in comparisons:
        if not row["passed"]:
            worst = row["worst"]
            failures.append({"comparison": row["name"], "input": name, "index": worst["index"],
                             "left_label": row["left"], "right_label": row["right"],
                             "left": worst["left"], "right": worst["right"], "abs_err": worst["abs_err"],
                             "rel_err": worst["rel_err"], "rtol": row["rtol"], "atol": row["atol"],
                             "diagnosis": "probable_bug",
                             "reason": Message("at H[{index}] {left} gives {a} but {right} gives {b}",
                                               index=", ".join(map(str, worst["index"])), left=row["left"],
                                               a=f"{worst['left']:.9g}", right=row["right"], b=f"{worst['right']:.9g}")})
    passed = not failures and observations["torch_gradgradcheck"]["status"] != "failed"
    return {"input": name, "expectation": written if isinstance(written, str) else
            ("<callable>" if callable(written) else written),
            "observations": observations, "comparisons": comparisons, "failures": failures, "passed": passed,
            "dtype": str(x.dtype).replace("torch.", ""), "device": str(x.device), "shape": [x.numel(), x.numel()],
            "convention": "H[i, j] = d^2 sum(grad_output * f) / dx_i dx_j over the flattened input"}
