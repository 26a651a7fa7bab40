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

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from .check.record.admission import estimate_cost, resolve_and_admit
from .check.record.spec import CheckSpec, parse_spec
from .errors import DeviceUnavailable, GradcheckError, JustificationRequired, LedgerError, OverBudget, SpecError
from .expr.parser import DEFAULT_LIMITS, Limits
from .ledger.binding import refresh_binding
from .ledger.reader import HISTORY_KEY
from .ledger.store import Ledger
from .values.blobs import referenced_shas, require_blobs, store_dir_for
from .values.form import PENDING, without_summaries

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
    from .check.autograd.custom_functions import check_signature
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
    """A check parsed, placed and admitted: the spec, its device, and its predicted seconds."""

    spec: CheckSpec
    device: str
    seconds: float


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
    seconds = estimate_cost(spec).seconds(admission.rate)
    if admission.timeout is not None and seconds > admission.timeout:
        cost = estimate_cost(spec)
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
    return Admitted(spec, device, seconds)


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
                        completed = run_here(spec, sweep=sweep, devices=admission.devices)
                    else:
                        completed = runner(spec, spec.to_dict(), None)
                    return Outcome(completed, None, spec)
                if before_declare is not None:
                    before_declare(spec)
                attempt = call(LedgeredRun.declare, ledger, spec, justification)
                try:
                    if runner is None:
                        completed = run_here(attempt.spec, sweep=sweep, devices=admission.devices)
                    else:
                        completed = runner(attempt.spec, attempt.spec_dict, attempt.expectation)
                except BaseException as exc:  # the attempt is kept whatever stopped it
                    call(attempt.failed, exc)
                    raise
                entry = call(attempt.observed, completed)
                return Outcome(completed, entry, attempt.spec)
    finally:
        PENDING.discard(staged)
