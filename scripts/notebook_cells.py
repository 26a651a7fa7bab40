"""The cell list both notebook editions are built from, and the helpers that fill it.

Each cell is written once in English and once in Spanish, in the same place; the section
modules (notebook_section_*.py) append to `CELLS` in notebook order when imported.
"""

from __future__ import annotations


def md(en: str, es: str) -> tuple:
    """A markdown cell, in English and in Spanish."""
    return ("markdown", en, es)


def code(en: str, es: str | None = None) -> tuple:
    """A code cell; the Spanish source defaults to the English one."""
    return ("code", en, en if es is None else es)


SEED_TEXT = '{"function":"x*x","x":3,"analytical_gradient":6,"observed_gradient":null,"executed":false}'

# --------------------------------------------------------------------------------------------
# The cells. Each entry: (cell id, kind, English source, Spanish source).
# --------------------------------------------------------------------------------------------
CELLS: list[tuple[str, tuple]] = []


def cell(cell_id: str, content: tuple) -> None:
    """Append a cell, with its stable id, to the notebook being built."""
    CELLS.append((cell_id, content))
