"""POST checks with the model exercises: softmax cross-entropy and a linear model's mean squared
error, run by a worker of a live server as the side panel would send them."""

from __future__ import annotations

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


def _within(observed: list, expected: list) -> bool:
    return len(observed) == len(expected) and all(abs(o - e) <= HAND_TOLERANCE for o, e in zip(observed, expected))


async def test_softmax_cross_entropy_passes_with_its_hand_gradient(api, lab1, ledger_lines):
    """Given -(y*log_softmax(z, dim=0)).sum() at z = [1, 2, 3], y = [0, 1, 0] expecting
    softmax(z, dim=0) - y for z,
    when it is POSTed to checks,
    then the answer is 200 with passed true, z's gradient is softmax(z) - y as worked out by
    hand, SymPy agrees, and the ledger holds its expectation and a passed observation."""
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": SOFTMAX_CROSS_ENTROPY})

    assert status == 200, body
    record = body["record"]
    assert record["passed"] is True, record["failures"]
    assert _within(record["observed_gradient"]["z"], SOFTMAX_MINUS_Y)
    assert record["symbolic"]["status"] == "agrees"
    entries = ledger_lines()
    assert [e["kind"] for e in entries] == ["expectation", "observation"]
    assert entries[1]["data"]["passed"] is True


async def test_the_linear_model_passes_with_its_hand_gradients(api, lab1):
    """Given mean((X @ w + b - y) ** 2) over four samples, expecting 2/N X.T @ r for w and
    2/N sum(r) for b (r the residual),
    when it is POSTed to checks,
    then the answer is 200 with passed true and the gradients of w and b worked out by hand."""
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": MEAN_SQUARED_ERROR})

    assert status == 200, body
    record = body["record"]
    assert record["passed"] is True, record["failures"]
    assert _within(record["observed_gradient"]["w"], MSE_W_GRADIENT)
    assert _within([record["observed_gradient"]["b"]], [MSE_B_GRADIENT])


async def test_softmax_without_the_target_is_a_finding_kept_in_the_ledger(api, lab1, ledger_lines):
    """Given the softmax loss expecting softmax(z, dim=0) for z (the "- y" forgotten),
    when it is POSTed to checks,
    then the answer is 200 with passed false and the failure at z[1], and the ledger keeps the
    failed observation."""
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": FORGOTTEN_TARGET})

    assert status == 200, body
    failure = body["record"]["failure"]
    assert body["record"]["passed"] is False
    assert (failure["input"], failure["index"]) == ("z", [1])
    assert ledger_lines()[-1]["data"]["passed"] is False


async def test_class_indices_out_of_range_are_400_and_nothing_is_appended(api, lab1, ledger_lines):
    """Given cross_entropy over a batch of two with three classes and the class index 3,
    when it is POSTed,
    then the answer is 400 naming the index and the class count, and no ledger appears."""
    check = {
        "function": "cross_entropy(z, [0, 3])",
        "inputs": {"z": [[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]]},
        "analytical_gradient": [[0, 0, 0], [0, 0, 0]],
    }

    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": check})

    assert status == 400, body
    assert "class index 3 is out of range for 3 classes" in body["message"]
    assert ledger_lines() == []
