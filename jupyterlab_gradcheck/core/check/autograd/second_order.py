"""Second order: the Hessian of phi = sum(grad_output * f) with respect to the inputs, three ways.

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
Function), written in the record as that text. A function of several inputs has one Hessian over
z, the inputs flattened and concatenated in their order (N x N for N elements in all, the mixed
second derivatives included, as gradgradcheck checks them); the record's `layout` says where each
input's elements lie. A backward that is not differentiable (a `.detach()` inside it, a value
computed outside autograd) gives a gradient with no graph: that is a failure with that reason,
not a crash.

The double backward is repeated (`double_backward_repeat`): one row of the autograd Hessian is taken
again from a fresh forward and gradient, and held to the first order's repeat rule.
"""

from __future__ import annotations

import torch

from ...errors import exception_line
from ...i18n import Message
from ...values.tensors import describe, to_tensor
from ..compare.comparison import compare
from ..fd.steps import mode_tolerances
from ..record.spec import DOUBLE_BACKWARD, refuse_wrong_size
from .observations import event_failure, failure, nondeterminism_failure, repeat_differences

# -------------------- grad output derivative
# The double backward with respect to grad_output: the half of the second order a Hessian does not see.
#
# A backward is a function of the input x and of its grad_output v, and `gradgradcheck` differentiates it
# with respect to both. The Hessian (core/check/autograd/second_order.py) is its derivative with respect to
# x alone; a backward whose value is right but whose graph is wrong in v (g + (g*g - (g*g).detach()) / 2
# for a linear op, whose Hessian is zero either way) passes the Hessian and fails gradgradcheck. So, where
# a second order is asked of a function through a custom Function, the derivative of sum(w * backward(v))
# with respect to v (w a seeded standard normal per input) is taken by autograd and by central
# differences in v, element by element of v, and compared. The backward is linear in v, so the differences
# are exact up to rounding; each element's tolerance adds BOUND_FACTOR times that rounding.

#: Seed of the weights w.
SEED = 31
#: Elements of grad_output up to which each is differenced (two backward passes each); beyond, skipped.
MAX_ELEMENTS = 1024
#: Multiple of the rounding of the two evaluations allowed on top of the tolerance.
BOUND_FACTOR = 8.0
#: The comparison's name in the record.
NAME = "double_backward_in_grad_output_vs_finite_difference"


def _weighted(output, inputs: dict, weights: dict, v, *, create_graph: bool):
    """sum_n sum(w_n * backward(v)_n): the backward's gradients under grad_output v, weighted."""
    grads = torch.autograd.grad(
        output,
        list(inputs.values()),
        v,
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
        materialize_grads=True,
    )
    return sum((weights[n] * g).sum() for n, g in zip(inputs, grads))


def _derivatives(function, leaves: dict, v, weights: dict):
    """(autograd's d/dv sum(w * backward(v)), sum(w * backward(v + h e_j)) and (v - h e_j) for each j, h), or None
    where the backward is not differentiable in v."""
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        output = function(**inputs)
        at = v.detach().clone().requires_grad_(True)
        total = _weighted(output, inputs, weights, at, create_graph=True)
        if not total.requires_grad:  # a once_differentiable backward: no graph in v to compare
            return None
        (autograd,) = torch.autograd.grad(total, at, allow_unused=True, materialize_grads=True)
        h = max(1.0, float(v.detach().abs().max()))
        plus, minus = torch.empty_like(autograd).reshape(-1), torch.empty_like(autograd).reshape(-1)
        for j in range(v.numel()):
            step = torch.zeros_like(v).reshape(-1)
            step[j] = h
            plus[j] = _weighted(output, inputs, weights, v.detach() + step.reshape(v.shape), create_graph=False)
            minus[j] = _weighted(output, inputs, weights, v.detach() - step.reshape(v.shape), create_graph=False)
    return autograd, plus, minus, h


