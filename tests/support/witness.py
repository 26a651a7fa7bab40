"""A real witness service for the tests: `jupyter gradcheck witness` in its own process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

JUPYTER = Path(sys.executable).with_name("jupyter")
#: The shared token the witness and its clients use in the tests.
TOKEN = "instructor-token-for-tests"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Witness:
    """`jupyter gradcheck witness` in its own process, started and stopped by the test."""

    def __init__(self, log: Path, port: int | None = None):
        self.log, self.port, self.process = log, port or free_port(), None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> Witness:
        self.process = subprocess.Popen(
            [str(JUPYTER), "gradcheck", "witness", "--log", str(self.log), "--port", str(self.port)],
            env={**os.environ, "GRADCHECK_WITNESS_TOKEN": TOKEN},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/public-key", timeout=1) as answer:
                    assert json.loads(answer.read())["public_key"]
                    return self
            except OSError:
                assert self.process.poll() is None, self.process.stdout.read().decode()
                time.sleep(0.2)
        raise AssertionError("the witness did not start")

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
