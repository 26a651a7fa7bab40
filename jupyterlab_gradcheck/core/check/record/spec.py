"""Parse and validate a check declaration (the record contract in docs/contracts.md).

`parse_spec` accepts the seed record verbatim and the full form, refuses bad input with a
one-line `SpecError` naming the field, and imports no torch: the server validates requests
with it before anything is queued or written.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import DeviceUnavailable, SpecError
from ...expr.parser import DEFAULT_LIMITS, RESERVED_NAMES, Expression, Limits, parse_expression
from ...expr.shapes import broadcast, infer_shapes
from ...i18n import N_, Message
from ...jsonio import encodable
from ...values.form import (
    as_empty_value,
    as_record_value,
    expectation_value,
    grad_output_value,
    is_complex_value,
    is_empty_value,
    is_stored_value,
    numel,
    refuse_unsupported,
    shape_of,
    single_value,
    stored_from_list,
    stored_mapping,
    stored_shape,
    without_summaries,
)
from .source import FIELD as FUNCTION_SOURCE
from .source import function_source

# -------------------- rules
# The numerical rules a record was made under.
#
# The default steps and tolerances, the rounding bounds, the re-estimation, the path each input takes and the
# observations a check makes are one set of rules (docs/tolerances.md), named by the version in which they last
# changed: every new record says `"rules": RULES`. A change to them ships with a CHANGELOG.md entry and a version bump,
# and moves RULES to that version; it never adds a second code path. A record made under earlier rules is replayed
# under today's (core/ledger/replay.py).
#
# Records of 0.1.0 carry a numbered `policy` field instead (an executed record with neither field predates it). They
# are named as made under the rules of 0.1.0, except those of its last numbered set, which became the rules of 0.2.0;
# those of 0.3.0 and 0.4.0 (CHANGELOG.md) followed.

#: The version in which the rules of new checks last changed (package.json's version at that change).
RULES = "0.4.0"
#: The record field that names them.
FIELD = "rules"
#: The field 0.1.0's records name their policy in: accepted and not acted on.
LEGACY_FIELD = "policy"
#: The policy of 0.1.0 whose rules became those of 0.2.0, and the rules it names.
LAST_POLICY = 7
LAST_POLICY_RULES = "0.2.0"
#: The rules every other record of 0.1.0 was made under.
FIRST_RULES = "0.1.0"


def rules_of(record: dict) -> str:
    """The rules a completed record was made under: its `rules`; for a record of 0.1.0, 0.2.0 when it names
    0.1.0's last numbered set, else 0.1.0 (also for an executed record that names neither field)."""
    if record.get(FIELD) is not None:
        return str(record[FIELD])
    policy = record.get(LEGACY_FIELD)
    if policy == LAST_POLICY and not isinstance(policy, bool):
        return LAST_POLICY_RULES
    return FIRST_RULES


# -------------------- defaults
# Default tolerances and finite-difference steps, which depend on the dtype.
#
# The reasoning, written down once (docs/tolerances.md repeats it for readers):
#
# - Analytical vs autograd, and pass-to-pass comparisons: both sides evaluate an exact
#   derivative, so they differ only by rounding in a handful of operations. The default allows
#   a few hundred units in the last place of the dtype (rtol) plus an absolute floor for
#   gradients that are exactly zero.
# - Finite difference vs autograd: a central difference with step h has truncation error
#   ~h^2 and rounding error ~eps/h, minimised at h ~ eps^(1/3) where the error is ~eps^(2/3)
#   (forward: h ~ eps^(1/2), error ~eps^(1/2); Richardson on central differences: h ~ eps^(1/5),
#   error ~eps^(4/5); complex step: no subtraction, error ~eps). The default tolerance is 100x
#   that floor, because the constants in front (|f|, |f'''|) are rarely 1.
# - float16 and bfloat16 cannot resolve a difference quotient at all (eps ~1e-3 and ~8e-3), so
#   their finite differences are taken in float32 on the same function and the tolerance is
#   that of the half-precision autograd result.
# - complex128 and complex64 are pairs of float64 and float32 numbers: their eps, steps and
#   tolerances are those of their parts (core/values/form.py has the convention).

#: Shifted copies per element for each scheme: the signed multiples of h evaluated.
SHIFTS = {"central": (1.0, -1.0), "forward": (1.0,), "complex_step": (1.0,), "richardson": (1.0, -1.0, 0.5, -0.5)}
#: Input elements above which torch.autograd.gradcheck runs in its fast mode (core/check/autograd/observations.py).
FAST_MODE_ABOVE = 1000

EPS = {
    "float64": 2.220446049250313e-16,
    "float32": 1.1920928955078125e-07,
    "float16": 0.0009765625,
    "bfloat16": 0.0078125,
    "complex128": 2.220446049250313e-16,
    "complex64": 1.1920928955078125e-07,
}

