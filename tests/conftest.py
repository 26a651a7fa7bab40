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
