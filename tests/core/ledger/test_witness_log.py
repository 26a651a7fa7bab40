"""The witness's log: hash-chained, signed receipts, and the findings it supports."""

from __future__ import annotations

import base64
import json

import pytest

from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.witness.log import WitnessLog, log_problems, public_key_fingerprint, read_log, signature_ok
from jupyterlab_gradcheck.witness.verify import witness_findings

HEAD_A, HEAD_B, HEAD_C = "a" * 64, "b" * 64, "c" * 64


def _report(seq, head, *, ledger_id="L1", notebook="lab1.ipynb", user="ana", entry_time="2026-01-01T10:00:00+00:00"):
    return {
        "ledger_id": ledger_id,
        "notebook": notebook,
        "user": user,
        "seq": seq,
        "head": head,
        "entry_time": entry_time,
    }


def test_receipts_chain_and_carry_the_witness_signature(tmp_path):
    """Given a fresh witness log, when two heads are reported,
    then the receipts chain (prev = the hash before), each signature verifies with the public
    key, the key file is private (0600), and the log reads back with no problem."""
    log = WitnessLog(tmp_path / "w.jsonl")
    first, second = log.append(_report(1, HEAD_A)), log.append(_report(2, HEAD_B))
    assert (first["log_seq"], second["log_seq"]) == (1, 2) and second["prev"] == first["hash"]
    assert signature_ok(first, log.public_key) and signature_ok(second, log.public_key)
    assert (tmp_path / "w.jsonl.key").stat().st_mode & 0o777 == 0o600
    assert read_log(tmp_path / "w.jsonl") == [first, second]
    assert log_problems(read_log(tmp_path / "w.jsonl"), log.public_key) == []


def test_the_fingerprint_is_the_sha256_of_the_raw_public_key(tmp_path):
    """Given a witness key, when its fingerprint is taken, then it is "sha256:" and the hex SHA-256
    of the key's 32 raw bytes (what an instructor records and `--witness-key` pins), and two
    witnesses' keys have different fingerprints."""
    import hashlib

    log, other = WitnessLog(tmp_path / "w.jsonl"), WitnessLog(tmp_path / "other.jsonl")
    raw = base64.b64decode(log.public_key)
    assert len(raw) == 32
    assert public_key_fingerprint(log.public_key) == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert public_key_fingerprint(log.public_key) != public_key_fingerprint(other.public_key)


def test_a_half_written_last_line_is_dropped_when_the_log_is_opened_again(tmp_path):
    """Given a log with one receipt and then half a line (a write cut short by a kill: never
    fsynced, never answered), when the log is opened again, then the half line is dropped (its
    byte count said), the next receipt chains onto the first, and the log reads back whole."""
    first = WitnessLog(tmp_path / "w.jsonl").append(_report(1, HEAD_A))
    with open(tmp_path / "w.jsonl", "ab") as handle:
        handle.write(b'{"entry_time":"2026-01-01T10:00:00+00:00","head":"bbbb')
    reopened = WitnessLog(tmp_path / "w.jsonl")
    assert reopened.dropped_tail == len(b'{"entry_time":"2026-01-01T10:00:00+00:00","head":"bbbb')
    second = reopened.append(_report(2, HEAD_B))
    assert (second["log_seq"], second["prev"]) == (2, first["hash"])
    assert read_log(tmp_path / "w.jsonl") == [first, second]
    assert log_problems(read_log(tmp_path / "w.jsonl"), reopened.public_key) == []


def test_a_forged_receipt_fails_signature_checking(tmp_path):
    """Given a genuine receipt, when its head is changed and its hash recomputed (all a forger
    without the key can do), then its signature no longer verifies, and a log holding it is
    reported at that line; a receipt signed by another witness's key fails too."""
    log = WitnessLog(tmp_path / "w.jsonl")
    genuine = log.append(_report(1, HEAD_A))
    forged = dict(genuine, head=HEAD_B)
    from jupyterlab_gradcheck.witness import log as witness_log

    forged["hash"] = witness_log.receipt_hash(forged)
    assert not signature_ok(forged, log.public_key)
    (tmp_path / "w.jsonl").write_text(json.dumps(forged) + "\n")
    assert log_problems(read_log(tmp_path / "w.jsonl"), log.public_key) == [
        "witness log line 1: the signature does not match the witness key"
    ]
    other = WitnessLog(tmp_path / "other.jsonl")
    assert not signature_ok(genuine, other.public_key)
    assert base64.b64decode(log.public_key) != base64.b64decode(other.public_key)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"seq": -1}, "seq"),
        ({"seq": True}, "seq"),
        ({"head": ""}, "head"),
        ({"user": 3}, "user"),
        ({"notebook": "x" * 5000}, "notebook"),
        ({"extra": 1}, "extra"),
        ({"private": "yes"}, "private"),
    ],
)
def test_a_malformed_report_is_refused_naming_its_field(tmp_path, change, field):
    """Given a witness log, when a report has a bad field, then SpecError names that field
    and nothing is appended."""
    log = WitnessLog(tmp_path / "w.jsonl")
    with pytest.raises(SpecError) as caught:
        log.append({**_report(1, HEAD_A), **change})
    assert caught.value.field == field
    assert read_log(tmp_path / "w.jsonl") == []


