"""What a replay makes of a record made under earlier numerical rules.

The rules are one set (docs/tolerances.md), named in every new record by the version in which they last changed
(`"rules"`, core/check/record/rules.py). A replay runs every record under today's rules: no code is kept alive to
re-run an old one. What a record keeps instead are the decisions its verdict rests on: the path each input took and
its evaluations, the steps, and each comparison's tolerance and rounding bound (`decisions`).

- What no rule decides (the expectation, the four autograd passes, shapes and dtypes) reproduces whatever the rules
  were; a difference there is a difference.
- A record of today's rules reproduces number for number.
- A record of earlier rules whose recorded decisions are not today's may see its finite differences, their
  comparisons and its verdict come out otherwise. That is reported as a note, "the rules changed since this record",
  with the recorded verdict and today's (`rules_changed`), and it does not fail the ledger: an edited record is what
  the chain and the witness catch. Where its decisions are today's, its numbers must reproduce as well.
"""

from __future__ import annotations

import math

from ..check.record.rules import RULES, rules_of
from ..i18n import Message

#: A comparison row whose name or sides mention this is made of finite differences, which the rules decide.
RULED_MARK = "finite_difference"
#: What a finite-difference observation records of each input's path: the decisions taken for it.
INPUT_DECISIONS = ("structure", "step", "forward_evaluations", "batched")
#: Relative agreement of two recorded decisions' numbers (steps, rounding bounds): far below any change of the rules
#: (a bound that a rule adds or drops moves by orders of magnitude), far above the last bits a bound's sum may round.
DECISION_RTOL = 1e-6


def default_tolerance_bounded(record: dict) -> bool:
    """Whether the record's finite differences took the dtype's default tolerance with each element's rounding bound
    (its rows carry `error_bound`): a completed record writes its tolerance out, so only this says that the author
    did not, and a replay that passed the written numbers on would run without the bound and the re-estimation."""
    return any(isinstance(row, dict) and "error_bound" in row for row in record.get("comparisons") or [])


def ruled_row(row: dict) -> bool:
    """Whether a comparison row is made of finite differences, whose steps, path and bound the rules decide."""
    return any(RULED_MARK in str(row.get(key, "")) for key in ("name", "left", "right"))


def decisions(record: dict) -> dict:
    """The decisions a record's verdict rests on: the finite differences' scheme and step, each input's path and
    evaluations, and each comparison's tolerance and rounding bound."""
    fd = (record.get("observations") or {}).get("finite_difference") or {}
    inputs = fd.get("inputs") if isinstance(fd.get("inputs"), dict) else {}
    return {
        "scheme": fd.get("scheme"),
        "step": fd.get("step"),
        "step_kind": fd.get("step_kind"),
        "inputs": {
            name: [info.get(key) for key in INPUT_DECISIONS] for name, info in inputs.items() if isinstance(info, dict)
        },
        "comparisons": {
            f"{row.get('name')}[{row.get('input')}]#{row.get('output')}": [
                row.get("rtol"),
                row.get("atol"),
                row.get("error_bound"),
            ]
            for row in record.get("comparisons") or []
            if isinstance(row, dict)
        },
    }


def _same(left, right) -> bool:
    if isinstance(left, dict) and isinstance(right, dict):
        return set(left) == set(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    if _is_number(left) and _is_number(right):
        if math.isnan(left) or math.isnan(right):
            return math.isnan(left) and math.isnan(right)
        return math.isclose(left, right, rel_tol=DECISION_RTOL, abs_tol=0.0)
    return left == right


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_decisions(recorded: dict, replayed: dict) -> bool:
    """Whether the replay took the decisions the record says its verdict rests on."""
    return _same(decisions(recorded), decisions(replayed))


def rules_changed(recorded: dict, replayed: dict, ruled: list) -> dict | None:
    """What changed for a record made under earlier rules whose `ruled` differences (those of its finite differences,
    their comparisons and its verdict) come from decisions that are not today's; None where they are differences: a
    record of today's rules, or one whose decisions are today's, must reproduce."""
    made_under = rules_of(recorded)
    if not ruled or made_under == RULES or same_decisions(recorded, replayed):
        return None
    return {
        "made_under": made_under,
        "rules": RULES,
        "recorded_passed": recorded.get("passed"),
        "replayed_passed": replayed.get("passed"),
        "differences": ruled,
    }


def rules_note(change: dict) -> Message:
    """The note of a record whose rules changed: both verdicts, and the rules of each."""
    return Message(
        "the rules changed since this record (made under {made_under}, replayed under {rules}): recorded "
        "passed={recorded}, passed={replayed} under today's rules",
        made_under=change["made_under"],
        rules=change["rules"],
        recorded=change["recorded_passed"],
        replayed=change["replayed_passed"],
    )
