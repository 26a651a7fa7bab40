"""The Python API: check a real Python callable, or a record, from a notebook or a script.

The commonest real gradient check is a custom `torch.autograd.Function` with a hand-written
backward; `check(MyFunction, grad=..., x=...)` runs it through the same core as every other
surface and, by default, records it in the notebook's ledger (expectation first). The result
shows the same expectation/observation table as the inline panel.

    from jupyterlab_gradcheck.api import check
    result = check(Cube, grad=[3.0, 12.0], x=[1.0, 2.0])
    result.passed, result.record["failure"]

`language="es"` shows the table and the summary in Spanish (default: `set_language()`, else the
locale environment); the record itself, like the ledger, stays English.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
from collections.abc import Callable
from typing import Any

from .core.check.record.spec import fixed_value
from .core.errors import SpecError
from .core.i18n import _, checked, localize
from .core.i18n import language as in_language
from .core.report.html_export import failure_sentence, record_html
from .core.values.form import PENDING, as_empty_value, holds_complex

# -------------------- api


class CheckResult:
    """A completed check: `.passed`, `.record`, and in a notebook the expectation/observation table."""

    def __init__(self, record: dict, *, ledger=None, attestation: dict | None = None, language: str | None = None):
        self.record = record
        #: The language of the summary and the table ("en", "es"), or None to follow the locale.
        self.language = None if language is None else checked(language)
        #: The Ledger it was written to, or None when it was run without one.
        self.ledger = ledger
        #: Ledger id, check id, seq and hash of the observation entry written (None without a
        #: ledger); the run displayed it as its own output, so a saved notebook binds its ledger.
        self.attestation = attestation

    @property
    def passed(self) -> bool:
        return bool(self.record.get("passed"))

    @property
    def failure(self) -> dict | None:
        """The first failed comparison with its worst element and diagnosis, or None."""
        return self.record.get("failure")

    @property
    def history(self) -> dict | None:
        """This check's history in the ledger (runs, failures kept, tolerance edits)."""
        if self.ledger is None:
            return None
        return self.ledger.checks().get(self.record["id"])

    def summary(self) -> str:
        """One line: the check, its verdict, and for a failure the worst element and diagnosis."""
        with in_language(self.language):
            if self.passed:
                return _("{id}: passed").format(id=self.record["id"])
            failure = self.failure
            if not failure:
                verdict = self.record["observations"]["torch_gradcheck"]
                return _("{id}: failed: torch_gradcheck {reason}").format(
                    id=self.record["id"], reason=localize(verdict.get("reason", ""))
                )
            if failure.get("index") is None and failure.get("abs_err") is None:  # no element: a backward that crashed
                return _("{id}: failed {comparison}; diagnosis {diagnosis}: {reason}").format(
                    id=self.record["id"],
                    comparison=failure["comparison"],
                    diagnosis=failure["diagnosis"],
                    reason=localize(failure["reason"]),
                )
            return _("{id}: failed {comparison} at {where}; diagnosis {diagnosis}: {reason}").format(
                id=self.record["id"],
                comparison=failure["comparison"],
                where=failure_sentence(failure),
                diagnosis=failure["diagnosis"],
                reason=localize(failure["reason"]),
            )

    def __repr__(self) -> str:
        return f"<CheckResult {self.summary()}>"

    def _repr_html_(self) -> str:
        with in_language(self.language):
            return record_html(self.record, history=self.history)


