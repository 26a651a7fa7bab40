"""The server reports to the witness every entry its kernels' checks write, whatever the kernel's
own environment says: it watches each kernel's iopub for check attestations."""

from __future__ import annotations

import asyncio

import nbformat
import pytest

from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.witness.log import read_log
from support.server import server_config
from support.witness import Witness, free_port

PORT = free_port()
#: The student's own token in the class list the test witness writes (tests/support/witness.py).
ANA = "ana-token-for-tests"
#: A kernel that pops or re-points its witness variable: its own reports go to a dead port.
EVASIVE = (
    "import os\n"
    "os.environ['GRADCHECK_WITNESS_URL'] = 'http://127.0.0.1:9'\n"
    "from jupyterlab_gradcheck import check\n"
    "check('x*x', '2*x', x=3.0, id='square')\n"
    "check('x*x', '3*x', x=3.0, id='wrong')\n"
)


@pytest.fixture
def lab1_notebook(jp_root_dir):
    notebook = jp_root_dir / "work" / "lab1.ipynb"
    notebook.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(notebook))
    return notebook


async def server_receipts(log, count: int, limit: float = 30.0) -> list[dict]:
    """The receipts the server sent (source "server"), once there are `count` of them."""
    for _ in range(int(limit / 0.1)):
        mine = [r for r in read_log(log) if r.get("source") == "server"] if log.exists() else []
        if len(mine) >= count:
            return mine
        await asyncio.sleep(0.1)
    pytest.fail(f"the witness holds {len(mine)} server receipts, not {count}")


def as_reported(entries: list[dict]) -> list[tuple]:
    return [
        (e["seq"], e["hash"], e["time"], e["kind"], e["data"].get("passed") if e["kind"] == "observation" else None)
        for e in entries
    ]


@pytest.mark.parametrize("jp_server_config", [server_config(witness_url=f"http://127.0.0.1:{PORT}", witness_token=ANA)])
async def test_a_kernel_that_points_its_witness_elsewhere_is_still_witnessed_by_its_server(
    tmp_path, lab1_notebook, notebook_kernel, ledger_lines, jp_server_config
):
    """Given a server whose witness options name a live witness with ana's own token, and a
    kernel it started for lab1.ipynb that points GRADCHECK_WITNESS_URL at a dead port,
    when the kernel checks a right derivative and a wrong one,
    then the witness holds one server receipt per ledger entry (seq 1 to 4), each with the
    entry's own head, time, kind and verdict (the wrong check's observation passed false), for
    ana and lab1.ipynb under the ledger's id, and none from the kernel."""
    witness = Witness(tmp_path / "w.jsonl", port=PORT).start()
    try:
        _, run = await notebook_kernel("work/lab1.ipynb")
        status, outputs = await run(EVASIVE)
        assert status == "ok", outputs
        # The kernel notes its own failed report (a witness_pending note) at some seq of its
        # own timing; every entry up to the last check's observation was attested by then.
        attested = [
            e for e in ledger_lines() if e["seq"] <= max(e["seq"] for e in ledger_lines() if e["kind"] == "observation")
        ]
        receipts = await server_receipts(witness.log, len(attested))
        kernel_receipts = [r for r in read_log(witness.log) if r.get("source") == "kernel"]
    finally:
        witness.kill()
    checks = [(e["kind"], e["check_id"]) for e in attested if e["kind"] != "note"]
    assert checks == [
        ("expectation", "square"),
        ("observation", "square"),
        ("expectation", "wrong"),
        ("observation", "wrong"),
    ]
    assert [(r["seq"], r["head"], r["entry_time"], r["kind"], r["passed"]) for r in receipts] == as_reported(attested)
    assert [r["passed"] for r in receipts if r["kind"] == "observation"] == [True, False]
    ledger_id = Ledger(lab1_notebook.with_name("lab1.gradcheck.jsonl")).ledger_id()
    assert {(r["user"], r["notebook"], r["ledger_id"]) for r in receipts} == {("ana", "lab1.ipynb", ledger_id)}
    assert kernel_receipts == []


@pytest.mark.parametrize("jp_server_config", [server_config(witness_url=f"http://127.0.0.1:{PORT}", witness_token=ANA)])
async def test_entries_checked_while_the_witness_was_down_reach_it_when_it_is_back(
    tmp_path, lab1_notebook, notebook_kernel, ledger_lines, jp_server_config
):
    """Given a server whose witness is down, when its kernel checks once and the witness then
    starts, then the server's retries deliver both entries of that check, in order, with
    their own heads, and nothing else."""
    _, run = await notebook_kernel("work/lab1.ipynb")
    status, outputs = await run("from jupyterlab_gradcheck import check\ncheck('x*x', '2*x', x=3.0, id='square')")
    assert status == "ok", outputs
    witness = Witness(tmp_path / "w.jsonl", port=PORT).start()
    try:
        receipts = await server_receipts(witness.log, 2)
    finally:
        witness.kill()
    assert [(r["seq"], r["head"]) for r in receipts] == [(e["seq"], e["hash"]) for e in ledger_lines()]