DTYPES = tuple(EPS)
#: The dtypes an expression can be checked in: expressions are real-valued (core/values/form.py).
EXPRESSION_DTYPES = ("float64", "float32", "float16", "bfloat16")

#: Dtype in which finite differences are evaluated for each declared dtype.
FD_DTYPE = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float32",
    "bfloat16": "float32",
    "complex128": "complex128",
    "complex64": "complex64",
}

SCHEMES = ("central", "forward", "complex_step", "richardson")

#: Below this many stacked copies a plain loop is cheaper than vmap's tracing.
LOOP_BELOW = 24
#: Relative agreement required between a batched and a separate evaluation of one copy: far
#: above the rounding of a different kernel (~1e-14), far below a step's effect (~1e-6).
BATCH_AGREEMENT = 1e-9

#: finite_difference.mode: "auto" (the default) compares every element unless that is predicted to
#: take over a second, then projects; "exhaustive" always compares every element; "projected"
#: compares one random direction and localises a failure (core/check/fd/finite_difference.py).
FD_MODES = ("auto", "exhaustive", "projected")

#: Exponent p such that the best achievable finite-difference error is ~eps^p, and the
#: exponent q of the step h ~ eps^q that reaches it.
_FLOOR_EXPONENT = {"central": 2 / 3, "forward": 1 / 2, "richardson": 4 / 5, "complex_step": 1.0}
_STEP_EXPONENT = {"central": 1 / 3, "forward": 1 / 2, "richardson": 1 / 5, "complex_step": 1.0}


def comparison_tolerance(dtype: str) -> dict:
    """Default `{rtol, atol}` for analytical vs autograd and pass-to-pass comparisons."""
    eps = EPS[dtype]
    rtol = {"float64": 1e-7, "float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2, "complex128": 1e-7, "complex64": 1e-4}[
        dtype
    ]
    return {"rtol": rtol, "atol": max(10 * eps, rtol * 1e-3)}


def repeat_tolerance(dtype: str) -> dict:
    """`{rtol, atol}` within which identical backward calls (same point, same grad_output) must agree.

    Zero in double precision, as torch's gradcheck (`nondet_tol=0`): a deterministic backward gives the
    same bits every time. In a lower precision, where gradcheck does not run and atomic adds on a GPU
    legitimately reorder sums, the pass-to-pass comparison tolerance of the dtype.
    """
    if dtype in ("float64", "complex128"):
        return {"rtol": 0.0, "atol": 0.0}
    return comparison_tolerance(dtype)


def fd_floor(dtype: str, scheme: str) -> float:
    """The theoretical best relative error of `scheme` in the dtype FD is evaluated in."""
    return EPS[FD_DTYPE[dtype]] ** _FLOOR_EXPONENT[scheme]


def fd_tolerance(dtype: str, scheme: str) -> dict:
    """Default `{rtol, atol}` for finite difference vs autograd.

    rtol is 100 x the floor. atol is an absolute floor for gradients that are zero in exact
    arithmetic (autograd's rounding residue there): 100 x the floor in float64 and complex128
    (3.7e-9 central), the floor itself in float32 and complex64 (2.4e-5 central), where 100 x
    (2.4e-3) would let a gradient element under ~0.25 be 1 % wrong unseen. Each element's rounding
    bound (core/check/fd/steps.py) covers what the differenced magnitude adds."""
    if dtype in ("float16", "bfloat16"):
        return dict(comparison_tolerance(dtype))
    floor = fd_floor(dtype, scheme)
    return {"rtol": 100 * floor, "atol": floor if EPS[dtype] > EPS["float64"] else 100 * floor}


def fd_step(dtype: str, scheme: str) -> float:
    """Default step, relative to max(1, |x|) element by element."""
    return EPS[FD_DTYPE[dtype]] ** _STEP_EXPONENT[scheme]


# -------------------- devices
# The resolution of a record's `device` field against the devices present (core/check/environment.py
# `available_devices` lists them where torch runs; the server asks its workers).


def resolve_device(requested: str, devices: list[dict]) -> str:
    """The concrete device for `requested`; DeviceUnavailable with the reason when absent."""
    present = [d["id"] for d in devices if d["available"]]
    if requested == "auto":
        for prefix in ("cuda", "mps"):
            match = next((d for d in present if d.startswith(prefix)), None)
            if match:
                return match
        return "cpu"
    if requested == "cuda":
        requested = "cuda:0"
    if requested in present:
        return requested
    kind = requested.split(":")[0]
    absent = next((d for d in devices if d["id"].split(":")[0] == kind and not d["available"]), None)
    reason = absent["reason"] if absent else Message("present devices are {present}", present=", ".join(present))
    raise DeviceUnavailable(
        "device {requested!r} is not available: {reason}", requested=requested, reason=reason, field="device"
    )


# -------------------- observation names
# What each of the four autograd observations is, in words, as a record and a report name it.
#
# Torch-free, so that a report (core/report/html_export.py) names the observations without loading the
# module that makes them (core/check/autograd/observations.py).

