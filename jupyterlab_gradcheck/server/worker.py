"""One worker process: torch imported once, checks run one at a time, answers over a pipe.

`serve` runs in the child. `WorkerProcess` is the server's handle on it: it starts the child
with the `spawn` start method (the server process holds threads, so it is never forked),
waits for its hello, sends it tasks, and kills it when it dies, hangs or overruns.

Only JSON text crosses the pipe, never pickles: the server does not unpickle what a process
running user expressions made (nor import what unpickling would import, torch included). A
task is `{"op": ..., ...}`; the worker acknowledges it as it arrives (so a worker found dead
before the acknowledgement never started the task, which may then go to a fresh worker), and
then answers with `{"ok": true, "result": ...}` or
`{"ok": false, "error": {"code", "message", "field"}}`, with non-finite numbers spelt as the
ledger spells them ("NaN", "Infinity"). A result that names stored values (tensors above 256
elements, core/values/form.py) carries their blobs beside it,
`"blobs": {sha256: base64}`; the server's handle puts them in its pending cache, checked against
their names, so the append that follows writes them beside the ledger.
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import signal
import threading
import time

from ..core.errors import GradcheckError
from .errors import WorkerCrashed, WorkerFailed, WorkerGone, WorkerTimeout

#: A tiny check each new worker runs once, so that the first real check does not pay for
#: torch's lazy initialisation of autograd and the engine's own imports.
_WARM_UP = {"function": "x*x", "x": 3, "analytical_gradient": 6}
#: What a worker sends the moment a task arrives, before it starts on it.
_ACK = b'{"ack": true}'


# --- the child ------------------------------------------------------------------------


def _limit_memory(extra: int) -> None:
    """Cap this worker's address space at what it holds now (torch loaded) plus `extra` bytes.

    An allocation past the cap fails inside torch with a clear "can't allocate memory" error,
    which is answered like any other worker error: the worker stays up for the next check.
    """
    if extra <= 0:
        return
    import resource

    with open("/proc/self/statm") as statm:
        held = int(statm.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = held + extra
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))


def serve(conn, options: dict) -> None:
    """Entry point of the worker process."""
    # Ctrl-C in the server's terminal reaches the whole process group; the server decides
    # when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import platform

        import torch

        from ..core.check.environment import available_devices

        options = {**options, "devices": available_devices()}
        hello = {
            "ok": True,
            "pid": os.getpid(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "devices": options["devices"],
        }
        _run_check(dict(_WARM_UP), options)
        _limit_memory(options.get("memory_limit") or 0)
        # the free memory each device reports is measured under the cap just set (core/run.py)
        hello["devices"] = options["devices"] = available_devices()
    except BaseException as exc:  # noqa: BLE001 - any failure to start is reported, then exit
        _send(
            conn,
            {
                "ok": False,
                "pid": os.getpid(),
                "error": {
                    "code": "worker_error",
                    "field": None,
                    "message": f"the worker could not start: {type(exc).__name__}: {exc}",
                },
            },
        )
        return
    _send(conn, hello)
    while True:
        try:
            task = json.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the server went away
            return
        conn.send_bytes(_ACK)
        _send(conn, _perform(task, options))


def _send(conn, answer: dict) -> None:
    from ..core.ledger.store import jsonable

    try:
        text = json.dumps(jsonable(answer), allow_nan=False)
    except (ValueError, TypeError, GradcheckError) as exc:
        text = json.dumps(
            {"ok": False, "error": {"code": "worker_error", "field": None, "message": f"the answer is not JSON: {exc}"}}
        )
    conn.send_bytes(text.encode("utf-8"))


def _perform(task: dict, options: dict) -> dict:
    operation = _OPERATIONS.get(task.get("op"))
    if operation is None:
        return {
            "ok": False,
            "error": {"code": "worker_error", "field": None, "message": f"unknown worker operation {task.get('op')!r}"},
        }
    from ..core.values.form import PENDING

    try:
        with PENDING.holding():  # every blob of the answer is still here to hand over
            result = operation(task, options)
            return {"ok": True, "result": result, **_blobs_of(result, task.get("store"))}
    except GradcheckError as exc:
        return {"ok": False, "error": exc.to_json()}
    except Exception as exc:  # noqa: BLE001 - the server answers 500 with this reason
        return {
            "ok": False,
            "error": {
                "code": "worker_error",
                "field": None,
                "message": f"{type(exc).__name__}: {' '.join(str(exc).split())}",
            },
        }


def _blobs_of(result, store: str | None = None) -> dict:
    """`{"blobs": {sha: base64}}` for the stored values the result names whose bytes this worker holds
    (core/values/form.py) and the ledger's store does not have yet (the record's own inputs
    are there already): the server writes them beside the ledger before the line. They leave the
    worker's pending cache with the answer."""
    from ..core.values.blobs import blob_path, referenced_shas
    from ..core.values.form import PENDING

    shas = [sha for sha in referenced_shas(result) if store is None or not blob_path(store, sha).is_file()]
    blobs = {sha: PENDING.get(sha) for sha in shas}
    PENDING.clear()
    held = {sha: base64.b64encode(data).decode("ascii") for sha, data in blobs.items() if data is not None}
    return {"blobs": held} if held else {}