def _seen(tmp_path, *reports):
    log = WitnessLog(tmp_path / "w.jsonl")
    return [log.append(r) for r in reports]


def test_an_intact_ledger_agrees_with_everything_the_witness_saw(tmp_path):
    """Given a witness that saw seq 1 and 2 of ledger L1, when the submitted L1 holds those
    hashes, then there is no error and the submission counts as witnessed, for the student the
    witness saw (ana)."""
    receipts = _seen(tmp_path, _report(1, HEAD_A), _report(2, HEAD_B))
    found = witness_findings(
        receipts, notebook="lab1.ipynb", user=None, ledger_id="L1", hashes={1: HEAD_A, 2: HEAD_B}, times=None
    )
    assert found == {"witnessed": True, "errors": [], "flags": [], "seen": 2, "student": "ana"}


@pytest.mark.parametrize(
    "hashes, ledger_id, expected",
    [
        (
            {1: HEAD_A, 2: HEAD_C},
            "L1",
            "has hash cccccccccccc, but the witness saw bbbbbbbbbbbb: the ledger was rewritten",
        ),
        ({1: HEAD_A}, "L1", "the ledger has no entry at seq 2"),
        ({1: HEAD_C}, "L2", "the witness never saw ledger L2 for lab1.ipynb; it saw L1"),
        (None, None, "the ledger of lab1.ipynb is missing, but the witness saw it up to seq 2"),
    ],
)
def test_a_rewrite_a_truncation_a_fresh_ledger_and_a_deletion_are_errors(tmp_path, hashes, ledger_id, expected):
    """Given a witness that saw seq 1 and 2 of L1 for ana's lab1.ipynb, when the submission was
    rewritten at seq 2, truncated to seq 1, replaced by a fresh ledger L2, or deleted,
    then each is an error naming the witnessed seq."""
    receipts = _seen(tmp_path, _report(1, HEAD_A), _report(2, HEAD_B))
    found = witness_findings(
        receipts, notebook="lab1.ipynb", user="ana", ledger_id=ledger_id, hashes=hashes, times=None
    )
    assert len(found["errors"]) == 1 and expected in found["errors"][0], found
    assert found["witnessed"] is False if hashes is not None else found["witnessed"] is True


def test_an_older_run_swapped_in_and_an_edited_time_are_errors(tmp_path):
    """Given a witness that saw ledger L1 and then a newer L2 of the same notebook,
    when L1 is submitted with an entry time moved after the witness received it,
    then both the swap and the edited time are errors."""
    receipts = _seen(tmp_path, _report(1, HEAD_A), _report(1, HEAD_B, ledger_id="L2"))
    found = witness_findings(
        receipts,
        notebook="lab1.ipynb",
        user=None,
        ledger_id="L1",
        hashes={1: HEAD_A},
        times={1: "2999-01-01T00:00:00+00:00"},
    )
    assert any("saw a newer ledger L2" in e for e in found["errors"])
    assert any("claims the time 2999-01-01" in e and "its time was edited" in e for e in found["errors"])


def test_private_runs_and_unwitnessed_entries_are_flags_not_errors(tmp_path):
    """Given a witness that saw seq 1 of L1 and two runs made with ledger=False,
    when L1 is submitted with seq 1 and a seq 2 the witness never saw,
    then there is no error, and both the private runs and the unwitnessed entry (its count and
    first seq) are flagged."""
    private = {
        "private": True,
        "notebook": "lab1.ipynb",
        "user": "ana",
        "ledger_id": None,
        "head": None,
        "seq": None,
        "check_id": "x*x@1",
    }
    receipts = _seen(tmp_path, _report(1, HEAD_A), private, private)
    found = witness_findings(
        receipts, notebook="lab1.ipynb", user=None, ledger_id="L1", hashes={1: HEAD_A, 2: HEAD_B}, times=None
    )
    assert found["errors"] == []
    assert [(f["flag"], f["count"], f.get("first_seq")) for f in found["flags"]] == [
        ("private_runs_witnessed", 2, None),
        ("unwitnessed", 1, 2),
    ]
