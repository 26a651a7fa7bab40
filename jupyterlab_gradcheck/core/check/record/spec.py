"""Parse and validate a check declaration (the record contract in docs/contracts.md).

`parse_spec` accepts the seed record verbatim and the full form, refuses bad input with a
one-line `SpecError` naming the field, and imports no torch: the server validates requests
with it before anything is queued or written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import SpecError
from ...expr.limits import DEFAULT_LIMITS, Limits
from ...expr.parser import Expression, parse_expression
from ...jsonio import encodable
from . import defaults
from .callable_source import FIELD as FUNCTION_SOURCE
from .callable_source import function_source
from .complex_values import (
    as_record_value,
    expectation_value,
    grad_output_value,
    is_complex_value,
    refuse_unsupported,
)
from .empty_values import as_empty_value, is_empty_value
from .expectation_field import analytical_field, check_shapes
from .fixed_arguments import fixed_value, parse_fixed
from .hessian_field import parse_hessian
from .inputs_field import INPUT_NAME, check_inputs
from .listed_values import stored_from_list, stored_mapping
from .per_output_fields import grad_output_shape, per_output
from .record_values import numel
from .rules import FIELD as RULES_FIELD
from .rules import LEGACY_FIELD, RULES
from .stored_values import without_summaries
from .tolerance_fields import finite_difference_field, tolerance_field

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
)
#: Fields a completed record carries; accepted on input (a record can be re-run) and ignored. The rules a record
#: names (or a record of 0.1.0's policy) are among them: a check always runs under today's (core/check/record/rules.py).
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
    #: A Python callable's arguments held fixed, as JSON values (core/check/record/fixed_arguments.py).
    fixed: dict = field(default_factory=dict)
    #: The expected Hessian (core/check/autograd/second_order.py), or None: no second-order check.
    hessian: Any = None
    #: For a callable returning several outputs: per output, its expectation parsed as `analytical`
    #: (None for an output that is not differentiated), from `analytical_gradient = {"outputs": [...]}`.
    outputs_analytical: list | None = None
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
            "inputs": without_summaries(inputs),  # a stored tensor by its hash (stored_values.py)
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
    if dtype not in defaults.DTYPES:
        raise SpecError(
            "dtype {dtype!r} is not one of {choices}", dtype=dtype, choices=", ".join(defaults.DTYPES), field="dtype"
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
        record.get("tolerance"), defaults.comparison_tolerance(dtype), "tolerance", limits.max_rtol
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
    for flag in ("executed",):
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
    # a long list becomes a stored value once the id is made from it as written (listed_values.py)
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
    )
