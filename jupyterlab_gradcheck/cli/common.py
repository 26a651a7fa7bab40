"""What the subcommands share: exit codes, reading input, and finding the ledger."""

from __future__ import annotations

import argparse
import sys

from ..core.errors import SpecError
from ..core.i18n import LANGUAGES, Message, _, checked, normalize

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2


def add_witness_argument(parser, what: str) -> None:
    """`--witness URL|LOG`, `--witness-key`, `--student` and `--max-delay`, the same for verify
    and export (`what` marked with N_)."""
    from ..core.ledger.witness_check import DEFAULT_MAX_DELAY

    parser.add_argument(
        "--witness",
        metavar="URL|LOG",
        help=_("{what}: its URL (token in GRADCHECK_WITNESS_TOKEN) or its log file").format(what=_(what)),
    )
    parser.add_argument(
        "--witness-key",
        metavar="KEY",
        help=_(
            "the witness's public key (base64) or its fingerprint (sha256:...), recorded when the course "
            "started; needed with a log file, checked against the witness with a URL"
        ),
    )
    parser.add_argument(
        "--student",
        metavar="NAME",
        help=_(
            "the student who submits PATH (default: the folder after submitted/ or autograded/, else "
            "the folder under PATH's root for a folder in nbgrader's layout)"
        ),
    )
    parser.add_argument(
        "--max-delay",
        type=float,
        default=DEFAULT_MAX_DELAY,
        metavar="SECONDS",
        help=_(
            "an entry whose head reached the witness more than SECONDS after the entry was written is "
            "flagged witnessed_late (default {seconds:g})"
        ).format(seconds=DEFAULT_MAX_DELAY),
    )


def witness_options(args) -> dict:
    """The witness keywords of verify_path and collect, from the arguments above."""
    return {
        "witness": args.witness,
        "witness_key": args.witness_key,
        "student": args.student,
        "max_delay": args.max_delay,
    }


def _language(value: str) -> str:
    try:
        return checked(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("language {value!r} is not one of {choices}").format(value=value, choices=", ".join(LANGUAGES))
        ) from None


def add_language_argument(parser) -> None:
    """`--language en|es`, accepted before or after the subcommand."""
    parser.add_argument(
        "--language",
        metavar="LANG",
        type=_language,
        default=argparse.SUPPRESS,
        help=_(
            "language of the messages: en or es (default: from LANGUAGE, LC_ALL, "
            "LC_MESSAGES or LANG, else en); records and ledgers stay English"
        ),
    )


def language_in(argv: list[str]) -> str | None:
    """The language named by `--language` anywhere in `argv` (None: the locale decides)."""
    for number, word in enumerate(argv):
        if word == "--":
            break
        value = (
            argv[number + 1]
            if word == "--language" and number + 1 < len(argv)
            else word.partition("=")[2]
            if word.startswith("--language=")
            else None
        )
        if value is not None:
            return normalize(value)
    return None


def read_text(path: str) -> str:
    """The text of a file, or of standard input for `-`."""
    source = Message("standard input") if path == "-" else path
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
