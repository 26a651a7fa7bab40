"""POST checks: the seed record runs in a worker, between its expectation and observation."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file


async def test_seed_record_runs_and_leaves_expectation_then_observation(
    api, lab1, seed_text, jp_root_dir, ledger_lines
):
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


async def test_a_wrong_derivative_is_a_finding_recorded_with_http_200(api, lab1, ledger_lines):
    """Given a check whose hand derivative is wrong (d/dx x*x at 3 is 6, not 5),
    when it is run,
    then the answer is 200 with passed false and the failure named, and the ledger keeps it."""
    status, _, body = await api(
        "POST", "checks", {"notebook": lab1, "check": {"function": "x*x", "x": 3, "analytical_gradient": 5}}
    )

    assert status == 200, body
    assert body["record"]["passed"] is False
    assert body["record"]["failure"]["comparison"].startswith("analytical_vs_")
    observation = ledger_lines()[-1]
    assert observation["kind"] == "observation"
    assert observation["data"]["passed"] is False


async def test_bad_input_is_400_naming_the_field_and_nothing_is_appended(api, lab1, ledger_lines):
    """Given records with an unknown name, a forbidden construct, a missing function, and
    shapes that only torch can refuse,
    when each is POSTed,
    then each answers 400 with a one-line message naming the field, and no ledger appears."""
    bad = [
        ({"function": "x*y", "x": 3, "analytical_gradient": 3}, "function"),
        ({"function": "__import__('os').system('true')", "x": 3, "analytical_gradient": 0}, "function"),
        ({"x": 3, "analytical_gradient": 6}, "function"),
        ({"function": "x*x", "x": 3, "analytical_gradient": 6, "dtype": "float128"}, "dtype"),
        # Shapes that cannot work: refused from the record's shapes, before anything is written.
        ({"function": "x[5]*x", "x": [1, 2, 3], "analytical_gradient": 0}, "function"),
        (
            {"function": "x @ y", "inputs": {"x": [1, 2], "y": [1, 2, 3]}, "analytical_gradient": {"x": 1, "y": 1}},
            "function",
        ),
        ({"function": "x*x", "x": [1, 2], "analytical_gradient": "2*x", "grad_output": [1, 2, 3]}, "grad_output"),
    ]
    for check, field in bad:
        status, _, body = await api("POST", "checks", {"notebook": lab1, "check": check})
        assert status == 400, (check, body)
        assert body["code"] == "bad_input"
        assert body["field"] == field, body
        assert "\n" not in body["message"] and body["message"]
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": "x*x"})
    assert (status, body["field"]) == (400, "check")
    assert ledger_lines() == []


async def test_an_unavailable_device_is_400_and_nothing_is_appended(api, lab1, ledger_lines):
    """Given the devices the workers reported at start-up,
    when a check asks for one they reported unavailable,
    then the answer is 400 device_unavailable with torch's reason, and nothing is appended."""
    _, _, status_body = await api("GET", "status")
    absent = [d for d in status_body["devices"] if not d["available"]]
    assert absent, "every device kind is available here; this test needs one that is not"
    device = absent[0]["id"]

    status, _, body = await api(
        "POST",
        "checks",
        {"notebook": lab1, "check": {"function": "x*x", "x": 3, "analytical_gradient": 6, "device": device}},
    )

    assert status == 400, body
    assert body["code"] == "device_unavailable"
    assert body["field"] == "device"
    assert absent[0]["reason"] in body["message"]
    assert ledger_lines() == []


async def test_fifty_concurrent_checks_all_succeed_in_one_valid_chain(api, lab1, jp_root_dir, ledger_lines):
    """Given two workers,
    when 50 checks on the same notebook are POSTed at once,
    then all 50 answer 200 executed, and the ledger holds 100 entries (each expectation
    before its own observation) in a chain that verifies."""
    checks = [{"function": "x*x", "x": float(i), "analytical_gradient": 2.0 * i} for i in range(50)]

    answers = await asyncio.gather(*(api("POST", "checks", {"notebook": lab1, "check": c}) for c in checks))

    assert [status for status, _, _ in answers] == [200] * 50, [b for s, _, b in answers if s != 200][:3]
    assert all(body["record"]["executed"] and body["record"]["passed"] for _, _, body in answers)
    entries = ledger_lines()
    assert len(entries) == 100
    assert sum(e["kind"] == "expectation" for e in entries) == 50
    seq_of_expectation = {e["seq"]: e for e in entries if e["kind"] == "expectation"}
    for observation in (e for e in entries if e["kind"] == "observation"):
        expectation = seq_of_expectation[observation["data"]["expectation_seq"]]
        assert expectation["check_id"] == observation["check_id"]
        assert expectation["seq"] < observation["seq"]
    report = verify_ledger_file(Path(jp_root_dir) / "work" / "lab1.gradcheck.jsonl")
    assert report["chain_ok"] is True, report["errors"]
    assert report["entries"] == 100


async def test_a_non_finite_gradient_comes_back_spelt_as_the_ledger_spells_it(api, lab1, ledger_lines):
    """Given sqrt(x) at x = 0, whose derivative is infinite,
    when it is run,
    then the answer is strict JSON with the observed gradient "Infinity" (as in the ledger),
    and the finding is kept."""
    status, _, body = await api(
        "POST", "checks", {"notebook": lab1, "check": {"function": "sqrt(x)", "x": 0.0, "analytical_gradient": 0}}
    )

    assert status == 200, body
    assert body["record"]["observed_gradient"] == "Infinity"
    assert body["record"]["passed"] is False
    assert ledger_lines()[-1]["data"]["record"]["observed_gradient"] == "Infinity"