def grad_output_derivative(function, leaves: dict, v, tolerance: dict) -> dict:
    """The `grad_output` observation of the second order: d/dv sum(w * backward(v)) by autograd against central
    differences in v, its comparison and failures; skipped, with the reason, where it does not apply."""
    if v is None or v.is_complex() or v.numel() > MAX_ELEMENTS:
        return {"status": "skipped", "reason": Message("a complex or a large output: not differenced in grad_output")}
    generator = torch.Generator().manual_seed(SEED)
    weights = {n: torch.randn(x.shape, dtype=x.dtype, generator=generator).to(x.device) for n, x in leaves.items()}
    try:
        found = _derivatives(function, leaves, v, weights)
    except Exception as exc:  # a backward that runs only under some grad_outputs, or whose graph raises
        reason = Message("the double backward in grad_output raised: {error}", error=exception_line(exc))
        return {"status": "failed", "failures": [event_failure(NAME, reason, input_name="grad_output")]}
    if found is None:  # a once_differentiable backward: no graph in v to compare
        return {"status": "skipped", "reason": Message("the backward is not differentiable in its grad_output")}
    autograd, plus, minus, h = found
    fd = ((plus - minus) / (2 * h)).reshape(v.shape)
    bound = BOUND_FACTOR * torch.finfo(fd.dtype).eps * (plus.abs() + minus.abs()).reshape(v.shape) / (2 * h)
    row = compare(
        NAME,
        "grad_output",
        fd.detach(),
        autograd.detach(),
        left_label="finite_difference_in_grad_output",
        right_label="double_backward",
        bound=bound,
        **tolerance,
    )
    reason = Message(
        "the derivative of the backward with respect to its grad_output is wrong at grad_output{index}: the double "
        "backward gives {right} but differences in grad_output give {left}: suspect the backward's graph (its value "
        "is right, the derivative gradgradcheck takes of it is not)",
        index=row["worst"]["index"],
        right=f"{row['worst']['right']:.9g}",
        left=f"{row['worst']['left']:.9g}",
    )
    return {
        "status": "observed",
        "description": Message(
            "d/dv sum(w * backward(v)) by the double backward against central differences in v, w standard "
            "normal (seed {seed})",
            seed=SEED,
        ),
        "comparisons": [row],
        "failures": [] if row["passed"] else [failure(row, "probable_bug", reason)],
    }


# -------------------- second order


def _gradients(function, values: dict, v, *, create_graph: bool):
    """(leaves, each input's gradient of phi flattened) at `values`; zeros for an input phi does not reach."""
    with torch.enable_grad():
        leaves = {n: x.detach().clone().requires_grad_(True) for n, x in values.items()}
        output = function(**leaves)
        weights = torch.ones_like(output) if v is None else v
        found = torch.autograd.grad(
            output, list(leaves.values()), weights, create_graph=create_graph, allow_unused=True
        )
    return leaves, [(torch.zeros_like(leaf) if g is None else g).reshape(-1) for leaf, g in zip(leaves.values(), found)]


def autograd_hessian(function, values: dict, v):
    """(N x N Hessian by double backward, or None, a note: why it is None, or which inputs' gradients
    carry no graph and were taken as constant, and per input whether its gradient carried a graph)."""
    with torch.enable_grad():
        leaves, parts = _gradients(function, values, v, create_graph=True)
        flat_leaves = list(leaves.values())
        constant = [n for n, part in zip(leaves, parts) if not part.requires_grad]
        differentiated = [part.requires_grad for part in parts]
        if len(constant) == len(parts):
            return (
                None,
                Message(
                    "the backward is not differentiable: the gradient of {name} it returns carries no "
                    "graph (a .detach() inside it, or a value computed outside autograd)",
                    name=", ".join(constant),
                ),
                differentiated,
            )
        rows = []
        for part in parts:
            for i in range(part.numel()):
                found = (
                    torch.autograd.grad(part[i], flat_leaves, retain_graph=True, allow_unused=True)
                    if part.requires_grad
                    else [None] * len(flat_leaves)
                )
                rows.append(
                    torch.cat(
                        [
                            (torch.zeros_like(leaf) if row is None else row).reshape(-1)
                            for leaf, row in zip(flat_leaves, found)
                        ]
                    )
                )
    note = (
        Message(
            "the gradient of {names} carries no graph: its rows are taken as 0 (a constant gradient), and "
            "the finite differences say whether they are",
            names=", ".join(constant),
        )
        if constant
        else ""
    )
    return torch.stack(rows).detach(), note, differentiated


