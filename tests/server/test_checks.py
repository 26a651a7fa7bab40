"""POST checks: the seed record runs in a worker, between its expectation and observation."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jupyterlab_gradcheck.core.verify import verify_ledger_file


async def test_seed_record_runs_and_leaves_expectation_then_observation(api, lab1, seed_text, jp_root_dir, ledger_lines):
    """Given the course's seed record and an empty notebook work/lab1.ipynb,
    when it is POSTed to checks,
    then the record comes back executed with the observed gradient 6.0, and
    work/lab1.gradcheck.jsonl holds its expectation and then its observation, in a chain
    that verifies."""
    import json

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": json.loads(seed_text)})

    assert status == 200, body
    record = body["record"]
    assert record["executed"] is True
    assert record["observed_gradient"] == 6.0
    assert record["passed"] is True
    entries = ledger_lines()
    assert [e["kind"] for e in entries] == ["expectation", "observation"]
    assert entries[1]["data"]["expectation_seq"] == entries[0]["seq"]
    assert entries[0]["data"]["executed"] is False  # written before the run
    assert body["ledger"]["path"] == "work/lab1.gradcheck.jsonl"
    assert body["ledger"]["entries"] == 2
    assert body["ledger"]["head"] == entries[1]["hash"]
    report = verify_ledger_file(Path(jp_root_dir) / "work" / "lab1.gradcheck.jsonl")
    assert report["chain_ok"] is True, report["errors"]
