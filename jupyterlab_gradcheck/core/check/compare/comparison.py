"""Compare two gradients element by element, keeping the worst element (principle 6).

A comparison passes when every element satisfies |left - right| <= atol + rtol * |right|
(the reference is the right-hand side). It records the largest absolute and relative
errors, the tolerance used, and the element that violates the tolerance most (or, when all
pass, the one with the largest error), with its index and both values.

Complex tensors (core/values/form.py) are compared by the modulus of the difference.

Two paths compute the same record: tensors of up to SMALL_ELEMENTS real elements on the CPU are
compared in plain Python floats, larger ones with torch (`compare_tensors`), and
both give bit-identical records (comparison.py writes them). A caller comparing the same
tensor several times wraps it once in an `Operand`, so that its elements are read once, and hands
several comparisons to `compare_rows`, which runs same-shaped ones as the rows of
one stacked tensor (the same records).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ...errors import SpecError, UserCodeFault
from ...i18n import Message
from ...values.tensors import grad_output_tensor, same_bits, to_value

# -------------------- forward pass
# One forward pass of the function under check, and the vector v of the v^T J it is compared by.
#
# Every comparison starts here: the autograd observations, the numerical verdict and the projected
# path each run the function once through `forward`, which refuses what cannot be differentiated,
# and take v from the record's grad_output (`grad_output_for`).


class SeveralOutputs(SpecError):
    """A function returned a tuple or list: `run_check` then checks it output by output
    (core/check/autograd/several_outputs.py); anywhere else one tensor was expected, and this is the refusal."""

    def __init__(self, message: str, *, outputs, **params):
        super().__init__(message, field="function", **params)
        #: The outputs of the forward pass that found them (inputs requiring grad).
        self.outputs = outputs


class NotDifferentiable(SpecError):
    """The function's output does not depend differentiably on the inputs (an integer output, or one
    autograd sees no path to). An expression that does so is bad input; a Python callable that does so
    is a fault of the user's code, which the engine records (core/check/engine.py)."""


def call_unmodified(function, leaves: dict, *, values: bool = False):
    """`function(**leaves)`, with `UserCodeFault` naming the input when the call modified one in place.

    A function that writes into its input (`x.mul_(2)` in a custom Function's forward with no
    `mark_dirty`) changes the point every later evaluation sees: finite differences then measure
    another function, and a backward that matches them proves nothing. autograd's version counter
    sees every in-place write through the tensor or a view of it, at no cost; `values=True` also
    compares the values before and after, which catches writes the counter does not see (through
    `.data`, or inside a `torch.library` custom op that declares no `mutates_args`).
    """
    versions = {name: leaf._version for name, leaf in leaves.items()}
    before = {name: leaf.detach().clone() for name, leaf in leaves.items()} if values else {}
    output = function(**leaves)
    for name, leaf in leaves.items():
        if leaf._version != versions[name] or (values and not same_values(before[name], leaf.detach())):
            raise UserCodeFault(
                Message(
                    "the function modified its input {name} in place, so every later evaluation sees "
                    "another {name}: copy it first (x = x.clone()), or return it marked with "
                    "ctx.mark_dirty({name})",
                    name=name,
                ),
                input_name=name,
            )
    return output


