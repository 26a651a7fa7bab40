"""The witness's log: every ledger head it was told of, hash-chained and signed by its own key.

The student controls their ledger, their notebook and the machine they run on, so everything
inside a submission can be rewritten consistently afterwards. The witness is a party they do
not control (a JupyterHub service, or a process the instructor runs): each time a ledger gains
an entry, its head is reported to the witness, which appends `{ledger_id, notebook, user, seq,
head, entry_time}` to this log with the time it received it, and answers with a receipt
signed by its Ed25519 key. What the witness saw can then be held against what is submitted
(`compare_with_witness`): a rewrite, a truncation, a swapped or fresh ledger, or a deleted one.

The log is JSON Lines like a ledger: `prev`/`hash` chain the receipts (SHA-256 over the
canonical JSON without `hash` and `signature`), and `signature` is the key's signature of the
hash. The private key is a PEM file beside the log (`W.jsonl.key`), created readable by the
witness's own OS user alone (mode 0600); a key file its group or others can read is refused,
since whoever reads it can re-sign a rewritten log. Its public half is written to `W.jsonl.pub`
(one line, base64 of the 32 raw bytes), answered by the service, and pinned by its fingerprint.

An append is written, then fsynced, before its receipt is given out (`append`); the service
splits the two (`write`, then `sync` from its commit thread) so that one fsync covers the
appends that arrived together.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

from ..core.errors import LedgerError, SpecError
from ..core.ledger.store import GENESIS, canonical_json, now_utc

# -------------------- witness log

#: The fields a client reports; `private` marks a run made without a ledger (ledger=False).
REPORT_FIELDS = (
    "ledger_id",
    "notebook",
    "user",
    "seq",
    "head",
    "entry_time",
    "private",
    "check_id",
    "kind",
    "passed",
    "source",
)
#: Who reported a head: the student's kernel, or the Jupyter server that saw its attestation.
SOURCES = ("kernel", "server")
MAX_FIELD = 4096
#: A receipt line is far below this (fields are capped at MAX_FIELD); a torn tail is within it.
MAX_LINE = 64 * 1024


def key_path(log_path: str | os.PathLike) -> Path:
    """The witness's private key beside its log: `W.jsonl.key`."""
    return Path(str(log_path) + ".key")


def public_key_path(log_path: str | os.PathLike) -> Path:
    """The witness's public key beside its log: `W.jsonl.pub` (public, harmless)."""
    return Path(str(log_path) + ".pub")


def readable_by_others(path: Path) -> bool:
    """Whether the file's group or others may read (or write) it."""
    return bool(path.stat().st_mode & 0o077)


def receipt_hash(receipt: dict) -> str:
    """SHA-256 of a receipt's canonical JSON without its `hash` and `signature`."""
    import hashlib

    body = {k: v for k, v in receipt.items() if k not in ("hash", "signature")}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def load_or_create_key(path: Path):
    """The witness's Ed25519 private key from `path`, created (mode 0600) when absent.

    LedgerError naming the file when an existing key can be read by its group or others: such a
    key may have been copied, and a copy re-signs a rewritten log."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if path.is_file():
        if readable_by_others(path):
            raise LedgerError(
                "the witness key {path} can be read by others (mode {mode}); "
                "make it readable by the witness's user alone (chmod 600) or start with a new key",
                path=str(path),
                mode=oct(path.stat().st_mode & 0o777),
            )
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)  # whatever the umask
        handle.write(pem)
        handle.flush()
        os.fsync(handle.fileno())
    return key


def write_public_key(path: Path, public_key: str) -> None:
    """Write the public key (base64, one line) to `path` unless it already holds it."""
    text = public_key + "\n"
    try:
        if path.read_text(encoding="ascii") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="ascii")
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def read_public_key_file(log_path: str | os.PathLike) -> str:
    """The base64 public key a witness wrote beside its log (`W.jsonl.pub`); LedgerError when the
    file is missing or does not hold a 32-byte key."""
    path = public_key_path(log_path)
    try:
        text = path.read_text(encoding="ascii").strip()
        if len(base64.b64decode(text, validate=True)) == 32:
            return text
    except FileNotFoundError:
        raise LedgerError("the witness public key {name} is missing", name=path.name) from None
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    raise LedgerError("the witness public key {name} does not hold a 32-byte base64 key", name=path.name)


def public_key_text(key) -> str:
    """The public half of a private key, as base64 of its 32 raw bytes."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def public_key_fingerprint(public_key_b64: str) -> str:
    """The key's fingerprint, `sha256:<hex>` of SHA-256 over its 32 raw bytes: short enough for an
    instructor to record when the course starts and pin with `verify --witness-key`."""
    import hashlib

    return "sha256:" + hashlib.sha256(base64.b64decode(public_key_b64, validate=True)).hexdigest()