#: Each observation's name -> what it holds (translated when shown).
DESCRIPTIONS = {
    "backward_pass_1": N_("x.grad after one forward pass and one backward()"),
    "backward_pass_2_accumulated": N_(
        "x.grad after a second forward pass and backward() with no clearing in between: "
        "backward() adds into .grad, so a pure function gives twice pass 1"
    ),
    "after_clear_none": N_("x.grad after the deliberate clearing x.grad = None and a fresh pass"),
    "autograd_grad": N_("return value of torch.autograd.grad(y, x, grad_output); it does not write .grad"),
}


# -------------------- inputs field
# The record's `inputs` field: names a function can use, and values whose shapes fit the limits.

#: An input's name: a letter, then letters, digits or _ (at most 32 characters).
INPUT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")


def check_inputs(inputs: dict, limits: Limits) -> dict[str, list[int]]:
    """Each input's shape; SpecError for no inputs, too many, a name that is not allowed, or too many elements."""
    if not inputs:
        raise SpecError('no inputs: declare at least one, e.g. "x": 3', field="inputs")
    if len(inputs) > limits.max_inputs:
        raise SpecError("more than {max_inputs} inputs", max_inputs=limits.max_inputs, field="inputs")
    shapes = {}
    for name, value in inputs.items():
        if not isinstance(name, str) or not INPUT_NAME.match(name) or name in RESERVED_NAMES:
            raise SpecError(
                "input name {name!r} is not allowed (a letter, then letters, digits or _, not a function name)",
                name=name,
                field="inputs",
            )
        shapes[name] = shape_of(value, f"inputs.{name}", limits)
    total = sum(numel(s) for s in shapes.values())
    if limits.max_input_elements is not None and total > limits.max_input_elements:
        raise SpecError(
            "inputs have {total} elements; the limit is {max_input_elements}",
            total=total,
            max_input_elements=limits.max_input_elements,
            field="inputs",
        )
    return shapes


# -------------------- expectation field
# The record's `analytical_gradient` field: each input's expectation, and whether its shape can fit.
#
# The expectation is written first (principle 1). Per input it is an expression of the language, a
# Python callable (through the API) or a value; with several inputs it maps each input to its own.
# An expression's shape is inferred without torch (core/expr/shapes.py) and must broadcast to its
# input's shape.


def analytical_field(raw, inputs: dict, shapes: dict, limits: Limits) -> dict:
    """Each input's expectation: an expression parsed against the inputs, a callable, or a value whose shape
    fits the input; SpecError naming the field otherwise."""
    if raw is None:
        raise SpecError(
            "analytical_gradient is missing: write the expectation before running the check",
            field="analytical_gradient",
        )
    names = list(inputs)
    mapping = isinstance(raw, dict) and not single_value(raw, names)
    if mapping:
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise SpecError(
                "analytical_gradient names {unknown!r}, which is not an input",
                unknown=unknown[0],
                field=f"analytical_gradient.{unknown[0]}",
            )
        missing = [n for n in names if n not in raw]
        if missing:
            raise SpecError(
                "analytical_gradient gives no value for input {missing!r}",
                missing=missing[0],
                field="analytical_gradient",
            )
        per_input = raw
    elif len(names) == 1:
        per_input = {names[0]: raw}
    else:
        raise SpecError(
            "analytical_gradient must map each input to its gradient when there are several inputs",
            field="analytical_gradient",
        )
    result = {}
    for name, value in per_input.items():
        field_name = "analytical_gradient" if not mapping else f"analytical_gradient.{name}"
        if isinstance(value, str):
            result[name] = parse_expression(value, inputs, limits=limits, field_name=field_name)
        elif callable(value):
            result[name] = value  # a Python callable from the API, called with the inputs
        else:
            shape = shape_of(value, field_name, limits)
            if shape and shape != shapes[name] and numel(shape) != 1:
                raise SpecError(
                    "{field_name} has shape {shape} but input {name!r} has shape {input_shape}",
                    field_name=field_name,
                    shape=shape,
                    name=name,
                    input_shape=shapes[name],
                    field=field_name,
                )
            result[name] = value
    return result


def check_shapes(expression: Expression, analytical: dict, shapes: dict, limits: Limits):
    """The function's ShapeReport; SpecError when a shape cannot work (core.expr.shapes)."""
    report = infer_shapes(expression, shapes, limit=limits.max_intermediate_elements)
    for name, written in analytical.items():
        if isinstance(written, Expression):
            field_name = "analytical_gradient" if len(analytical) == 1 else f"analytical_gradient.{name}"
            produced = infer_shapes(written, shapes, field_name, limits.max_intermediate_elements).shape
            target = tuple(shapes[name])
            try:
                fits = broadcast(produced, target) == target
            except ValueError:
                fits = False
            if not fits:
                raise SpecError(
                    "{field_name} gives shape {produced}, which does not fit input {name!r} of shape {target}",
                    field_name=field_name,
                    produced=list(produced),
                    name=name,
                    target=list(target),
                    field=field_name,
                )
    return report


