"""Faults: a worker killed mid-check or idle, a check past its timeout, a worker out of memory,
a full disk and a read-only ledger.

Each fault must get a clear one-line error, leave the server answering and the next check
working, and lose no entry: every complete line the ledger held before the fault is still
there, byte for byte and in order, and the chain verifies. The faults run one after another
on one server, so the figure "entries lost" covers all of them together.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from figures import record
from live_server import LiveServer
from traitlets.config import Config

from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file

NOTEBOOK = "work/lab1.ipynb"
TIMEOUT = 6.0  #: seconds; a warm scalar check takes milliseconds, the stuck one sleeps 600 s
STUCK = "x*x*x"
SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")


def _config(**extension) -> Config:
    options = {"workers": 1, "timeout": TIMEOUT, "test_slow_functions": {STUCK: 600.0}}
    options.update(extension)
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyterlab_gradcheck": True}, "allow_unauthenticated_access": False},
            "GradcheckExtension": options,
        }
    )


@pytest.fixture
def jp_server_config():
    return _config()


def _honest(x: float) -> dict:
    return {"function": "x*x", "x": x, "analytical_gradient": 2 * x}


class Ledger:
    """The notebook's ledger as the test sees it: what it held, and whether any of it was lost."""

    def __init__(self, path: Path):
        self.path, self.seen = path, b""

    def snapshot(self) -> None:
        self.seen = self.path.read_bytes()

    def lost(self) -> int:
        """Complete lines seen before that are no longer there, at the same place."""
        now = self.path.read_bytes().split(b"\n")
        before = self.seen.split(b"\n")[:-1]
        return sum(1 for index, line in enumerate(before) if index >= len(now) or now[index] != line)


@pytest.fixture
def lab(jp_root_dir):
    root = Path(jp_root_dir)
    (root / "work").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), str(root / NOTEBOOK))
    return Ledger(root / "work" / "lab1.gradcheck.jsonl")


