"""Replay of records made under earlier numerical rules, and of records of today's.

The records in records_of_earlier_rules.json were made by the 0.1.0 code, each under the policy it names (CHANGELOG.md),
and are kept as data: no code runs those rules any more. A replay runs them under today's rules; where their recorded
decisions (path, steps, tolerances, rounding bounds) are not today's and their verdict moves, it says so in a note
with both verdicts, kept apart from the differences an edited record leaves (docs/tolerances.md, "Changing these
rules").
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.record.spec import RULES, rules_of
from jupyterlab_gradcheck.core.ledger.replay import replay_lines, replay_record
from jupyterlab_gradcheck.core.ledger.store import Ledger

RECORDS = json.loads(Path(__file__).with_name("records_of_earlier_rules.json").read_text(encoding="utf-8"))


def test_a_record_the_first_rules_failed_near_a_pole_reproduces_under_its_recorded_decisions():
    """Given sum(tan(x)) near its poles as policy 1 recorded it (failed, precision_limited: its rows carry no rounding
    bound, so its tolerance was applied as written, with no re-estimation), when it is replayed, then it is run under
    those decisions and reproduces its verdict number for number, with no note; the same declaration run today
    passes (its bound and re-estimation resolve the pole)."""
    record = RECORDS["tan_near_pole_policy_1"]
    assert (record["policy"], record["passed"], record["failure"]["diagnosis"]) == (1, False, "precision_limited")
    assert not any("error_bound" in row for row in record["comparisons"])
    assert replay_record(record) == {"status": "reproduced", "differences": [], "notes": [], "device": "cpu"}
    today = run_check({key: record[key] for key in ("function", "inputs", "analytical_gradient")}, sweep=False)
    assert (today["passed"], today["rules"]) == (True, RULES)


def test_a_record_written_before_policies_were_numbered_is_one_of_policy_1():
    """Given the same record without its policy field (as written before the field existed), when it is read and
    replayed, then it is taken as made under the rules of 0.1.0 and reproduces as that record does."""
    unnumbered = {key: value for key, value in RECORDS["tan_near_pole_policy_1"].items() if key != "policy"}
    assert rules_of(unnumbered) == "0.1.0"
    assert replay_record(unnumbered)["status"] == "reproduced"


def test_a_record_whose_bound_the_rules_changed_gets_a_note_of_both_verdicts():
    """Given x * 1e-7 + 1e5 at 0.3 as policy 5 recorded it (failed, probable_bug: its two equal evaluations gave a
    rounding bound of 0), when it is replayed, then nothing differs, and a note says that the rules changed since the
    record, with the recorded verdict (failed) and today's (passed: equal evaluations count in the bound)."""
    record = RECORDS["offset_policy_5"]
    assert (record["policy"], record["passed"], record["failure"]["diagnosis"]) == (5, False, "probable_bug")
    result = replay_record(record)
    assert (result["status"], result["differences"]) == ("rules_changed", [])
    change = result["rules_changed"]
    assert (change["made_under"], change["rules"], change["recorded_passed"], change["replayed_passed"]) == (
        "0.1.0",
        RULES,
        False,
        True,
    )
    assert change["differences"][-1] == "verdict: recorded passed=False, replayed passed=True"
    assert result["notes"] == [
        f"the rules changed since this record (made under 0.1.0, replayed under {RULES}): recorded passed=False, "
        "passed=True under today's rules"
    ]


def test_a_ledger_with_a_record_of_changed_rules_still_verifies_and_lists_the_note(tmp_path):
    """Given a ledger holding policy 5's record of x * 1e-7 + 1e5 (failed: its equal evaluations had a bound of 0),
    when the ledger is replayed, then it is ok, nothing differs, the observation is not counted as reproduced, and the
    note and the rules_changed entry name its line with both verdicts."""
    record = RECORDS["offset_policy_5"]
    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    declared = {key: record[key] for key in ("id", "function", "inputs", "analytical_gradient")}
    seq = ledger.record_expectation(declared)["seq"]
    ledger.record_observation(record, seq)
    result = replay_lines(ledger.iter_raw_lines())
    assert (result["ok"], result["observations"], result["reproduced"], result["differs"]) == (True, 1, 0, [])
    [note] = result["notes"]
    assert note["note"].startswith("the rules changed since this record (made under 0.1.0")
    [change] = result["rules_changed"]
    assert (change["line"], change["recorded_passed"], change["replayed_passed"]) == (note["line"], False, True)


