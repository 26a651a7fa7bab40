"""Shared fixtures: the seed record and a runner for the real `jupyter-gradcheck` script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: pytest-jupyter's fixtures (a real jupyter-server per test) for the server and hardening suites.
pytest_plugins = ("pytest_jupyter.jupyter_server",)

#: The suite reads English messages: a Spanish locale on the machine must not switch it, nor the
#: subprocesses and kernels it starts (the language tests set LANGUAGE themselves).
os.environ["LANGUAGE"] = "en"

SEED = '{"function":"x*x","x":3,"analytical_gradient":6,"observed_gradient":null,"executed":false}'
SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")


def pytest_collection_modifyitems(config, items):
    """CUDA-marked tests are skipped, with the reason, where torch reports no CUDA device."""
    import torch

    if torch.cuda.is_available():
        return
    reason = pytest.mark.skip(reason="no CUDA device: torch.cuda.is_available() is False on this machine")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(reason)


#: How long the threads a run leaves behind may take to end once every test is done.
LINGER_SECONDS = 30.0


def pytest_unconfigure(config):
    """Given every test done, when a thread that is not a daemon is still alive (a check whose
    server stopped, an executor never shut down), then its stack is printed and the run fails
    after LINGER_SECONDS, rather than waiting for it for ever: the interpreter joins such threads
    before it exits, so one stuck thread would hold the whole run past any time limit."""
    import threading
    import time
    import traceback

    def busy(thread) -> bool:  # an executor's idle thread waits for work, and exits with the interpreter
        frame = sys._current_frames().get(thread.ident)
        while frame is not None and os.path.basename(frame.f_code.co_filename) in ("threading.py", "queue.py"):
            frame = frame.f_back
        idle = frame is not None and frame.f_code.co_name == "_worker" and "concurrent" in frame.f_code.co_filename
        return not idle

    deadline = time.monotonic() + LINGER_SECONDS
    while True:
        lingering = [
            t
            for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive() and busy(t)
        ]
        if not lingering or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if not lingering:
        return
    frames = sys._current_frames()
    out = sys.__stderr__
    print(f"\n{len(lingering)} thread(s) still alive after the tests; the run fails:", file=out)
    for thread in lingering:
        print(f"--- {thread.name}", file=out)
        traceback.print_stack(frames.get(thread.ident), file=out)
    out.flush()
    os._exit(3)


@pytest.fixture
def seed_text() -> str:
    """The course's seed record, exactly as written in MISSION.md."""
    return SEED


@pytest.fixture
def gradcheck_cli():
    """Run `jupyter-gradcheck ARGS` with optional stdin; return (exit code, stdout, stderr)."""

    def run(*args: str, stdin: str | None = None, cwd: str | os.PathLike | None = None):
        completed = subprocess.run(
            [str(SCRIPT), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=240,
        )
        return completed.returncode, completed.stdout, completed.stderr

    return run


@pytest.fixture
def run_record(gradcheck_cli):
    """Pipe one record (a dict) to `jupyter-gradcheck run -`; return (code, record, stderr)."""

    def run(record: dict, *extra: str):
        code, out, err = gradcheck_cli("run", "-", *extra, stdin=json.dumps(record))
        return code, (json.loads(out) if out.strip() else None), err

    return run
