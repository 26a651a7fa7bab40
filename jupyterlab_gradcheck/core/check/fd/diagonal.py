"""Finite differences of a function whose Jacobian is observed to be diagonal, in a few evaluations.

When every operation that input x flows through is elementwise and keeps x's shape, output
element i depends on input element i alone. Shifting every element at once, each by its own
step, then yields all n difference quotients from the few evaluations one element would need,
instead of 2n evaluations of an n-element function (O(n^2) work). The same holds for a full sum
or mean of such a body, optionally scaled by constants: d phi / d x_i is the body's derivative
at element i times the weight, so the quotients come from the body's values, which the
evaluation captures as they enter the reduction.

The structure is observed, not assumed. Every evaluation of the real function runs under a
dispatch mode that follows each tensor derived from x through the aten operations actually
executed, and the shortcut is used only when the evaluation at x and every shifted evaluation
are such a chain, with the same operations. Anything else (an operation not known to be
elementwise, a view or broadcast that changes x's shape, an in-place update, a second reduction,
an output that is not the chain's end) leaves the general path to run instead. It is also the
more accurate estimate: element i's quotient rounds like |g_i|, not like the whole sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from .error_bound import moved_outputs

#: aten operations (by overload packet) whose every overload maps element i to element i when
#: the result keeps the input's shape; dtype conversions and copies are identities.
ELEMENTWISE = frozenset(
    {
        "abs",
        "acos",
        "acosh",
        "add",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "clamp",
        "clamp_max",
        "clamp_min",
        "clone",
        "cos",
        "cosh",
        "div",
        "eq",
        "erf",
        "erfc",
        "exp",
        "exp2",
        "expm1",
        "ge",
        "gt",
        "hypot",
        "le",
        "log",
        "log10",
        "log1p",
        "log2",
        "logaddexp",
        "lt",
        "maximum",
        "minimum",
        "mul",
        "ne",
        "neg",
        "pow",
        "reciprocal",
        "relu",
        "rsqrt",
        "rsub",
        "sigmoid",
        "sign",
        "sin",
        "sinh",
        "softplus",
        "sqrt",
        "square",
        "sub",
        "tan",
        "tanh",
        "where",
        "_to_copy",
        "alias",
        "detach",
        "lift_fresh",
        "lift_fresh_copy",
    }
)
#: Full reductions: the chain's body enters one of these and the result has one element.
REDUCTIONS = {"sum": "sum", "mean": "mean"}
#: What may follow the reduction: a constant factor keeps d phi / d x_i a multiple of g'(x_i).
_SCALE = {"mul", "div", "neg"}
_SHIFT = {"add", "sub"}
_IDENTITY = {"clone", "alias", "detach", "_to_copy"}


class _NotDiagonal(Exception):
    """Raised inside the recorder: this evaluation is not an elementwise chain."""


@dataclass
class Trace:
    """What one evaluation showed: the chain's operations, its body values and output weight."""

    kind: str  #: "elementwise" or "elementwise then " + the reduction's name
    operations: tuple
    body: object  #: values whose element i depends on x_i alone (the reduction's input, or the output)
    factor: complex = 1.0 + 0j  #: d output / d sum(body) for a reduction (1/n for a mean, times constants)


