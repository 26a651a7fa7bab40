"""Report each new ledger head to the witness, in the background, never blocking a check.

Configured by `GRADCHECK_WITNESS_URL` and `GRADCHECK_WITNESS_TOKEN` (under JupyterHub the
user's own `JUPYTERHUB_API_TOKEN` serves when no witness token is set), or by `configure()`
(the server extension's `witness_url` / `witness_token`). Unconfigured, it does nothing. A
report names no user: the witness takes it from the token (a student's own token standalone,
their hub token under JupyterHub).

Every entry's head is reported, one report per entry, carrying the entry's own time: the
witness holds a ledger as witnessed only when it received every entry's head, each within a
bounded delay of the entry's time. Reports wait in one queue, first in first out, sent by one
thread, so each ledger's heads arrive in seq order and none is ever replaced by a newer one. A
witness that is down or refuses costs the check nothing: the queue keeps every report and
retries its first with a growing pause, then sends the rest in order (the witness sees them
late, with their own times, and says so), and the ledger gets one note, `witness_pending`,
the first time a head of it could not be delivered. The first time a process reports an entry
of a ledger that already has earlier entries, it first asks the witness which of them it holds
(`GET log?ledger_id=`) and sends the missing ones, in order: entries written by a process that
exited while the witness was down (a CLI run, a restarted kernel) are delivered late, never
lost. A report the witness answers 400 (it can
never accept it) is set aside in `rejected` so that it does not hold up the rest. At exit the
queue is given a moment to drain, unless the witness is known to be down.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from ..core.errors import GradcheckError

URL_VARIABLE = "GRADCHECK_WITNESS_URL"
TOKEN_VARIABLE = "GRADCHECK_WITNESS_TOKEN"
TIMEOUT = 5.0
#: Pauses between tries while the witness cannot be reached, in seconds.
RETRY_PAUSES = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
DRAIN_AT_EXIT = 3.0
#: Who sends a report: the process that wrote the entry (a kernel, the CLI) unless told otherwise.
DEFAULT_SOURCE = "kernel"


def notebook_of(ledger_path: Path, notebook: Path | None) -> str:
    """The notebook's file name a report is keyed by: `lab1.ipynb` for `lab1.gradcheck.jsonl`."""
    if notebook is not None:
        return Path(notebook).name
    name = ledger_path.name
    return name[: -len(".gradcheck.jsonl")] + ".ipynb" if name.endswith(".gradcheck.jsonl") else name


class CatchUp:
    """A queue item: before `upto`, send whatever earlier entries of its ledger the witness lacks."""

    def __init__(self, upto: dict):
        self.upto = upto


