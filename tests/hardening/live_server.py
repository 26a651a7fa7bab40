"""A jupyter server in its own process, for faults that must not touch the test process.

A file-size limit (RLIMIT_FSIZE) stands in for a full disk: it has to be set on the process
that writes the ledger, and setting it on the test process would break pytest's own files.
`LiveServer` starts `jupyter server` with the extension, token authentication and a free port,
with an optional file-size limit (SIGXFSZ ignored, so a write past it fails with EFBIG rather
than killing the server), and talks to it with the standard library only.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SERVER = Path(sys.executable).with_name("jupyter-server")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """`with LiveServer(root, file_size_limit=...) as server: server.call("POST", "checks", {...})`."""

    def __init__(
        self,
        root: Path,
        *,
        file_size_limit: int | None = None,
        workers: int = 1,
        timeout: float = 60.0,
        slow_functions: dict[str, float] | None = None,
        runtime: Path | None = None,
    ):
        self.root, self.limit = Path(root), file_size_limit
        self.runtime = runtime
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.arguments = [
            str(SERVER),
            "--no-browser",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            f"--ServerApp.root_dir={self.root}",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.jpserver_extensions={'jupyterlab_gradcheck': True}",
            f"--GradcheckExtension.workers={workers}",
            f"--GradcheckExtension.timeout={timeout}",
            "--ServerApp.allow_root=True",
        ]
        if slow_functions:
            self.arguments.append(f"--GradcheckExtension.test_slow_functions={slow_functions!r}")
        self.process: subprocess.Popen | None = None
        self.log = self.root.parent / f"server-{self.port}.log"

    def _limits(self) -> None:  # runs in the child before exec
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if self.limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.limit, resource.RLIM_INFINITY))

    def __enter__(self) -> LiveServer:
        runtime = self.runtime or self.root.parent / f"runtime-{self.port}"
        environment = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_CONFIG_DIR": str(runtime)}
        self.log_handle = open(self.log, "wb")  # the log file is opened here, outside the limit
        self.process = subprocess.Popen(
            self.arguments,
            stdout=self.log_handle,
            stderr=subprocess.STDOUT,
            env=environment,
            preexec_fn=self._limits,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                status, body = self.call("GET", "status")
                if status == 200 and body["pool"]["state"] == "ready":
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the server did not become ready within 120 s")

    def kill_hard(self) -> None:
        """`kill -9` of the server and its workers at once, as a crash of the machine would."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def __exit__(self, *exc_info) -> None:
        if self.process.poll() is not None:
            self.log_handle.close()
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.log_handle.close()

    def lift_file_size_limit(self) -> None:
        """Free disk space again: remove the limit from the running server."""
        resource.prlimit(self.process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    def call(self, method: str, route: str, body=None, timeout: float = 120.0) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/gradcheck/{route}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")