# -------------------- hessian field
# The record's `hessian` field: what a second-order expectation may be, checked before anything runs.
#
# A matrix (n x n for the inputs' n elements together), a callable of the inputs giving one, or the
# text "double_backward" for a custom Function's own double backward. The second-order observation
# itself (core/check/autograd/second_order.py) needs torch; this field does not.

#: The expectation text of "the custom Function's own double backward".
DOUBLE_BACKWARD = "double_backward"


def parse_hessian(raw, names: list[str], numel: int):
    """The record's `hessian` expectation, validated before anything runs (None when the check has none);
    `numel` is the number of elements of the inputs together."""
    if raw is None:
        return None
    if isinstance(raw, list):  # rectangular and numeric, as any record value (SpecError naming the problem)
        count = math.prod(shape_of(raw, "hessian"))
        if count != numel * numel:
            refuse_wrong_size(names, count, numel)
    if raw == DOUBLE_BACKWARD or callable(raw) or isinstance(raw, list):
        return raw
    raise SpecError('hessian must be a matrix, a callable of the inputs or "double_backward"', field="hessian")


def refuse_wrong_size(names: list[str], count: int, n: int):
    """Refuse a Hessian of `count` elements for inputs of `n` elements together (it must have n x n)."""
    if len(names) == 1:
        raise SpecError(
            "hessian for {name!r} has {count} elements; an input of {n} elements has an {n} x {n} Hessian",
            name=names[0],
            count=count,
            n=n,
            field="hessian",
        )
    raise SpecError(
        "hessian for the inputs {names} has {count} elements; their {n} elements together have an {n} x {n} Hessian",
        names=", ".join(names),
        count=count,
        n=n,
        field="hessian",
    )


# -------------------- tolerance fields
# The tolerance fields of a check declaration: `tolerance` and `finite_difference`.
#
# Split from core/check/record/spec.py, which parses the rest of the record: each field is checked
# and given its dtype's default (docs/tolerances.md gives the reasoning), and a relative
# tolerance too wide to mean anything is refused in one line wherever a tolerance is written.


