"""The server extension reports every ledger head it writes to the witness its options name."""

from __future__ import annotations

import asyncio

import pytest

from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.witness import client as witness_client
from jupyterlab_gradcheck.witness.log import read_log
from support.server import server_config
from support.witness import Witness, free_port

PORT = free_port()
#: The student's own token in the class list the test witness writes (tests/support/witness.py).
ANA = "ana-token-for-tests"


@pytest.fixture
def witness(tmp_path):
    running = Witness(tmp_path / "w.jsonl", port=PORT).start()
    yield running
    running.kill()


@pytest.mark.parametrize("jp_server_config", [server_config(witness_url=f"http://127.0.0.1:{PORT}", witness_token=ANA)])
async def test_a_check_posted_to_the_server_reaches_the_witness(
    witness, api, lab1, ledger_lines, jp_root_dir, jp_server_config
):
    """Given a server whose witness_url and witness_token name a live witness and ana's own token,
    when a check is POSTed, then the witness's log holds one receipt per entry, in order (the
    expectation's head at seq 1, the observation's at seq 2), for ana and lab1.ipynb under the
    ledger's id, each sent by the server; the request never waited on them."""
    status, _, body = await api(
        "POST",
        "checks",
        {"notebook": lab1, "check": {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6}},
    )
    assert status == 200, body
    entries = ledger_lines()
    assert [e["seq"] for e in entries] == [1, 2]
    for _ in range(100):  # the reports go out in the background; allow them a few seconds
        if any(r["seq"] == entries[-1]["seq"] for r in read_log(witness.log)):
            break
        await asyncio.sleep(0.05)
    receipts = read_log(witness.log)
    assert [(r["notebook"], r["seq"], r["head"]) for r in receipts] == [
        ("lab1.ipynb", e["seq"], e["hash"]) for e in entries
    ]
    assert {(r["user"], r["source"], r["ledger_id"]) for r in receipts} == {
        ("ana", "server", Ledger(jp_root_dir / "work" / "lab1.gradcheck.jsonl").ledger_id())
    }
    assert witness_client.client() is not None and witness_client.client().url == witness.url
