"""Every failing record says why: `passed: false` implies a `failure` with its comparison, diagnosis and reason.

A record can fail in ways no comparison row of ours describes: the embedded `torch.autograd.gradcheck`
or `gradgradcheck` failing alone, a mode that raised (a jvp that crashes), a case of the undefined-gradient
test that crashed. Each of those becomes a failure of its own (`event_failure`), shaped like a failed
comparison's, with no element where none is known. `ensure_failure` is the one place the invariant is
enforced: the engine passes every record through it before returning it.

A backward that is not reentrant (gradcheck: "Backward is not reentrant": cuDNN's or atomics'
nondeterministic kernels) is diagnosed `nondeterministic`, never `probable_bug`, and the reason names the
settings that remove it.
"""

from __future__ import annotations

import re

from ..i18n import Message
from .autograd.failures import event_failure

#: How gradcheck and gradgradcheck begin the message of a backward that gives different values on repeated runs.
NOT_REENTRANT = "Backward is not reentrant"

#: The settings that make PyTorch's kernels deterministic, named in a `nondeterministic` failure's reason.
DETERMINISTIC_SETTINGS = "torch.use_deterministic_algorithms(True), torch.backends.cudnn.deterministic = True"


def tool_failure(observation: dict, names: list) -> dict:
    """The failure of a failed `torch_gradcheck` or `torch_gradgradcheck` observation: `nondeterministic` for a
    backward that is not reentrant, else `probable_bug`, naming the input its message names."""
    tool = observation["name"]
    detail = str(observation.get("reason", ""))
    found = re.search(r"with respect to input (\d+)", detail)
    input_name = names[int(found.group(1))] if found and int(found.group(1)) < len(names) else None
    if NOT_REENTRANT in detail:
        reason = Message(
            "{tool}: the backward is not reentrant (the same input and grad_output give different gradients on "
            "repeated runs): nondeterministic kernels (cuDNN, atomic adds), not a wrong derivative; "
            "{settings} remove it",
            tool=tool,
            settings=DETERMINISTIC_SETTINGS,
        )
        return event_failure(tool, reason, diagnosis="nondeterministic", input_name=input_name)
    reason = Message("{tool} rejects the function where our comparisons pass: {detail}", tool=tool, detail=detail[:300])
    return event_failure(tool, reason, input_name=input_name)


def _tool_observations(record: dict) -> list:
    """The embedded tools' observations, first order first."""
    found = [(record.get("observations") or {}).get("torch_gradcheck")]
    found.append(((record.get("second_order") or {}).get("observations") or {}).get("torch_gradgradcheck"))
    return [o for o in found if o and o.get("status") == "failed"]


def ensure_failure(record: dict) -> dict:
    """The record with the invariant made true: a failed record's `failures` hold at least one failure, and
    `failure` is the first. A failing embedded tool whose verdict no failure of ours explains adds its own."""
    if record.get("passed", True):
        return record
    failures = list(record.get("failures") or [])
    if not failures:
        names = list(record.get("inputs") or {})
        failures = [tool_failure(o, names) for o in _tool_observations(record)]
    if not failures:
        failures = [
            event_failure(
                "record", Message("the check failed, but no comparison and no tool said why: report this record")
            )
        ]
    record["failures"] = failures
    record["failure"] = failures[0]
    return record
