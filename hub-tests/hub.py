"""A real JupyterHub started from examples/jupyterhub_config.py, and what the hub tests do with it.

The hub, its configurable-http-proxy, the witness service and every student's single-user server
are real processes on loopback. `HubProcess.stop` ends them all: the hub's own shutdown first,
then any process left whose working folder or command line lies in this hub's state folder (the
spawned servers run in `<state>/home/<name>`), each by its id.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CONFIG = ROOT / "examples" / "jupyterhub_config.py"
PROXY = ROOT / "hub-tests" / "node_modules" / ".bin" / "configurable-http-proxy"
JUPYTERHUB = Path(sys.executable).with_name("jupyterhub")

#: The public port; the proxy's API, the witness and the hub's API take the next three (see the config).
PORT = int(os.environ.get("GRADCHECK_HUB_TEST_PORT", "18000"))
PUBLIC_URL = f"http://127.0.0.1:{PORT}"
WITNESS = "/services/witness"

#: The class list the hub reads (GRADCHECK_HUB_DIR/passwords.json): two students, each with her password.
PASSWORDS = {"ana": "ana-gradient-2026", "bob": "bob-jacobian-2026"}


class Answer:
    """One HTTP answer: its status and body (parsed as JSON where it is JSON)."""

    def __init__(self, status: int, body: bytes, url: str):
        self.status, self.body, self.url = status, body, url

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self) -> str:
        return f"<{self.status} {self.url}: {self.body[:200]!r}>"


def call(method: str, path: str, body=None, token: str | None = None, timeout: float = 60.0) -> Answer:
    """A request to the hub's public URL (through the proxy), with `Authorization: token ...` when given."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(PUBLIC_URL + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return Answer(answer.status, answer.read(), answer.url)
    except urllib.error.HTTPError as refused:
        return Answer(refused.code, refused.read(), refused.url)


def ports_taken(first: int, count: int) -> list[int]:
    """The ports among first..first+count-1 that something already listens on."""
    taken = []
    for port in range(first, first + count):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                taken.append(port)
    return taken


def processes_in(folder: Path) -> list[int]:
    """Ids of this machine's processes whose working folder or command line lies in `folder`."""
    mine, marker = [], str(folder)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if cwd == marker or cwd.startswith(marker + "/") or marker in cmdline:
            mine.append(int(entry.name))
    return mine


class HubProcess:
    """A JupyterHub run from the example config with its state in `folder`."""

    def __init__(self, folder: Path, instructor_token: str):
        self.folder, self.instructor_token = folder, instructor_token
        self.log_path = folder / "hub.log"
        self.process: subprocess.Popen | None = None
        #: The folder of the students' homes (their OS accounts'), set by the test's fixture.
        self.homes: Path | None = None

    def start(self, timeout: float = 90.0) -> HubProcess:
        taken = ports_taken(PORT, 4)
        if taken:
            raise RuntimeError(f"ports {taken} are in use: another hub test or service is running there")
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "passwords.json").write_text(json.dumps(PASSWORDS), encoding="utf-8")
        env = {
            key: value for key, value in os.environ.items() if not key.startswith(("JUPYTERHUB_", "GRADCHECK_", "JPY_"))
        }
        env.update(
            {
                "GRADCHECK_HUB_DIR": str(self.folder),
                "GRADCHECK_HUB_PORT": str(PORT),
                "GRADCHECK_HUB_PROXY": str(PROXY),
                "GRADCHECK_WITNESS_TOKEN": self.instructor_token,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            }
        )
        log = open(self.log_path, "wb")
        # SIGINT back to its default: a hub started from a background job would otherwise pass an
        # ignored SIGINT on to the witness and the servers, and the hub stops those with SIGINT.
        self.process = subprocess.Popen(
            [str(JUPYTERHUB), "-f", str(EXAMPLE_CONFIG)],
            cwd=self.folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the hub exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if (
                    call("GET", "/hub/api/", timeout=5).status == 200
                    and call("GET", WITNESS + "/public-key", timeout=5).status == 200
                ):
                    return self
            except OSError:  # not listening yet
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the hub or its witness did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no hub log)"

    def stop(self) -> list[int]:
        """Stop the hub (it stops the proxy, the witness and the servers), then end anything left in
        its state folder; the ids of the processes that had to be killed that way."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return kill_processes_in(self.folder)


def make_accounts(homes: Path, names) -> list[str]:
    """An OS account for each student name that has none, its home `homes/<name>` (mode 0700, the
    student's own); the names of the accounts made, for `remove_accounts`. Needs root."""
    made = []
    for name in names:
        home = homes / name
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(
                ["useradd", "--no-create-home", "--home-dir", str(home), "--shell", "/usr/sbin/nologin"]
                + ["--user-group", name],
                check=True,
                capture_output=True,
            )
            made.append(name)
        account = pwd.getpwnam(name)
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, account.pw_uid, account.pw_gid)
        home.chmod(0o700)
    return made


