"""The one entry routine: a check from its record to its appended outcome, for every surface.

`run_spec` takes a check record (JSON, or Python arguments already gathered into one) through
the same steps wherever it comes from: parse once, place it on a device, admit it (memory, and
the predicted time where a timeout applies), refuse a Python callable that cannot take its
inputs, stage its stored values (their blobs wait, pinned, until the appends that name them),
declare its expectation in the ledger, run it, and append exactly one outcome: the observation,
or, when the run raised, the attempt as failed to run with its reason. The CLI, the kernel (the
inline widget and `check()`), and the server all call it; what differs between them is only
*where the check runs* (`runner`: this process, or a worker of the server's pool), *when the
declaration may start* (`gate`: the server waits for a place at a worker first), and *how an
error is reported*, which is the table `REPORTED` below.

A ledger holds one current tolerance per check. A re-run that writes an explicit tolerance
different from it is refused (change it with `jupyter gradcheck tolerance ... --justification`);
a re-run that writes none takes the ledger's. A re-run with a different analytical gradient
is allowed and recorded as an `expectation_change` (with `after_observation: true` once the
check has run), so a revised hand derivation stays visible.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from .check.record.spec import FAST_MODE_ABOVE, SHIFTS, CheckSpec, parse_spec, resolve_device
from .errors import DeviceUnavailable, GradcheckError, JustificationRequired, LedgerError, OverBudget, SpecError
from .expr.parser import DEFAULT_LIMITS, Limits
from .ledger.binding import refresh_binding
from .ledger.store import HISTORY_KEY, Ledger
from .values.blobs import referenced_shas, require_blobs, store_dir_for
from .values.form import PENDING, without_summaries

# -------------------- admission
# What a check will cost before it runs, from its shapes and the path its inputs will take.
#
# A server with a timeout must refuse, before anything is written, a check that cannot finish
# within it, and keep heavy checks from taking every worker. Both need the work known in advance.
# The work of a check is dominated by its finite differences: an input whose Jacobian is observed
# to be diagonal (an elementwise chain, optionally summed; see `structure.py`) costs a handful of
# evaluations whatever its size, and any other input costs one evaluation per shifted copy of
# each of its elements. Each evaluation builds tensors up to `work_elements`. The estimate counts
# element evaluations, a lower bound on the real work: it predicts the diagonal path only where
# the written expression is such a chain, which the engine would also observe.

# -------------------- cost estimate

#: Calls that map element i to element i, keeping the shape of a same-shaped argument.
_ELEMENTWISE_CALLS = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "exp",
        "log",
        "log1p",
        "sqrt",
        "tanh",
        "sigmoid",
        "abs",
        "relu",
        "softplus",
        "logsigmoid",
        "clamp",
        "where",
        "maximum",
        "minimum",
        "pow",
    }
)
#: Full reductions a diagonal chain may end in (see diagonal.REDUCTIONS).
_REDUCTIONS = frozenset({"sum", "mean"})
#: Evaluations of the diagonal path: both shifts of all elements, the base and a refinement.
DIAGONAL_EVALUATIONS = 8
#: Evaluations the embedded `torch.autograd.gradcheck` adds in its fast mode (a few products).
GRADCHECK_FAST_EVALUATIONS = 4


@dataclass(frozen=True)
class Cost:
    """The predicted work of one check."""

    #: Evaluations of the function: finite differences and the embedded gradcheck.
    evaluations: int
    #: Element evaluations: evaluations times the elements of the largest tensor built.
    element_evaluations: int
    #: Per input, "diagonal" (a few evaluations) or "general" (one per shifted element).
    paths: dict

    def seconds(self, rate: float) -> float:
        """The time the work takes at `rate` element evaluations per second."""
        return self.element_evaluations / rate


def estimate_cost(spec) -> Cost:
    """The predicted work of a validated CheckSpec (see the module docstring)."""
    sizes = {name: math.prod(shape) for name, shape in spec.shapes.items()}
    diagonal = _diagonal_inputs(spec)
    shifts = len(SHIFTS.get(spec.finite_difference.get("scheme"), SHIFTS["central"]))
    evaluations, paths = 1, {}
    for name, size in sizes.items():
        if name in diagonal:
            paths[name] = "diagonal"
            evaluations += DIAGONAL_EVALUATIONS
        else:
            paths[name] = "general"
            evaluations += shifts * size
    total = sum(sizes.values())
    # gradcheck's slow mode perturbs every element both ways; its fast mode a few products.
    evaluations += 2 * total if total <= FAST_MODE_ABOVE else GRADCHECK_FAST_EVALUATIONS
    return Cost(evaluations, evaluations * max(1, spec.work_elements), paths)


def _diagonal_inputs(spec) -> set[str]:
    """The inputs the engine will take on the diagonal path, predicted from the expression:
    those whose shape is the shape of an elementwise body that is the output or the operand of
    one full sum or mean (with constant factors around it). A callable predicts none."""
    expression = getattr(spec, "expression", None)
    if expression is None:
        return set()
    body = _strip_reduction(expression.tree.body)
    if body is None or not _elementwise(body):
        return set()
    names = {node.id for node in ast.walk(body) if isinstance(node, ast.Name)}
    shapes = [tuple(spec.shapes[name]) for name in names if name in spec.shapes]
    if not shapes:
        return set()
    widest = max(shapes, key=lambda shape: (math.prod(shape), len(shape)))
    return {name for name in names if tuple(spec.shapes.get(name, ())) == widest}


def _strip_reduction(node: ast.AST) -> ast.AST | None:
    """The body under constant factors and one full sum or mean; the node itself if there is none."""
    while True:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)) and _constant(node.right):
            node = node.left
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _constant(node.left):
            node = node.right
        else:
            break
    name = _call_name(node)
    if name in _REDUCTIONS:
        if node.keywords or len(_operands(node)) != 1:
            return None
        return _operands(node)[0]
    return node


def _elementwise(node: ast.AST) -> bool:
    """Whether every operation under `node` is elementwise (no reduction, product or index)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.UnaryOp):
        return _elementwise(node.operand)
    if isinstance(node, ast.BinOp):
        return not isinstance(node.op, ast.MatMult) and _elementwise(node.left) and _elementwise(node.right)
    if isinstance(node, ast.Compare):
        return _elementwise(node.left) and all(_elementwise(c) for c in node.comparators)
    if isinstance(node, ast.Call) and _call_name(node) in _ELEMENTWISE_CALLS:
        return all(_elementwise(arg) for arg in _operands(node)) and all(
            _constant(keyword.value) for keyword in node.keywords
        )
    return False


