"""The client's queue: every entry's head reaches the witness, one report per entry, in order,
with the entry's own time, also across an outage."""

from __future__ import annotations

import pytest

from jupyterlab_gradcheck.core.ledger.store import Ledger, now_utc
from jupyterlab_gradcheck.core.run import run_and_record
from jupyterlab_gradcheck.witness import client as witness_client
from jupyterlab_gradcheck.witness.log import log_problems, read_log

SQUARE = {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6}
WRONG = {"id": "cube", "function": "x*x*x", "x": 2, "analytical_gradient": 11}


@pytest.fixture
def ana_reports_to(witness):
    """Ana's kernel (this process) reporting to the live witness with her own token."""
    witness_client.configure(witness.url, witness.tokens["ana"])
    yield witness
    witness_client.configure(None, None)


def test_every_entry_is_delivered_in_order_after_an_outage_with_its_own_time(ana_reports_to, tmp_path):
    """Given ana's kernel reporting to a live witness, and one check witnessed, when the witness is
    killed, two more checks run (one fails), and the witness comes back on the same port, then the
    queue re-sends what waited: the witness's log holds, for ana's ledger, exactly one receipt per
    entry, seq 1..N in order (the witness_pending note included), each with the entry's own
    time as entry_time, its kind, its verdict (passed false for the failed observation) and
    source kernel; the entries written during the outage were received after the witness was back; the chain of the log is intact."""
    witness = ana_reports_to
    ledger = Ledger(tmp_path / "lab1.gradcheck.jsonl")
    run_and_record(SQUARE, ledger, sweep=False)
    assert witness_client.client().drain(30)
    witness.kill()
    run_and_record(WRONG, ledger, sweep=False)
    run_and_record(SQUARE, ledger, sweep=False)
    assert witness_client.client().pending() >= 4  # both checks' entries wait, none replaced
    back = now_utc()
    witness.start()
    assert witness_client.client().drain(60), witness_client.client().last_error

    entries = [e for e in ledger.entries() if e["seq"] >= 1]
    receipts = [r for r in read_log(witness.log) if r["ledger_id"] == ledger.ledger_id()]
    assert [r["seq"] for r in receipts] == [e["seq"] for e in entries]
    assert [r["head"] for r in receipts] == [e["hash"] for e in entries]
    assert [r["entry_time"] for r in receipts] == [e["time"] for e in entries]
    assert [r["kind"] for r in receipts] == [e["kind"] for e in entries]
    assert {r["user"] for r in receipts} == {"ana"} and {r["source"] for r in receipts} == {"kernel"}
    verdicts = [(r["check_id"], r["passed"]) for r in receipts if r["kind"] == "observation"]
    assert verdicts == [("square", True), ("cube", False), ("square", True)]
    assert any(e["kind"] == "note" and e["data"].get("event") == "witness_pending" for e in entries)
    late = [r for r in receipts if r["seq"] > 2]  # written while the witness was down
    assert len(late) == len(entries) - 2 and all(r["time"] >= back > r["entry_time"] for r in late)
    assert log_problems(read_log(witness.log), None) == []
    assert witness_client.client().rejected == []


def test_a_report_the_witness_can_never_accept_does_not_hold_up_the_rest(ana_reports_to, tmp_path):
    """Given ana's kernel reporting to a live witness, when a malformed report (a negative seq)
    is queued before a good one, then the witness refuses it (400, kept in `rejected` with the
    witness's message) and the good one behind it is still delivered."""
    client = witness_client.client()
    client.report("bad", {"ledger_id": "L", "notebook": "lab1.ipynb", "seq": -1, "head": "a" * 64})
    client.report("good", {"ledger_id": "L", "notebook": "lab1.ipynb", "seq": 1, "head": "b" * 64})
    assert client.drain(30)
    assert [(r["seq"], r["head"][0]) for r in read_log(ana_reports_to.log)] == [(1, "b")]
    [(report, answer)] = client.rejected
    assert report["seq"] == -1 and "seq must be a whole number" in answer


def test_a_refused_token_stops_the_retries_and_says_so_once(witness, tmp_path, capfd):
    """Given a kernel reporting to a live witness with a token the witness does not know,
    when three checks run (six entries),
    then the witness refuses the first report, the client stops: its queue is empty at once (no
    retry waits on a pause), it says so once on stderr and once in the ledger (a witness_refused
    note), queues nothing for a later check, and the witness's log holds nothing."""
    witness_client.configure(witness.url, "not-a-token-of-this-class")
    try:
        ledger = Ledger(tmp_path / "lab1.gradcheck.jsonl")
        run_and_record(SQUARE, ledger, sweep=False)
        client = witness_client.client()
        assert client.drain(10), client.last_error  # retried, the report would stay queued for ever
        run_and_record(WRONG, ledger, sweep=False)
        run_and_record(SQUARE, ledger, sweep=False)
        assert client.pending() == 0
        assert client.refused and client.receipts == []
        notes = [e for e in ledger.entries() if e["kind"] == "note" and e["data"].get("event") == "witness_refused"]
        assert len(notes) == 1
        assert capfd.readouterr().err.count("refused this token") == 1
        assert read_log(witness.log) == []
    finally:
        witness_client.configure(None, None)
