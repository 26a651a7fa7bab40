"""`compare_rows` computes the torch-path comparisons of one input's gradients together, stacked as
the rows of one tensor; each record must be the one its own `compare` call gives, bit for bit,
including NaN, infinities, signed zeros, ties, a zero reference and a finite difference's rounding
bound. Records are compared as JSON text with NaN allowed: `repr` of a float round-trips exactly,
so equal text means equal bits."""

from __future__ import annotations

import json
import random

import pytest
import torch

from jupyterlab_gradcheck.core.check.compare import comparison as plain_floats
from jupyterlab_gradcheck.core.check.compare import comparison as stacked_rows
from jupyterlab_gradcheck.core.check.compare.comparison import compare, compare_rows
from jupyterlab_gradcheck.core.check.engine import run_check

NAN, INF = float("nan"), float("inf")
SPECIAL = [0.0, -0.0, 1.0, -1.0, 6.0, 6.000000000001, 1e-310, -1e-310, 1e308, -1e308, 1e-7, 3.5e-9, NAN, INF, -INF]
#: (rtol, atol) pairs handed to compare: the float64 defaults, exact equality, gradcheck's own,
#: integer ones and infinite ones. They are inputs under test; every assertion here is exact.
TOLERANCES = [(1e-7, 1e-10), (0.0, 0.0), (1e-3, 1e-5), (0, 1), (INF, 0.0), (1.0, INF)]
NAMES = [
    "analytical_vs_backward_pass_1",
    "analytical_vs_autograd_grad",
    "autograd_vs_finite_difference",
    "pass_2_vs_twice_pass_1",
    "after_clear_none_vs_pass_1",
]


def _text(records) -> str:
    return json.dumps(records, sort_keys=True, allow_nan=True, default=repr)  # repr: a tensor tolerance


def _one_by_one(requests: list[dict]) -> list[dict]:
    return [compare(**request) for request in requests]


@pytest.mark.parametrize("shape", [[plain_floats.SMALL_ELEMENTS + 1], [5, 20], [3, 4, 11]])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
def test_stacked_rows_give_the_records_of_separate_comparisons(shape, dtype):
    """Given 60 draws of five same-shaped comparisons above SMALL_ELEMENTS elements (the torch path),
    a fifth of their elements special values (ties included), each row with its own tolerance and
    some with a rounding bound, when compared together, then every record is the one its own
    compare call gives, in the same order."""
    rng = random.Random(20261203)
    count = 1
    for size in shape:
        count *= size

    def draw(special=SPECIAL):
        values = [
            rng.choice(special) if rng.random() < 0.2 else rng.choice([6.0, rng.uniform(-10, 10)]) for _ in range(count)
        ]
        return torch.tensor(values, dtype=torch.float64).reshape(shape).to(dtype)

    for _ in range(60):
        requests = []
        for name in NAMES:
            rtol, atol = rng.choice(TOLERANCES)
            request = dict(
                name=name,
                input_name="x",
                left=draw(),
                right=draw(),
                left_label="l",
                right_label="r",
                rtol=rtol,
                atol=atol,
            )
            if rng.random() < 0.4:
                request["bound"] = draw([0.0, 1e-9, INF, NAN]).abs().to(torch.float64)
            requests.append(request)
        together = compare_rows(requests)
        assert _text(together) == _text(_one_by_one(requests))
        assert [record["name"] for record in together] == NAMES


def test_requests_that_cannot_be_stacked_are_compared_on_their_own_in_order():
    """Given a mixture: two large rows of one shape, one of another shape, a small pair (the plain
    path), a complex pair and a large pair with a tensor tolerance, when compared together, then
    the records are those of separate compare calls in the request order, and a failing large row
    names its worst element."""
    big = torch.linspace(-1, 1, 100, dtype=torch.float64)
    wrong = big.clone()
    wrong[37] += 1e-3
    requests = [
        dict(name="a", input_name="x", left=wrong, right=big, rtol=1e-7, atol=1e-10),
        dict(
            name="b",
            input_name="x",
            left=torch.ones(3, dtype=torch.float64),
            right=torch.ones(3, dtype=torch.float64),
            rtol=0.0,
            atol=0.0,
        ),
        dict(name="c", input_name="x", left=big.reshape(10, 10), right=big.reshape(10, 10), rtol=0.0, atol=0.0),
        dict(
            name="d",
            input_name="x",
            left=big,
            right=big * 2,
            rtol=0.0,
            atol=0.0,
            bound=torch.full((100,), 1e-12, dtype=torch.float64),
        ),
        dict(
            name="e",
            input_name="z",
            left=torch.ones(70, dtype=torch.complex128),
            right=torch.ones(70, dtype=torch.complex128) * 1j,
            rtol=0.0,
            atol=0.0,
        ),
        dict(name="f", input_name="x", left=big, right=big, rtol=torch.tensor(1e-7), atol=0.0),
    ]
    for request in requests:
        request.update(left_label="l", right_label="r")
    together = compare_rows(requests)
    assert _text(together) == _text(_one_by_one(requests))
    assert together[0]["passed"] is False and together[0]["worst"]["index"] == [37]
    assert together[3]["error_bound"] == {"max": 1e-12, "at_worst": 1e-12}


@pytest.mark.parametrize(
    "record,passes",
    [
        ({"function": "sum(sin(x))", "x": [0.01 * k for k in range(100)], "analytical_gradient": "cos(x)"}, True),
        (
            {"function": "sum(sin(x))", "x": [0.01 * k for k in range(100)], "analytical_gradient": "cos(x) + 1e-6"},
            False,
        ),
        (
            {"function": "sum(x*y)", "x": [0.5] * 80, "y": [2.0] * 80, "analytical_gradient": {"x": "y", "y": "x*0"}},
            False,
        ),
    ],
)
def test_a_whole_check_records_the_same_comparisons_stacked_or_not(record, passes, monkeypatch):
    """Given checks of 100 and 2 x 80 elements (the torch path), a correct one and two with a wrong
    expectation, when each runs with its comparisons stacked and again with stacking switched off,
    then the comparisons, failures and passed are identical, in the record's order."""
    stacked = run_check(record, sweep=False, symbolic=False)
    monkeypatch.setattr(stacked_rows, "STACKED_ELEMENTS", 0)
    alone = run_check(record, sweep=False, symbolic=False)
    for key in ("comparisons", "failures", "failure", "passed"):
        assert _text(stacked[key]) == _text(alone[key]), key
    assert stacked["passed"] is passes
    inputs = [name for name in ("x", "y") if name in record]
    assert [(row["name"], row["input"]) for row in stacked["comparisons"]] == [
        (name, n)
        for name in (
            "analytical_vs_backward_pass_1",
            "analytical_vs_autograd_grad",
            "autograd_vs_finite_difference",
            "pass_2_vs_twice_pass_1",
            "after_clear_none_vs_pass_1",
        )
        for n in inputs
    ]