def _call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _operands(call: ast.Call) -> list[ast.AST]:
    """A call's tensor arguments: a method's receiver first (`x.sum()`), then its arguments."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Name) and receiver.id == "torch":
        receiver = None
    return ([receiver] if receiver is not None else []) + list(call.args)


def _constant(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    return isinstance(node, ast.Constant)


# -------------------- memory admission
# How many elements a check may have: what its device's memory holds, not a CPU-sized constant.
#
# A check keeps several tensors the size of its inputs at once: the inputs and their leaves, the
# expectation, four backward observations and the finite-difference estimate, the shifted copies and
# outputs of the evaluations in flight, the embedded gradcheck's own, and the comparisons' temporaries,
# plus the stored copies of the large values on their way to the ledger's blob store. `WORKING_COPIES`
# counts them (measured: see tests/core/check/test_memory_admission.py); the largest tensor the
# function builds (`work_elements`, from the written expression's shapes) is held a few times over as
# well. A check whose estimate exceeds the free memory of its device is refused before anything runs or
# is written, with the numbers, so a card with 139 GiB takes 10^7 elements and a laptop refuses what
# would swap.
#
# Torch-free: the free memory comes with the device list (core/check/environment.py
# `available_devices` where torch runs; the server asks its workers).

#: Input-sized tensors alive at the peak of a check (see the module docstring). Measured peaks of a
#: whole ledgered check at 2-3x10^6 float64 elements: 32-36 copies (elementwise) and 48-49 (banded);
#: this bound leaves a quarter more.
WORKING_COPIES = 56
#: Copies of the largest intermediate the function builds that a check holds at once (the base and
#: shifted evaluations, and autograd's saved tensors).
INTERMEDIATE_COPIES = 6
#: Bytes per element of each dtype a record may name.
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


class OverMemory(SpecError):
    """A check that would not fit in its device's free memory: bad input, refused before it runs."""

    code = "over_memory"