# -------------------- repeats
# A double backward whose identical calls disagree, named as such (as the first order's repeats,
# core/check/autograd/observations.py).
#
# A random op or a nondeterministic kernel in the backward's own backward (a backward written with a
# second Function, whose backward draws noise) leaves the first order's repeats the same bits and makes
# the Hessian disagree with the finite differences of the gradient, which reads as a wrong formula. So
# one row of the autograd Hessian is taken again with identical arguments: a fresh forward, a fresh
# gradient with create_graph=True (a random term drawn while the first backward builds its graph is drawn
# again), and that row's element of the gradient differentiated again. It is held to the Hessian's row,
# element by element, under `repeat_tolerance` (zero in float64: the same bits). The row repeated is the
# one holding the Hessian's largest entry (noise relative to the values shows most there), among the
# rows that came from a double backward. It costs one double-backward pass (and one gradient) beside
# the N of the Hessian.

#: The two passes the repeat holds against each other, as the block's `passes` names them.
REPEAT_PASSES = ("hessian_autograd", "hessian_autograd_repeat")


def _repeated_row(hessian, differentiated: list[bool], layout: list[dict]) -> int | None:
    """The row of the largest entry among the rows whose gradient element carries a graph, or None."""
    rows = torch.zeros(hessian.shape[0], dtype=torch.bool, device=hessian.device)
    for part, flag in zip(layout, differentiated):
        rows[part["offset"] : part["offset"] + part["numel"]] = flag
    if not bool(rows.any()):
        return None
    size = hessian.detach().abs().amax(dim=1)
    size = torch.where(torch.isnan(size), torch.full_like(size, torch.inf), size)
    return int(torch.where(rows, size, torch.full_like(size, -1.0)).argmax())


def double_backward_repeat(function, values: dict, v, hessian, differentiated: list[bool]) -> tuple:
    """(k, block): the row k of `hessian` (autograd's) taken again with identical arguments from a fresh
    graph (None where no row came from a double backward), and the second order's `nondeterminism` block
    where the two differ, else None. `differentiated` says, per input, whether its gradient carried a graph."""
    layout = _layout(values)
    k = _repeated_row(hessian, differentiated, layout)
    if k is None:
        return None, None
    where = next(p for p in layout if p["offset"] <= k < p["offset"] + p["numel"])
    position = [p["input"] for p in layout].index(where["input"])
    with torch.enable_grad():
        leaves, parts = _gradients(function, values, v, create_graph=True)
        flat_leaves = list(leaves.values())
        part = parts[position]
        if not part.requires_grad:  # the fresh gradient has no graph where the first had one: they differ
            again = [None] * len(flat_leaves)
        else:
            again = torch.autograd.grad(part[k - where["offset"]], flat_leaves, allow_unused=True)
    row = torch.cat([(torch.zeros_like(leaf) if g is None else g).reshape(-1) for leaf, g in zip(flat_leaves, again)])
    label = ", ".join(values)
    dtype = str(hessian.dtype).replace("torch.", "")
    block = repeat_differences(
        {REPEAT_PASSES[0]: {label: hessian[k]}, REPEAT_PASSES[1]: {label: row.detach()}}, dtype, REPEAT_PASSES
    )
    if block is not None:
        j = block["index"][0]
        block.update(index=[k, j], elements=[_element(layout, k), _element(layout, j)])
    return k, block


def finite_difference_hessian(function, values: dict, v):
    """N x N: column j is the central difference of autograd's gradient along element j of z."""
    columns = []
    for name, x in values.items():
        eps = torch.finfo(x.dtype).eps
        flat = x.detach().reshape(-1)
        for i in range(flat.numel()):
            h = eps ** (1 / 3) * max(1.0, abs(float(flat[i])))
            plus, minus = flat.clone(), flat.clone()
            plus[i] += h
            minus[i] -= h
            taken = float(plus[i] - minus[i])
            g_plus = _gradients(function, {**values, name: plus.reshape(x.shape)}, v, create_graph=False)[1]
            g_minus = _gradients(function, {**values, name: minus.reshape(x.shape)}, v, create_graph=False)[1]
            columns.append(((torch.cat(g_plus) - torch.cat(g_minus)) / taken).detach())
    return torch.stack(columns, dim=1)


