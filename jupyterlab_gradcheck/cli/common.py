"""What the subcommands share: exit codes, reading input, and finding the ledger."""

from __future__ import annotations

import sys

from ..core.errors import SpecError

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2


def add_witness_argument(parser, what: str) -> None:
    """`--witness URL|LOG`, the same for verify and export."""
    parser.add_argument("--witness", metavar="URL|LOG",
                        help=f"{what}: its URL (token in GRADCHECK_WITNESS_TOKEN) or its log file")


def read_text(path: str) -> str:
    """The text of a file, or of standard input for `-`."""
    source = "standard input" if path == "-" else path
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise SpecError("cannot read {source}: {strerror}", source=source, strerror=exc.strerror) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError("{source} is not UTF-8 text (byte {start})", source=source, start=exc.start) from None


def open_ledger(ledger: str | None, notebook: str | None):
    """The Ledger named by --ledger or beside --notebook, or None when neither is given."""
    if ledger is None and notebook is None:
        return None
    from ..core.ledger.store import Ledger

    return Ledger(ledger) if ledger is not None else Ledger.for_notebook(notebook)
