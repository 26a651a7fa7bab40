"""A progress bar for long verifications, drawn only on a terminal.

`jupyter gradcheck verify --replay` over a class's folder can take minutes. On a terminal
(standard error is a TTY) one line on standard error is redrawn in place: a bar, how many
notebooks and ledgers are verified of how many, the rate and the time left; when done it
leaves one line with the total time. Anywhere else (a pipe, a file, a CI log) nothing is
drawn, so the output is the same plain lines a script reads.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ..core.i18n import _

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
