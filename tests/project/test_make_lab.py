"""`make lab` opens JupyterLab on the English example notebook."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "examples/gradient-check-notebook.ipynb"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.skipif(not (ROOT / NOTEBOOK).exists(), reason="the example notebook is not in this checkout")
def test_make_lab_opens_the_example_notebook(tmp_path):
    """Given a set-up checkout, when `make lab` starts (no browser, a free port),
    then JupyterLab serves examples/, its start-up URL opens the English notebook, and the
    notebook is reachable through the contents API."""
    port, token = _free_port(), "make-lab-test"
    log = tmp_path / "lab.log"
    options = f"--no-browser --port={port} --IdentityProvider.token={token} --ServerApp.port_retries=0"
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["make", "-s", "lab", f"LAB_OPTS={options}"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        contents = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/contents/{Path(NOTEBOOK).name}?content=0",
                    headers={"Authorization": f"token {token}"},
                )
                with urllib.request.urlopen(request, timeout=5) as answer:
                    contents = answer.status
                break
            except urllib.error.HTTPError as answer:  # the server is up and said no
                contents = answer.code
                break
            except OSError:  # not listening yet
                time.sleep(1)
        text = log.read_text()
        assert contents == 200, text[-2000:]
        # The server root is examples/, and the start-up URL opens the notebook.
        assert f"/lab/tree/{Path(NOTEBOOK).name}?token=" in text
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a slow shutdown must not leave a server behind
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