def remove_accounts(names: list[str]) -> None:
    """Remove the accounts `make_accounts` made (their homes go with the test's folder)."""
    for name in names:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@contextlib.contextmanager
def interpreter_reachable():
    """While inside, every student account may reach this Python (the servers run it as them):
    each folder above the real interpreter that others cannot traverse gets o+x (traverse, not
    list) and has its mode back on leaving."""
    changed = []
    try:
        for folder in Path(os.path.realpath(sys.executable)).parents:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
                changed.append((folder, stat.S_IMODE(mode)))
        yield
    finally:
        for folder, mode in changed:
            folder.chmod(mode)


def as_student(name: str, *command: str) -> subprocess.CompletedProcess:
    """`command` run as the OS account `name` (runuser), as that student's kernel would run it."""
    return subprocess.run(["runuser", "-u", name, "--", *command], capture_output=True, text=True, timeout=60)


def kill_processes_in(folder: Path) -> list[int]:
    """SIGKILL every process whose working folder or command line lies in `folder`; their ids."""
    left = processes_in(folder)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


class Student:
    """A student of the class: her name, and the token she got by logging in with her password."""

    def __init__(self, name: str, token: str):
        self.name, self.token = name, token

    @property
    def base(self) -> str:
        return f"/user/{self.name}/"

    def server_call(self, method: str, path: str, body=None, token: str | None = None) -> Answer:
        """A request to this student's server (under her base URL), with her token unless another is given."""
        return call(method, self.base + path, body, token or self.token)


def log_in(name: str, password: str) -> Answer:
    """Log in through the hub's authenticator: a new API token for `name`, given her password."""
    return call(
        "POST", f"/hub/api/users/{name}/tokens", {"auth": {"username": name, "password": password}, "note": "hub test"}
    )


def start_servers(students: list[Student], timeout: float = 150.0) -> dict[str, float]:
    """Ask the hub for every student's server at once (each with her own token) and wait until all
    are ready and their gradcheck extension answers; the seconds each took."""
    started = time.monotonic()
    for student in students:
        answer = call("POST", f"/hub/api/users/{student.name}/server", {}, student.token, timeout=timeout)
        if answer.status not in (201, 202):
            raise RuntimeError(f"the hub would not start {student.name}'s server: {answer!r}")
    ready: dict[str, float] = {}
    deadline = started + timeout
    while len(ready) < len(students) and time.monotonic() < deadline:
        for student in students:
            if student.name in ready:
                continue
            model = call("GET", f"/hub/api/users/{student.name}", token=student.token).json()
            if (
                model.get("servers", {}).get("", {}).get("ready")
                and student.server_call("GET", "gradcheck/status").status == 200
            ):
                ready[student.name] = time.monotonic() - started
        time.sleep(0.5)
    if len(ready) < len(students):
        raise RuntimeError(f"servers not ready after {timeout:.0f} s: only {sorted(ready)}")
    return ready


def stop_servers(students: list[Student]) -> None:
    """Ask the hub to stop every student's server (each with her own token)."""
    for student in students:
        try:
            call("DELETE", f"/hub/api/users/{student.name}/server", token=student.token, timeout=30)
        except OSError:  # the hub is already gone: HubProcess.stop ends what is left
            pass