def check(
    fn: Callable | str,
    grad: Any = None,
    *,
    dtype: str | None = None,
    device: str | None = None,
    tolerance: dict | None = None,
    finite_difference: dict | None = None,
    grad_output: Any = None,
    origin: str = "",
    destination: str = "",
    id: str | None = None,
    justification: str | None = None,
    notebook: str | os.PathLike | None = None,
    ledger=None,
    language: str | None = None,
    fixed: dict | None = None,
    hessian: Any = None,
    shadow: bool = True,
    **inputs,
) -> CheckResult:
    """Check the gradient of `fn` at `inputs` against the expectation `grad`.

    `fn` is a callable taking the inputs as keyword arguments, a `torch.autograd.Function`
    subclass (its `apply` is checked), or an expression string. `grad` is the analytical
    gradient written first: a number, nested list, tensor, expression string, a callable of
    the inputs, or a mapping input name -> one of those. Without `grad`, a function that goes
    through custom Functions is checked against their own backward ("the backward of F", named
    with the SHA-256 of F's source); any other function is refused for lack of an expectation.
    A function returning a tuple or list of tensors is checked output by output: `grad` is then a
    Python tuple with one expectation per output (None for an output that is not differentiated;
    a list stays one value), `grad_output` a list with one entry per output, and every comparison
    and failure names its output.
    Inputs are numbers, nested lists or
    tensors (a tensor also gives the dtype and device when they are not named). `fixed=` maps the
    names of arguments `fn` is also given but not differentiated (ints, bools, tuples, None, tensors
    that do not require grad) to their values: every call gets them, the record keeps them. A keyword
    that is a setting (`rtol=`, `eps=`, a misspelt `dtype=`) and an integer input the backward gives no
    gradient for are refused in one line (api.py); an input with no elements is checked with
    nothing to compare for it.
    `hessian=` adds the second order: the expected Hessian (a matrix over the inputs flattened and
    concatenated in their order, a callable of the inputs, or "double_backward" for a custom
    Function's own) beside autograd's double backward, finite differences of the gradient and
    `torch.autograd.gradgradcheck`.
    A check in float32, float16, bfloat16 or complex64 also runs in float64 (complex128) where the code
    does, on the same point, and fails where that sees an error the low precision cannot (its
    `float64_shadow` block); `shadow=False` leaves that out.

    The check is recorded in the ledger of `notebook=` / `ledger=`, else of the notebook this
    kernel runs for; `ledger=False` runs it without recording. A tolerance that differs from
    the one the ledger holds needs `justification=`. `language=` ("en", "es") is the language
    of the result's summary and table.
    """
    with PENDING.holding():  # the blobs of its tensors wait for the check's appends
        refuse_settings(fn, inputs, list(inspect.signature(check).parameters))
        inputs_json, inferred_dtype, inferred_device = _inputs_as_values(inputs)
        record: dict[str, Any] = {
            "function": _held(fn, list(inputs), fixed) if fixed else _as_checkable(fn, list(inputs)),
            "inputs": inputs_json,
            "analytical_gradient": _expectation(grad),
            "dtype": dtype or inferred_dtype or "float64",
            "device": device or inferred_device or "cpu",
            "origin": origin,
            "destination": destination,
        }
        for key, value in (
            ("tolerance", tolerance),
            ("finite_difference", finite_difference),
            ("grad_output", _as_value(grad_output)),
            ("id", id),
            ("fixed", None if fixed is None else {k: _fixed_value(v) for k, v in fixed.items()}),
            ("hessian", _as_value(hessian)),
            ("shadow", None if shadow else False),
        ):
            if value is not None:
                record[key] = value
        if grad is None and callable(record["function"]):
            record["analytical_gradient"], record["origin"] = _backward_as_expectation(record, inputs)
        elif callable(record["function"]):
            _refuse_held_integers(record, inputs)
        return check_record(record, justification=justification, notebook=notebook, ledger=ledger, language=language)


def check_record(
    record: dict,
    *,
    justification: str | None = None,
    notebook: str | os.PathLike | None = None,
    ledger=None,
    language: str | None = None,
) -> CheckResult:
    """Run one check record (the seed record is accepted as written) and return its result."""
    from .kernel.kernel_run import open_ledger, run_attested

    language = None if language is None else checked(language)  # refused before anything runs
    target = None if ledger is False else open_ledger(notebook=notebook, ledger=ledger)
    completed, attestation = run_attested(record, target, justification=justification, notebook=notebook)
    return CheckResult(completed, ledger=target, attestation=attestation, language=language)


