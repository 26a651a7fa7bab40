"""Figures the hardening tests measure, printed at the end of the run by conftest.py.

Tests add what they counted (cases tried, fuzz examples, faults survived, entries lost), so
`make test` shows the numbers docs/reliability.md quotes.
"""

from __future__ import annotations

FIGURES: dict[str, str] = {}


def record(name: str, value) -> None:
    """Keep one figure under `name` (a later value for the same name replaces it)."""
    FIGURES[name] = str(value)