@cache
def _mode_class():
    """The recording mode, defined on first use so that importing the core never loads torch."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        """Follows tensors derived from x; refuses anything that is not an elementwise chain."""

        @classmethod
        def _should_skip_dynamo(cls):  # nothing here is compiled: do not load the compiler
            return False

        def __init__(self, x):
            super().__init__()
            self.shape, self.numel = tuple(x.shape), x.numel()
            self.derived = {id(x): ("body", x)}  #: id -> (role, tensor kept alive so ids stay unique)
            self.operations, self.reduced, self.body, self.reduction = [], None, None, None
            self.factor = complex(1.0)

        def role(self, value):
            entry = self.derived.get(id(value)) if isinstance(value, torch.Tensor) else None
            return entry[0] if entry and entry[1] is value else None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            flat = list(args) + [v for item in args if isinstance(item, (list, tuple)) for v in item]
            flat += list(kwargs.values())
            roles = [self.role(value) for value in flat]
            if not any(roles):
                return out
            name = func._overloadpacket.__name__
            if (
                name.endswith("_")
                or not isinstance(out, torch.Tensor)
                or any(isinstance(item, (list, tuple)) and any(self.role(v) for v in item) for item in args)
            ):
                raise _NotDiagonal(name)
            self.operations.append(name)
            if "reduced" in roles:
                self._after_reduction(name, args, kwargs, roles, out)
            elif name in ELEMENTWISE and tuple(out.shape) == self.shape:
                self.derived[id(out)] = ("body", out)
            elif (
                name in REDUCTIONS
                and self.reduced is None
                and out.numel() == 1
                and roles.count("body") == 1
                and roles[0] == "body"
                and tuple(args[0].shape) == self.shape
                and (args[0].is_floating_point() or args[0].is_complex())
            ):
                self.reduced, self.body, self.reduction = out, args[0], name
                self.factor = complex(1.0 / self.numel if name == "mean" else 1.0)
                self.derived[id(out)] = ("reduced", out)
            else:
                raise _NotDiagonal(name)
            return out

        def _after_reduction(self, name, args, kwargs, roles, out):
            """Only constant scales and shifts of the reduced value, which keep its derivative's form."""
            if out.numel() != 1 or roles.count("reduced") != 1 or "body" in roles or args[0] is not self.reduced:
                raise _NotDiagonal(name)
            others = [a for a in args[1:] if isinstance(a, (int, float, complex, torch.Tensor))]
            constants = [complex(a.item()) if isinstance(a, torch.Tensor) else complex(a) for a in others]
            if any(isinstance(a, torch.Tensor) and a.numel() != 1 for a in others):
                raise _NotDiagonal(name)
            if name in _SCALE and not kwargs and len(constants) == (name != "neg"):
                if name == "mul":
                    self.factor *= constants[0]
                elif name == "div":
                    self.factor /= constants[0]
                else:
                    self.factor = -self.factor
            elif not (
                (name in _SHIFT and set(kwargs) <= {"alpha"} and kwargs.get("alpha", 1) == 1) or name in _IDENTITY
            ):
                raise _NotDiagonal(name)
            self.reduced = out
            self.derived[id(out)] = ("reduced", out)

    return Recorder


def record(function, arguments: dict, name: str):
    """Evaluate function(**arguments) once; the Trace if it is an elementwise chain in `name`, else None."""
    x = arguments[name]
    recorder = _mode_class()(x)
    try:
        with torch.no_grad(), recorder:
            out = function(**arguments)
    except Exception:  # not a chain, or the function fails here: the general path runs it and reports
        return None
    if not isinstance(out, torch.Tensor) or not (out.is_floating_point() or out.is_complex()):
        return None
    if out is x or recorder.role(out) == "body":
        if recorder.reduced is not None:
            return None  # a reduction whose value was dropped: the output is the body itself
        return Trace("elementwise", tuple(recorder.operations), out)
    if recorder.role(out) == "reduced" and out is recorder.reduced:
        return Trace(
            f"elementwise then {recorder.reduction}", tuple(recorder.operations), recorder.body, recorder.factor
        )
    return None