def number_field(value, field_name: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(
            "{field_name} must be a number, got {value}",
            field_name=field_name,
            value=json.dumps(value)[:40],
            field=field_name,
        )
    if isinstance(value, int) and abs(value) > 2**63:  # beyond float's exact range; float() may overflow
        raise SpecError(
            "{field_name} must be a finite number of at most 2**63, got an integer of about {digits} digits",
            field_name=field_name,
            digits=int(value.bit_length() * math.log10(2)) + 1,
            field=field_name,
        )
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        if positive:
            raise SpecError(
                "{field_name} must be a positive finite number, got {value}",
                field_name=field_name,
                value=value,
                field=field_name,
            )
        raise SpecError(
            "{field_name} must be a non-negative finite number, got {value}",
            field_name=field_name,
            value=value,
            field=field_name,
        )
    return float(value)


def tolerance_field(raw, default: dict, field_name: str, max_rtol: float) -> tuple[dict, bool]:
    if raw is None:
        return dict(default), False
    if not isinstance(raw, dict):
        raise SpecError("{field_name} must be an object with rtol and atol", field_name=field_name, field=field_name)
    allowed = {"rtol", "atol"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SpecError(
            "{field_name}: unknown field {unknown!r} (allowed: {choices})",
            field_name=field_name,
            unknown=unknown[0],
            choices=", ".join(sorted(allowed)),
            field=f"{field_name}.{unknown[0]}",
        )
    result = dict(default)
    explicit = False
    for key in ("rtol", "atol"):
        if key in raw and raw[key] is not None:
            result[key] = number_field(raw[key], f"{field_name}.{key}")
            explicit = True
    refuse_meaningless_rtol(result["rtol"], f"{field_name}.rtol", max_rtol)
    return result, explicit


def refuse_meaningless_rtol(rtol: float, field_name: str, max_rtol: float) -> None:
    """SpecError for a relative tolerance of `max_rtol` or more (see Limits.max_rtol)."""
    if rtol >= max_rtol:
        raise SpecError(
            "{field_name} {rtol} is {limit} or more: a relative tolerance that large accepts any "
            "gradient of the right sign, so the check would check nothing (the limit is an "
            "instructor's setting)",
            field_name=field_name,
            rtol=rtol,
            limit=max_rtol,
            field=field_name,
        )


def finite_difference_field(raw, dtype: str, limits: Limits) -> tuple[dict, bool]:
    if raw is not None and not isinstance(raw, dict):
        raise SpecError("finite_difference must be an object", field="finite_difference")
    raw = raw or {}
    scheme = raw.get("scheme", "central")
    if scheme not in SCHEMES:
        raise SpecError(
            "finite_difference.scheme {scheme!r} is not one of {choices}",
            scheme=scheme,
            choices=", ".join(SCHEMES),
            field="finite_difference.scheme",
        )
    step = raw.get("step")
    if step is not None and step != "adaptive":
        step = number_field(step, "finite_difference.step", positive=True)
    tolerance, explicit = tolerance_field(
        {k: v for k, v in raw.items() if k in ("rtol", "atol")} if raw else None,
        fd_tolerance(dtype, scheme),
        "finite_difference",
        limits.max_rtol,
    )
    unknown = sorted(set(raw) - {"scheme", "step", "rtol", "atol", "mode"})
    if unknown:
        raise SpecError(
            "finite_difference: unknown field {unknown!r} (allowed: atol, mode, rtol, scheme, step)",
            unknown=unknown[0],
            field=f"finite_difference.{unknown[0]}",
        )
    mode = _fd_mode(raw, scheme, step)
    return {"scheme": scheme, "step": step, **tolerance, **({"mode": mode} if mode else {})}, explicit


def _fd_mode(raw: dict, scheme: str, step) -> str | None:
    """finite_difference.mode as written (None when absent: auto), refused unless it names a mode that can run."""
    if "mode" not in raw:
        return None
    mode = raw["mode"]
    if mode not in FD_MODES:
        raise SpecError(
            "finite_difference.mode {mode!r} is not one of {choices}",
            mode=mode,
            choices=", ".join(FD_MODES),
            field="finite_difference.mode",
        )
    if mode == "projected" and (scheme != "central" or step is not None):
        raise SpecError(
            "finite_difference.mode projected takes central differences at the default step, "
            "not scheme {scheme!r} with step {step!r}",
            scheme=scheme,
            step=step,
            field="finite_difference.mode",
        )
    return mode


# -------------------- per output fields
# The record fields of a check of a function with several outputs, parsed without torch.
#
# A Python function may return a tuple or list of tensors (core/check/autograd/several_outputs.py checks it output
# by output). Its expectation is then written per output, `analytical_gradient = {"outputs": [e_0,
# e_1, ...]}`, each e_k what a one-output check accepts (None for an output that is not
# differentiated), and its grad_output may be a list with one entry per output. How many outputs
# there are is known only once the function runs; here each entry is checked as written.


def is_per_output(raw, names: list) -> bool:
    """Whether an analytical_gradient is the per-output form `{"outputs": [...]}` (an input named
    `outputs` keeps the mapping's reading)."""
    return isinstance(raw, dict) and set(raw) == {"outputs"} and "outputs" not in names


def per_output(raw, names: list, is_callable: bool, limits: Limits, parse_one: Callable) -> list | None:
    """Each output's expectation parsed by `parse_one` (None stays None), or None when `raw` is not the
    per-output form; SpecError for the form where it cannot apply or an entry that cannot be read."""
    if not is_per_output(raw, names):
        return None
    if not is_callable:
        raise SpecError(
            "analytical_gradient.outputs is for a Python function that returns several outputs; an "
            "expression has one output",
            field="analytical_gradient.outputs",
        )
    entries = raw["outputs"]
    if not isinstance(entries, (list, tuple)) or not entries:
        raise SpecError(
            "analytical_gradient.outputs must be a list with one expectation per output",
            field="analytical_gradient.outputs",
        )
    if len(entries) > limits.max_inputs:
        raise SpecError(
            "analytical_gradient.outputs has more than {max_inputs} entries",
            max_inputs=limits.max_inputs,
            field="analytical_gradient.outputs",
        )
    return [None if entry is None else parse_one(entry) for entry in entries]


def grad_output_shape(grad_output, limits: Limits, is_callable: bool) -> list[int] | None:
    """The shape of a grad_output value; for a callable, a list that is no one value (a ragged list,
    or one holding None) is one grad_output per output, each checked here: its shape is then None."""
    try:
        return shape_of(grad_output, "grad_output", limits)
    except SpecError:
        if not is_callable or not isinstance(grad_output, list):
            raise
    for index, entry in enumerate(grad_output):
        if entry is not None:
            shape_of(entry, f"grad_output[{index}]", limits)
    return None


# -------------------- fixed arguments
# Arguments a Python callable is given but not differentiated: held fixed, and recorded.
#
# `check(fn, x=..., fixed={"k": 3, "causal": True, "shape": (2, 3), "w": weights})` passes `k`,
# `causal`, `shape` and `w` to every call of `fn` (the Python API binds the objects themselves) and
# compares the gradient of the inputs alone, as `torch.autograd.gradcheck` leaves non-tensor
# arguments and tensors that do not require grad alone. The record keeps them under `fixed` as
# JSON values (a tuple or a tensor as a nested list; a tensor above 256 elements as a stored value,
# core/values/form.py), so that a reader sees what the function was
# evaluated with and the check's id changes with them. An expression has no held arguments.

#: Elements a recorded fixed value may hold (a tensor held fixed is kept whole in the record).
MAX_FIXED_ELEMENTS = 100_000


def fixed_value(value):
    """The JSON form of one held argument (or of any tensor the Python API is given): tuples and tensors as
    nested lists, the rest as given. Any tensor is read, autograd's zero placeholder included."""
    if hasattr(value, "detach") and hasattr(value, "tolist"):
        value = value.detach()
        if getattr(value, "_is_zerotensor", lambda: False)():
            # autograd's zero placeholder (the gradient of sgn, say) has no storage to read: its zeros
            return _zeros(list(value.shape))
        return value.to("cpu").tolist()
    if isinstance(value, (list, tuple)):
        return [fixed_value(item) for item in value]
    return value


def _zeros(shape: list[int]):
    return 0.0 if not shape else [_zeros(shape[1:]) for _ in range(shape[0])]


def _count(value) -> int:
    """Values a fixed argument writes into the record: a stored value writes its hash and summary, so one."""
    return sum(_count(item) for item in value) if isinstance(value, list) else 1


def _plain_argument(value) -> bool:
    if isinstance(value, list):
        return all(_plain_argument(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def parse_fixed(raw, inputs: dict, is_callable: bool) -> dict:
    """The record's `fixed` mapping, validated; {} when absent."""
    if raw is None or raw == {}:
        return {}
    if not is_callable:
        raise SpecError("fixed holds the held arguments of a Python callable; an expression has none", field="fixed")
    if not isinstance(raw, dict):
        raise SpecError("fixed must map argument names to values", field="fixed")
    for name, value in raw.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError("fixed argument name {name!r} is not a Python identifier", name=name, field="fixed")
        if name in inputs:
            raise SpecError(
                "{name!r} is both an input and a fixed argument: an argument is either differentiated or held fixed",
                name=name,
                field=f"fixed.{name}",
            )
        if is_stored_value(value):  # a tensor above 256 elements, by its hash (form.py)
            stored_shape(value, f"fixed.{name}")
        elif not _plain_argument(value):
            raise SpecError(
                "fixed.{name} must be a number, true/false, null, a string or a nested list of them",
                name=name,
                field=f"fixed.{name}",
            )
    if sum(_count(value) for value in raw.values()) > MAX_FIXED_ELEMENTS:
        raise SpecError("fixed holds more than {limit} values", limit=MAX_FIXED_ELEMENTS, field="fixed")
    return dict(raw)


# -------------------- spec

RULES_FIELD = FIELD

INPUT_FIELDS = (
    "id",
    "function",
    "inputs",
    "dtype",
    "device",
    "analytical_gradient",
    "grad_output",
    "tolerance",
    "finite_difference",
    "origin",
    "destination",
    "observed_gradient",
    "executed",
    "fixed",
    "hessian",
    "shadow",
)
#: Fields a completed record carries; accepted on input (a record can be re-run) and ignored. The rules a record
#: names (or a record of 0.1.0's policy) are among them: a check always runs under today's (core/check/record/spec.py).
OUTPUT_FIELDS = (
    RULES_FIELD,
    LEGACY_FIELD,
    "passed",
    "observations",
    "comparisons",
    "failure",
    "failures",
    "symbolic",
    "environment",
    "step_sweep",
    "failed_to_run",
    "replay",
    "function_source",
    "second_order",
    "function_modes",
    "float64_shadow",
)
DEVICE_PATTERN = re.compile(r"^(cpu|cuda(:\d{1,2})?|mps|auto)\Z")  # \Z: `$` would let "cpu\n" through


@dataclass
class CheckSpec:
    """A validated check declaration, ready for the engine."""

    id: str
    function: str | Callable
    inputs: dict[str, Any]
    shapes: dict[str, list[int]]
    dtype: str
    device: str
    analytical_gradient: Any
    analytical: dict[str, Any]  #: per input: a value, or an Expression
    tolerance: dict
    finite_difference: dict
    grad_output: Any = None
    origin: str = ""
    destination: str = ""
    expression: Expression | None = None
    tolerance_explicit: bool = False
    fd_tolerance_explicit: bool = False
    #: Elements of the largest tensor one evaluation builds (inputs or, for an expression,
    #: any intermediate): finite differences size their batches by it.
    work_elements: int = 1
    #: A Python callable's arguments held fixed, as JSON values (core/check/record/spec.py).
    fixed: dict = field(default_factory=dict)
    #: The expected Hessian (core/check/autograd/second_order.py), or None: no second-order check.
    hessian: Any = None
    #: For a callable returning several outputs: per output, its expectation parsed as `analytical`
    #: (None for an output that is not differentiated), from `analytical_gradient = {"outputs": [...]}`.
    outputs_analytical: list | None = None
    #: Whether a check in a low precision is also run in float64 (core/check/engine.py, "float64 shadow").
    shadow: bool = True
    extra: dict = field(default_factory=dict)

    @property
    def function_text(self) -> str:
        """The function as written, or a callable's qualified name."""
        if isinstance(self.function, str):
            return self.function
        return getattr(self.function, "__qualname__", None) or repr(self.function)

    def to_dict(self) -> dict:
        """The normalised record, not yet executed."""
        written = self.analytical_gradient
        if _holds_callable(written):
            written = _callable_text(written)
        return {
            "id": self.id,
            "function": self.function_text,
            "inputs": self.inputs,
            "dtype": self.dtype,
            "device": self.device,
            "analytical_gradient": written,
            "grad_output": self.grad_output,
            "tolerance": dict(self.tolerance),
            "finite_difference": dict(self.finite_difference),
            "origin": self.origin,
            "destination": self.destination,
            "observed_gradient": None,
            "executed": False,
            RULES_FIELD: RULES,
            **({"fixed": self.fixed} if self.fixed else {}),
            **({} if self.shadow else {"shadow": False}),
            **(
                {"hessian": _callable_text(self.hessian) if callable(self.hessian) else self.hessian}
                if self.hessian is not None
                else {}
            ),
            **({} if isinstance(self.function, str) else {FUNCTION_SOURCE: function_source(self.function)}),
        }


def _holds_callable(value) -> bool:
    """Whether an expectation is or holds (in a mapping or a per-output list) a Python callable."""
    if isinstance(value, dict):
        return any(_holds_callable(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_callable(v) for v in value)
    return callable(value)


def _callable_text(value):
    if isinstance(value, dict):
        return {k: _callable_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and _holds_callable(value):
        return [_callable_text(v) for v in value]
    if callable(value):
        return f"<callable {getattr(value, '__qualname__', type(value).__name__)}>"
    return value


def _plain(value):
    """A tensor or array given through the Python API, as the nested list a record holds."""
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        if as_empty_value(value) is not value:
            return as_empty_value(value)  # written by its shape: a nested list cannot say (0, 5)
        if hasattr(value, "detach"):
            return fixed_value(value)  # any tensor, autograd's zero placeholder included
        return value.tolist()
    return value


def _text(record: dict, key: str, limits: Limits) -> str:
    value = record.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpecError("{key} must be a string, got {type}", key=key, type=type(value).__name__, field=key)
    if len(value) > limits.max_text_length:
        raise SpecError(
            "{key} is longer than {max_text_length} characters",
            key=key,
            max_text_length=limits.max_text_length,
            field=key,
        )
    if not encodable(value):
        raise SpecError("{key} holds a lone surrogate, which is not Unicode text", key=key, field=key)
    return value


def _split_inputs(record: dict, function_text: str | None, limits: Limits):
    """(inputs, expression): inputs from the top level or `inputs`; the function checked first.

    The function is parsed against every candidate name before unknown top-level fields are
    reported, so a forbidden construct is named as such rather than as an unused field.
    """
    top_level = {k: v for k, v in record.items() if k not in INPUT_FIELDS and k not in OUTPUT_FIELDS}
    nested = record.get("inputs")
    if nested is not None and not isinstance(nested, dict):
        raise SpecError("inputs must be an object mapping names to values", field="inputs")
    if nested and top_level:
        first = next(iter(top_level))
        raise SpecError(
            "unknown field {first!r}: inputs are given under 'inputs', so nothing else may name one",
            first=first,
            field=first,
        )
    inputs = dict(nested or top_level)
    expression = None
    if function_text is not None:
        candidates = [k for k in inputs if isinstance(k, str) and INPUT_NAME.match(k)]
        expression = parse_expression(function_text, candidates, limits=limits)
        if not nested:
            for key in top_level:
                if key not in expression.names:
                    raise SpecError(
                        "unknown field {key!r}: not part of the record and not a name in the function",
                        key=key,
                        field=key,
                    )
    return inputs, expression


def make_check_id(function_text: str, inputs: dict, dtype: str, device: str, fixed: dict | None = None) -> str:
    """A stable name: the function, then a digest of what it is evaluated at (held arguments included)."""
    canonical = json.dumps(
        {
            "function": function_text,
            "inputs": without_summaries(inputs),  # a stored tensor by its hash (form.py)
            "dtype": dtype,
            "device": device,
            **({"fixed": without_summaries(fixed)} if fixed else {}),
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:8]
    return f"{''.join(function_text.split())[:80]}@{digest}"


def parse_spec(record, *, limits: Limits = DEFAULT_LIMITS) -> CheckSpec:
    """Validate one check declaration and return it normalised; SpecError on bad input."""
    if isinstance(record, CheckSpec):
        return record
    if not isinstance(record, dict):
        raise SpecError("a check record must be a JSON object, got {type}", type=type(record).__name__)
    function = record.get("function")
    if function is None:
        raise SpecError('function is missing: write the expression to differentiate, e.g. "x*x"', field="function")
    is_callable = callable(function) and not isinstance(function, str)
    if not is_callable and not isinstance(function, str):
        raise SpecError("function must be a string, got {type}", type=type(function).__name__, field="function")
    inputs, expression = _split_inputs(record, None if is_callable else function, limits)
    inputs = {k: as_record_value(_plain(v)) for k, v in inputs.items()}
    shapes = check_inputs(inputs, limits)
    empty = [name for name, value in inputs.items() if is_empty_value(value)]
    if expression is not None and empty:
        raise SpecError(
            "input {name!r} has no elements: an expression needs values to differentiate (a Python callable "
            "is checked on its other inputs)",
            name=empty[0],
            field=f"inputs.{empty[0]}",
        )
    if expression is not None and not expression.names:
        raise SpecError("function uses none of the inputs, so it has no gradient to check", field="function")
    dtype = record.get("dtype", "complex128" if any(map(is_complex_value, inputs.values())) else "float64")
    if dtype not in DTYPES:
        raise SpecError(
            "dtype {dtype!r} is not one of {choices}", dtype=dtype, choices=", ".join(DTYPES), field="dtype"
        )
    device = record.get("device", "cpu")
    if not isinstance(device, str) or not DEVICE_PATTERN.match(device):
        raise SpecError("device {device!r} is not cpu, cuda, cuda:N, mps or auto", device=device, field="device")
    written = record.get("analytical_gradient")
    outputs_analytical = per_output(
        written,
        list(inputs),
        is_callable,
        limits,
        lambda entry: analytical_field(expectation_value(entry, list(inputs)), inputs, shapes, limits),
    )
    if outputs_analytical is None:
        written = expectation_value(written, list(inputs))
        analytical = analytical_field(written, inputs, shapes, limits)
    else:
        written = {"outputs": [None if e is None else expectation_value(e, list(inputs)) for e in written["outputs"]]}
        analytical = {}
    tolerance, tolerance_explicit = tolerance_field(
        record.get("tolerance"), comparison_tolerance(dtype), "tolerance", limits.max_rtol
    )
    fd, fd_explicit = finite_difference_field(record.get("finite_difference"), dtype, limits)
    if fd["scheme"] == "complex_step" and expression is not None and not expression.complex_analytic:
        refused = ", ".join(expression.non_analytic_functions())
        raise SpecError(
            "finite_difference.scheme complex_step needs a complex-analytic function; {refused} "
            "is not (use central or richardson)",
            refused=refused,
            field="finite_difference.scheme",
        )
    output, work = None, sum(numel(s) for s in shapes.values())
    if expression is not None:
        report = check_shapes(expression, analytical, shapes, limits)
        output, work = report.shape, max(work, report.largest)
    refuse_unsupported(
        dtype,
        inputs,
        analytical,
        expression=expression,
        scheme=fd["scheme"],
        mode=fd.get("mode"),
        hessian=record.get("hessian"),
    )
    grad_output = grad_output_value(_plain(record.get("grad_output")))
    if grad_output is not None:
        given = grad_output_shape(grad_output, limits, is_callable)
        if output is not None and given != list(output) and numel(given) != 1:
            raise SpecError(
                "grad_output has shape {given} but the output has shape {output}",
                given=given,
                output=list(output),
                field="grad_output",
            )
    for flag in ("executed", "shadow"):
        if flag in record and not isinstance(record[flag], bool):
            raise SpecError("{flag} must be true or false", flag=flag, field=flag)
    fixed = parse_fixed(record.get("fixed"), inputs, is_callable)
    function_text = function if isinstance(function, str) else getattr(function, "__qualname__", repr(function))
    check_id = record.get("id")
    if check_id is None:
        check_id = make_check_id(function_text, inputs, dtype, device, fixed)
    elif (
        not isinstance(check_id, str)
        or not check_id.strip()
        or len(check_id) > 200
        or not check_id.isprintable()
        or not encodable(check_id)
    ):
        raise SpecError("id must be a printable string of 1 to 200 characters", field="id")
    # a long list becomes a stored value once the id is made from it as written (form.py)
    inputs = {name: stored_from_list(value) for name, value in inputs.items()}
    if not (isinstance(written, dict) and "outputs" in written):
        written = stored_mapping(written)
    return CheckSpec(
        id=check_id,
        function=function,
        inputs=inputs,
        shapes=shapes,
        dtype=dtype,
        device=device,
        analytical_gradient=written,
        analytical=analytical,
        tolerance=tolerance,
        finite_difference=fd,
        grad_output=grad_output,
        origin=_text(record, "origin", limits),
        destination=_text(record, "destination", limits),
        expression=expression,
        tolerance_explicit=tolerance_explicit,
        fd_tolerance_explicit=fd_explicit,
        work_elements=work,
        fixed=fixed,
        hessian=parse_hessian(record.get("hessian"), list(inputs), sum(numel(s) for s in shapes.values())),
        outputs_analytical=outputs_analytical,
        shadow=record.get("shadow", True),
    )
