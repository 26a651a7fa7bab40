"""Replay: re-running every recorded observation catches what hashing alone cannot."""

from __future__ import annotations

import math

import pytest

from jupyterlab_gradcheck.core.ledger.binding import update_binding
from jupyterlab_gradcheck.core.ledger.replay import replay_lines, replay_record, values_agree
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_path
from support.ledger import is_observation_of, line_number_of, notebook_with_three_checks, rechain

CPU_ONLY = [
    {"id": "cpu", "name": "cpu", "available": True, "reason": ""},
    {"id": "cuda", "name": "", "available": False, "reason": "no CUDA device here"},
]


def test_honest_ledger_replays(tmp_path):
    """Given an honest notebook ledger with three observations (one failing),
    when verified with replay, then all three reproduce, including the failing verdict."""
    notebook, _ledger = notebook_with_three_checks(tmp_path)
    result = verify_path(notebook, replay=True)
    assert result["ok"]
    replay = result["reports"][0]["replay"]
    assert (replay["observations"], replay["reproduced"], replay["differs"], replay["skipped"]) == (3, 3, [], [])


def test_forged_value_with_recomputed_chain_and_binding_fails_replay(tmp_path):
    """Given the failing check's observed gradient edited from 12.0 to 6.0 (in the record and
    in its backward_pass_1 value), every hash recomputed and the binding updated, when
    verified without replay it passes (hashing cannot tell), and with replay it fails naming
    the line and each value that does not reproduce."""
    notebook, ledger = notebook_with_three_checks(tmp_path)

    def edit(entry):
        if entry["kind"] == "observation" and entry["check_id"] == "cube_wrong":
            record = entry["data"]["record"]
            record["observed_gradient"] = 6.0
            record["observations"]["backward_pass_1"]["gradients"]["x"]["value"] = 6.0

    rechain(ledger.path, edit)
    update_binding(notebook, Ledger(ledger.path))
    assert verify_path(notebook)["ok"]

    result = verify_path(notebook, replay=True)
    assert not result["ok"]
    [differs] = result["reports"][0]["replay"]["differs"]
    assert differs["line"] == line_number_of(ledger.path, is_observation_of("cube_wrong"))
    assert differs["check_id"] == "cube_wrong"
    assert differs["differences"] == [
        "observed_gradient: recorded 6.0, replayed 12.0 (rtol=1e-07, atol=1e-10)",
        "backward_pass_1[x]: recorded 6.0, replayed 12.0 (rtol=1e-07, atol=1e-10)",
    ]


def test_a_flipped_verdict_is_caught_before_replay(tmp_path):
    """Given the failing observation's verdict flipped to passed with the chain and binding
    recomputed, when verified, then verify already fails: the justified widening after it
    says after_failure true, which no longer follows from the ledger; replay adds the verdict."""
    notebook, ledger = notebook_with_three_checks(tmp_path)

    def edit(entry):
        if entry["kind"] == "observation" and entry["check_id"] == "cube_wrong":
            entry["data"]["record"]["passed"] = entry["data"]["passed"] = True

    rechain(ledger.path, edit)
    update_binding(notebook, Ledger(ledger.path))
    report = verify_path(notebook, replay=True)["reports"][0]
    assert [e["reason"] for e in report["errors"]] == [
        "after_failure is recorded as True but the check's latest observation had not failed"
    ]
    assert report["replay"]["differs"][0]["differences"] == ["verdict: recorded passed=True, replayed passed=False"]


def test_replay_compares_within_the_recorded_tolerance(tmp_path):
    """Given a recorded value nudged by less than the record's tolerance and one nudged by
    more, when replayed, then the first reproduces and the second does not."""
    notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    record = next(e for e in ledger.entries() if e["kind"] == "observation")["data"]["record"]
    assert record["tolerance"] == {"rtol": 1e-7, "atol": 1e-10}
    # 6 * (1 + 1e-9) is within atol + rtol * 6 = 6e-7; 6 * (1 + 1e-5) is not.
    inside = {**record, "observed_gradient": 6.0 * (1 + 1e-9)}
    outside = {**record, "observed_gradient": 6.0 * (1 + 1e-5)}
    assert replay_record(inside)["status"] == "reproduced"
    assert replay_record(outside)["status"] == "differs"


