"""The model exercises through `jupyter gradcheck run`: softmax cross-entropy and the mean
squared error of a linear model, declared in the expression language, checked by the script."""

from __future__ import annotations

import json

from support.model_exercises import (
    FORGOTTEN_TARGET,
    MEAN_SQUARED_ERROR,
    MSE_B_GRADIENT,
    MSE_W_GRADIENT,
    SOFTMAX_CROSS_ENTROPY,
    SOFTMAX_MINUS_Y,
)

#: float64 autograd against values worked out by hand in Python floats: a few roundings apart.
HAND_TOLERANCE = 1e-12


def _close(observed, expected) -> bool:
    if isinstance(expected, list):
        return len(observed) == len(expected) and all(_close(o, e) for o, e in zip(observed, expected))
    return abs(observed - expected) <= HAND_TOLERANCE


def test_softmax_cross_entropy_and_the_linear_model_pass(gradcheck_cli, tmp_path):
    """Given -(y*log_softmax(z, dim=0)).sum() at z = [1, 2, 3], y = [0, 1, 0] expecting
    softmax(z, dim=0) - y for z, and mean((X @ w + b - y) ** 2) expecting 2/N X.T @ r for w and
    2/N sum(r) for b,
    when both are run into a ledger,
    then the script exits 0, each record passed with every comparison, the observed gradients
    are the values worked out by hand, SymPy agrees, and the ledger holds both observations."""
    ledger = tmp_path / "models.gradcheck.jsonl"
    records = [SOFTMAX_CROSS_ENTROPY, MEAN_SQUARED_ERROR]

    code, out, err = gradcheck_cli("run", "-", "--ledger", str(ledger), "--no-sweep", stdin=json.dumps(records))

    assert code == 0, err
    softmax, mse = json.loads(out)
    for record in (softmax, mse):
        assert record["passed"] is True, record["failures"]
        assert all(row["passed"] for row in record["comparisons"])
        assert record["symbolic"]["status"] == "agrees", record["symbolic"]["reason"]
    assert _close(softmax["observed_gradient"]["z"], SOFTMAX_MINUS_Y)
    assert _close(mse["observed_gradient"]["w"], MSE_W_GRADIENT)
    assert _close(mse["observed_gradient"]["b"], MSE_B_GRADIENT)
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [(e["check_id"], e["data"]["passed"]) for e in entries if e["kind"] == "observation"] == [
        ("softmax_cross_entropy", True),
        ("linear_model_mse", True),
    ]


def test_softmax_without_the_target_is_a_recorded_finding(gradcheck_cli, tmp_path):
    """Given the same loss with the expectation softmax(z, dim=0) for z (the "- y" forgotten),
    when it is run into a ledger,
    then the script exits 1, the failure is at z[1], where the hand derivation says
    softmax(z)[1] and autograd softmax(z)[1] - 1, diagnosed as a probable bug, SymPy sides with
    autograd, and the ledger keeps the failed observation."""
    ledger = tmp_path / "models.gradcheck.jsonl"

    code, out, err = gradcheck_cli(
        "run", "-", "--ledger", str(ledger), "--no-sweep", stdin=json.dumps(FORGOTTEN_TARGET)
    )

    assert code == 1, err
    record = json.loads(out)
    failure = record["failure"]
    assert (failure["input"], failure["index"]) == ("z", [1])
    assert _close([failure["left"], failure["right"]], [SOFTMAX_MINUS_Y[1] + 1, SOFTMAX_MINUS_Y[1]])
    assert failure["diagnosis"] == "probable_bug"
    assert (record["symbolic"]["analytical_agrees"], record["symbolic"]["autograd_agrees"]) == (False, True)
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    observation = entries[-1]
    assert (observation["kind"], observation["check_id"]) == ("observation", "softmax_cross_entropy_forgot_y")
    assert observation["data"]["passed"] is False


def test_a_wrong_dimension_is_bad_input_and_nothing_is_recorded(run_record, tmp_path):
    """Given the softmax loss written with dim=1 on a vector of three logits,
    when it is run with a ledger,
    then the script exits 2 with one line naming the dimension, and no ledger is created."""
    ledger = tmp_path / "models.gradcheck.jsonl"
    record = {**SOFTMAX_CROSS_ENTROPY, "function": "-(y*log_softmax(z, dim=1)).sum()"}

    code, completed, err = run_record(record, "--ledger", str(ledger))

    assert code == 2 and completed is None
    assert err.strip().count("\n") == 0
    assert "dimension out of range (expected to be in range of [-1, 0], but got 1)" in err
    assert not ledger.exists()
