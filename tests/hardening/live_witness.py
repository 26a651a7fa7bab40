"""A live witness on loopback, standalone, with a token per student, and the grader's commands.

`LiveWitness` starts `jupyter gradcheck witness --log W.jsonl --port N --students S.json` as a
real process (S.json maps each student's own token to their name; the instructor's token, in
GRADCHECK_WITNESS_TOKEN, reads the log). `student(name, ...)` is that student's kernel
environment: the witness's URL and their own token (or another URL: a dead port, a witness of
their own). `grade(...)` runs what the grader runs, `jupyter gradcheck verify ... --json` and
`export --format submission-csv`, as separate processes.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from live_server import free_port

from jupyterlab_gradcheck.witness import client as witness_client

JUPYTER = Path(sys.executable).with_name("jupyter")
SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")
INSTRUCTOR = "instructor-" + secrets.token_hex(8)


class LiveWitness:
    """`jupyter gradcheck witness` with a class list, started and stopped by the test."""

    def __init__(self, folder: Path, students: tuple[str, ...]):
        folder.mkdir(parents=True, exist_ok=True)
        self.log, self.port = folder / "w.jsonl", free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tokens = {name: f"{name}-{secrets.token_hex(12)}" for name in students}
        self.students = folder / "students.json"
        self.students.write_text(json.dumps({token: name for name, token in self.tokens.items()}))
        self.students.chmod(0o600)
        self.process: subprocess.Popen | None = None
        self.fingerprint: str | None = None

    def start(self) -> LiveWitness:
        self.process = subprocess.Popen(
            [str(JUPYTER), "gradcheck", "witness", "--log", str(self.log), "--port", str(self.port)]
            + ["--students", str(self.students)],
            env={**os.environ, witness_client.TOKEN_VARIABLE: INSTRUCTOR, "LANGUAGE": "en"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/public-key", timeout=1) as answer:
                    self.fingerprint = json.loads(answer.read())["fingerprint"]
                    return self
            except OSError:
                assert self.process.poll() is None, "the witness exited"
                time.sleep(0.2)
        raise AssertionError("the witness did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def post_heads(self, token: str, body: dict) -> tuple[int, dict]:
        """`POST heads` as a client would, with `token`."""
        request = urllib.request.Request(
            self.url + "/heads",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"token {token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def receipts(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    @contextlib.contextmanager
    def student(self, name: str, url: str | None = "", *, token: str | None = None, drain: bool = True):
        """`name`'s kernel environment: this witness and their own token (`url` and `token`:
        another witness, None none); on leaving, every queued report has been taken when `drain`."""
        keys = ("JUPYTERHUB_USER", witness_client.URL_VARIABLE, witness_client.TOKEN_VARIABLE, "JPY_SESSION_NAME")
        saved = {key: os.environ.get(key) for key in keys}
        os.environ["JUPYTERHUB_USER"] = name
        os.environ.pop("JPY_SESSION_NAME", None)
        target = self.url if url == "" else url
        if target:
            os.environ[witness_client.URL_VARIABLE] = target
            os.environ[witness_client.TOKEN_VARIABLE] = token or self.tokens.get(name, "none")
        else:
            os.environ.pop(witness_client.URL_VARIABLE, None)
        try:
            yield
            client = witness_client.client()
            if drain and target and client is not None:
                assert client.drain(60), "the witness did not take every report"
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def environment() -> dict:
    return {**os.environ, witness_client.TOKEN_VARIABLE: INSTRUCTOR, "LANGUAGE": "en", "LC_ALL": "C.UTF-8"}


def verify(path: Path, witness: LiveWitness, *extra: str) -> tuple[int, dict]:
    """`jupyter gradcheck verify PATH --witness URL --json ...`: (exit status, the one report)."""
    done = subprocess.run(
        [str(SCRIPT), "verify", str(path), "--witness", witness.url, "--json", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment(),
    )
    assert done.returncode in (0, 1), done.stderr
    [report] = json.loads(done.stdout)["reports"]
    return done.returncode, report


def verify_log(path: Path, log: Path, *extra: str) -> subprocess.CompletedProcess:
    """`jupyter gradcheck verify PATH --witness LOG --json ...` against a witness log file."""
    return subprocess.run(
        [str(SCRIPT), "verify", str(path), "--witness", str(log), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment(),
    )


def grade_row(folder: Path, witness: LiveWitness, *extra: str) -> dict:
    """The submission-csv row of the one student and assignment under `folder`."""
    done = subprocess.run(
        [str(SCRIPT), "export", str(folder), "--format", "submission-csv", "--witness", witness.url, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment(),
    )
    assert done.returncode == 0, done.stderr
    [row] = list(csv.DictReader(io.StringIO(done.stdout)))
    return row


def flags(report: dict) -> dict[str, int]:
    """The witness flags of a verify report, by name, with their counts."""
    return {flag["flag"]: flag["count"] for flag in report["witness"]["flags"]}


def errors(report: dict) -> list[str]:
    return [error["reason"] for error in report["errors"]]


RIGHT = {"function": "x*x", "x": 3, "analytical_gradient": 6}  # d/dx x^2 at 3 is 6
OTHER = {"function": "sin(x)", "x": 0.5, "analytical_gradient": "cos(x)"}
CUBE_WRONG = {"function": "x*x*x", "x": 2, "analytical_gradient": 6}  # 3x^2 at 2 is 12: a failure
CUBE_RIGHT = {**CUBE_WRONG, "analytical_gradient": 12}


def notebook_of(root: Path, student: str):
    """`student`'s lab1 as JupyterLab keeps it, in nbgrader's layout `submitted/<student>/lab1/`."""
    from support.course import Notebook

    return Notebook(root / "submitted" / student / "lab1" / "lab1.ipynb")


def ledger_of(book) -> Path:
    return book.path.with_name("lab1.gradcheck.jsonl")
