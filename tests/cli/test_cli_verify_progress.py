"""`jupyter gradcheck verify --replay` over a folder of submissions: worker processes, a progress
bar on a terminal and plain output anywhere else, and a Python callable's source shown.

An instructor replays a class's folder from a terminal and sees a bar move; a script or CI job
that pipes the same command reads the same plain lines it always did, with no bar in them.
"""

from __future__ import annotations

import hashlib
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.cli.common import ProgressBar
from jupyterlab_gradcheck.core.ledger.verify import discover, verify_items
from support.ledger import notebook_with_three_checks

SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")
STUDENTS = ("ann", "ben", "cat")


@pytest.fixture(scope="module")
def submissions(tmp_path_factory) -> Path:
    """Three students' honest notebooks in nbgrader's layout, each with three real checks."""
    root = tmp_path_factory.mktemp("class") / "submitted"
    for student in STUDENTS:
        notebook_with_three_checks(root / student / "ps1", tolerance_change=False)
    return root


def _verify_in_a_pipe(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), "verify", "--replay", str(folder), "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


def _verify_on_a_terminal(folder: Path) -> tuple[int, str, str]:
    """(exit code, stdout from a pipe, what was written to the terminal standard error is)."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [str(SCRIPT), "verify", "--replay", str(folder), "--jobs", "2"],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    seen = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: every process holding the terminal has closed it
            break
        if not data:
            break
        seen.append(data)
    os.close(master)
    out = process.stdout.read().decode()
    process.stdout.close()
    return process.wait(timeout=240), out, b"".join(seen).decode()


@pytest.fixture(scope="module")
def piped(submissions) -> subprocess.CompletedProcess:
    """The folder replayed in two worker processes, standard output and error both pipes."""
    return _verify_in_a_pipe(submissions)


def test_piped_output_has_no_progress_bar(submissions, piped):
    """Given a folder of three submissions, when it is replayed in two worker processes with
    standard error a pipe (not a terminal), then it passes, standard error is empty (no bar)
    and standard output is three plain report blocks with no carriage return."""
    done = piped
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    assert "\r" not in done.stdout and "verified" not in done.stdout
    heads = [line.split(": ")[0] for line in done.stdout.splitlines() if line.startswith("OK ")]
    assert heads == [f"OK   {submissions / s / 'ps1' / 'lab1.ipynb'}" for s in STUDENTS]
    assert done.stdout.count("replay: 3 of 3 observations reproduced, 0 differ, 0 skipped") == 3


def test_a_terminal_sees_the_bar_and_stdout_stays_plain(submissions, piped):
    """Given the same folder, when replayed with standard error on a pseudo-terminal, then the
    terminal shows the bar redrawn in place up to 3 of 3 and a closing line with the total, and
    standard output is exactly what the piped run printed."""
    code, out, terminal = _verify_on_a_terminal(submissions)
    assert code == 0, out + terminal
    assert "\r[########################] 3 of 3 verified, " in terminal
    closing = terminal.rsplit("\r", 2)[-2:]  # the pty ends the closing line with \r\n
    assert closing[0].startswith("3 verified in ") and "per second)" in closing[0]
    assert out == piped.stdout


def test_progress_is_called_once_per_submission_in_a_pool_and_alone(submissions):
    """Given the three submissions, when verified with replay by two worker processes and by
    this one, then progress hears (1, 3), (2, 3), (3, 3) in both, and the reports are equal."""
    items = list(discover(submissions))
    calls = {1: [], 2: []}
    reports = {
        jobs: verify_items(items, replay=True, jobs=jobs, progress=lambda d, t, j=jobs: calls[j].append((d, t)))
        for jobs in (1, 2)
    }
    assert calls[1] == calls[2] == [(1, 3), (2, 3), (3, 3)]
    assert reports[1] == reports[2]


class _Terminal:
    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def test_the_bar_shows_rate_and_time_left_and_is_not_redrawn_too_often():
    """Given a bar whose clock reads 0 s at start, when 5 of 10 are done at 10 s, then it shows
    half the bar, 0.5 per second and 0:10 left; a call 0.05 s later draws nothing new; the last
    one always draws; closing leaves '10 verified in 20.0 s (0.5 per second)'."""
    now = [0.0]
    terminal = _Terminal()
    bar = ProgressBar(terminal, clock=lambda: now[0])
    now[0] = 10.0
    bar(5, 10)
    assert terminal.text == "\r[############............] 5 of 10 verified, 0.5 per second, 0:10 left\033[K"
    now[0] = 10.05
    bar(6, 10)
    assert terminal.text.count("\r") == 1
    now[0] = 20.0
    bar(10, 10)
    assert terminal.text.endswith("\r[########################] 10 of 10 verified, 0.5 per second, 0:00 left\033[K")
    bar.close()
    assert terminal.text.endswith("\r10 verified in 20.0 s (0.5 per second)\033[K\n")


def cube(x):
    return x**3


def test_the_cli_shows_a_python_callables_source_under_its_skip(tmp_path):
    """Given a named Python function checked through the API into a ledger, when the ledger
    is verified with replay from the command line, then it exits 0 and prints that the function
    was a Python callable, then its recorded SHA-256 and source, line by line."""
    ledger = tmp_path / "lab.gradcheck.jsonl"
    check(cube, grad=27.0, x=3.0, ledger=str(ledger))
    done = subprocess.run([str(SCRIPT), "verify", "--replay", str(ledger)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    skipped = next(i for i, line in enumerate(lines) if line.startswith("  replay skipped: line 3: "))
    assert "the function was a Python callable, cube, which exists only in the kernel that ran it" in lines[skipped]
    sha256 = hashlib.sha256(b"def cube(x):\n    return x**3").hexdigest()
    assert lines[skipped + 1] == f"    recorded source (sha256 {sha256}):"
    assert lines[skipped + 2 : skipped + 4] == ["      | def cube(x):", "      |     return x**3"]
