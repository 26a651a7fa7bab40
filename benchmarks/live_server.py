"""A real `jupyter server` with the extension, started as a subprocess for the REST benchmarks.

Each instance gets a temporary root with `work/lab1.ipynb`, its own config folder, a token and
a free port; `request` speaks JSON over one keep-alive connection with that token.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(samples: list[float], fraction: float) -> float:
    """The sample at `fraction` of the sorted list (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


class LiveJupyter:
    """A jupyter server subprocess with the extension, in a temporary root."""

    def __init__(self, root: Path, workers: int = 2, **options):
        self.port, self.token = free_port(), secrets.token_hex(16)
        config = root / "config"
        config.mkdir(parents=True)
        (config / "jupyter_server_config.json").write_text(
            json.dumps(
                {
                    "ServerApp": {"jpserver_extensions": {"jupyterlab_gradcheck": True}},
                    "GradcheckExtension": {"workers": workers, **options},
                }
            )
        )
        self.root = root / "root"
        (self.root / "work").mkdir(parents=True)
        import nbformat

        nbformat.write(nbformat.v4.new_notebook(), str(self.root / "work" / "lab1.ipynb"))
        self.log = open(root / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config)}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}",
                "--ServerApp.open_browser=False",
                "--ServerApp.allow_root=True",
                "--ServerApp.ip=127.0.0.1",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.connection = self.connect()

    def connect(self, timeout: float = 120) -> http.client.HTTPConnection:
        """A new keep-alive connection to the server (one per client thread)."""
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, route: str, body=None, connection=None) -> tuple[int, dict]:
        """(status, decoded JSON) of one request, on `connection` or the instance's own."""
        connection = connection or self.connection
        payload = None if body is None else json.dumps(body)
        connection.request(
            method,
            f"/gradcheck/{route}",
            body=payload,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")

    def wait_ready(self, limit: float = 180.0) -> dict:
        """The status once every worker is idle; RuntimeError if the server dies or is slow."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the jupyter server exited while starting; see its log")
            try:
                status, body = self.request("GET", "status")
                if (
                    status == 200
                    and body["pool"]["state"] == "ready"
                    and all(w["state"] == "idle" for w in body["pool"]["workers"])
                ):
                    return body
            except (ConnectionError, OSError, http.client.HTTPException):
                self.connection.close()
            time.sleep(0.2)
        raise RuntimeError(f"the server's worker pool was not ready within {limit:g} s")

    def torch_libraries(self) -> int | None:
        """How many torch shared libraries the server process has mapped (None off Linux)."""
        maps = Path(f"/proc/{self.process.pid}/maps")
        if not maps.exists():
            return None
        return len({line.split()[-1] for line in maps.read_text().splitlines() if "libtorch" in line})

    def rss_mb(self) -> float | None:
        """The server process's resident memory in MB (None off Linux)."""
        status = Path(f"/proc/{self.process.pid}/status")
        if not status.exists():
            return None
        line = next(line for line in status.read_text().splitlines() if line.startswith("VmRSS"))
        return int(line.split()[1]) / 1024

    def kill_hard(self) -> None:
        """SIGKILL the server, as a crash would: nothing of it gets to clean up."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """Stop the server (and with it its workers) and close its log."""
        self.connection.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
