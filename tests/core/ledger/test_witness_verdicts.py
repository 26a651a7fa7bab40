"""What the witness's receipts make of a submitted ledger: witnessed, late, unwitnessed, whose.

The receipts here are as the witness keeps them (witness.log): the reported fields,
the `user` the token named and the `time` the witness received the head. Each story builds them
around one submitted ledger L1 of ana's lab1.ipynb with three entries written at 10:00:00.
"""

from __future__ import annotations

import json

import pytest

from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.witness.log import WitnessLog, public_key_fingerprint
from jupyterlab_gradcheck.witness.verify import load_witness, witness_findings

HASHES = {0: "0" * 64, 1: "a" * 64, 2: "b" * 64, 3: "c" * 64}
TIMES = {seq: "2026-01-01T10:00:00+00:00" for seq in HASHES}


def _receipt(seq, *, after=1, ledger_id="L1", user="ana", head=None, kind="expectation", passed=None, source="kernel"):
    """A receipt of seq `seq` received `after` seconds past 10:00:00."""
    minutes, seconds = divmod(after, 60)
    return {
        "ledger_id": ledger_id,
        "notebook": "lab1.ipynb",
        "user": user,
        "seq": seq,
        "head": head or HASHES[seq],
        "entry_time": TIMES[seq],
        "kind": kind,
        "passed": passed,
        "source": source,
        "private": False,
        "time": f"2026-01-01T10:{minutes:02d}:{seconds:02d}+00:00",
    }


def _findings(receipts, user="ana", **options):
    return witness_findings(
        receipts, notebook="lab1.ipynb", user=user, ledger_id="L1", hashes=HASHES, times=TIMES, **options
    )


def _flags(found):
    return {f["flag"]: {k: v for k, v in f.items() if k not in ("flag", "reason")} for f in found["flags"]}


def test_every_entry_received_on_time_from_the_student_is_witnessed():
    """Given receipts of seq 1-3 from ana, each 1 s after its entry, and each reported twice
    (by the kernel and by the server), when L1 is held against them as ana's,
    then it is witnessed, with no error and no flag, and each entry counts once."""
    receipts = [_receipt(s, source=source) for s in (1, 2, 3) for source in ("kernel", "server")]
    found = _findings(receipts)
    assert (found["witnessed"], found["errors"], found["flags"], found["seen"]) == (True, [], [], 3)


def test_entries_delivered_after_an_outage_are_witnessed_late_and_nothing_else():
    """Given receipts of seq 1 on time and seq 2 and 3 delivered 300 s and 301 s late (the
    client's queue after an outage), when L1 is held against them with the default 60 s,
    then it is still witnessed, without error, flagged witnessed_late: 2 entries from seq 2, the
    largest delay 301 s; with --max-delay 600 nothing is flagged."""
    receipts = [_receipt(1), _receipt(2, after=300), _receipt(3, after=301)]
    found = _findings(receipts)
    assert (found["witnessed"], found["errors"]) == (True, [])
    assert _flags(found) == {"witnessed_late": {"count": 2, "first_seq": 2, "largest_delay": 301.0}}
    assert "more than 60 s after" in found["flags"][0]["reason"]
    assert _findings(receipts, max_delay=600)["flags"] == []


def test_entries_never_delivered_are_unwitnessed_and_a_ledger_never_heard_of_is_never_clean():
    """Given receipts of seq 1 only, when L1 (3 entries) is held against them, then it is not
    witnessed, flagged unwitnessed: 2 entries from seq 2, with no tampering error; given no
    receipt at all, every entry is unwitnessed from seq 1."""
    found = _findings([_receipt(1)])
    assert (found["witnessed"], found["errors"], _flags(found)) == (
        False,
        [],
        {"unwitnessed": {"count": 2, "first_seq": 2}},
    )
    never = _findings([])
    assert (never["witnessed"], _flags(never)) == (False, {"unwitnessed": {"count": 3, "first_seq": 1}})


def test_a_ledger_witnessed_for_another_student_is_an_error_naming_both():
    """Given receipts of L1 from ana, when L1 is submitted as carol's,
    then the error names both students, and nothing of it counts as carol's."""
    found = _findings([_receipt(s) for s in (1, 2, 3)], user="carol")
    assert found["errors"] == ["this ledger was witnessed for ana; it is submitted as carol's"]
    assert (found["witnessed"], found["seen"], _flags(found)["unwitnessed"]["count"]) == (False, 0, 3)


