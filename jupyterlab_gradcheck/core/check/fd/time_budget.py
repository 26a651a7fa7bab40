"""The time budget of finite_difference.mode auto: when the exhaustive comparison would be too slow.

Mode auto (the default) compares every element unless that is predicted to take over
AUTO_BUDGET_S; the general path times its first part and raises ExhaustiveOverBudget with the
prediction, and the engine then compares in the projected mode (core/check/fd/projected.py).
Apart from both, so that the finite differences need not import the projected mode that uses them.
"""

from __future__ import annotations

#: Above this many seconds predicted for the exhaustive comparison, "auto" chooses the projected mode.
AUTO_BUDGET_S = 1.0


class ExhaustiveOverBudget(Exception):
    """The exhaustive comparison would take longer than the budget; the message says from what."""

    def __init__(self, name: str, elements: int, done: int, seconds: float, predicted: float):
        super().__init__(
            f"the exhaustive comparison of {name!r} would take about {predicted:.2g} s "
            f"({done} of its {elements} elements took {seconds:.2g} s), over the "
            f"{AUTO_BUDGET_S:g} s budget of mode auto"
        )
        self.predicted = predicted


def budget(finite_difference: dict) -> float | None:
    """Seconds the exhaustive path may take before the projected mode replaces it (None: no limit)."""
    return AUTO_BUDGET_S if finite_difference.get("mode", "auto") == "auto" else None


def check_budget(probe, total: int, done: int, seconds: float) -> None:
    """Raise ExhaustiveOverBudget when the first chunk's time, scaled to every element, is over budget."""
    predicted = seconds * total / done
    if predicted > probe.budget_s:
        raise ExhaustiveOverBudget(probe.name, total, done, seconds, predicted)


def exhaustive_reason(inputs: dict, elements: int, budget_s: float | None) -> str:
    """Why every element was compared, for the record (`mode_reason`): asked for, or mode auto's choice, with
    its forward evaluations beside the 2 per element of gradcheck's slow mode (the projected mode writes its own)."""
    evaluations = sum(info["forward_evaluations"] for info in inputs.values())
    paths = ", ".join(f"{name} {info['structure']}" for name, info in inputs.items())
    if budget_s is None:
        return (
            f"requested: finite_difference.mode is exhaustive; every element compared in {evaluations} forward "
            f"evaluations ({paths})"
        )
    return (
        f"auto: every element compared in {evaluations} forward evaluations ({paths}), where gradcheck's slow mode "
        f"makes {2 * elements}; auto projects only when the general path's first part predicts more than "
        f"{budget_s:g} s"
    )
