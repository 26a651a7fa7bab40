"""Large ledgers have their hashes checked in a forked process while this one decodes."""

from __future__ import annotations

import pytest

from jupyterlab_gradcheck.core.ledger import verify
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file


def _public(report: dict) -> dict:
    return {k: v for k, v in report.items() if not k.startswith("_")}


@pytest.fixture
def ledger_path(tmp_path):
    path = tmp_path / "lab.gradcheck.jsonl"
    ledger = Ledger(path)
    for number in range(40):
        ledger.append("note", f"check-{number % 3}", {"text": f"entry {number}", "padding": "x" * 3000})
    return path


def test_child_hashing_gives_the_same_report(ledger_path, monkeypatch):
    """Given a ledger verified once with hashing in a thread,
    when the size threshold sends it to a forked child instead,
    then the report is identical and intact."""
    thread_report = verify_ledger_file(ledger_path)
    monkeypatch.setattr(verify, "HASH_IN_CHILD_ABOVE", 0)
    child_report = verify_ledger_file(ledger_path)
    assert child_report["ok"] is True and child_report["entries"] == 40
    assert _public(child_report) == _public(thread_report)


def test_child_hashing_still_names_a_changed_line(ledger_path, monkeypatch):
    """Given one byte changed inside line 17's data,
    when verified through the child path,
    then the report fails naming line 17 as a hash mismatch, as the thread path does."""
    lines = ledger_path.read_bytes().split(b"\n")
    assert b"entry 15" in lines[16]  # line 1 is the genesis entry, so line 17 holds entry 15
    lines[16] = lines[16].replace(b"entry 15", b"entry 51", 1)
    ledger_path.write_bytes(b"\n".join(lines))
    monkeypatch.setattr(verify, "HASH_IN_CHILD_ABOVE", 0)
    report = verify_ledger_file(ledger_path)
    assert report["ok"] is False
    assert any(e["line"] == 17 and "hash mismatch" in e["reason"] for e in report["errors"])