def _backward_as_expectation(record: dict, inputs: dict):
    """(expectation, origin) for a check written without `grad=`: the backward of the custom
    autograd Functions the function goes through (core/check/autograd/observations.py), or
    (None, origin) when it goes through none, so that the missing expectation is refused.

    Everything else in the record is validated first: bad input is refused before the one
    forward pass that finds the Functions."""
    from .core.check.autograd.observations import backward_expectation, backward_name, check_signature, custom_functions
    from .core.check.autograd.several_outputs import differentiable_outputs
    from .core.check.environment import available_devices
    from .core.check.record.spec import parse_spec, resolve_device
    from .core.errors import SpecError

    try:
        parse_spec(record)
    except SpecError as exc:
        if exc.field != "analytical_gradient":  # only the expectation may be missing here
            raise
    function, names = record["function"], list(inputs)
    check_signature(function, names)
    device = resolve_device(record["device"], available_devices())
    refuse_ungradiented_integers(function, inputs, record["dtype"], device)
    classes = custom_functions(function, inputs, record["dtype"], device)
    if not classes:
        return None, record["origin"]
    return (
        backward_expectation(
            function,
            names,
            classes,
            record.get("grad_output"),
            outputs=differentiable_outputs(function, inputs, record["dtype"], device),
        ),
        record["origin"] or backward_name(classes),
    )


def _refuse_held_integers(record: dict, inputs: dict) -> None:
    """SpecError for an integer input the backward gives no gradient for (api.py), the record validated first."""
    from .core.check.environment import available_devices
    from .core.check.record.spec import parse_spec, resolve_device

    if isinstance(record["function"], str) or not any(_integral(value) for value in inputs.values()):
        return  # nothing to probe (refuse_ungradiented_integers); the entry routine parses the record
    parse_spec(record)
    device = resolve_device(record["device"], available_devices())
    refuse_ungradiented_integers(record["function"], inputs, record["dtype"], device)


def _held(fn, input_names: list[str], fixed: dict):
    """`fn` (or a Function's `apply`) called with the inputs by name and the `fixed` objects themselves."""
    from .core.check.autograd.observations import check_signature

    if isinstance(fn, str) or not isinstance(fixed, dict) or any(name in input_names for name in fixed):
        return _as_checkable(fn, input_names)  # the record's own check names the problem
    checkable = _as_checkable(fn, input_names + [name for name in fixed if name not in input_names])
    if callable(checkable):
        check_signature(checkable, input_names + list(fixed))

    def held(**inputs):
        return checkable(**inputs, **fixed)

    held.__qualname__ = held.__name__ = getattr(checkable, "__qualname__", type(checkable).__name__)
    held.__wrapped__ = checkable  # its recorded source is fn's (inspect unwraps to it)
    return held


def _as_checkable(fn, input_names: list[str]):
    """A callable taking the inputs by name; an autograd Function becomes its `apply`."""
    import torch

    owner = getattr(fn, "__self__", None)
    if inspect.isclass(owner) and issubclass(owner, torch.autograd.Function) and getattr(fn, "__name__", "") == "apply":
        fn = owner
    if not (inspect.isclass(fn) and issubclass(fn, torch.autograd.Function)):
        return fn
    function_class = fn
    parameters = list(inspect.signature(function_class.forward).parameters)
    named = [p for p in parameters if p in input_names]
    order = named if sorted(named) == sorted(input_names) else input_names

    def apply(**values):
        return function_class.apply(*(values[name] for name in order))

    apply.__qualname__ = apply.__name__ = f"{function_class.__qualname__}.apply"
    apply.__wrapped__ = function_class  # its recorded source is the class's (inspect unwraps to it)
    return apply