def take_blobs(answer: dict) -> None:
    """Put the blobs a worker's answer carries into this (the server's) pending cache, each checked
    against its name, so that the append that follows can write them."""
    from ..core.values.form import PENDING

    for sha, text in (answer.pop("blobs", None) or {}).items():
        PENDING.put(sha, base64.b64decode(text), verify=True, pin=True)  # until the service's discard


def _run_check(record: dict, options: dict, store: str | None = None) -> dict:
    """The check through the core's entry routine, without a ledger: the service declared it and
    appends its outcome. Memory was admitted by the service, at its share of the free memory this
    worker reported, so the worker does not judge it again (fraction 0)."""
    from ..core.expr.parser import Limits
    from ..core.run import Admission, run_spec
    from ..core.values.tensors import reading_store

    delay = options.get("slow_functions", {}).get(record.get("function"))
    if delay:
        time.sleep(delay)
    admission = Admission(
        devices=options.get("devices"), limits=Limits(**options.get("limits", {})), memory_fraction=0.0
    )
    with reading_store(store):  # stored values of the record are read from the ledger's blob folder
        return run_spec(record, None, admission=admission).record


def _check(task: dict, options: dict) -> dict:
    return _run_check(task["record"], options, task.get("store"))


def _verify(task: dict, options: dict) -> dict:
    from ..core.ledger.verify import verify_path

    return verify_path(task["path"], replay=task["replay"], deep=task["deep"], refused=task.get("refused"))


_OPERATIONS = {"check": _check, "verify": _verify}


# --- the server's handle ----------------------------------------------------------------


class WorkerProcess:
    """A started worker and the server's end of its pipe. Its blocking methods run in a thread.

    The pipe is used by one thread at a time (the hello, then one task after another) and
    is never closed from another thread, where its descriptor could be reused under a
    reader: it closes when the handle is dropped. The process may be killed from any thread.
    """

    def __init__(self, name: str, options: dict):
        context = multiprocessing.get_context("spawn")
        self._conn, child_end = context.Pipe()
        self.process = context.Process(target=serve, args=(child_end, options), name=name, daemon=True)
        self.process.start()
        # Only the child holds its end now, so its death reads as end-of-file here.
        child_end.close()
        self.hello: dict | None = None
        self._reaping = threading.Lock()  #: one thread at a time waits for the process

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def is_alive(self) -> bool:
        return self.process.is_alive()

    def handshake(self, timeout: float) -> dict:
        """Wait for the worker's hello (torch version, devices); WorkerFailed if none comes."""
        if not self._conn.poll(timeout):
            self.kill()
            raise WorkerFailed(f"the worker process did not start within {timeout:g} s")
        try:
            message = json.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            reason = self.exit_reason()
            self.kill()
            raise WorkerFailed(f"the worker process exited while starting ({reason})") from None
        if not message.get("ok"):
            self.kill()
            raise WorkerFailed(message["error"]["message"])
        self.hello = message
        return message

    def call(self, task: dict, timeout: float) -> dict:
        """Send one task and wait for its answer; the worker is killed if it dies or overruns.

        WorkerGone when the worker was dead before it acknowledged the task (nothing ran),
        WorkerCrashed when it died afterwards, WorkerTimeout when the answer is late.
        """
        deadline = time.monotonic() + timeout
        try:
            self._conn.send_bytes(json.dumps(task).encode("utf-8"))
            self._wait(deadline, timeout)
            self._conn.recv_bytes()  # the acknowledgement
        except (EOFError, OSError):
            raise self._ended(WorkerGone, "had died before the request reached it") from None
        try:
            self._wait(deadline, timeout)
            answer = json.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            raise self._ended(WorkerCrashed, "died while running the request") from None
        take_blobs(answer)
        return answer

    def _wait(self, deadline: float, timeout: float) -> None:
        """Return once a message (or end-of-file) is there; kill and WorkerTimeout at the deadline."""
        if not self._conn.poll(max(0.0, deadline - time.monotonic())):
            self.kill()
            raise WorkerTimeout(
                f"the worker did not finish within the {timeout:g} s timeout and was killed; a fresh worker replaces it"
            )

    def _ended(self, error: type, what: str) -> Exception:
        """`error` saying how the worker ended, after making sure it has."""
        reason = self.exit_reason()
        self.kill()
        return error(f"the worker process {what} ({reason}); a fresh worker replaces it")

    def exit_reason(self) -> str:
        """How the process ended, in words (`killed by SIGKILL`, `exit status 1`)."""
        with self._reaping:
            self.process.join(timeout=2)
            code = self.process.exitcode
        if code is None:
            return "it is still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def terminate(self) -> None:
        """Send SIGTERM (the worker's default action: exit at once)."""
        with self._reaping:
            if self.process.exitcode is None:
                self.process.terminate()

    def wait(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the process to end."""
        with self._reaping:
            self.process.join(timeout)

    def kill(self) -> None:
        """Kill the process if it still runs, and reap it. Safe from any thread, repeatedly."""
        with self._reaping:
            if self.process.exitcode is None:
                self.process.kill()
            self.process.join(timeout=5)