def test_every_other_ledger_of_the_notebook_is_reported_with_its_failures():
    """Given an earlier ledger L0 of ana's lab1.ipynb (3 entries, one a failed observation
    reported by both kernel and server) and L1 after it, when L1 is held as ana's,
    then L0 is flagged with 3 entries and 1 failure, and L1 itself is witnessed; a classmate's
    ledger of the same notebook is not ana's and is not listed."""
    earlier = [
        _receipt(1, ledger_id="L0"),
        _receipt(2, ledger_id="L0", kind="observation", passed=False),
        _receipt(2, ledger_id="L0", kind="observation", passed=False, source="server"),
        _receipt(3, ledger_id="L0", kind="observation", passed=True),
        _receipt(1, ledger_id="B1", user="bob"),
    ]
    found = _findings(earlier + [_receipt(s, after=60) for s in (1, 2, 3)])
    assert found["witnessed"] is True and found["errors"] == []
    flag = _flags(found)["other_ledgers_witnessed"]
    assert [(o["ledger_id"], o["entries"], o["failures"]) for o in flag["ledgers"]] == [("L0", 3, 1)]
    assert (flag["count"], flag["failures"]) == (1, 1)


def test_private_runs_in_no_notebook_are_flagged_for_the_student():
    """Given two runs ana made with ledger=False under nbconvert (reported under "(no notebook)")
    and one in lab1.ipynb, and one of bob's, when L1 is held as ana's,
    then 3 private runs are flagged, 2 of them in no notebook."""
    private = {"private": True, "ledger_id": None, "head": None, "seq": None, "time": "2026-01-01T09:00:00+00:00"}
    receipts = [
        {**private, "user": "ana", "notebook": "(no notebook)"},
        {**private, "user": "ana", "notebook": "(no notebook)"},
        {**private, "user": "ana", "notebook": "lab1.ipynb"},
        {**private, "user": "bob", "notebook": "(no notebook)"},
    ] + [_receipt(s) for s in (1, 2, 3)]
    assert _flags(_findings(receipts)) == {"private_runs_witnessed": {"count": 3, "without_notebook": 2}}


def test_a_witnessed_failure_replaced_in_the_ledger_is_named_as_removed():
    """Given the witness saw seq 2 as a failed observation with another head than the ledger's,
    when L1 is held against it, then the error says a failed observation was removed."""
    receipts = [_receipt(1), _receipt(2, head="f" * 64, kind="observation", passed=False), _receipt(3)]
    [error] = _findings(receipts)["errors"]
    assert "has hash bbbbbbbbbbbb, but the witness saw ffffffffffff: a failed observation was removed" in error


def _log_with_two_heads(folder):
    log = WitnessLog(folder / "w.jsonl")
    for seq in (1, 2):
        report = {k: _receipt(seq)[k] for k in ("ledger_id", "notebook", "user", "seq", "head", "entry_time")}
        log.append(report)
    (folder / "w.jsonl.pub").write_text(log.public_key + "\n")
    return log


def test_a_log_file_is_read_only_with_a_pinned_key_never_the_key_beside_it(tmp_path):
    """Given a witness log with its .pub and .key beside it, when it is loaded without a key,
    then SpecError names --witness-key; with the fingerprint, it loads with no problem even after
    the .key file is removed (never read); with another fingerprint, a problem names both."""
    log = _log_with_two_heads(tmp_path)
    with pytest.raises(SpecError) as refused:
        load_witness(str(log.path))
    assert refused.value.field == "witness_key"
    (tmp_path / "w.jsonl.key").unlink()
    pinned = load_witness(str(log.path), public_key_fingerprint(log.public_key))
    assert (len(pinned["receipts"]), pinned["problems"]) == (2, [])
    assert load_witness(str(log.path), log.public_key)["problems"] == []
    [problem] = load_witness(str(log.path), "sha256:" + "0" * 64)["problems"]
    assert "not the pinned sha256:000000000000000" in problem and "re-signed" in problem


def test_a_log_re_signed_with_another_key_fails_against_the_pinned_key(tmp_path):
    """Given a genuine log, when a forger rewrites a head and re-signs every receipt with a key of
    their own, replacing the .pub beside it, then against the key pinned at the start of the course
    the fingerprint check fails, and against the genuine key itself every line's signature fails."""
    (tmp_path / "genuine").mkdir()
    genuine = _log_with_two_heads(tmp_path / "genuine")
    fingerprint, key = public_key_fingerprint(genuine.public_key), genuine.public_key
    forged = WitnessLog(tmp_path / "forged.jsonl")
    for receipt in json.loads("[" + ",".join(genuine.path.read_text().splitlines()) + "]"):
        clean = {k: receipt[k] for k in ("ledger_id", "notebook", "user", "seq", "head", "entry_time")}
        forged.append({**clean, "head": "e" * 64})
    genuine.path.write_bytes(forged.path.read_bytes())
    (genuine.path.parent / "w.jsonl.pub").write_text(forged.public_key)
    assert "re-signed" in load_witness(str(genuine.path), fingerprint)["problems"][0]
    assert load_witness(str(genuine.path), key)["problems"] == [
        "witness log line 1: the signature does not match the witness key",
        "witness log line 2: the signature does not match the witness key",
    ]
