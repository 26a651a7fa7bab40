"""What the subcommands share: exit codes, reading input, and finding the ledger."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from ..core.errors import SpecError
from ..core.i18n import LANGUAGES, Message, _, checked, normalize

# -------------------- common

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2


def add_witness_argument(parser, what: str) -> None:
    """`--witness URL|LOG`, `--witness-key`, `--student` and `--max-delay`, the same for verify
    and export (`what` marked with N_)."""
    from ..witness.verify import DEFAULT_MAX_DELAY

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


# -------------------- progress
# A progress bar for long verifications, drawn only on a terminal.
#
# `jupyter gradcheck verify --replay` over a class's folder can take minutes. On a terminal
# (standard error is a TTY) one line on standard error is redrawn in place: a bar, how many
# notebooks and ledgers are verified of how many, the rate and the time left; when done it
# leaves one line with the total time. Anywhere else (a pipe, a file, a CI log) nothing is
# drawn, so the output is the same plain lines a script reads.

#: Width of the bar itself, in characters.
BAR_WIDTH = 24
#: Shortest time between two redraws, so a fast run does not spend its time drawing.
REDRAW_SECONDS = 0.1


def _clock(seconds: float) -> str:
    """1:05 for 65 seconds, 1:01:05 past an hour."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressBar:
    """`bar(done, total)` redraws the line; `bar.close()` leaves the summary line."""

    def __init__(self, stream: TextIO, *, clock=time.monotonic):
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.drawn_at = None
        self.done = self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        now = self.clock()
        if done < total and self.drawn_at is not None and now - self.drawn_at < REDRAW_SECONDS:
            return
        self.drawn_at = now
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        left = (total - done) / rate if rate > 0 else 0.0
        filled = BAR_WIDTH * done // total if total else BAR_WIDTH
        line = _("{done} of {total} verified, {rate:.1f} per second, {left} left").format(
            done=done, total=total, rate=rate, left=_clock(left)
        )
        self.stream.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {line}\033[K")
        self.stream.flush()

    def close(self) -> None:
        """Replace the bar with one line: how many, in how long."""
        if self.drawn_at is None:
            return
        elapsed = max(self.clock() - self.started, 1e-9)
        line = _("{total} verified in {seconds:.1f} s ({rate:.1f} per second)").format(
            total=self.done, seconds=elapsed, rate=self.done / elapsed
        )
        self.stream.write(f"\r{line}\033[K\n")
        self.stream.flush()


def progress_bar(stream: TextIO | None = None) -> ProgressBar | None:
    """A bar on `stream` (standard error by default) when it is a terminal, else None."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return ProgressBar(stream) if isatty is not None and isatty() else None
