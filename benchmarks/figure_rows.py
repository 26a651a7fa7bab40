"""Rows shared by the benchmarks that grade a share against a floor, or state a sample count."""

from __future__ import annotations

from . import graded, row


def share_row(name: str, fraction: float, goal: float, note: str) -> dict:
    """A row graded `fraction >= goal`, in percent; "-" and a MISS where nothing was measured (NaN)."""
    measured = fraction == fraction
    return graded(
        name,
        round(100 * fraction, 2) if measured else "-",
        "%",
        f">= {100 * goal:g}%",
        measured and fraction >= goal,
        note,
    )


def count_row(label: str, count: int, note: str) -> dict:
    """The INFO row saying how many samples a figure is measured over."""
    return row(f"{label}: samples", count, "samples", "-", "INFO", note)