class WitnessClient:
    """The queue of reports to one witness and the thread that sends them, in order."""

    def __init__(self, url: str, token: str, source: str = DEFAULT_SOURCE):
        self.url, self.token, self.source = url.rstrip("/"), token, source
        self._pending: collections.deque[tuple[str, dict, object]] = collections.deque()
        self._wake = threading.Condition()
        self._noted: set = set()  # ledgers that already carry a witness_pending (or witness_refused) note
        self._caught_up: set[str] = set()  # ledgers this process has checked against the witness
        self._thread: threading.Thread | None = None
        self.receipts: list[dict] = []
        #: Reports the witness refused as malformed (400), with its answer: never retried.
        self.rejected: list[tuple[dict, str]] = []
        self.last_error: str | None = None
        #: The witness's answer when it refused this client's token (401 or 403), else None. A refused
        #: token is never retried: what was queued is dropped, each ledger queued then gets one
        #: `witness_refused` note, stderr one line, and later reports are not queued (verify then reads
        #: their entries as unwitnessed).
        self.refused: str | None = None

    # ------------------------------------------------------------------ queueing
    def report(self, key: str, report: dict, ledger=None) -> None:
        """Queue `report` (after every report queued before it) and return at once; `key` names
        its ledger, for the one `witness_pending` note per ledger."""
        with self._wake:
            if self.refused is not None:  # said once, when it was refused: nothing is queued again
                return
            if ledger is not None and key not in self._caught_up:
                self._caught_up.add(key)
                if isinstance(report.get("seq"), int) and report["seq"] > 1:
                    self._pending.append((key, CatchUp(report), ledger))
            self._pending.append((key, report, ledger))
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
                key, item, ledger = self._pending[0]  # sent before anything queued after it
            report = item.upto if isinstance(item, CatchUp) else item
            try:
                receipt = self._catch_up(report, ledger) if isinstance(item, CatchUp) else self._send(report)
            except urllib.error.HTTPError as exc:
                if exc.code in (401, 403):
                    self._refuse(_answer_text(exc))
                    continue
                if exc.code != 400:
                    failures = self._failed(exc, key, report, ledger, failures)
                    continue
                self._done(None, (report, _answer_text(exc)))
            except (OSError, ValueError) as exc:  # URLError, timeouts, bad answers
                failures = self._failed(exc, key, report, ledger, failures)
                continue
            else:
                self._done(receipt, None)
            failures = 0

    def _failed(self, exc: Exception, key: str, report: dict, ledger, failures: int) -> int:
        """Note the outage, pause, and keep the report first in the queue; the failures so far."""
        self.last_error = str(exc)
        self._note_pending(key, report, ledger)
        time.sleep(RETRY_PAUSES[min(failures, len(RETRY_PAUSES) - 1)])
        return failures + 1

    def _refuse(self, answer: str) -> None:
        """The witness refused the token: stop, drop the queue, and say so once per ledger and once on stderr."""
        with self._wake:
            dropped, self._pending = list(self._pending), collections.deque()
            self.refused = answer
            self._wake.notify_all()
        print(
            f"gradcheck: the witness at {self.url} refused this token ({answer.strip()[:200]}); "
            "nothing more is reported to it from this process",
            file=sys.stderr,
        )
        for key, item, ledger in dropped:
            self._note_refused(key, item.upto if isinstance(item, CatchUp) else item, ledger)

    def _done(self, receipt: dict | None, rejected: tuple[dict, str] | None) -> None:
        with self._wake:
            self._pending.popleft()
            if receipt is not None:
                self.receipts.append(receipt)
            if rejected is not None:
                self.rejected.append(rejected)
            self.last_error = None
            self._wake.notify_all()

    def _catch_up(self, upto: dict, ledger) -> None:
        """Send the entries before `upto` that the witness lacks, in order (see the module)."""
        request = urllib.request.Request(
            f"{self.url}/log?" + urllib.parse.urlencode({"ledger_id": upto["ledger_id"]}),
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            seen = {r.get("seq") for r in json.loads(answer.read().decode("utf-8"))["receipts"]}
        try:
            entries = ledger.entries()
        except GradcheckError:  # a ledger that cannot be read: verify says so, nothing to send
            return None
        for entry in entries:
            seq = entry.get("seq")
            if isinstance(seq, int) and 1 <= seq < upto["seq"] and seq not in seen and entry.get("hash"):
                report = entry_report(ledger.path, ledger.notebook, entry, upto["ledger_id"], self.source)
                receipt = self._send(report)
                with self._wake:
                    self.receipts.append(receipt)
                seen.add(seq)
        return None

    def _send(self, report: dict) -> dict:
        request = urllib.request.Request(
            f"{self.url}/heads",
            data=json.dumps(report).encode("utf-8"),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return json.loads(answer.read().decode("utf-8"))

    #: The ledger note of each event, once per ledger: its text, and the attribute its reason is read from.
    NOTES = {
        "witness_pending": ("the witness could not be reached; this head is reported when it is back", "last_error"),
        "witness_refused": (
            "the witness refused this token; no head of this ledger is reported from this process",
            "refused",
        ),
    }

    def _note_pending(self, key: str, report: dict, ledger) -> None:
        """Once per ledger and outage: a `witness_pending` note in the ledger itself."""
        self._note_once("witness_pending", key, report, ledger)

    def _note_refused(self, key: str, report: dict, ledger) -> None:
        """Once per ledger: a `witness_refused` note in the ledger itself."""
        self._note_once("witness_refused", key, report, ledger)

    def _note_once(self, event: str, key: str, report: dict, ledger) -> None:
        """The note of `event` in the ledger of `key`, unless it holds one from this process already."""
        mark = key if event == "witness_pending" else (event, key)
        if ledger is None or mark in self._noted:
            return
        self._noted.add(mark)
        text, reason = self.NOTES[event]
        try:
            ledger.note(text, event=event, seq=report.get("seq"), reason=getattr(self, reason), witness=False)
        except Exception:  # noqa: BLE001 - a note that cannot be written must not stop the client
            pass


def _answer_text(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode("utf-8", "replace")[:500]
    except OSError:
        return str(exc)


_client: WitnessClient | None = None
_lock = threading.Lock()
_configured: tuple[str, str, str] | None = None


def configure(url: str | None, token: str | None, source: str = DEFAULT_SOURCE) -> None:
    """Use this witness from now on, reporting as `source` ("kernel" or "server"); None: go back
    to the environment."""
    global _configured, _client
    with _lock:
        _configured = (url, token or "", source) if url else None
        _client = None


def client() -> WitnessClient | None:
    """The process's client for the configured witness, or None when there is none."""
    global _client
    if _configured is not None:
        url, token, source = _configured
    else:
        url = os.environ.get(URL_VARIABLE, "").strip()
        token = os.environ.get(TOKEN_VARIABLE) or os.environ.get("JUPYTERHUB_API_TOKEN", "")
        source = DEFAULT_SOURCE
    if not url:
        return None
    with _lock:
        if _client is None or (_client.url, _client.token, _client.source) != (url.rstrip("/"), token, source):
            _client = WitnessClient(url, token, source)
        return _client


def entry_report(ledger_path, notebook, entry: dict, ledger_id: str | None, source: str) -> dict:
    """The report of one ledger entry: its seq, hash and own time, its kind, and for an
    observation whether it passed."""
    path = Path(ledger_path)
    data = entry.get("data")
    passed = data.get("passed") if entry.get("kind") == "observation" and isinstance(data, dict) else None
    return {
        "ledger_id": ledger_id or "legacy:" + path.name,
        "notebook": notebook_of(path, notebook),
        "seq": entry["seq"],
        "head": entry["hash"],
        "entry_time": entry["time"],
        "check_id": entry.get("check_id"),
        "kind": entry.get("kind"),
        "passed": passed if isinstance(passed, bool) else None,
        "source": source,
    }


def report_entry(ledger, entry: dict, ledger_id: str | None) -> None:
    """After an append: queue the report of the ledger's new entry when a witness is set (the
    `witness_pending` note too: every entry is witnessed; it is written once per ledger, so it
    never loops)."""
    target = client()
    if target is None:
        return
    path = Path(ledger.path)
    target.report(str(path.resolve()), entry_report(path, ledger.notebook, entry, ledger_id, target.source), ledger)


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
            "check_id": check_id,
            "seq": None,
            "ledger_id": None,
            "head": None,
            "source": target.source,
        },
    )


@atexit.register
def _drain_at_exit() -> None:
    """Give queued reports a moment at exit, unless the witness is already known to be down
    (then the ledger's witness_pending note says so, and exiting is not held up)."""
    if _client is not None and _client.last_error is None:
        _client.drain(DRAIN_AT_EXIT)
