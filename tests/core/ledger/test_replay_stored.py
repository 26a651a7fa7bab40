"""Replay of a check whose tensors are stored values: the inputs and the expectation are read from the
blob store beside the ledger, and the recomputed observations are compared with the recorded blobs.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.verify import verify_path
from jupyterlab_gradcheck.core.values.blobs import blob_path, store_dir_for
from jupyterlab_gradcheck.core.values.form import PENDING, is_stored_value


def _recorded(tmp_path, expectation):
    ledger = tmp_path / "lab.gradcheck.jsonl"
    x = torch.linspace(-2, 2, 1000, dtype=torch.float64)
    result = check("sin(x)*x", expectation(x), x=x, ledger=ledger)
    PENDING.clear()  # replay reads the store, as a grader's machine would
    return ledger, result


def test_a_stored_value_check_replays_and_reproduces(tmp_path):
    """Given an expression checked at 1000 elements with a 1000-element expected tensor, both stored,
    when verify --replay runs with nothing of them in memory, then the one observation reproduces."""
    ledger, result = _recorded(tmp_path, lambda x: torch.cos(x) * x + torch.sin(x))
    assert result.passed
    assert is_stored_value(result.record["inputs"]["x"]) and is_stored_value(result.record["analytical_gradient"])
    report = verify_path(ledger, replay=True)["reports"][0]
    assert report["ok"], report["errors"]
    assert report["replay"]["observations"] == 1 and report["replay"]["reproduced"] == 1


def test_a_failing_stored_value_check_replays_to_the_same_verdict(tmp_path):
    """Given the same check with a wrong expectation (missing the sin term), when replayed, then it
    reproduces: the recorded failure is what the code computes again."""
    ledger, result = _recorded(tmp_path, lambda x: torch.cos(x) * x)
    assert not result.passed
    report = verify_path(ledger, replay=True)["reports"][0]
    assert report["replay"]["reproduced"] == 1 and report["replay"]["differs"] == []


def test_replay_without_the_inputs_blob_is_not_a_reproduction(tmp_path):
    """Given the check, when its input's blob is deleted, then verify fails (the blob is missing) and the
    replay cannot reproduce the observation."""
    ledger, result = _recorded(tmp_path, lambda x: torch.cos(x) * x + torch.sin(x))
    blob_path(store_dir_for(ledger), result.record["inputs"]["x"]["stored"]["sha256"]).unlink()
    report = verify_path(ledger, replay=True)["reports"][0]
    assert not report["ok"]
    assert report["replay"]["reproduced"] == 0
    assert any(e["problem"] == "missing" for e in report["blob_errors"])