def test_an_edited_autograd_value_in_a_record_of_changed_rules_is_still_a_difference():
    """Given policy 5's record of x * 1e-7 + 1e5 with its observed gradient edited, when it is replayed, then the edit
    is a difference (what no rule decides must reproduce whatever the rules were), and so is the verdict beside it,
    while the finite differences' row, which the rules moved, stays in the note."""
    record = copy.deepcopy(RECORDS["offset_policy_5"])
    record["observed_gradient"] = 2e-7
    result = replay_record(record)
    assert result["status"] == "differs"
    assert [d.split(":")[0] for d in result["differences"]] == ["observed_gradient", "verdict"]
    assert result["rules_changed"]["replayed_passed"] is True


def test_a_record_of_an_earlier_policy_whose_decisions_are_todays_must_reproduce_its_finite_differences():
    """Given the example ledger's x*x at 3 as policy 2 recorded it (0.1.0's example ledger), with the step, path and
    bound today's rules take,
    with its finite-difference value edited from 6 to 7, when it is replayed, then the edit is a difference and not
    a note: decisions that are today's leave nothing for the rules to explain."""
    record = copy.deepcopy(RECORDS["square_policy_2"])
    assert record["policy"] == 2
    assert replay_record(record)["status"] == "reproduced"
    record["observations"]["finite_difference"]["gradients"]["x"]["value"] = 7.0
    result = replay_record(record)
    assert result["status"] == "differs"
    assert result["differences"][0].startswith("finite_difference[x]: recorded 7.0, replayed 6.0")
    assert "rules_changed" not in result


def test_a_record_of_todays_rules_with_an_edited_verdict_differs():
    """Given the seed record run under today's rules, and policy 7's record of it (0.1.0's name for today's rules),
    each with its verdict edited to failed, when they are replayed, then both differ on the verdict and neither gets
    a note: a record of today's rules reproduces number for number."""
    fresh = run_check({"function": "x*x", "x": 3, "analytical_gradient": 6, "executed": False})
    for record in (fresh, copy.deepcopy(RECORDS["square_policy_7"])):
        assert replay_record(record)["status"] == "reproduced"
        record["passed"] = False
        result = replay_record(record)
        assert (result["status"], result["notes"]) == ("differs", [])
        assert "verdict: recorded passed=False, replayed passed=True" in result["differences"]


def test_a_wrong_expectation_under_the_first_rules_replays_as_it_was_recorded():
    """Given policy 1's record of x*x at 3 declared with the wrong derivative 5, when it is replayed under today's
    rules, then it fails as it did (the expectation's comparisons are no rule's), and nothing moves enough to note."""
    record = RECORDS["square_wrong_policy_1"]
    assert record["passed"] is False
    result = replay_record(record)
    assert (result["status"], result["differences"], result["notes"]) == ("reproduced", [], [])


def test_a_record_of_todays_rules_that_passes_through_its_bound_and_re_estimation_reproduces():
    """Given sum(tan(x)) near its poles and x * 1e-7 + 1e5, run today at the default tolerance (the first passes
    after re-estimating the elements near the poles, the second through the rounding bound of its equal evaluations),
    when they are replayed, then both reproduce: the record's rows carry a bound, so the replay takes the default
    tolerance as the record did rather than the numbers it wrote out (which, applied as written, would fail both)."""
    for declared in (
        {"function": "sum(tan(x))", "inputs": {"x": [1.52, -1.5, 0.3]}, "analytical_gradient": "1/cos(x)**2"},
        {"function": "x*1e-7 + 1e5", "x": 0.3, "analytical_gradient": "1e-7"},
    ):
        record = run_check(declared, sweep=False)
        assert record["passed"] is True
        assert replay_record(record)["status"] == "reproduced"
