"""A witness killed with SIGKILL mid-load loses no receipt it gave out, and the clients' queues
re-send the rest (real witness processes, real client queues, on loopback)."""

from __future__ import annotations

from benchmarks.witness_class import kill_nine


def test_a_witness_killed_mid_load_loses_no_acknowledged_receipt_and_gets_every_head(tmp_path):
    """Given 30 students whose client queues each report a head a second to a witness process,
    when the witness is SIGKILLed while a second's heads are being sent (some answered, some not),
    kept down a second and started again on the same log and port, and the queues are drained,
    then every receipt any client got back is in the log, byte for byte; the log's chain is
    intact; the log holds every head every student queued, each student's in seq order; and every
    queued head was acknowledged in the end."""
    outcome = kill_nine(tmp_path, 30, before=2, down=1, after=2)
    assert outcome["waiting_at_kill"] > 0 and outcome["acknowledged_before_kill"] > 0  # killed mid-load
    assert outcome["lost"] == 0
    assert outcome["chain_problems"] == 0
    assert outcome["missing"] == 0 and outcome["out_of_order"] == 0
    assert outcome["drained"] and outcome["acknowledged"] == outcome["queued"]