def same_values(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether a tensor holds the values it held (NaN where it held NaN counts as the same)."""
    if before.layout != torch.strided or after.layout != torch.strided:
        return True  # a sparse input's writes are seen by the version counter alone
    if before.shape != after.shape:
        return False
    return bool(((before == after) | (before.isnan() & after.isnan())).all())


def forward(function, leaves: dict, *, values: bool = False):
    """One forward pass, refusing outputs that cannot be differentiated (a tuple or list of
    outputs raises `SeveralOutputs`, which carries them) and a function that modifies its input
    (`call_unmodified`)."""
    output = call_unmodified(function, leaves, values=values)
    if isinstance(output, (tuple, list)):
        raise SeveralOutputs(
            "function returned a {type} of {count} outputs where one tensor was expected",
            outputs=output,
            type=type(output).__name__,
            count=len(output),
        )
    if not isinstance(output, torch.Tensor):
        raise SpecError("function returned {type}, not a tensor", type=type(output).__name__, field="function")
    if not (output.is_floating_point() or output.is_complex()) or not output.requires_grad:
        raise NotDifferentiable(
            "function output (dtype {dtype}) does not depend differentiably on the inputs",
            dtype=str(output.dtype).replace("torch.", ""),
            field="function",
        )
    return output


def autograd_vjp(function, inputs: dict, grad_output) -> tuple[dict, torch.Tensor, dict]:
    """One forward pass from fresh leaves and autograd's v^T J: `(leaves, v, autograd)`, with v from
    `grad_output` (`grad_output_for`) and an input the output does not use given zeros."""
    leaves = {name: t.detach().clone().requires_grad_(True) for name, t in inputs.items()}
    output = forward(function, leaves)
    v = grad_output_for(output, grad_output)
    grads = torch.autograd.grad(output, tuple(leaves.values()), v, allow_unused=True)
    autograd = {name: torch.zeros_like(leaf) if g is None else g for (name, leaf), g in zip(leaves.items(), grads)}
    return leaves, v, autograd


def grad_output_for(output, grad_output):
    """The vector v in v^T J: the record's grad_output, or ones shaped like the output."""
    if grad_output is None:
        return torch.ones_like(output)
    tensor = grad_output_tensor(grad_output, output)  # a complex value's form: core/values/form.py
    if tensor.shape != output.shape:
        if tensor.numel() == 1:
            return tensor.reshape(()).expand_as(output).clone()
        raise SpecError(
            "grad_output has shape {shape} but the output has shape {output_shape}",
            shape=list(tensor.shape),
            output_shape=list(output.shape),
            field="grad_output",
        )
    return tensor


# -------------------- comparison

# -------------------- plain floats
# The plain-Python path of a comparison: small real CPU tensors compared in Python floats.
#
# For the scalars and short vectors of the course a dozen torch operations on one element cost far
# more than the arithmetic. This path evaluates the torch path's IEEE double operations in the same
# order (subtract, abs, multiply, add, divide, each rounded once) and picks the worst element by the
# same rule as `torch.argmax` (the first NaN, else the first maximum), so its records are
# bit-identical to the torch path's.

#: torch's real floating dtypes: their elements fit a double exactly.
REAL_DTYPES = frozenset((torch.float64, torch.float32, torch.float16, torch.bfloat16))
#: What nan_to_num turns +inf into.
MAX_FINITE = 1.7976931348623157e308
#: Largest element count compared in plain Python floats instead of torch operations.
SMALL_ELEMENTS = 64


def compare_floats(
    name, input_name, left: list, right: list, shape, *, left_label, right_label, rtol, atol, extra=None
) -> dict:
    """The plain-Python path: the torch path's operations, element by element, in doubles."""
    if len(left) == 1 and extra is None:  # one element is its own worst and its own maximum
        a, b = left[0], right[0]
        e = abs(a - b)
        r = 0.0 if e == 0 else (INF if b == 0 else e / abs(b))
        passed = (INF if e != e else e - (atol + rtol * abs(b))) <= 0
        labels = Labels(name, input_name, left_label, right_label)
        return comparison_record(labels, Tolerance(rtol, atol), passed, (e, r), shape, Worst(0, a, b, e, r))
    errors = [abs(a - b) for a, b in zip(left, right)]
    if extra is None:
        excess = [INF if e != e else e - (atol + rtol * abs(b)) for e, b in zip(errors, right)]
    else:
        excess = [INF if e != e else e - (atol + rtol * abs(b) + x) for e, b, x in zip(errors, right, extra)]
    passed = all(x <= 0 for x in excess)
    if passed:
        worst_flat = _argmax([INF if e != e else (MAX_FINITE if e == INF else e) for e in errors])
    else:
        worst_flat = _argmax(excess)
    # Relative to a reference of exactly 0 the error is infinite (reported as null), not 1e307.
    relative = [0.0 if e == 0 else (INF if b == 0 else e / abs(b)) for e, b in zip(errors, right)]
    result = comparison_record(
        Labels(name, input_name, left_label, right_label),
        Tolerance(rtol, atol),
        passed,
        (_max(errors), _max(relative)),
        shape,
        Worst(worst_flat, left[worst_flat], right[worst_flat], errors[worst_flat], relative[worst_flat]),
    )
    if extra is not None:
        result["error_bound"] = {"max": finite_or_none(_max(extra)), "at_worst": finite_or_none(extra[worst_flat])}
    return result


def _argmax(values: list) -> int:
    """`torch.argmax` of a flat list: the first NaN if there is one, else the first maximum."""
    best = 0
    for index, value in enumerate(values):
        if value != value:
            return index
        if value > values[best]:
            best = index
    return best


def _max(values: list) -> float:
    """`Tensor.max()` of a flat list: NaN when any element is NaN."""
    return values[_argmax(values)]


def plain_number(value) -> bool:
    """A float, or an int that a double holds exactly (torch and Python then agree on it)."""
    return type(value) is float or (type(value) is int and abs(value) <= 2**53)


def plain_values(tensor) -> list[float] | None:
    """The elements of a small real CPU tensor as Python floats, else None."""
    if not (
        tensor.is_cpu
        and 0 < tensor.numel() <= SMALL_ELEMENTS
        and tensor.dtype in REAL_DTYPES
        and tensor.layout is torch.strided
    ):
        return None
    if tensor.dim() == 0:
        return [tensor.item()]
    values = tensor.tolist()
    while values and isinstance(values[0], list):  # flatten a nested list, row-major as reshape(-1)
        values = [item for row in values for item in row]
    return values


# -------------------- comparison


class Operand:
    """A tensor to compare, and its elements as Python floats when the plain path suits it."""

    __slots__ = ("_tensor", "_make", "shape", "values")

    def __init__(self, tensor):
        self._tensor, self._make, self.shape = tensor, None, tensor.shape
        #: The elements (exact: every real dtype fits a double), or None for the torch path.
        self.values = plain_values(tensor)

    @property
    def tensor(self):
        """The tensor (made on first use for a `doubled` operand)."""
        if self._tensor is None:
            self._tensor = self._make()
        return self._tensor

    @classmethod
    def doubled(cls, operand: Operand) -> Operand:
        """`Operand(2 * operand.tensor)`. In float64 the doubling is exact (or overflows to inf)
        in Python floats as in torch, so the plain values are doubled without a tensor; other
        dtypes round (and overflow) in their own precision, so torch doubles them."""
        tensor = operand.tensor
        if operand.values is None or tensor.dtype != torch.float64:
            return cls(2 * tensor)
        twice = cls.__new__(cls)
        twice._tensor, twice._make, twice.shape = None, lambda: 2 * tensor, operand.shape
        twice.values = [2 * value for value in operand.values]
        return twice


def compare(
    name: str, input_name: str, left, right, *, left_label: str, right_label: str, rtol: float, atol: float, bound=None
) -> dict:
    """One comparison record between two same-shaped tensors (or `Operand`s of them).

    `bound`, a tensor shaped like `right`, adds an allowance of its own to each element's
    tolerance (a finite difference's rounding bound, core/check/fd/steps.py); the record
    then carries `error_bound` with its largest value and its value at the worst element.
    """
    left = left if isinstance(left, Operand) else Operand(left)
    right = right if isinstance(right, Operand) else Operand(right)
    extra = None
    if bound is not None:
        extra = Operand(bound).values if left.values is not None and right.values is not None else None
        if extra is None or len(extra) != len(right.values):
            return compare_tensors(
                name,
                input_name,
                left.tensor,
                right.tensor,
                left_label=left_label,
                right_label=right_label,
                rtol=rtol,
                atol=atol,
                bound=bound,
            )
    if (
        left.values is not None
        and right.values is not None
        and left.shape == right.shape
        and plain_number(rtol)
        and plain_number(atol)
    ):
        return compare_floats(
            name,
            input_name,
            left.values,
            right.values,
            right.shape,
            left_label=left_label,
            right_label=right_label,
            rtol=rtol,
            atol=atol,
            extra=extra,
        )
    if bound is None and identical(left.tensor, right.tensor, rtol, atol):
        return identical_record(name, input_name, left.tensor, right.tensor, left_label, right_label, rtol, atol)
    return compare_tensors(
        name,
        input_name,
        left.tensor,
        right.tensor,
        left_label=left_label,
        right_label=right_label,
        rtol=rtol,
        atol=atol,
        bound=bound,
    )


def identical(left, right, rtol, atol) -> bool:
    """Whether two real tensors hold the same finite bits (pass 1 and the pass after clearing, say) under
    non-negative plain tolerances: then every error is 0 and the comparison's record is known without it."""
    return (
        plain_number(rtol)
        and plain_number(atol)
        and rtol >= 0
        and atol >= 0
        and left.numel() > 0
        and left.is_floating_point()
        and not left._is_zerotensor()
        and same_bits(left, right)
        and bool(torch.isfinite(right).all())
    )


def identical_record(name, input_name, left, right, left_label, right_label, rtol, atol) -> dict:
    """`compare_tensors`' record of two `identical` tensors, written directly: every error is 0, so it passes,
    and its worst element is the first (argmax of an all-zero error), each value read in float64."""
    zero = torch.zeros((), dtype=torch.float64)
    first_left = left.detach().reshape(-1)[0].to("cpu", torch.float64)
    first_right = right.detach().reshape(-1)[0].to("cpu", torch.float64)
    labels = Labels(name, input_name, left_label, right_label)
    worst = Worst(0, to_value(first_left), to_value(first_right), zero, zero)
    return comparison_record(labels, Tolerance(rtol, atol), True, (zero, zero), right.shape, worst)


def compare_tensors(name, input_name, left, right, *, left_label, right_label, rtol, atol, bound=None) -> dict:
    """The torch path, for tensors of any size and device, real or complex.

    Complex tensors are compared in complex128: the error is the modulus |left - right| and the
    tolerance is relative to |right|, so a wrong imaginary part fails as a wrong real part does;
    the worst element's values are written in the record's complex form.
    """
    wide = torch.complex128 if left.is_complex() or right.is_complex() else torch.float64
    left64 = left.detach().to("cpu", wide).broadcast_to(right.shape)
    right64 = right.detach().to("cpu", wide)
    error = (left64 - right64).abs()
    extra = None if bound is None else bound.detach().to("cpu", torch.float64).reshape(right64.shape)
    size = right64.abs()
    bound = atol + rtol * size if extra is None else atol + rtol * size + extra
    excess = torch.where(torch.isnan(error), INF, error - bound)
    passed = bool((excess <= 0).all())
    # every error of a passing comparison is finite (a NaN or inf one exceeds its bound): its largest is the worst
    worst_flat = int(torch.argmax(excess.reshape(-1) if not passed else error.reshape(-1)))
    # Relative to a reference of exactly 0 the error is infinite (reported as null), not 1e307.
    relative = torch.where(error == 0, 0.0, torch.where(right64 == 0, INF, error / size))
    worst = Worst(
        worst_flat,
        to_value(left64.reshape(-1)[worst_flat]),
        to_value(right64.reshape(-1)[worst_flat]),
        error.reshape(-1)[worst_flat],
        relative.reshape(-1)[worst_flat],
    )
    labels = Labels(name, input_name, left_label, right_label)
    result = comparison_record(
        labels, Tolerance(rtol, atol), passed, (error.max(), relative.max()), right64.shape, worst
    )
    if extra is not None:
        result["error_bound"] = {
            "max": finite_or_none(extra.max()) if extra.numel() else 0.0,
            "at_worst": finite_or_none(extra.reshape(-1)[worst_flat]),
        }
    return result


# -------------------- comparison record
# The record of one comparison: its errors, tolerance, verdict and worst element, as every path writes it.
#
# The plain-Python path, the torch path (`compare_tensors`) and the
# stacked rows (`compare_rows`) compute the same numbers; each hands them here, so that the record's
# fields, their order and the null written for an infinite error are the same whichever ran.

INF = float("inf")


def unravel(flat_index: int, shape) -> list[int]:
    """The index of a flat position in a tensor of `shape`, row-major."""
    index = []
    for size in reversed(list(shape)):
        index.append(flat_index % size)
        flat_index //= size
    return list(reversed(index))


class Labels(NamedTuple):
    """What a comparison compares: its name, the input it is about, and its two sides' labels."""

    name: str
    input: str
    left: str
    right: str


class Tolerance(NamedTuple):
    """|left - right| <= atol + rtol * |right|, element by element."""

    rtol: float
    atol: float


class Worst(NamedTuple):
    """The element a comparison reports (the most violating one, or the largest error when all pass)."""

    flat: int
    left: object
    right: object
    abs_err: float
    rel_err: float


def comparison_record(labels: Labels, tolerance: Tolerance, passed, largest: tuple, shape, worst: Worst) -> dict:
    """One comparison record: the labels, tolerance and verdict, the largest (absolute, relative)
    errors and the worst element, located in `shape`."""
    max_abs, max_rel = largest
    return {
        "name": labels.name,
        "input": labels.input,
        "left": labels.left,
        "right": labels.right,
        "max_abs_err": finite_or_none(max_abs),
        "max_rel_err": finite_or_none(max_rel),
        "rtol": tolerance.rtol,
        "atol": tolerance.atol,
        "passed": passed,
        "worst": {
            "index": unravel(worst.flat, shape),
            "flat_index": worst.flat,
            "left": worst.left,
            "right": worst.right,
            "abs_err": finite_or_none(worst.abs_err),
            "rel_err": finite_or_none(worst.rel_err),
        },
    }


def finite_or_none(value):
    """A float of the value, or None where it is not finite (JSON has no inf or NaN)."""
    value = float(value)
    return value if math.isfinite(value) else None


# -------------------- stacked rows
# Several comparisons at once: same-shaped torch-path comparisons computed as the rows of one tensor.
#
# A dozen small torch operations cost the same for one row as for five, and a check compares each
# input several ways (autograd's passes, finite differences, the expectation). `compare_rows` stacks
# the real same-shaped requests that take the torch path; each row goes through `compare_tensors`'
# operations elementwise and its reductions run along the row, so every record is bit-identical to
# its own `compare` call.

#: Largest element count whose torch-path comparisons of one shape `compare_rows` stacks into one computation.
STACKED_ELEMENTS = 4096


def compare_rows(requests: list[dict]) -> list[dict]:
    """`compare(**request)` for each request, the same records in the same order.

    The requests that take the torch path with real tensors of one shape, up to STACKED_ELEMENTS
    elements, are stacked row by row and computed by one set of torch operations (a dozen small
    operations cost the same for one row as for five). Each row goes through the operations of
    `compare_tensors`, elementwise, and its reductions run along the row, so each record is
    bit-identical to that of its own `compare` call; any other request is handed to `compare`.
    """
    requests = [
        {**request, "left": operand(request["left"]), "right": operand(request["right"])} for request in requests
    ]
    results: list = [None] * len(requests)
    groups: dict = {}
    for i, request in enumerate(requests):
        if stackable(request):
            groups.setdefault(tuple(request["right"].shape), []).append(i)
    for members in groups.values():
        if len(members) > 1:
            for i, record in zip(members, stacked([requests[i] for i in members])):
                results[i] = record
    return [record if record is not None else compare(**request) for record, request in zip(results, requests)]


def operand(value) -> Operand:
    """The value as an `Operand` (read once), unless it is one."""
    return value if isinstance(value, Operand) else Operand(value)


def stackable(request: dict) -> bool:
    """Whether `compare` takes the torch path with real tensors of one shape and plain tolerances."""
    left, right, bound = request["left"], request["right"], request.get("bound")
    if left.values is not None and right.values is not None:  # the plain path (or a shape mismatch)
        return False
    tensors = [left.tensor, right.tensor] + ([] if bound is None else [bound])
    return (
        left.shape == right.shape
        and 0 < right.tensor.numel() <= STACKED_ELEMENTS
        and all(t.is_floating_point() for t in tensors)
        and (bound is None or bound.numel() == right.tensor.numel())
        and plain_number(request["rtol"])
        and plain_number(request["atol"])
    )


def stacked(requests: list[dict]) -> list[dict]:
    """`compare_tensors` of each request, its tensors stacked as the rows of one (rows, n) tensor."""

    def rows(tensors):
        return torch.stack([t.detach().to("cpu", torch.float64).reshape(-1) for t in tensors])

    left64, right64 = rows([r["left"].tensor for r in requests]), rows([r["right"].tensor for r in requests])
    bounded = [r.get("bound") is not None for r in requests]
    error = (left64 - right64).abs()
    rtol = torch.tensor([[float(r["rtol"])] for r in requests], dtype=torch.float64)
    atol = torch.tensor([[float(r["atol"])] for r in requests], dtype=torch.float64)
    extra = rows(
        [r["bound"] if b else torch.zeros(right64.shape[1], dtype=torch.float64) for r, b in zip(requests, bounded)]
    )
    bound = atol + rtol * right64.abs() + extra  # + 0 where there is no bound, as compare_tensors adds
    nan = torch.isnan(error)
    excess = torch.where(nan, torch.full_like(error, float("inf")), error - bound)
    passed = (excess <= 0).all(dim=1)
    worst = torch.where(passed, torch.argmax(error.nan_to_num(nan=float("inf")), dim=1), torch.argmax(excess, dim=1))
    relative = torch.where(right64 == 0, torch.full_like(error, float("inf")), error / right64.abs())
    relative = torch.where(error == 0, torch.zeros_like(relative), relative)
    at = worst.unsqueeze(1)
    columns = [
        passed.tolist(),
        error.max(dim=1).values.tolist(),
        relative.max(dim=1).values.tolist(),
        worst.tolist(),
    ] + [t.gather(1, at).reshape(-1).tolist() for t in (left64, right64, error, relative)]
    extra_max, extra_at = extra.max(dim=1).values.tolist(), extra.gather(1, at).reshape(-1).tolist()
    records = []
    for k, (r, (ok, max_abs, max_rel, flat, left, right, abs_err, rel_err)) in enumerate(zip(requests, zip(*columns))):
        record = comparison_record(
            Labels(r["name"], r["input_name"], r["left_label"], r["right_label"]),
            Tolerance(r["rtol"], r["atol"]),
            ok,
            (max_abs, max_rel),
            r["right"].shape,
            Worst(flat, left, right, abs_err, rel_err),
        )
        if bounded[k]:
            record["error_bound"] = {"max": finite_or_none(extra_max[k]), "at_worst": finite_or_none(extra_at[k])}
        records.append(record)
    return records