def _gradgradcheck(function, values: dict) -> dict:
    settings = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}
    names = list(values)
    if any(x.dtype != torch.float64 for x in values.values()):
        return {
            "status": "skipped",
            "verdict": None,
            "settings": settings,
            "reason": Message("gradgradcheck needs double precision"),
        }
    try:
        torch.autograd.gradgradcheck(
            lambda *leaves: function(**dict(zip(names, leaves))),
            tuple(x.detach().clone().requires_grad_(True) for x in values.values()),
            **settings,
        )
    except Exception as exc:  # its verdict, or it could not run: the reason says which
        first = " ".join(str(exc).split("\n")[0].split())[:300]
        failed = type(exc).__name__ == "GradcheckError"
        return {
            "status": "failed" if failed else "error",
            "verdict": False if failed else None,
            "settings": settings,
            "reason": first if failed else f"{type(exc).__name__}: {first}",
        }
    return {"status": "passed", "verdict": True, "settings": settings, "reason": Message("gradgradcheck passed")}


def expected_hessian(written, function, values: dict, v, autograd):
    """The expectation as an N x N tensor (None with `autograd` None for "double_backward")."""
    x = next(iter(values.values()))
    n = sum(t.numel() for t in values.values())
    if written == DOUBLE_BACKWARD:
        return autograd
    if callable(written):
        with torch.no_grad():
            value = torch.as_tensor(
                written(**{k: t.detach() for k, t in values.items()}), dtype=x.dtype, device=x.device
            )
    else:
        value = to_tensor(written, str(x.dtype).replace("torch.", ""), str(x.device))
    if value.numel() != n * n:
        refuse_wrong_size(list(values), value.numel(), n)
    return value.reshape(n, n)


def _layout(values: dict) -> list[dict]:
    """Where each input's elements lie in z, the flattened inputs concatenated in their order."""
    offset, layout = 0, []
    for name, x in values.items():
        layout.append({"input": name, "offset": offset, "numel": x.numel()})
        offset += x.numel()
    return layout


def _element(layout: list[dict], k: int) -> str:
    """Element k of z by its input: "w[2]" (flat index within that input)."""
    part = next(p for p in layout if p["offset"] <= k < p["offset"] + p["numel"])
    return f"{part['input']}[{k - part['offset']}]"