def required_bytes(elements: int, work_elements: int, dtype: str) -> int:
    """Bytes a check of `elements` input elements, building tensors of up to `work_elements`, holds at its peak."""
    size = DTYPE_BYTES.get(dtype, 8)
    return size * (WORKING_COPIES * elements + INTERMEDIATE_COPIES * max(work_elements, elements))


def elements_that_fit(free_bytes: int, dtype: str) -> int:
    """The most input elements of an elementwise check that `free_bytes` holds."""
    size = DTYPE_BYTES.get(dtype, 8)
    return max(0, free_bytes // (size * (WORKING_COPIES + INTERMEDIATE_COPIES)))


def admit_memory(spec, device: str, devices: list[dict], fraction: float = 1.0) -> None:
    """OverMemory when `spec`, run on `device`, needs more than `fraction` of that device's free memory.

    A device entry without `free_bytes` (a kind whose memory torch cannot read), or a fraction of 0,
    admits anything: the run itself then fails with torch's out-of-memory error, kept as a failed
    attempt like any other."""
    entry = next((d for d in devices if d.get("id") == device), None)
    free = None if entry is None else entry.get("free_bytes")
    if free is None or fraction <= 0:
        return
    free = int(free * fraction)
    elements = sum(math.prod(shape) for shape in spec.shapes.values())
    needed = required_bytes(elements, getattr(spec, "work_elements", 1), spec.dtype)
    if needed > free:
        raise OverMemory(
            "inputs have {elements} elements in {dtype}: the check needs about {needed} at once, and {device} "
            "has {free} free (at most {fit} elements fit)",
            elements=elements,
            dtype=spec.dtype,
            needed=_gib(needed),
            device=device,
            free=_gib(free),
            fit=elements_that_fit(free, spec.dtype),
            field="inputs",
        )


def resolve_and_admit(spec, devices: list[dict], fraction: float = 1.0) -> str:
    """The concrete device of `spec` (core/check/record/spec.py), once `fraction` of its free memory is
    known to hold the check."""
    device = resolve_device(spec.device, devices)
    admit_memory(spec, device, devices, fraction)
    return device


def _gib(count: int) -> str:
    return f"{count / 2**30:.2f} GiB"


# -------------------- run

#: The CheckSpec attribute that says whether a target's tolerance was written by the user.
EXPLICIT_ATTR = {"tolerance": "tolerance_explicit", "finite_difference": "fd_tolerance_explicit"}


def ledger_spec_dict(spec: CheckSpec) -> dict:
    """The normalised record as the ledger stores it (a callable is named, not stored)."""
    return spec.to_dict()


def apply_ledger_tolerance(spec: CheckSpec, history: dict | None) -> CheckSpec:
    """The spec with the ledger's current tolerances; SpecError when it contradicts them."""
    if not history:
        return spec
    changes = {}
    for target, key in HISTORY_KEY.items():
        explicit_attr = EXPLICIT_ATTR[target]
        current = history.get(key)
        if current is None:
            continue
        block = getattr(spec, target)
        written = {"rtol": block["rtol"], "atol": block["atol"]}
        if getattr(spec, explicit_attr):
            if written != current:
                raise SpecError(
                    "check {id!r}: {target} rtol={rtol:g} atol={atol:g} differs from the ledger's "
                    "current rtol={current_rtol:g} atol={current_atol:g}; change it with `jupyter gradcheck tolerance "
                    "--check {id} --rtol R --atol A --justification TEXT` (nothing was run or written)",
                    id=spec.id,
                    target=target,
                    rtol=written["rtol"],
                    atol=written["atol"],
                    current_rtol=current["rtol"],
                    current_atol=current["atol"],
                    field=f"{target}.rtol",
                )
        elif written != current:
            changes[target] = {**block, **current}
    return dataclasses.replace(spec, **changes) if changes else spec


def declare(ledger: Ledger, parsed: CheckSpec, justification: str | None = None) -> tuple[CheckSpec, dict, dict]:
    """Write the expectation of a check about to run; return (spec as run, as recorded, entry).

    The ledger's current tolerance applies (an explicit contradicting one is refused before
    anything is written), and an analytical gradient that differs from the recorded one is
    first recorded as an `expectation_change`, carrying `justification` when given (the
    honest correction a grader does not penalise). The history is read and the entries written
    under one exclusive lock, so no other writer's entry can come in between. A stored value
    whose blob is neither pending nor in the ledger's store is refused before the ledger is opened.
    """
    require_blobs(store_dir_for(ledger.path), ledger_spec_dict(parsed))
    with ledger.locked() as held:
        history = held.history(parsed.id, copy=False)  # only read, and only inside this block
        parsed = apply_ledger_tolerance(parsed, history)
        spec_dict = ledger_spec_dict(parsed)
        if (
            history
            and history["expectation"] is not None
            and without_summaries(history["analytical_gradient"]) != without_summaries(spec_dict["analytical_gradient"])
        ):
            held.change_expectation(
                parsed.id, spec_dict["analytical_gradient"], via="rerun", justification=justification
            )
        return parsed, spec_dict, held.record_expectation(spec_dict)


def refuse_bad_callable(spec, devices: list | None = None):
    """The parsed spec, or SpecError before anything is written: a callable that cannot take the
    inputs, or whose outputs the expectation or grad_output does not fit, is bad input, not a failed run."""
    from .check.autograd.observations import check_signature
    from .check.autograd.several_outputs import check_outputs_fit
    from .check.environment import available_devices
    from .check.record.spec import resolve_device

    parsed = parse_spec(spec)
    device = resolve_device(parsed.device, available_devices() if devices is None else devices)
    if not parsed.expression:
        check_signature(parsed.function, list(parsed.inputs))
        check_outputs_fit(parsed, device)
    return parsed


def failure_reason(exc: BaseException) -> str:
    """What a failed-to-run entry says of the error that stopped a run: a project error by its code
    and message (as the server answers it), anything else by its type and text."""
    if isinstance(exc, GradcheckError):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class LedgeredRun:
    """One attempt at a check in a ledger: its expectation is written; one outcome follows.

    `declare` writes the expectation (and any expectation change) under the ledger's lock;
    then exactly one of `observed` (the completed record) or `failed` (the error that stopped
    the run) appends the outcome and refreshes the notebook's binding.
    """

    ledger: Ledger
    spec: CheckSpec  #: the check as it runs: the ledger's current tolerance applied
    spec_dict: dict  #: the check as the ledger records it
    expectation: dict  #: the expectation entry the outcome refers to

    @classmethod
    def declare(cls, ledger: Ledger, parsed: CheckSpec, justification: str | None = None) -> LedgeredRun:
        """Write the expectation of `parsed` (see `declare`) and return the open attempt."""
        spec, spec_dict, expectation = declare(ledger, parsed, justification)
        return cls(ledger, spec, spec_dict, expectation)

    def observed(self, record: dict) -> dict:
        """Append the completed record as this attempt's observation; return its entry."""
        entry = self.ledger.record_observation(record, self.expectation["seq"])
        refresh_binding(self.ledger)
        return entry

    def run(self, *, sweep: bool | None = None, devices: list | None = None) -> tuple[dict, dict]:
        """Run the check in this process and append its outcome: (record, observation entry).

        An error raised by the run is recorded as failed to run and re-raised, so the attempt is
        never lost."""
        from .check.engine import run_check

        with PENDING.holding():  # the run's blobs wait for the observation's append
            try:
                record = run_check(self.spec, sweep=sweep, devices=devices)
            except BaseException as exc:
                self.failed(exc)
                raise
            return record, self.observed(record)

    def failed(self, exc: BaseException) -> dict:
        """Append this attempt as failed to run, with the reason `exc` gives; return its entry."""
        entry = self.ledger.record_failed_to_run(self.spec_dict, self.expectation["seq"], failure_reason(exc))
        refresh_binding(self.ledger)
        return entry


def run_and_record(
    spec, ledger: Ledger, *, sweep: bool | None = None, devices: list | None = None, refused: bool = False
) -> dict:
    """Record the expectation, run the check here, record the observation; return the record.

    Bad input (SpecError, including an unavailable device) raises before anything is written;
    `refused=True` says the caller has already passed the spec through `refuse_bad_callable`.
    """
    parsed = parse_spec(spec) if refused else refuse_bad_callable(spec, devices)
    return LedgeredRun.declare(ledger, parsed).run(sweep=sweep, devices=devices)[0]


# -------------------- the entry routine

#: How each surface reports an error that `run_spec` raises: the CLI's exit code, the REST API's HTTP
#: status, and what the Python API and the widget do. The most specific class comes first. A failed
#: comparison is never an error: it is a finding, recorded, and `passed: false` (CLI exit 1, HTTP 200).
#: Errors only a server meets (paths, the worker pool) are in server/errors.py, with their statuses.
REPORTED = (
    # error class, CLI exit, HTTP status, Python API / widget
    (JustificationRequired, 2, 400, "raised as JustificationRequired; the widget asks for the text"),
    (DeviceUnavailable, 2, 400, "raised as DeviceUnavailable (a SpecError); the widget shows the line"),
    (OverBudget, 2, 400, "raised as OverBudget (a SpecError); the widget shows the line"),
    (SpecError, 2, 400, "raised as SpecError: nothing was run or written"),
    (LedgerError, 2, 500, "raised as LedgerError: the ledger was not changed"),
    (GradcheckError, 2, 500, "raised"),
)


def exit_code(exc: BaseException) -> int:
    """The CLI's exit code for an error `run_spec` raised (REPORTED)."""
    return next((code for kind, code, _status, _api in REPORTED if isinstance(exc, kind)), 2)


def http_status(exc: BaseException) -> int:
    """The REST API's status for an error `run_spec` raised (REPORTED); 500 for anything else."""
    return next((status for kind, _code, status, _api in REPORTED if isinstance(exc, kind)), 500)


@dataclass(frozen=True)
class Admission:
    """What the surface that calls `run_spec` admits a check against.

    `devices` are those the runner can use (as `available_devices` lists them: the server's come from
    its workers); None means this process's. `timeout` (seconds), with `rate` (element evaluations
    per second), refuses a check predicted to take longer, before anything is written; None admits
    any. `memory_fraction` is the share of the device's free memory one check may take."""

    devices: list | None = None
    limits: Limits = DEFAULT_LIMITS
    default_device: str | None = None
    memory_fraction: float = 1.0
    timeout: float | None = None
    rate: float = 1e8


@dataclass(frozen=True)
class Admitted:
    """A check parsed, placed and admitted: the spec, its device, its predicted seconds, and the
    devices it was placed among (read once per check: the engine places it among the same)."""

    spec: CheckSpec
    device: str
    seconds: float
    devices: list


def admit(record, admission: Admission = Admission()) -> Admitted:
    """Parse `record` once, place it on a device, and admit it; SpecError (or a subclass) before
    anything runs or is written: bad input, an unavailable device, a check that does not fit in the
    device's memory or in the timeout, a Python callable that cannot take its inputs."""
    if isinstance(record, dict) and admission.default_device is not None:
        record = {"device": admission.default_device, **record}
    spec = parse_spec(record, limits=admission.limits)
    devices = admission.devices
    if devices is None:
        from .check.environment import available_devices

        devices = available_devices()
    device = resolve_and_admit(spec, devices, admission.memory_fraction)
    cost = estimate_cost(spec)
    seconds = cost.seconds(admission.rate)
    if admission.timeout is not None and seconds > admission.timeout:
        general = [name for name, path in cost.paths.items() if path == "general"]
        raise OverBudget(
            "this check would need about {seconds} s ({evaluations} evaluations of up to {elements} "
            "elements), beyond the {timeout} s timeout; inputs differenced one element at a time: "
            "{general}; use fewer elements",
            seconds=f"{seconds:.0f}",
            evaluations=cost.evaluations,
            elements=spec.work_elements,
            timeout=f"{admission.timeout:g}",
            general=", ".join(general) or "none",
            field="check",
        )
    refuse_bad_callable(spec, devices)
    return Admitted(spec, device, seconds, devices)


def run_here(spec: CheckSpec, *, sweep: bool | None = None, devices: list | None = None) -> dict:
    """The runner of the CLI, the kernel and the server's worker: the engine, in this process."""
    from .check.engine import run_check

    return run_check(spec, sweep=sweep, devices=devices)


@dataclass
class Outcome:
    """What `run_spec` returns: the completed record, and with a ledger the observation entry."""

    record: dict
    entry: dict | None
    spec: CheckSpec


def run_spec(
    record,
    ledger=None,
    *,
    admission: Admission = Admission(),
    runner: Callable | None = None,
    gate: Callable | None = None,
    ledger_call: Callable | None = None,
    before_declare: Callable | None = None,
    sweep: bool | None = None,
    justification: str | None = None,
    forget_staged: bool = False,
) -> Outcome:
    """One check from its record to its appended outcome: parse, place, admit, stage, declare,
    run, append (see the module). Raises before anything is written for bad input.

    - `runner(spec, spec_dict, expectation)` computes the completed record (default: `run_here`, with
      `sweep`); `expectation` is the declared entry, None without a ledger.
    - `gate(admitted)` is a context manager entered after admission and before the declaration: the
      server takes its place at a worker there, so a full pool refuses with nothing written.
    - `ledger_call(function, *args)` runs a ledger write (default: directly); the server passes its
      per-ledger serialisation.
    - `before_declare(spec)` runs once the check is admitted and before its expectation is written
      (the kernel's justified tolerance change).
    - `forget_staged` drops the record's pending blobs once its outcome is appended (the server, which
      holds many requests' blobs); a kernel keeps them within the pending cache's budget, for display.
    """
    call = ledger_call or (lambda function, *args: function(*args))
    staged: list = []
    try:
        # the record's own long lists, put in the pending cache as it is parsed, wait for its appends
        with PENDING.holding():
            admitted = admit(record, admission)
            spec = admitted.spec
            if forget_staged:  # pinned past the hold, then forgotten once the outcome is appended
                staged = referenced_shas({"inputs": spec.inputs, "analytical_gradient": spec.analytical_gradient})
                PENDING.pin(staged)
            with gate(admitted) if gate is not None else contextlib.nullcontext():
                if ledger is None:
                    if runner is None:
                        completed = run_here(spec, sweep=sweep, devices=admitted.devices)
                    else:
                        completed = runner(spec, spec.to_dict(), None)
                    return Outcome(completed, None, spec)
                if before_declare is not None:
                    before_declare(spec)
                attempt = call(LedgeredRun.declare, ledger, spec, justification)
                try:
                    if runner is None:
                        completed = run_here(attempt.spec, sweep=sweep, devices=admitted.devices)
                    else:
                        completed = runner(attempt.spec, attempt.spec_dict, attempt.expectation)
                except BaseException as exc:  # the attempt is kept whatever stopped it
                    call(attempt.failed, exc)
                    raise
                entry = call(attempt.observed, completed)
                return Outcome(completed, entry, attempt.spec)
    finally:
        PENDING.discard(staged)
