"""The ledger's writing rules: the hash chain, the entry kinds, and the refusals."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta

import pytest

from jupyterlab_gradcheck.core.errors import DeviceUnavailable, JustificationRequired, LedgerError, SpecError
from jupyterlab_gradcheck.core.ledger.store import Ledger, ledger_path_for
from jupyterlab_gradcheck.core.run import run_and_record
from support.ledger import JUSTIFICATION, THREE_CHECKS, lines_of, notebook_with_three_checks

CPU_ONLY = [
    {"id": "cpu", "name": "cpu", "available": True, "reason": ""},
    {"id": "cuda", "name": "", "available": False, "reason": "no CUDA here (test)"},
]


def _independent_hash(entry: dict) -> str:
    """The hash as docs/ledger.md defines it, computed without the project's code."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_entries_are_hash_chained_from_64_zeros(tmp_path):
    """Given an empty ledger, when three notes are appended (one with non-ASCII text),
    then the file opens with a genesis entry (seq 0, prev 64 zeros, a random 32-hex ledger id),
    each line is a JSON object with the seven fields, each prev is the hash before it, each hash
    is SHA-256 over the canonical JSON without `hash`, seq counts 0, 1, 2, 3 and time is UTC."""
    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    for text in ("first", "second: ∂f/∂x", "third"):
        ledger.append("note", None, {"text": text})
    entries = [json.loads(raw) for raw in lines_of(ledger.path)]
    assert [e["seq"] for e in entries] == [0, 1, 2, 3]
    genesis = entries[0]
    assert genesis["prev"] == "0" * 64 and genesis["kind"] == "note" and genesis["data"]["event"] == "genesis"
    assert (
        re.fullmatch(r"[0-9a-f]{32}", genesis["data"]["ledger_id"])
        and ledger.ledger_id() == genesis["data"]["ledger_id"]
    )
    assert all(later["prev"] == earlier["hash"] for earlier, later in zip(entries, entries[1:]))
    for entry in entries:
        assert set(entry) == {"seq", "time", "kind", "check_id", "data", "prev", "hash"}
        assert entry["hash"] == _independent_hash(entry)
        assert datetime.fromisoformat(entry["time"]).utcoffset() == timedelta(0)
    assert entries[2]["data"]["text"] == "second: ∂f/∂x"
    assert "∂f/∂x".encode() in ledger.path.read_bytes()  # kept as UTF-8, not \u-escaped


def test_notebook_ledger_lives_beside_it():
    """Given a notebook path, then its ledger is the .gradcheck.jsonl file beside it."""
    assert ledger_path_for("work/lab1.ipynb").as_posix() == "work/lab1.gradcheck.jsonl"
    assert Ledger.for_notebook("lab1.ipynb").path.name == "lab1.gradcheck.jsonl"


def test_non_finite_values_are_stored_as_strict_json(tmp_path):
    """Given data holding NaN and infinities (a gradient can be NaN),
    when it is appended, then the line is strict JSON (no NaN token) and the hash holds."""
    ledger = Ledger(tmp_path / "a.jsonl")
    entry = ledger.append("note", None, {"values": [float("nan"), float("inf"), -float("inf"), 1.5]})
    raw = lines_of(ledger.path)[1]  # after the genesis entry
    assert b"NaN," not in raw.replace(b'"NaN"', b"")
    assert json.loads(raw)["data"]["values"] == ["NaN", "Infinity", "-Infinity", 1.5]
    assert entry["hash"] == _independent_hash(json.loads(raw))


@pytest.mark.parametrize(
    "kind, check_id, data, field",
    [
        ("comment", None, {}, "kind"),
        ("observation", None, {"expectation_seq": 1}, "check_id"),
        ("note", None, ["not", "an", "object"], "data"),
    ],
)
def test_malformed_appends_are_refused_before_writing(tmp_path, kind, check_id, data, field):
    """Given a bad kind, a missing check id or non-object data, when appended,
    then SpecError names the field and no file is created."""
    ledger = Ledger(tmp_path / "a.jsonl")
    with pytest.raises(SpecError) as caught:
        ledger.append(kind, check_id, data)
    assert caught.value.field == field
    assert not ledger.path.exists()