def signature_ok(receipt: dict, public_key: str) -> bool:
    """Whether `receipt` is whole (its hash) and signed by the key whose public half is given."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        if receipt.get("hash") != receipt_hash(receipt):
            return False
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key))
        key.verify(base64.b64decode(receipt["signature"]), receipt["hash"].encode("ascii"))
        return True
    except (InvalidSignature, KeyError, TypeError, ValueError):
        return False


def validate_report(report) -> dict:
    """The reported head, checked field by field; SpecError naming the first bad field."""
    if not isinstance(report, dict):
        raise SpecError("the report must be a JSON object", field="report")
    unknown = sorted(set(report) - set(REPORT_FIELDS))
    if unknown:
        raise SpecError("unknown field {unknown!r}", unknown=unknown[0], field=unknown[0])
    private = report.get("private", False)
    if not isinstance(private, bool):
        raise SpecError("private must be true or false", field="private")
    passed = report.get("passed")
    if passed is not None and not isinstance(passed, bool):
        raise SpecError("passed must be true, false or null", field="passed")
    source = report.get("source")
    if source is not None and source not in SOURCES:
        raise SpecError("source must be one of {choices}", choices=", ".join(SOURCES), field="source")
    clean = {"private": private, "passed": passed, "source": source}
    for name in ("notebook", "user", "ledger_id", "head", "entry_time", "check_id", "kind"):
        value = report.get(name)
        optional = name in ("check_id", "entry_time", "kind") or (private and name in ("ledger_id", "head"))
        if value is None and optional:
            clean[name] = None
            continue
        if not isinstance(value, str) or not value or len(value) > MAX_FIELD:
            raise SpecError("{name} must be a non-empty string", name=name, field=name)
        clean[name] = value
    seq = report.get("seq")
    if private and seq is None:
        clean["seq"] = None
    elif isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise SpecError("seq must be a whole number >= 0", field="seq")
    else:
        clean["seq"] = seq
    return clean


class WitnessLog:
    """The append-only, hash-chained, signed log a witness keeps."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.key = load_or_create_key(key_path(self.path))
        self.public_key = public_key_text(self.key)
        write_public_key(public_key_path(self.path), self.public_key)
        self._lock = threading.Lock()
        self._head: tuple[int, str] | None = None
        #: Bytes of a half-written last line dropped at start (a write cut short by a kill).
        self.dropped_tail = self._drop_torn_tail()

    def _drop_torn_tail(self) -> int:
        """Cut a last line that lacks its newline: it was being written when the process died, so
        it was never fsynced nor answered, and no receipt anybody holds can be in it."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            start = max(0, size - MAX_LINE)
            tail = os.pread(fd, size - start, start)
            if not tail or tail.endswith(b"\n"):
                return 0
            cut = tail.rfind(b"\n")
            keep = start + cut + 1 if cut >= 0 else 0
            os.ftruncate(fd, keep)
            os.fsync(fd)
            return size - keep
        finally:
            os.close(fd)

    def _read_head(self) -> tuple[int, str]:
        if self._head is None:
            seq, head = 0, GENESIS
            for receipt in read_log(self.path):
                seq, head = receipt["log_seq"], receipt["hash"]
            self._head = (seq, head)
        return self._head

    def append(self, report: dict) -> dict:
        """Record a reported head (validated by `validate_report`), fsync it, and return its
        signed receipt."""
        receipt = self.write(report)
        self.sync()
        return receipt

    def sync(self) -> None:
        """Make every line written so far durable (one fsync covers them all)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write(self, report: dict) -> dict:
        """Validate, chain, sign and write a reported head; its receipt may be given out only
        after a later `sync()`."""
        clean = validate_report(report)
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                seq, prev = self._read_head()
                receipt = {**clean, "log_seq": seq + 1, "time": now_utc(), "prev": prev}
                receipt["hash"] = receipt_hash(receipt)
                receipt["signature"] = base64.b64encode(self.key.sign(receipt["hash"].encode("ascii"))).decode()
                line = (json.dumps(receipt, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
                written = os.write(fd, line)
                if written != len(line):
                    raise OSError(f"short write to the witness log ({written} of {len(line)} bytes)")
                self._head = (receipt["log_seq"], receipt["hash"])
            finally:
                os.close(fd)
        return receipt


def read_log(path: str | os.PathLike) -> list[dict]:
    """The receipts of a witness log file, in order; LedgerError when it cannot be read."""
    receipts = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    receipts.append(json.loads(line))
                except ValueError:
                    raise LedgerError(
                        "the witness log {name} line {number} is not JSON", name=Path(path).name, number=number
                    ) from None
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise LedgerError(
            "cannot read the witness log {name}: {strerror}", name=Path(path).name, strerror=exc.strerror
        ) from None
    return receipts


def log_problems(receipts: list[dict], public_key: str | None) -> list[str]:
    """What is wrong with a witness log itself: a broken chain or, given its key, a bad signature."""
    problems, prev = [], GENESIS
    for number, receipt in enumerate(receipts, start=1):
        if receipt.get("prev") != prev or receipt.get("hash") != receipt_hash(receipt):
            problems.append(f"witness log line {number}: the receipt chain is broken")
        elif public_key is not None and not signature_ok(receipt, public_key):
            problems.append(f"witness log line {number}: the signature does not match the witness key")
        prev = receipt.get("hash")
    return problems


def parse_time(text) -> datetime | None:
    """An ISO 8601 time as an aware datetime (UTC when it names no zone), or None."""
    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


#: How far a ledger entry's own time may lie after the witness received its head (clock skew).
CLOCK_SKEW_SECONDS = 5.0


# -------------------- witness receipts
# The witness's receipts as a grader reads them: one per entry, grouped by ledger and student.
#
# The kernel and the server extension may both report the same entry (the same ledger id, seq and
# head): the witness keeps both, and readers keep one, the first received, so that a delay is
# measured from the first delivery. A receipt's `kind` and `passed` (reported with the head)
# let the grader count the failures of a ledger it was never handed.

#: The notebook a run made without a ledger is reported under when no notebook was named
#: (`ledger=False` under nbconvert, a script).
NO_NOTEBOOK = "(no notebook)"


def deduplicated(receipts: list[dict]) -> list[dict]:
    """The receipts with each entry once (by user, ledger id, seq and head: the first received);
    a private run has no head and each is kept."""
    seen: set[tuple] = set()
    kept = []
    for receipt in receipts:
        if not receipt.get("private"):
            key = (receipt.get("user"), receipt.get("ledger_id"), receipt.get("seq"), receipt.get("head"))
            if key in seen:
                continue
            seen.add(key)
        kept.append(receipt)
    return kept


def is_failure(receipt: dict) -> bool:
    """Whether the receipt is of a failed observation (its `kind` and `passed` as reported)."""
    return receipt.get("kind") == "observation" and receipt.get("passed") is False


def ledger_summaries(receipts: list[dict]) -> list[dict]:
    """`{"ledger_id", "entries", "failures", "first", "last"}` for each ledger id among
    `receipts`, in the order the witness first saw them: distinct seqs, failed observations,
    and the times the first and last of them were received."""
    by_id: dict[str, dict] = {}
    for receipt in receipts:
        ledger_id = str(receipt.get("ledger_id"))
        item = by_id.setdefault(
            ledger_id, {"ledger_id": ledger_id, "seqs": set(), "failures": set(), "first": receipt.get("time")}
        )
        item["seqs"].add(receipt.get("seq"))
        if is_failure(receipt):
            item["failures"].add(receipt.get("seq"))
        item["last"] = receipt.get("time")
    return [
        {
            "ledger_id": item["ledger_id"],
            "entries": len(item["seqs"]),
            "failures": len(item["failures"]),
            "first": item["first"],
            "last": item["last"],
        }
        for item in by_id.values()
    ]


def delay_seconds(entry_time: str | None, received: str | None) -> float | None:
    """Seconds from an entry's own time to the witness receiving its head (None if unreadable)."""
    entry, at = parse_time(entry_time), parse_time(received)
    if not isinstance(entry, datetime) or not isinstance(at, datetime):
        return None
    return (at - entry).total_seconds()


# -------------------- commit
# Group commit for the witness: one fsync for the appends that arrived together.
#
# Every receipt is answered only after an fsync that covers its line, so a witness killed at
# any moment loses no receipt it gave out. An fsync per append on the event loop would hold up
# every other report for the length of a disk flush; here the loop writes each line (cheap) and
# waits, without blocking, for a commit thread that fsyncs once for every line written before it
# started, then wakes the waiting requests.


def _settle(future: asyncio.Future, error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class GroupCommit:
    """A thread that runs `sync()` for every batch of waiting appends."""

    def __init__(self, sync):
        self._sync = sync
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="witness-commit", daemon=True)
        self._thread.start()
        #: fsyncs run, and appends they covered: their ratio is the batch size.
        self.syncs = self.covered = 0

    async def durable(self) -> None:
        """Return once every line written before this call is on disk (raise if the fsync fails)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._wake:
            self._waiting.append((loop, future))
            self._wake.notify()
        await future

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._waiting:
                    self._wake.wait()
                batch, self._waiting = self._waiting, []
            error = None
            try:
                self._sync()
            except OSError as exc:
                error = exc
            self.syncs += 1
            self.covered += len(batch)
            for loop, future in batch:
                loop.call_soon_threadsafe(_settle, future, error)