def estimates(probe, scheme: str, h, *, exact: bool = False):
    """The scheme's d phi / d x_i for every flat element i, or None where x's chain is not diagonal.

    `h` holds each element's absolute step; with `exact` each quotient divides by the shift the
    arithmetic really took, (x_i + s) - x_i. The evaluation at x establishes the chain; every
    shifted evaluation must repeat it exactly (same operations, same constant factor), else the
    estimate is abandoned and None tells the caller to take the general path. When
    `probe.track_rounding` is set, `probe.rounding` gets each element's rounding bound,
    eps |w_i| (|g_i(x+)| + |g_i(x-)|) / width (core/check/fd/error_bound.py).
    """
    x = probe.values[probe.name]
    base = record(probe.function, probe.arguments(x), probe.name)
    if base is None or base.factor.imag != 0:
        return None
    evaluations = [base]

    along_imaginary = getattr(probe, "imaginary_shift", False)  # a complex input's imaginary part

    def body(multiple: float, imaginary: bool = False):
        shift = (h * multiple).reshape(x.shape)
        imaginary = imaginary or along_imaginary
        point = x.to(torch.promote_types(x.dtype, torch.complex64)) + 1j * shift if imaginary else x + shift
        taken = shift
        if exact and along_imaginary:  # the part shifted: the imaginary part's step really taken
            moved = (point - x).imag
            taken = torch.where(moved == 0, shift, moved)
        elif (
            exact and not imaginary
        ):  # the shift really taken; a vanished one keeps its nominal size (0 / 2h, not 0 / 0)
            taken = torch.where(point == x, shift, (point - x).real if x.is_complex() else point - x)
        trace = record(probe.function, probe.arguments(point), probe.name)
        if trace is None or (trace.kind, trace.operations, trace.factor) != (base.kind, base.operations, base.factor):
            raise _NotDiagonal(f"the chain changed at the point shifted by {multiple} h")
        evaluations.append(trace)
        return trace.body.reshape(-1), taken.reshape(-1)

    v = probe.v.reshape(-1)
    weight = v if base.kind == "elementwise" else v[0] * base.factor.real
    track = probe.track_rounding
    precision = probe.values[probe.name].dtype  # error_bound.moved_outputs
    try:
        if scheme == "complex_step":
            value, _ = body(1.0, imaginary=True)
            result = (weight * value).imag / h
            rounding = _rounding(weight, value.imag, None, h) if track else None
        elif scheme == "forward":
            value, taken = body(1.0)
            centre = base.body.reshape(-1)
            result = _weighted(weight, value - centre) / taken
            rounding = _rounding(weight, value, centre, taken, precision) if track else None
        else:
            (plus, up), (minus, down) = body(1.0), body(-1.0)
            width = up - down
            result = _weighted(weight, plus - minus) / width
            rounding = _rounding(weight, plus, minus, width, precision) if track else None
            if scheme == "richardson":
                (half_plus, half_up), (half_minus, half_down) = body(0.5), body(-0.5)
                half = _weighted(weight, half_plus - half_minus) / (half_up - half_down)
                result = (4 * half - result) / 3
                if track:
                    half_rounding = _rounding(weight, half_plus, half_minus, half_up - half_down, precision)
                    rounding = (4 * half_rounding + rounding) / 3
    except _NotDiagonal:
        return None
    finally:
        probe.stats["forward_evaluations"] += len(evaluations)
    probe.structure = base.kind
    probe.rounding = rounding
    return result


def _weighted(weight, difference):
    """weight * difference; Re(conj(weight) * difference) where either is complex, the real loss of a
    complex output (core/check/record/complex_values.py)."""
    if not (weight.is_complex() or difference.is_complex()):
        return weight * difference
    return weight.real * difference.real + (
        weight.imag * difference.imag if weight.is_complex() and difference.is_complex() else 0
    )


def _rounding(weight, first, second, width, precision=None):
    """eps |w_i| (|first_i| + |second_i|) / |width_i| where they differ (|first_i| alone for the complex step),
    and also where they are equal, for body values in `precision`: element i moves its own body value, so equal
    values mean a change below their rounding (error_bound.moved_outputs)."""
    eps = torch.finfo(first.dtype).eps
    if second is None:
        magnitude = first.abs()
    else:
        magnitude = (first.abs() + second.abs()) * moved_outputs(first, second, precision)
    return eps * weight.abs() * magnitude / width.abs()


def element_magnitude(probe, flat_index: int):
    """|w_i g_i| at x, what element i's diagonal quotient rounds like; None if the chain is not diagonal."""
    x = probe.values[probe.name]
    trace = record(probe.function, probe.arguments(x), probe.name)
    if trace is None:
        return None
    v = probe.v.reshape(-1)
    weight = v[flat_index] if trace.kind == "elementwise" else v[0] * trace.factor.real
    return float(abs(weight * trace.body.reshape(-1)[flat_index]))
