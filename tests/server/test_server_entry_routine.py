"""The server's checks go through the core's one entry routine, in a thread of their own."""

from __future__ import annotations

from support.entry import counting_entries


async def test_a_check_posted_to_the_server_goes_through_the_entry_routine(api, lab1, ledger_lines):
    """Given the seed record, when it is POSTed to checks, then run_spec is called once (in the
    service's thread: parse, admit, a place at a worker, declare, the worker's run, append), the answer
    is the executed record, and the ledger holds its expectation then its observation."""
    seed = {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}
    with counting_entries() as calls:
        status, _, body = await api("POST", "checks", {"notebook": lab1, "check": seed})
    assert status == 200, body
    assert len(calls) == 1
    assert (body["record"]["observed_gradient"], body["record"]["executed"]) == (6.0, True)
    assert [entry["kind"] for entry in ledger_lines()] == ["expectation", "observation"]
