"""The ledger-aware run: write the expectation, run the check, record exactly one outcome.

Every surface that records a check (the CLI's `run --ledger/--notebook`, the server, the
kernel's widget and `check()`) goes through `LedgeredRun`, so the order that makes a check
evidence is kept in one place: the expectation is in the ledger before the engine starts, and
the observation that follows refers to it by `seq`; an attempt that raises, for whatever
reason, is recorded as failed to run with that reason before the error goes on. The CLI and
the kernel run the check in their own process (`record_run`); the server drives the same
steps around its worker pool.

A ledger holds one current tolerance per check. A re-run that writes an explicit tolerance
different from it is refused (change it with `jupyter gradcheck tolerance ... --justification`);
a re-run that writes none takes the ledger's. A re-run with a different analytical gradient
is allowed and recorded as an `expectation_change` (with `after_observation: true` once the
check has run), so a revised hand derivation stays visible.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..check.record.spec import CheckSpec, parse_spec
from ..errors import GradcheckError, SpecError
from ..values.blobs import require_blobs, store_dir_for
from ..values.form import PENDING, without_summaries
from .binding import refresh_binding
from .reader import HISTORY_KEY
from .store import Ledger

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
    from ..check.autograd.custom_functions import check_signature
    from ..check.autograd.several_outputs import check_outputs_fit
    from ..check.environment import available_devices
    from ..check.record.spec import resolve_device

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
        from ..check.engine import run_check

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
