"""Where a grader reads what the witness saw, and the key that proves the witness signed it.

The witness's private key may sit beside its log (`W.jsonl.key`), where a student who can write
to that folder could re-sign a rewritten log. So the grader never takes the key from there:

- `--witness URL`: the receipts come from `GET log` (the instructor's token in
  GRADCHECK_WITNESS_TOKEN) and the key from the witness itself (`GET public-key`);
- `--witness W.jsonl`: the key is pinned by the grader with `--witness-key`, either the key
  itself (base64 of its 32 raw bytes) or its fingerprint (`sha256:<hex>`, recorded when the
  course started), which is checked against the public key the witness wrote to `W.jsonl.pub`.

A log whose receipts are not all signed by the pinned key fails every submission held against
it (core.ledger.witness_log.log_problems names each bad line).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import urllib.request
from pathlib import Path

from ..errors import LedgerError, SpecError
from ..i18n import Message
from .witness_client import TOKEN_VARIABLE
from .witness_log import log_problems, public_key_fingerprint, read_log

#: The prefix of a key fingerprint, as `public_key_fingerprint` writes it.
FINGERPRINT_PREFIX = "sha256:"


def _fetch_json(url: str, token: str | None) -> dict:
    headers = {"Authorization": f"token {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
            body = json.loads(answer.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise LedgerError("cannot read the witness at {source}: {exc}", source=url, exc=exc) from None
    if not isinstance(body, dict):
        raise LedgerError("cannot read the witness at {source}: {exc}", source=url, exc="not a JSON object")
    return body


def raw_key(text: str) -> str:
    """A base64 Ed25519 public key, checked to be 32 bytes; SpecError naming --witness-key if not."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise SpecError(
            "--witness-key must be the witness's public key (base64 of 32 bytes) or its fingerprint "
            "(sha256:<64 hex digits>), got {value!r}",
            value=text[:80],
            field="witness_key",
        )
    return text.strip()


def _published_key(log: Path) -> str | None:
    """The public key the witness wrote beside its log (`W.jsonl.pub`: the base64 key, or a JSON
    object with `public_key`), or None when there is none."""
    published = log.with_name(log.name + ".pub")
    try:
        text = published.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if text.startswith("{"):
        try:
            text = str(json.loads(text).get("public_key") or "")
        except (ValueError, AttributeError):
            return None
    return text or None


def pinned_key(log: Path, witness_key: str | None) -> tuple[str | None, list]:
    """(the public key to check the log's signatures with, problems) for a witness log file.

    SpecError when no key is given (a log file without a pinned key proves nothing); a problem
    (the key is then None, so nothing counts as signed) when the fingerprint does not match the
    key published beside the log."""
    if not witness_key:
        raise SpecError(
            "a witness log needs --witness-key: the witness's public key or the fingerprint recorded "
            "when the course started (its key file beside the log is never read)",
            field="witness_key",
        )
    if not witness_key.startswith(FINGERPRINT_PREFIX):
        return raw_key(witness_key), []
    digest = witness_key[len(FINGERPRINT_PREFIX) :].lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raw_key(witness_key)  # raises, naming the bad value
    published = _published_key(log)
    if published is None:
        return None, [
            Message(
                "no public key beside the witness log ({name}) to check the fingerprint against", name=log.name + ".pub"
            )
        ]
    try:
        found = public_key_fingerprint(published)
    except (binascii.Error, ValueError):
        found = "?"
    if found != FINGERPRINT_PREFIX + digest:
        return None, [
            Message(
                "the witness key beside the log has fingerprint {found}, not the pinned {pinned}: the log was "
                "re-signed with another key",
                found=found[:23],
                pinned=witness_key[:23],
            )
        ]
    return published, []


def load_witness(source: str, witness_key: str | None = None) -> dict:
    """`{"receipts", "problems", "source", "public_key"}` from a witness's URL or its log file.

    A URL is read with the instructor's token (GRADCHECK_WITNESS_TOKEN) and gives its own key;
    a log file needs `witness_key` (see the module's docstring). `problems` are what is wrong
    with the log itself: a broken chain, a signature that is not the pinned key's."""
    if source.startswith(("http://", "https://")):
        base = source.rstrip("/")
        key = str(_fetch_json(base + "/public-key", None).get("public_key") or "")
        if witness_key:
            pinned = (
                witness_key
                if witness_key.startswith(FINGERPRINT_PREFIX)
                else public_key_fingerprint(raw_key(witness_key))
            )
            if not key or public_key_fingerprint(key) != pinned:
                raise LedgerError(
                    "the witness at {source} signs with key {found}, not the pinned {pinned}",
                    source=source,
                    found=public_key_fingerprint(key)[:23] if key else "none",
                    pinned=pinned[:23],
                )
        body = _fetch_json(base + "/log", os.environ.get(TOKEN_VARIABLE, ""))
        receipts, problems = body.get("receipts") or [], []
    else:
        path = Path(source)
        if not path.is_file():
            raise LedgerError("no witness log at {source}", source=source)
        key, problems = pinned_key(path, witness_key)
        receipts = read_log(path)
    problems += log_problems(receipts, key or None)
    return {"receipts": receipts, "problems": problems, "source": source, "public_key": key}