def second_order(
    function, leaves: dict, v, written, tolerance: dict, *, whole=None, phi: str = "sum(grad_output * f)"
) -> dict:
    """The record's `second_order` block: observations, comparisons and failures (gradgradcheck runs on
    `whole` where the Hessian is that of a function built from it; `phi` says which scalar it is of)."""
    values = {n: leaf.detach() for n, leaf in leaves.items()}
    label = ", ".join(values)
    several = len(values) > 1
    layout = _layout(values)
    x = next(iter(values.values()))
    weights = None if v is None else v.detach()
    autograd, reason, differentiated = autograd_hessian(function, values, weights)
    # the double backward again, one row from a fresh graph: identical calls must agree (repeat_tolerance)
    repeated_row, repeated = None, None
    if autograd is not None:
        repeated_row, repeated = double_backward_repeat(function, values, weights, autograd, differentiated)
    fd = finite_difference_hessian(function, values, weights)
    # the finite differences of a gradient (central, step eps^(1/3) max(1, |x|)) against the double
    # backward: the modes' "differences" tolerance in x's dtype and on its device (core/check/fd/steps.py)
    fd_tolerance = mode_tolerances(x.dtype, x.device)["differences"]
    if autograd is None and float(fd.abs().max()) <= fd_tolerance["atol"]:
        # a gradient that does not depend on x (a linear function) has no graph to differentiate
        # either: its finite differences say the Hessian is 0, so the backward is not at fault
        autograd = fd.new_zeros(fd.shape)
        reason = Message(
            "the gradient carries no graph and its finite differences are 0: a constant gradient, whose Hessian is 0"
        )
    observations = {
        "autograd": {
            "name": "hessian_autograd",
            "note": reason,
            "description": Message("autograd.grad of each element of autograd.grad(..., create_graph=True)"),
            **({"hessian": describe(autograd)} if autograd is not None else {}),
            **({"repeated_row": repeated_row} if repeated_row is not None else {}),
        },
        "finite_difference": {
            "name": "hessian_finite_difference",
            "hessian": describe(fd),
            "description": Message(
                "central differences of autograd's gradient along each input element, step eps^(1/3) max(1, |x_i|)"
            ),
        },
        "torch_gradgradcheck": {"name": "torch_gradgradcheck", **_gradgradcheck(whole or function, values)},
    }
    expected = expected_hessian(written, function, values, weights, autograd)
    comparisons, failures = [], []
    if autograd is None:
        failures.append(event_failure("hessian_autograd", reason, input_name=label))
    else:
        if expected is not None and written != DOUBLE_BACKWARD:
            comparisons.append(
                compare(
                    "hessian_analytical_vs_autograd",
                    label,
                    expected,
                    autograd,
                    left_label="analytical",
                    right_label="hessian_autograd",
                    **tolerance,
                )
            )
        comparisons.append(
            compare(
                "hessian_autograd_vs_finite_difference",
                label,
                fd,
                autograd,
                left_label="hessian_finite_difference",
                right_label="hessian_autograd",
                **fd_tolerance,
            )
        )
    failures += [_failure(row, label, layout if several else None) for row in comparisons if not row["passed"]]
    if repeated is not None and repeated["beyond_tolerance"]:
        # first: a double backward that disagrees with itself is why the Hessian disagrees with the differences
        failures.insert(0, nondeterminism_failure(repeated, second_order=True))
    passed = not failures and observations["torch_gradgradcheck"]["status"] != "failed"
    n = sum(t.numel() for t in values.values())
    block = {
        "input": label,
        "expectation": written if isinstance(written, str) else ("<callable>" if callable(written) else written),
        "observations": observations,
        "comparisons": comparisons,
        "failures": failures,
        "passed": passed,
        "dtype": str(x.dtype).replace("torch.", ""),
        "device": str(x.device),
        "shape": [n, n],
        "convention": f"H[i, j] = d^2 {phi} / dx_i dx_j over the flattened input",
    }
    if several:
        block["convention"] = (
            f"H[i, j] = d^2 {phi} / dz_i dz_j over z, the inputs flattened and concatenated in the order {label}"
        )
        block["layout"] = layout
    if repeated is not None:
        block["nondeterminism"] = repeated
    return block


def _failure(row: dict, label: str, layout: list[dict] | None) -> dict:
    """A failed Hessian comparison as a failure naming its entry (and, for several inputs, whose elements)."""
    worst = row["worst"]
    found = {
        "left": row["left"],
        "a": f"{worst['left']:.9g}",
        "right": row["right"],
        "b": f"{worst['right']:.9g}",
        "index": ", ".join(map(str, worst["index"])),
    }
    reason = (
        Message("at H[{index}] {left} gives {a} but {right} gives {b}", **found)
        if layout is None
        else Message(
            "at H[{index}] ({where}) {left} gives {a} but {right} gives {b}",
            where=", ".join(_element(layout, k) for k in worst["index"]),
            **found,
        )
    )
    return {**failure(row, "probable_bug", reason), "input": label}


def second_order_of_outputs(function, leaves: dict, weights: dict, written, tolerance: dict) -> dict:
    """The `second_order` block of a function of several outputs: the Hessian of
    phi = sum_k sum(v_k * f_k) over its differentiable outputs k, each weighted by the check's grad_output
    v_k (`weights`), with gradgradcheck run on the whole function, as it checks a tuple of outputs."""
    if any(w.is_complex() for w in weights.values()):
        return {
            "status": "skipped",
            "passed": True,
            "failures": [],
            "reason": Message("the second order of several outputs is checked for real outputs"),
        }
    indices = sorted(weights)

    def weighted(**values):
        found = function(**values)
        return sum((weights[k] * found[k]).sum() for k in indices)

    block = second_order(
        weighted, leaves, None, written, tolerance, whole=function, phi="sum_k sum(grad_output_k * f_k)"
    )
    block["outputs"] = indices
    return block