def test_absent_device_falls_back_to_cpu_with_a_note(tmp_path):
    """Given an observation recorded on cuda:0 (its values say so), when replayed where
    no CUDA device exists, then it runs on the CPU, says so in a note, and reproduces."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)

    def on_cuda(entry):
        if entry["kind"] == "observation" and entry["check_id"] == "square":
            record = entry["data"]["record"]
            record["device"] = "cuda"
            for observation in record["observations"].values():
                for gradient in (observation.get("gradients") or {}).values():
                    gradient["device"] = "cuda:0"

    rechain(ledger.path, on_cuda)
    result = replay_lines(ledger.iter_raw_lines(), devices=CPU_ONLY)
    assert result["ok"] and result["reproduced"] == 3
    assert [n["note"] for n in result["notes"]] == [
        "cuda:0 is not available here (device 'cuda:0' is not available: no CUDA device here); replayed on cpu"
    ]


def test_failed_runs_and_callables_are_listed_as_skipped(tmp_path):
    """Given a failed-to-run observation and the record of a Python callable (which only
    exists in its kernel), when replayed, then both are skipped with their reason and the
    replay still passes on what it could run."""
    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    spec = {
        "id": "c",
        "function": "x*x",
        "inputs": {"x": 1},
        "analytical_gradient": 2,
        "tolerance": {"rtol": 1e-7, "atol": 1e-10},
    }
    seq = ledger.record_expectation(spec)["seq"]
    ledger.record_failed_to_run(spec, seq, "worker crashed")
    callable_spec = {**spec, "id": "f", "function": "Square.apply"}
    seq = ledger.record_expectation(callable_spec)["seq"]
    ledger.record_observation({**callable_spec, "passed": True, "executed": True}, seq)
    result = replay_lines(ledger.iter_raw_lines())
    assert result["ok"] and result["reproduced"] == 0
    assert [s["check_id"] for s in result["skipped"]] == ["c", "f"]
    assert result["skipped"][0]["reason"].startswith("the recorded run did not complete")
    assert result["skipped"][1]["reason"].startswith("cannot be re-run here")


@pytest.mark.parametrize(
    "recorded, replayed, expected",
    [
        (1.0, 1.0 + 1e-12, True),
        (1.0, 1.1, False),
        ([1.0, "NaN"], [1.0, math.nan], True),
        (["Infinity"], [math.inf], True),
        (["-Infinity"], [math.inf], False),
        ([[1.0, 2.0]], [[1.0, 2.0, 3.0]], False),
        (None, 0.0, False),
        ({"x": 6.0, "w": [1.0, 2.0]}, {"w": [1.0, 2.0 + 1e-12], "x": 6.0}, True),
        ({"x": 6.0, "w": [1.0, 2.0]}, {"x": 6.0, "w": [1.0, 2.1]}, False),
        ({"x": 6.0}, {"x": 6.0, "w": 1.0}, False),
        ({"x": 6.0}, 6.0, False),
    ],
)
def test_values_agree(recorded, replayed, expected):
    """Given recorded and replayed values (non-finite ones as the ledger stores them),
    then they agree within rtol 1e-9, atol 1e-9 exactly when they should: NaN matches NaN,
    infinities match their own sign, shapes must match, and a gradient per input name agrees
    name by name (the same names, each value agreeing)."""
    # 1e-9 sits between the 1e-12 difference that must pass and the 0.1 that must not.
    assert values_agree(recorded, replayed, 1e-9, 1e-9) is expected


@pytest.mark.cuda
def test_cuda_observation_replays_on_cuda(tmp_path):
    """Given a check recorded on cuda (where a CUDA device exists), when replayed, then it
    runs on that device with no fallback note and reproduces."""
    from jupyterlab_gradcheck.core.run import run_and_record

    ledger = Ledger(tmp_path / "gpu.gradcheck.jsonl")
    record = run_and_record(
        {"id": "gpu_square", "function": "x*x", "x": [1.0, 2.0], "analytical_gradient": "2*x", "device": "cuda"},
        ledger,
        sweep=False,
    )
    assert record["observations"]["backward_pass_1"]["gradients"]["x"]["device"] == "cuda:0"
    result = replay_lines(ledger.iter_raw_lines())
    assert result["ok"] and result["reproduced"] == 1 and result["notes"] == []


def test_a_folder_replays_in_worker_processes_with_the_same_reports(tmp_path):
    """Given a folder of three students' notebooks, one of them with a forged value and a
    recomputed chain, when verified with replay in two worker processes and in this one,
    then both give identical reports, in the same order, and both fail on that notebook only."""
    for student in ("ann", "ben", "cat"):
        notebook, ledger = notebook_with_three_checks(tmp_path / "submitted" / student / "ps1", tolerance_change=False)
        if student == "ben":
            rechain(
                ledger.path,
                lambda e: (
                    e["data"]["record"].update(observed_gradient=7.0)
                    if e["kind"] == "observation" and e["check_id"] == "square"
                    else None
                ),
            )
            update_binding(notebook, Ledger(ledger.path))
    pooled = verify_path(tmp_path, replay=True, jobs=2)
    alone = verify_path(tmp_path, replay=True, jobs=1)
    assert pooled == alone
    assert [(r["path"].split("/")[-3], r["ok"]) for r in pooled["reports"]] == [
        ("ann", True),
        ("ben", False),
        ("cat", True),
    ]


def test_a_check_of_several_inputs_replays(tmp_path):
    """Given a check of x*w with two inputs, whose observed gradient maps each input to its
    value, when its ledger is verified with replay, then the observation reproduces (it used to
    be reported as differing, a mapping compared as if it were a number)."""
    ledger = Ledger(tmp_path / "two.gradcheck.jsonl")
    from jupyterlab_gradcheck.core.run import run_and_record

    record = run_and_record(
        {
            "function": "sum(x*w)",
            "inputs": {"x": [1.0, 2.0], "w": [3.0, 4.0]},
            "analytical_gradient": {"x": "w", "w": "x"},
        },
        ledger,
        sweep=False,
    )
    assert set(record["observed_gradient"]) == {"x", "w"}
    replay = verify_path(ledger.path, replay=True)["reports"][0]["replay"]
    assert (replay["observations"], replay["reproduced"], replay["differs"]) == (1, 1, [])
