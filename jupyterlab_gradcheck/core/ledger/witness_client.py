"""Report each new ledger head to the witness, in the background, never blocking a check.

Configured by `GRADCHECK_WITNESS_URL` and `GRADCHECK_WITNESS_TOKEN` (under JupyterHub the
user's own `JUPYTERHUB_API_TOKEN` serves when no witness token is set), or by `configure()`
(the server extension's `witness_url` / `witness_token`). Unconfigured, it does nothing.

A report is queued and sent by one thread. A witness that is down or refuses costs the check
nothing: the report stays queued and is retried with a growing pause, the newest head of a
ledger replacing older ones (the chain makes it cover them), and the ledger gets one note,
`witness_pending`, the first time a head of it could not be delivered. At exit the queue is
given a moment to drain, unless the witness is known to be down.
"""

from __future__ import annotations

import atexit
import collections
import getpass
import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

URL_VARIABLE = "GRADCHECK_WITNESS_URL"
TOKEN_VARIABLE = "GRADCHECK_WITNESS_TOKEN"
TIMEOUT = 5.0
#: Pauses between tries while the witness cannot be reached, in seconds.
RETRY_PAUSES = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
DRAIN_AT_EXIT = 3.0


def witness_user() -> str:
    """Who the witness is told ran the check (it trusts its hub login over this when it has one)."""
    return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()


def notebook_of(ledger_path: Path, notebook: Path | None) -> str:
    """The notebook's file name a report is keyed by: `lab1.ipynb` for `lab1.gradcheck.jsonl`."""
    if notebook is not None:
        return Path(notebook).name
    name = ledger_path.name
    return name[: -len(".gradcheck.jsonl")] + ".ipynb" if name.endswith(".gradcheck.jsonl") else name


class WitnessClient:
    """The queue of reports to one witness and the thread that sends them."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url.rstrip("/"), token
        self._pending: collections.OrderedDict[str, tuple[dict, object]] = collections.OrderedDict()
        self._wake = threading.Condition()
        self._noted: set[str] = set()  # ledgers that already carry a witness_pending note
        self._thread: threading.Thread | None = None
        self.receipts: list[dict] = []
        self.last_error: str | None = None

    # ------------------------------------------------------------------ queueing
    def report(self, key: str, report: dict, ledger=None) -> None:
        """Queue `report` (the newest for `key` replaces an unsent older one) and return at once."""
        with self._wake:
            self._pending.pop(key, None)
            self._pending[key] = (report, ledger)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="gradcheck-witness", daemon=True)
                self._thread.start()
            self._wake.notify()

    def pending(self) -> int:
        with self._wake:
            return len(self._pending)

    def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the queue to empty; whether it did."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._pending and time.monotonic() < deadline:
                self._wake.wait(max(0.0, min(0.05, deadline - time.monotonic())))
            return not self._pending

    # ------------------------------------------------------------------- sending
    def _run(self) -> None:
        failures = 0
        while True:
            with self._wake:
                while not self._pending:
                    self._wake.wait()
                key, (report, ledger) = next(iter(self._pending.items()))
            try:
                receipt = self._send(report)
            except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, bad answers
                self.last_error = str(exc)
                self._note_pending(key, report, ledger)
                time.sleep(RETRY_PAUSES[min(failures, len(RETRY_PAUSES) - 1)])
                failures += 1
                continue
            failures = 0
            with self._wake:
                if self._pending.get(key, (None,))[0] is report:
                    del self._pending[key]
                self.receipts.append(receipt)
                self._wake.notify_all()

    def _send(self, report: dict) -> dict:
        request = urllib.request.Request(
            f"{self.url}/heads",
            data=json.dumps(report).encode("utf-8"),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return json.loads(answer.read().decode("utf-8"))

    def _note_pending(self, key: str, report: dict, ledger) -> None:
        """Once per ledger and outage: a `witness_pending` note in the ledger itself."""
        if ledger is None or key in self._noted:
            return
        self._noted.add(key)
        try:
            ledger.note(
                "the witness could not be reached; this head is reported when it is back",
                event="witness_pending",
                seq=report.get("seq"),
                reason=self.last_error,
                witness=False,
            )
        except Exception:  # noqa: BLE001 - a note that cannot be written must not stop the retries
            pass


_client: WitnessClient | None = None
_lock = threading.Lock()
_configured: tuple[str, str] | None = None


def configure(url: str | None, token: str | None) -> None:
    """Use this witness from now on (None: go back to the environment)."""
    global _configured, _client
    with _lock:
        _configured = (url, token or "") if url else None
        _client = None


def client() -> WitnessClient | None:
    """The process's client for the configured witness, or None when there is none."""
    global _client
    if _configured is not None:
        url, token = _configured
    else:
        url = os.environ.get(URL_VARIABLE, "").strip()
        token = os.environ.get(TOKEN_VARIABLE) or os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not url:
        return None
    with _lock:
        if _client is None or (_client.url, _client.token) != (url.rstrip("/"), token):
            _client = WitnessClient(url, token)
        return _client


def report_entry(ledger, entry: dict, ledger_id: str | None) -> None:
    """After an append: report the ledger's new head (its seq and hash) when a witness is set."""
    if entry.get("kind") == "note" and isinstance(entry.get("data"), dict) and entry["data"].get("witness") is False:
        return  # the pending note itself: reported with the next head, never looping here
    target = client()
    if target is None:
        return
    path = Path(ledger.path)
    target.report(
        str(path.resolve()),
        {
            "ledger_id": ledger_id or "legacy:" + path.name,
            "notebook": notebook_of(path, ledger.notebook),
            "user": witness_user(),
            "seq": entry["seq"],
            "head": entry["hash"],
            "entry_time": entry["time"],
            "check_id": entry.get("check_id"),
        },
        ledger,
    )


def report_private(notebook: str | None, check_id: str | None) -> None:
    """A run made without a ledger: the witness sees it as a private run of that notebook."""
    target = client()
    if target is None:
        return
    target.report(
        f"private:{time.monotonic_ns()}",
        {
            "private": True,
            "notebook": Path(notebook).name if notebook else "(no notebook)",
            "user": witness_user(),
            "check_id": check_id,
            "seq": None,
            "ledger_id": None,
            "head": None,
        },
    )


@atexit.register
def _drain_at_exit() -> None:
    """Give queued reports a moment at exit, unless the witness is already known to be down
    (then the ledger's witness_pending note says so, and exiting is not held up)."""
    if _client is not None and _client.last_error is None:
        _client.drain(DRAIN_AT_EXIT)
