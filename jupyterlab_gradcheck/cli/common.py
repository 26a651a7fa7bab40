"""What the subcommands share: exit codes, reading input, and finding the ledger."""

from __future__ import annotations

import sys

from ..core.errors import SpecError

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2


def read_text(path: str) -> str:
    """The text of a file, or of standard input for `-`."""
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None


def open_ledger(ledger: str | None, notebook: str | None):
    """The Ledger named by --ledger or beside --notebook, or None when neither is given."""
    if ledger is None and notebook is None:
        return None
    from ..core.ledger import Ledger

    return Ledger(ledger) if ledger is not None else Ledger.for_notebook(notebook)
