"""A real witness service for the tests: `jupyter gradcheck witness` in its own process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

JUPYTER = Path(sys.executable).with_name("jupyter")
#: The instructor's token (GRADCHECK_WITNESS_TOKEN): it reads the whole log and reports nothing.
TOKEN = "instructor-token-for-tests"
#: The class the witness knows by default; each student reports with `witness.tokens[name]`.
CLASS = ("ana", "bob", "carol", "dan", "offline")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Witness:
    """`jupyter gradcheck witness` in its own process, started and stopped by the test."""

    def __init__(self, log: Path, port: int | None = None, students: tuple[str, ...] = CLASS):
        self.log, self.port, self.process = log, port or free_port(), None
        self.url = f"http://127.0.0.1:{self.port}"
        #: The class list beside the log (written at start), and each student's own token.
        self.students = log.with_name(log.name + ".students.json")
        self.tokens = {user: f"{user}-token-for-tests" for user in students}

    def start(self) -> Witness:
        fd = os.open(self.students, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({token: user for user, token in self.tokens.items()}, handle)
        self.process = subprocess.Popen(
            [
                str(JUPYTER),
                "gradcheck",
                "witness",
                "--log",
                str(self.log),
                "--port",
                str(self.port),
                "--students",
                str(self.students),
            ],
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


def call(url: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of a GET (no body) or POST to the witness, errors included."""
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json", **({"Authorization": f"token {token}"} if token else {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())
