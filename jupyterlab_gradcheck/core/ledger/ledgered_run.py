"""The ledger-aware entry point: write the expectation, run the check, record the observation.

Every surface that records a check (the CLI's `run --ledger/--notebook`, the server, the
widget) calls `run_and_record`, so the order that makes a check evidence is kept in one
place: the expectation is in the ledger before the engine starts, and the observation that
follows refers to it by `seq`.

A ledger holds one current tolerance per check. A re-run that writes an explicit tolerance
different from it is refused (change it with `jupyter gradcheck tolerance ... --justification`);
a re-run that writes none takes the ledger's. A re-run with a different analytical gradient
is allowed and recorded as an `expectation_change` (with `after_observation: true` once the
check has run), so a revised hand derivation stays visible.
"""

from __future__ import annotations

import dataclasses

from ..check.autograd.outputs import check_outputs_fit
from ..check.record.signature import check_signature
from ..check.record.spec import CheckSpec, parse_spec
from ..errors import SpecError
from .binding import refresh_binding
from .history import HISTORY_KEY
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


def declare(ledger: Ledger, parsed: CheckSpec) -> tuple[CheckSpec, dict, dict]:
    """Write the expectation of a check about to run; return (spec as run, as recorded, entry).

    The ledger's current tolerance applies (an explicit contradicting one is refused before
    anything is written), and an analytical gradient that differs from the recorded one is
    first recorded as an `expectation_change`. The history is read and the entries written
    under one exclusive lock, so no other writer's entry can come in between.
    """
    with ledger.locked() as held:
        history = held.history(parsed.id, copy=False)  # only read, and only inside this block
        parsed = apply_ledger_tolerance(parsed, history)
        spec_dict = ledger_spec_dict(parsed)
        if (
            history
            and history["expectation"] is not None
            and history["analytical_gradient"] != spec_dict["analytical_gradient"]
        ):
            held.change_expectation(parsed.id, spec_dict["analytical_gradient"], via="rerun", justification=None)
        return parsed, spec_dict, held.record_expectation(spec_dict)


def run_and_record(spec, ledger: Ledger, *, sweep: bool | None = None, devices: list | None = None) -> dict:
    """Record the expectation, run the check, record the observation; return the record.

    Bad input (SpecError, including an unavailable device) raises before anything is
    written. An error raised once the expectation is written is recorded as a failed run
    (`failed_to_run`) and then re-raised, so the attempt is never lost.
    """
    return record_run(spec, ledger, sweep=sweep, devices=devices)[0]


def refuse_bad_callable(spec, devices: list | None = None):
    """The parsed spec, or SpecError before anything is written: a callable that cannot take the
    inputs, or whose outputs the expectation or grad_output does not fit, is bad input, not a failed run."""
    from ..check.record.devices import resolve_device

    parsed = parse_spec(spec)
    device = resolve_device(parsed.device, devices)
    if not parsed.expression:
        check_signature(parsed.function, list(parsed.inputs))
        check_outputs_fit(parsed, device)
    return parsed


def record_run(
    spec, ledger: Ledger, *, sweep: bool | None = None, devices: list | None = None, refused: bool = False
) -> tuple[dict, dict]:
    """`run_and_record`, returning the observation entry it appended too (for its attestation).

    `refused=True`: the caller has already passed the spec through `refuse_bad_callable`."""
    from ..check.engine import run_check

    parsed = parse_spec(spec) if refused else refuse_bad_callable(spec, devices)
    parsed, spec_dict, expectation = declare(ledger, parsed)
    try:
        record = run_check(parsed, sweep=sweep, devices=devices)
    except BaseException as exc:
        reason = f"{type(exc).__name__}: {exc}"
        ledger.record_failed_to_run(spec_dict, expectation["seq"], reason)
        refresh_binding(ledger)
        raise
    entry = ledger.record_observation(record, expectation["seq"])
    refresh_binding(ledger)
    return record, entry