@pytest.fixture
def api(jp_fetch):
    async def call(method, route, body=None):
        response = await jp_fetch(
            "gradcheck",
            route,
            method=method,
            raise_error=False,
            request_timeout=120,
            body=None if body is None else json.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        return response.code, json.loads(response.body)

    return call


async def _pool(api, predicate, what, limit=60.0) -> dict:
    deadline = time.monotonic() + limit
    while True:
        status, body = await api("GET", "status")
        assert status == 200
        if predicate(body["pool"]):
            return body["pool"]
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {body['pool']}"
        await asyncio.sleep(0.05)


async def _recovered(api, lab: Ledger, x: float) -> None:
    """The server answers, the next check works, nothing was lost and the chain verifies."""
    status, body = await api("GET", "status")
    assert status == 200, body
    status, body = await api("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(x)})
    assert status == 200 and body["record"]["passed"] is True, body
    assert lab.lost() == 0
    report = verify_ledger_file(lab.path)
    assert report["chain_ok"], report["errors"]
    lab.snapshot()


def _one_line_error(body: dict, code: str) -> str:
    assert body["code"] == code, body
    assert body["message"] and "\n" not in body["message"]
    return body["message"]


async def test_worker_faults_in_a_row_lose_nothing(api, lab):
    """Given a server with one worker and a ledger holding two honest checks, when a worker is
    killed mid-check, a check runs past the timeout and an idle worker is killed, one after
    another, then each fault answers a clear error, the server keeps answering, the next check
    works, the failed attempts are kept, and no earlier entry is lost."""
    for x in (1.0, 2.0):
        status, body = await api("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(x)})
        assert status == 200, body
    lab.snapshot()
    survived = 0

    # 1. killed mid-check
    request = asyncio.ensure_future(
        api(
            "POST",
            "checks",
            {"notebook": NOTEBOOK, "check": _honest(3.0) | {"function": STUCK, "analytical_gradient": 27.0}},
        )
    )
    pool = await _pool(api, lambda p: any(w["state"] == "busy" for w in p["workers"]), "the check to start")
    os.kill(next(w["pid"] for w in pool["workers"] if w["state"] == "busy"), signal.SIGKILL)
    status, body = await request
    assert status == 500
    assert "SIGKILL" in _one_line_error(body, "worker_crashed")
    await _recovered(api, lab, 4.0)
    survived += 1

    # 2. past the timeout
    started = time.monotonic()
    status, body = await api(
        "POST", "checks", {"notebook": NOTEBOOK, "check": {"function": STUCK, "x": 2.0, "analytical_gradient": 12.0}}
    )
    assert status == 504 and time.monotonic() - started >= TIMEOUT
    _one_line_error(body, "timeout")
    await _recovered(api, lab, 5.0)
    survived += 1

    # 3. an idle worker killed between checks (the next request comes once it is gone)
    pool = await _pool(api, lambda p: p["workers"][0]["state"] == "idle", "an idle worker")
    os.kill(pool["workers"][0]["pid"], signal.SIGKILL)
    await _pool(api, lambda p: p["workers"][0]["state"] == "dead", "the killed worker to be gone")
    await _recovered(api, lab, 6.0)
    survived += 1

    entries = [json.loads(line) for line in lab.path.read_text().splitlines()]
    failed = [e for e in entries if e["kind"] == "observation" and e["data"].get("failed_to_run")]
    assert len(failed) == 2  # the killed and the timed-out attempt, kept with their reasons
    assert failed[0]["data"]["reason"].startswith("worker_crashed") and failed[1]["data"]["reason"].startswith(
        "timeout"
    )
    record(
        "faults survived: worker killed mid-check, past timeout, idle worker killed", f"{survived} of 3, entries lost 0"
    )


async def test_a_worker_that_died_idle_unnoticed_costs_the_request_nothing(api, lab, jp_serverapp, monkeypatch):
    """Given a server with one worker that is killed while idle, and a pool that still sees it
    alive (the request arrives before the death is noticed),
    when a check is POSTed,
    then the task, never started, goes to a fresh worker: 200, the check passes, and the ledger
    holds its expectation and observation with no failed-to-run entry."""
    from jupyterlab_gradcheck.server.service import SERVICE_SETTING

    pool = await _pool(api, lambda p: p["workers"][0]["state"] == "idle", "an idle worker")
    worker = jp_serverapp.web_app.settings[SERVICE_SETTING].pool.worker(0)
    os.kill(pool["workers"][0]["pid"], signal.SIGKILL)
    worker.process.join(timeout=10)  # dead for certain, and reaped
    monkeypatch.setattr(worker, "is_alive", lambda: True)  # the liveness check came just before
    status, body = await api("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(3.0)})
    assert status == 200, body
    assert body["record"]["passed"] is True
    genesis, *entries = [json.loads(line) for line in lab.path.read_text().splitlines()]
    assert genesis["data"]["event"] == "genesis"
    assert [e["kind"] for e in entries] == ["expectation", "observation"]
    assert not entries[1]["data"].get("failed_to_run")
    status, body = await api("GET", "status")
    assert body["pool"]["restarts"] == 1 and body["pool"]["workers"][0]["pid"] != pool["workers"][0]["pid"]
    record("faults survived: idle worker dead before the pool noticed", "1 of 1, entries lost 0")


def _has_memory_option() -> bool:
    from jupyterlab_gradcheck.server.extension import GradcheckExtension

    return "worker_memory_limit" in GradcheckExtension.class_traits()


def _bomb() -> dict:
    """A check whose forward builds 392 MB: the outer product of a 7000x1 and a 1x7000 input
    (4.9e7 elements, within the intermediate limit of 5e7)."""
    return {
        "function": "matmul(x, y).sum()",
        "inputs": {"x": [[1.0]] * 7000, "y": [[1.0] * 7000]},
        "analytical_gradient": {"x": 7000.0, "y": 7000.0},
    }


@pytest.mark.parametrize("jp_server_config", [_config(worker_memory_limit=256 * 2**20, admission_rate=1e15)])
async def test_a_check_too_big_for_the_workers_memory_is_refused_before_it_runs(api, lab):
    """Given workers limited to 256 MiB of address space beyond what they hold with torch loaded,
    when the 392 MB check arrives, then it is refused with 400 over_memory in one line naming the
    device, the memory it needs (2.2 GiB by the estimate) and what is free, and the ledger is
    exactly as it was: nothing ran and nothing was written."""
    status, body = await api("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(1.0)})
    assert status == 200, body
    lab.snapshot()
    status, body = await api("POST", "checks", {"notebook": NOTEBOOK, "check": _bomb()})
    assert (status, body["code"], body["field"]) == (400, "over_memory", "inputs"), body
    assert "14000 elements in float64" in body["message"] and "cpu has" in body["message"], body
    assert "\n" not in body["message"]
    assert lab.path.read_bytes() == lab.seen


# Admission would refuse this check before it runs (1.4e12 element evaluations, and 2.2 GiB by the
# memory estimate): an admission rate of 1e15 per second and a memory fraction of 0 let it through,
# so that the memory limit is what stops it.
@pytest.mark.parametrize(
    "jp_server_config", [_config(worker_memory_limit=256 * 2**20, admission_rate=1e15, memory_fraction=0.0)]
)
async def test_a_worker_out_of_memory_leaves_the_server_answering(api, lab):
    """Given workers limited to 256 MiB of address space beyond what they hold with torch loaded,
    when a check's forward pass needs 392 MB (the outer product of a 7000x1 and a 1x7000 input:
    4.9e7 elements, within the intermediate limit of 5e7), then the request answers a clear 5xx,
    the server keeps answering, the next check works and no earlier entry is lost."""
    assert _has_memory_option(), "no worker_memory_limit option: refusing to run a 392 MB check unprotected"
    status, body = await api("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(1.0)})
    assert status == 200, body
    lab.snapshot()
    status, body = await api("POST", "checks", {"notebook": NOTEBOOK, "check": _bomb()})
    assert status in (500, 503, 507), body
    assert body["message"] and "\n" not in body["message"]
    await _recovered(api, lab, 2.0)
    record("faults survived: worker out of memory", "1 of 1, entries lost 0")


def _ledger_with_two_checks(folder: Path) -> Path:
    ledger = folder / "lab1.gradcheck.jsonl"
    for x in (1, 2):
        completed = subprocess.run(
            [str(SCRIPT), "run", "-", "--ledger", str(ledger)],
            capture_output=True,
            input=json.dumps(_honest(x)),
            text=True,
            timeout=240,
        )
        assert completed.returncode == 0, completed.stderr
    return ledger


def _fill_the_disk(size: int):
    def limit() -> None:  # in the child: a write past `size` bytes fails with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

    return limit


def test_a_full_disk_refuses_the_cli_append_and_loses_nothing(tmp_path):
    """Given a ledger with two checks and a disk that takes only 64 more bytes (RLIMIT_FSIZE),
    when the CLI runs a third check into it, then it exits 2 with one line saying the ledger
    cannot be written, every earlier entry is still there and verifies, and once there is room
    again the next run works and the interrupted write is sealed, not dropped."""
    ledger = _ledger_with_two_checks(tmp_path)
    before = ledger.read_bytes()
    completed = subprocess.run(
        [str(SCRIPT), "run", "-", "--ledger", str(ledger)],
        capture_output=True,
        text=True,
        input=json.dumps(_honest(3)),
        timeout=240,
        preexec_fn=_fill_the_disk(len(before) + 64),
    )
    message = completed.stderr.strip()
    assert completed.returncode == 2, message
    assert len(message.splitlines()) == 1 and "cannot write the ledger" in message, message
    assert ledger.read_bytes().startswith(before)
    report = verify_ledger_file(ledger)
    assert report["entries"] == 4
    completed = subprocess.run(
        [str(SCRIPT), "run", "-", "--ledger", str(ledger)],
        capture_output=True,
        text=True,
        input=json.dumps(_honest(3)),
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr
    assert ledger.read_bytes().startswith(before)
    report = verify_ledger_file(ledger)
    assert report["chain_ok"], report["errors"]
    assert report["entries"] == 4 + 1 + 2  # the seal of the torn write, then the new check
    record("faults survived: full disk (CLI)", "1 of 1, entries lost 0")


SETPRIV = shutil.which("setpriv")


def _without_override() -> list[str]:
    """A command prefix under which file modes bind: root without CAP_DAC_OVERRIDE."""
    if os.geteuid() != 0:
        return []
    if SETPRIV is None:
        pytest.skip("running as root and setpriv is absent: file modes cannot bind")
    caps = "-dac_override,-dac_read_search"
    return [SETPRIV, f"--bounding-set={caps}", f"--inh-caps={caps}"]


def test_a_read_only_ledger_refuses_the_cli_append_and_loses_nothing(tmp_path):
    """Given a ledger with two checks made read-only (for root, run without the capability that
    overrides file modes), when the CLI runs a third check into it, then it exits 2 with one
    line saying the ledger cannot be opened, and the ledger is byte for byte as it was."""
    ledger = _ledger_with_two_checks(tmp_path)
    before = ledger.read_bytes()
    ledger.chmod(0o444)
    completed = subprocess.run(
        [*_without_override(), str(SCRIPT), "run", "-", "--ledger", str(ledger)],
        capture_output=True,
        text=True,
        input=json.dumps(_honest(3)),
        timeout=240,
    )
    message = completed.stderr.strip()
    assert completed.returncode == 2, message
    assert len(message.splitlines()) == 1 and "cannot open the ledger" in message, message
    assert "Permission denied" in message
    assert ledger.read_bytes() == before
    record("faults survived: read-only ledger (CLI)", "1 of 1, entries lost 0")


def test_a_full_disk_under_the_server_answers_an_error_and_loses_nothing(tmp_path):
    """Given a server process whose disk takes only 64 more bytes and a notebook whose ledger
    holds two checks, when a check is POSTed, then it answers 500 ledger_error in one line, the
    server keeps answering, every earlier entry is still there, and once there is room again the
    next check works and the chain verifies."""
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(root / NOTEBOOK))
    ledger = _ledger_with_two_checks(root / "work")
    before = ledger.read_bytes()
    with LiveServer(root, file_size_limit=len(before) + 64) as server:
        status, body = server.call("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(3.0)})
        assert status == 500, body
        assert "cannot write the ledger" in _one_line_error(body, "ledger_error")
        assert server.call("GET", "status")[0] == 200
        assert ledger.read_bytes().startswith(before)
        server.lift_file_size_limit()
        status, body = server.call("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(4.0)})
        assert status == 200 and body["record"]["passed"] is True, body
    assert ledger.read_bytes().startswith(before)
    report = verify_ledger_file(ledger)
    assert report["chain_ok"], report["errors"]
    record("faults survived: full disk (server)", "1 of 1, entries lost 0")


def test_after_a_kill_9_of_the_server_during_a_check_verify_names_the_interrupted_check(tmp_path):
    """Given a server whose worker is running a check (its expectation already in the ledger),
    when the server and its workers are killed with SIGKILL, then the ledger holds the
    expectation and no outcome, and verify names that check, its seq and its line as interrupted
    (a warning: the chain itself is intact)."""
    import threading

    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(root / NOTEBOOK))
    ledger = root / "work" / "lab1.gradcheck.jsonl"
    slow = {"id": "slow_cube", "function": "x*x*x", "x": 2.0, "analytical_gradient": 12.0}
    runtime = tmp_path / "runtime"
    with LiveServer(root, slow_functions={"x*x*x": 600.0}, runtime=runtime) as server:
        threading.Thread(
            target=lambda: server.call("POST", "checks", {"notebook": NOTEBOOK, "check": slow}, 5), daemon=True
        ).start()
        deadline = time.monotonic() + 60
        while not (ledger.exists() and b'"kind":"expectation"' in ledger.read_bytes()):
            assert time.monotonic() < deadline, "the expectation was never written"
            time.sleep(0.05)
        server.kill_hard()
    report = verify_ledger_file(ledger)
    assert report["ok"] and report["chain_ok"], report["errors"]
    assert report["interrupted"] == [{"seq": 1, "line": 2, "check_id": "slow_cube"}]
    assert any("the expectation of 'slow_cube' (seq 1) has no outcome" in w for w in report["warnings"])
    record("faults survived: server kill -9 mid-check", "1 of 1, interrupted check named by verify")

    with LiveServer(root, runtime=runtime) as server:
        status, body = server.call("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(2.0)})
    notes = [json.loads(line) for line in ledger.read_text().splitlines()]
    interrupted = [e for e in notes if e["kind"] == "note" and e["data"].get("event") == "interrupted"]
    assert status == 200, body
    assert len(interrupted) == 1 and interrupted[0]["check_id"] == "slow_cube"
    assert (
        interrupted[0]["data"]["expectation_seq"] == 1
        and "stopped while this check ran" in interrupted[0]["data"]["text"]
    )
    assert verify_ledger_file(ledger)["interrupted"] == [{"seq": 1, "line": 2, "check_id": "slow_cube"}]


def test_a_clean_restart_notes_nothing(tmp_path):
    """Given a server that ran checks to their end and was stopped cleanly,
    when a new server starts on the same root and runtime folder,
    then no interrupted note is written: only checks a crash left open are noted."""
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(root / NOTEBOOK))
    runtime = tmp_path / "runtime"
    with LiveServer(root, runtime=runtime) as server:
        assert server.call("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(2.0)})[0] == 200
    with LiveServer(root, runtime=runtime) as server:
        assert server.call("POST", "checks", {"notebook": NOTEBOOK, "check": _honest(3.0)})[0] == 200
    kinds = [json.loads(line)["kind"] for line in (root / "work" / "lab1.gradcheck.jsonl").read_text().splitlines()]
    assert kinds == ["note", "expectation", "observation", "expectation", "observation"]