def test_run_and_record_writes_the_expectation_before_the_observation(tmp_path):
    """Given three checks run into a notebook's ledger (one failing),
    then each check has an expectation entry followed by an observation that refers to its
    seq, the observation holds the full record, and the failing one is kept with passed false."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    genesis, *entries = ledger.entries()
    assert (genesis["seq"], genesis["data"]["event"]) == (0, "genesis")
    assert [(e["kind"], e["check_id"]) for e in entries] == [
        (kind, spec["id"]) for spec in THREE_CHECKS for kind in ("expectation", "observation")
    ]
    for expectation, observation in zip(entries[::2], entries[1::2]):
        assert observation["data"]["expectation_seq"] == expectation["seq"] < observation["seq"]
        assert observation["data"]["record"]["executed"] is True
        assert expectation["data"]["analytical_gradient"] == observation["data"]["record"]["analytical_gradient"]
    verdicts = {e["check_id"]: e["data"]["passed"] for e in entries if e["kind"] == "observation"}
    assert verdicts == {"square": True, "vector_sum": True, "cube_wrong": False}
    assert entries[-1]["data"]["record"]["failure"]["diagnosis"] == "probable_bug"


@pytest.mark.parametrize("justification", [None, "", "   \n\t"])
def test_tolerance_change_without_justification_is_refused_and_writes_nothing(tmp_path, justification):
    """Given a ledger with a failed check, when its tolerance is changed with a missing or
    blank justification, then JustificationRequired is raised and the file is byte-identical."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    before = ledger.path.read_bytes()
    with pytest.raises(JustificationRequired):
        ledger.change_tolerance("cube_wrong", rtol=0.9, justification=justification)
    assert ledger.path.read_bytes() == before


def test_tolerance_change_records_direction_and_after_failure(tmp_path):
    """Given a failed check and a passing one, when the failed one's tolerance is widened and
    the passing one's tightened, then the first entry says widened and after_failure true, the
    second tightened and after_failure false, and both keep old, new and the justification."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    widened = ledger.change_tolerance("cube_wrong", rtol=0.9, justification=JUSTIFICATION)
    tightened = ledger.change_tolerance("square", atol=1e-12, justification="float64 is exact here")
    assert widened["data"] == {
        "target": "tolerance",
        "old": {"rtol": 1e-7, "atol": 1e-10},
        "new": {"rtol": 0.9, "atol": 1e-10},
        "justification": JUSTIFICATION,
        "widened": True,
        "tightened": False,
        "after_failure": True,
    }
    assert tightened["data"]["after_failure"] is False
    assert (tightened["data"]["widened"], tightened["data"]["tightened"]) == (False, True)
    history = ledger.checks()
    assert history["cube_wrong"]["tolerance"] == {"rtol": 0.9, "atol": 1e-10}
    assert history["cube_wrong"]["widened_after_failure"] is True
    assert history["square"]["widened_after_failure"] is False


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"check_id": "nope", "rtol": 0.5}, "no check 'nope'"),
        ({"check_id": "square"}, "needs --rtol or --atol"),
        ({"check_id": "square", "rtol": -1.0}, "rtol must be a finite number >= 0"),
        ({"check_id": "square", "rtol": 1e-7}, "nothing to change"),
        ({"check_id": "square", "rtol": 0.5, "target": "gradient"}, "unknown tolerance target"),
    ],
)
def test_bad_tolerance_changes_are_refused_and_write_nothing(tmp_path, kwargs, message):
    """Given a ledger, when a tolerance change names an unknown check, no value, a negative
    value, the current value or an unknown target, then SpecError says so and nothing is written."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    before = ledger.path.read_bytes()
    check_id = kwargs.pop("check_id")
    with pytest.raises(SpecError, match=message):
        ledger.change_tolerance(check_id, justification="a reason", **kwargs)
    assert ledger.path.read_bytes() == before


def test_rerun_with_an_explicit_different_tolerance_is_refused(tmp_path):
    """Given a check in the ledger with the default tolerance, when it is re-run with an
    explicit wider tolerance, then SpecError points to the tolerance command and nothing is
    run or written; without an explicit tolerance the re-run takes the ledger's current one."""
    _notebook, ledger = notebook_with_three_checks(tmp_path)  # cube_wrong now has rtol 0.9
    before = ledger.path.read_bytes()
    with pytest.raises(SpecError, match="jupyter gradcheck tolerance") as caught:
        run_and_record({**THREE_CHECKS[2], "tolerance": {"rtol": 0.8}}, ledger, sweep=False)
    assert caught.value.field == "tolerance.rtol"
    assert ledger.path.read_bytes() == before
    record = run_and_record(THREE_CHECKS[2], ledger, sweep=False)
    assert record["tolerance"] == {"rtol": 0.9, "atol": 1e-10}
    # |6 - 12| = 6 <= 1e-10 + 0.9 * 12: the widened tolerance now lets the wrong derivation pass
    assert record["passed"] is True
    same = run_and_record({**THREE_CHECKS[2], "tolerance": {"rtol": 0.9, "atol": 1e-10}}, ledger, sweep=False)
    assert same["tolerance"] == {"rtol": 0.9, "atol": 1e-10}