def _expectation(grad):
    """The record's analytical_gradient: a tuple is one expectation per output (`{"outputs": [...]}`),
    anything else one expectation, as `_as_value` gives it."""
    if isinstance(grad, tuple):
        return {"outputs": [_as_value(item) for item in grad]}
    return _as_value(grad)


def _as_value(value):
    """Tensors (also inside a mapping or a list) as nested lists, or above INLINE_ELEMENTS elements as
    stored values in their own dtype (core/values/form.py); everything else unchanged."""
    import torch

    from .core.values.tensors import should_store, to_stored

    if isinstance(value, torch.Tensor):
        if should_store(value):
            return to_stored(value)  # no tolist: a 10^5-element list costs more than the check's JSON
        return fixed_value(value) if value.numel() else as_empty_value(value)
    if isinstance(value, dict):
        return {key: _as_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and any(isinstance(item, (torch.Tensor, dict, list, tuple)) for item in value):
        return [_as_value(item) for item in value]
    return value


def _fixed_value(value):
    """A held argument as the record keeps it: a tensor above INLINE_ELEMENTS elements as a stored value,
    anything else as `fixed_value` writes it."""
    import torch

    if isinstance(value, torch.Tensor) and value.numel():
        from .core.values.tensors import should_store, to_stored

        if should_store(value):
            return to_stored(value)
    return fixed_value(value)


def _inputs_as_values(inputs: dict) -> tuple[dict, str | None, str | None]:
    """(inputs as record values, dtype and device shared by the tensor inputs, or None)."""
    import torch

    dtypes, devices = set(), set()
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            _refuse_layout(name, value)
            dtypes.add(str(value.dtype).replace("torch.", ""))
            devices.add(str(value.device))
    if not dtypes and any(holds_complex(value) for value in inputs.values()):
        dtypes.add("complex128")  # Python complex numbers (core/values/form.py)
    return (
        {name: _as_value(value) for name, value in inputs.items()},
        dtypes.pop() if len(dtypes) == 1 else None,
        devices.pop() if len(devices) == 1 else None,
    )


def _refuse_layout(name: str, tensor) -> None:
    """SpecError for an input the check cannot perturb element by element: a sparse tensor (not checked
    yet), or one with a zero stride over more than one element (an expanded view), whose elements share
    memory, so that perturbing one perturbs them all; torch's gradcheck refuses the latter too."""
    import torch

    if tensor.layout != torch.strided:
        raise SpecError(
            "input {name} is a {layout} tensor, and sparse inputs are not checked yet: pass {name}.to_dense() "
            "to check the function of its dense values",
            name=name,
            layout=str(tensor.layout).replace("torch.", ""),
            field=name,
        )
    for dim, (size, stride) in enumerate(zip(tensor.shape, tensor.stride())):
        if stride == 0 and size > 1:
            raise SpecError(
                "input {name} has stride 0 in dimension {dim} (an expanded view, whose elements share "
                "memory), which torch.autograd.gradcheck refuses too: pass {name}.contiguous() to check its values",
                name=name,
                dim=dim,
                field=name,
            )


# -------------------- api arguments
# What `check()` takes as an input, and what it refuses before anything runs or is written.
#
# `check(fn, grad, **inputs)` takes every keyword it does not name as an input to differentiate. Two
# slips then read as something else:
#
# - a setting written as a keyword (`rtol=1e-3`, `eps=1e-6`, `dtpye="float32"`) would become a
#   second input, and the check would fail on a missing expectation. A name that is a setting of
#   torch's gradcheck or of a check record, or a near miss of one of `check()`'s own keywords, is
#   refused in one line that points at `tolerance=`, `finite_difference=` or the keyword meant,
#   unless the function itself takes an argument of that name;
# - an integer argument (`k=3`) would become a differentiable float input. When the function's
#   backward gives no gradient for it, it is refused in one line that says to hold it with `fixed=`.

#: Settings of a check, or of torch's gradcheck, that a caller may write as a keyword: where each is written.
SETTINGS = {
    "rtol": "tolerance={'rtol': ...}",
    "atol": "tolerance={'atol': ...}",
    "tol": "tolerance={'rtol': ..., 'atol': ...}",
    "tolerances": "tolerance={'rtol': ..., 'atol': ...}",
    "eps": "finite_difference={'step': ...}",
    "step": "finite_difference={'step': ...}",
    "h": "finite_difference={'step': ...}",
    "scheme": "finite_difference={'scheme': ...}",
    "mode": "finite_difference={'mode': ...}",
    "fast_mode": "finite_difference={'mode': 'projected'}",
    "fd": "finite_difference={...}",
}
#: Near misses of check()'s own keywords closer than this ratio (difflib) are refused as misspellings.
NEAR_MISS = 0.8


def refuse_settings(function, inputs: dict, keywords: list[str]) -> None:
    """SpecError for an input whose name is a setting or a misspelt keyword of check(), unless `function` takes it."""
    for name in inputs:
        if _takes(function, name):
            continue
        if name in SETTINGS:
            raise SpecError(
                "{name!r} is a setting, not an input: write it as {written}",
                name=name,
                written=SETTINGS[name],
                field=name,
            )
        meant = difflib.get_close_matches(name, [k for k in keywords if len(k) > 3], n=1, cutoff=NEAR_MISS)
        if meant and len(name) > 3:
            raise SpecError(
                "{name!r} is not a keyword of check(): did you mean {meant}=? (an input's name must differ from it)",
                name=name,
                meant=meant[0],
                field=name,
            )


def _takes(function, name: str) -> bool:
    """Whether `function` (an expression, a callable, an autograd Function) names an argument `name`."""
    if isinstance(function, str):
        return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", function) is not None
    target = getattr(function, "forward", function) if inspect.isclass(function) else function
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters and parameters[name].kind not in (inspect.Parameter.VAR_KEYWORD,)


def refuse_ungradiented_integers(function, inputs: dict, dtype: str, device: str) -> None:
    """SpecError for an integer input the function's backward gives no gradient for: it should be held fixed.

    Only a Python callable with an integer input (a Python int, or a tensor of an integer dtype) is
    probed: one forward and one backward pass with every input as a float leaf, as the check itself
    would take it. An integer input that does get a gradient (an exponent, say) stays an input."""
    import torch

    integers = [name for name, value in inputs.items() if _integral(value)]
    if isinstance(function, str) or not integers:
        return
    dtype_of = getattr(torch, dtype)
    leaves = {
        name: torch.as_tensor(value, dtype=dtype_of, device=device).requires_grad_(True)
        for name, value in inputs.items()
    }
    try:
        output = function(**leaves)
        parts = [o for o in (output if isinstance(output, (list, tuple)) else [output]) if _tracked(o, torch)]
        if not parts:
            return
        total = sum(part.real.sum() if part.is_complex() else part.sum() for part in parts)
        grads = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
    except Exception:  # the check itself runs the function and reports what goes wrong
        return
    for (name, value), grad in zip(leaves.items(), grads):
        if name in integers and grad is None:
            raise SpecError(
                "{name} is an integer and the backward gives no gradient for it: hold it with fixed={{{name!r}: {value}}}",
                name=name,
                value=_written(inputs[name]),
                field=name,
            )


def _tracked(value, torch) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _integral(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    dtype = getattr(value, "dtype", None)
    return (
        dtype is not None
        and hasattr(value, "is_floating_point")
        and not (value.is_floating_point() or value.is_complex())
    )


def _written(value):
    """The value as the caller would write it in fixed=: a number, or a tensor's nested list."""
    if hasattr(value, "tolist"):
        listed = value.tolist()
        return listed if len(str(listed)) <= 40 else "..."
    return value