def test_rerun_with_a_new_expectation_records_an_expectation_change(tmp_path):
    """Given a check that already ran, when it is re-run with a corrected analytical gradient,
    then an expectation_change with after_observation true precedes the new expectation."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    record = run_and_record({**THREE_CHECKS[2], "analytical_gradient": "3*x*x"}, ledger, sweep=False)
    assert record["passed"] is True
    change, expectation, observation = ledger.entries()[-3:]
    assert change["kind"] == "expectation_change"
    assert change["data"] == {
        "old": 6,
        "new": "3*x*x",
        "justification": None,
        "after_observation": True,
        "via": "rerun",
    }
    assert (expectation["kind"], observation["kind"]) == ("expectation", "observation")
    assert ledger.checks()["cube_wrong"]["expectation_revised_after_observation"] is True


def test_change_expectation_needs_a_justification_and_knows_if_the_check_ran(tmp_path):
    """Given one check that only has an expectation and one that ran, when their expectations
    are changed, then a blank justification is refused, and after_observation is false for the
    first and true for the second."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    ledger.record_expectation(
        {
            "id": "declared_only",
            "function": "x*x",
            "inputs": {"x": 1},
            "analytical_gradient": 2,
            "tolerance": {"rtol": 1e-7, "atol": 1e-10},
        }
    )
    with pytest.raises(JustificationRequired):
        ledger.change_expectation("declared_only", 3, justification=" ")
    before_run = ledger.change_expectation("declared_only", "2*x", justification="written symbolically")
    after_run = ledger.change_expectation("square", "2*x", justification="written symbolically")
    assert before_run["data"]["after_observation"] is False
    assert after_run["data"]["after_observation"] is True
    assert ledger.checks()["square"]["analytical_gradient"] == "2*x"


def test_bad_input_appends_nothing(tmp_path):
    """Given a record asking for an absent device, or a malformed one, when run and recorded,
    then the SpecError is raised before anything is written: no ledger file appears."""
    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    with pytest.raises(DeviceUnavailable):
        run_and_record(
            {"function": "x*x", "x": 3, "analytical_gradient": 6, "device": "cuda"}, ledger, devices=CPU_ONLY
        )
    with pytest.raises(SpecError):
        run_and_record({"function": "x*", "x": 3, "analytical_gradient": 6}, ledger)
    assert not ledger.path.exists()


def test_failed_runs_are_kept_but_are_not_comparison_failures(tmp_path):
    """Given a run that did not complete (recorded as failed to run), when its tolerance is
    then widened, then the failure is kept in the history, but after_failure stays false:
    a crash says nothing about the tolerance."""
    ledger = Ledger(tmp_path / "a.jsonl")
    spec = {
        "id": "c",
        "function": "x*x",
        "inputs": {"x": 1},
        "analytical_gradient": 2,
        "tolerance": {"rtol": 1e-7, "atol": 1e-10},
    }
    expectation = ledger.record_expectation(spec)
    ledger.record_failed_to_run(spec, expectation["seq"], "worker timed out after 30 s")
    history = ledger.checks()["c"]
    assert history["runs"] == 1
    assert [(f["failed_to_run"], f["reason"]) for f in history["failures_kept"]] == [
        (True, "worker timed out after 30 s")
    ]
    change = ledger.change_tolerance("c", rtol=1e-3, justification="slow machine, not a tolerance issue")
    assert change["data"]["after_failure"] is False


def test_an_edited_last_line_stops_appends(tmp_path):
    """Given a ledger whose last complete line was replaced by something that is not an entry
    (corruption, not a torn write), when appending, then LedgerError is raised and the file
    is unchanged."""
    ledger = Ledger(tmp_path / "a.jsonl")
    ledger.append("note", None, {"text": "one"})
    ledger.path.write_bytes(ledger.path.read_bytes() + b'{"edited": true}\n')
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError, match="not a valid entry"):
        ledger.append("note", None, {"text": "two"})
    assert ledger.path.read_bytes() == before
