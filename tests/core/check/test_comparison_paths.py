"""The two paths of `compare` (plain Python floats for small CPU tensors, torch otherwise)
give the same record, bit for bit, including NaN, infinities, signed zeros and a zero
reference. Records are compared as JSON text with NaN allowed: `repr` of a float round-trips
exactly, so equal text means equal bits (and NaN compares equal to NaN, which == does not)."""

from __future__ import annotations

import json
import random

import pytest
import torch

from jupyterlab_gradcheck.core.check.compare import comparison
from jupyterlab_gradcheck.core.check.compare import comparison as plain_floats
from jupyterlab_gradcheck.core.check.compare.comparison import compare
from jupyterlab_gradcheck.core.check.engine import run_check

NAN, INF = float("nan"), float("inf")
SPECIAL = [0.0, -0.0, 1.0, -1.0, 6.0, 6.000000000001, 1e-310, -1e-310, 1e308, -1e308, 1e-7, 3.5e-9, NAN, INF, -INF]
#: (rtol, atol) pairs handed to compare: the float64 defaults, exact equality, gradcheck's own,
#: integer ones and infinite ones. They are inputs under test; every assertion here is exact.
TOLERANCES = [(1e-7, 1e-10), (0.0, 0.0), (1e-3, 1e-5), (0, 1), (INF, 0.0), (1.0, INF)]


def _text(record: dict) -> str:
    return json.dumps(record, sort_keys=True, allow_nan=True)


def _both(left, right, rtol, atol) -> tuple[str, str]:
    """(plain-Python record, torch record) of one comparison, as JSON text."""
    kwargs = {"left_label": "l", "right_label": "r", "rtol": rtol, "atol": atol}
    assert comparison.Operand(left).values is not None and comparison.Operand(right).values is not None
    fast = compare("c", "x", left, right, **kwargs)
    slow = comparison.compare_tensors("c", "x", left, right, **kwargs)
    return _text(fast), _text(slow)


@pytest.mark.parametrize("rtol,atol", TOLERANCES)
def test_every_pair_of_special_scalars_gives_the_same_record(rtol, atol):
    """Given two 0-d float64 tensors drawn from NaN, ±inf, ±0, subnormals, huge and ordinary
    values, when they are compared on both paths under each tolerance, then the records are
    identical (the worst element, both errors, None for non-finite errors, passed)."""
    for a in SPECIAL:
        for b in SPECIAL:
            left, right = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
            fast, slow = _both(left, right, rtol, atol)
            assert fast == slow, (a, b, rtol, atol)


def test_a_zero_reference_gives_an_infinite_relative_error_on_both_paths():
    """Given a reference of exactly 0 and a left value of 1e-12, when compared, then both
    paths report max_rel_err None (infinite), max_abs_err 1e-12 and the element [1]."""
    left = torch.tensor([0.0, 1e-12, 0.0], dtype=torch.float64)
    right = torch.zeros(3, dtype=torch.float64)
    fast, slow = _both(left, right, 0.0, 0.0)
    assert fast == slow
    record = json.loads(fast)
    assert record["max_rel_err"] is None and record["max_abs_err"] == 1e-12
    assert record["worst"]["index"] == [1] and record["passed"] is False


@pytest.mark.parametrize("shape", [[], [3], [2, 3], [4, 4, 4]])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_random_tensors_with_specials_give_the_same_record(shape, dtype):
    """Given 300 random pairs of tensors of one shape and dtype, a fifth of their elements
    replaced by special values (ties included), when compared on both paths, then every pair
    of records is identical, including which element is worst when several tie."""
    rng = random.Random(20240601)
    count = 1
    for size in shape:
        count *= size
    for _ in range(300):

        def draw():
            values = [
                rng.choice(SPECIAL) if rng.random() < 0.2 else rng.choice([6.0, rng.uniform(-10, 10)])
                for _ in range(count)
            ]
            return torch.tensor(values, dtype=torch.float64).reshape(shape).to(dtype)

        rtol, atol = rng.choice(TOLERANCES)
        fast, slow = _both(draw(), draw(), rtol, atol)
        assert fast == slow


def test_the_first_nan_excess_is_the_worst_element_as_torch_argmax_picks_it():
    """Given a NaN error at [0] (its excess counts as +inf) and errors of inf against an
    infinite bound at [2] and [3] (excess inf - inf = NaN), when compared, then both paths
    name element [2] as worst, as torch.argmax does, and report both maxima as None."""
    left = torch.tensor([NAN, 1.0, -INF, -INF], dtype=torch.float64)
    right = torch.tensor([1.0, 1.0, INF, INF], dtype=torch.float64)
    fast, slow = _both(left, right, 1e-7, 1e-10)
    assert fast == slow
    record = json.loads(fast)
    assert record["worst"]["index"] == [2] and record["worst"]["flat_index"] == 2
    assert record["max_abs_err"] is None and record["max_rel_err"] is None


def test_large_complex_sparse_or_integer_tensors_keep_the_torch_path():
    """Given tensors above SMALL_ELEMENTS elements, complex, sparse or integer ones, then no
    plain values are read from them; given two scalars with a tensor tolerance, or shapes
    [] and [3], then compare takes the torch path and returns its record."""
    big = torch.ones(plain_floats.SMALL_ELEMENTS + 1, dtype=torch.float64)
    for tensor in (
        big,
        torch.ones(3, dtype=torch.complex128),
        torch.ones(3, dtype=torch.float64).to_sparse(),
        torch.ones(3, dtype=torch.int64),
    ):
        assert comparison.Operand(tensor).values is None
    record = compare("c", "x", big, big * 2, left_label="l", right_label="r", rtol=0.0, atol=0.0)
    assert record["max_abs_err"] == 1.0 and record["worst"]["index"] == [0]
    scalar, vector = torch.tensor(1.0, dtype=torch.float64), torch.tensor([1.0, 1.0, 3.0], dtype=torch.float64)
    kwargs = {"left_label": "l", "right_label": "r"}
    broadcast = compare("c", "x", scalar, vector, rtol=0.0, atol=0.0, **kwargs)
    assert broadcast["worst"]["index"] == [2] and broadcast["max_abs_err"] == 2.0
    tensor_rtol = compare("c", "x", scalar, scalar, rtol=torch.tensor(1e-7), atol=0.0, **kwargs)
    assert tensor_rtol["passed"] is True and tensor_rtol["max_abs_err"] == 0.0


def test_an_operand_is_read_once_and_flattened_row_major():
    """Given a 2x3 float32 tensor, when wrapped as an Operand, then its values are its six
    elements in row-major order, as exact doubles, and comparing it with itself passes."""
    tensor = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.1]], dtype=torch.float32)
    operand = comparison.Operand(tensor)
    assert operand.values == [1.0, 2.0, 3.0, 4.0, 5.0, float(torch.tensor(0.1, dtype=torch.float32))]
    record = compare("c", "x", operand, operand, left_label="l", right_label="r", rtol=0.0, atol=0.0)
    assert record["passed"] is True and record["worst"]["index"] == [0, 0]


@pytest.mark.parametrize(
    "record",
    [
        {"function": "x*x", "x": 3, "analytical_gradient": 6},
        {"function": "x*x", "x": 3, "analytical_gradient": 5},
        {"function": "sum(x*x)", "x": [1.0, 0.0, -3.0], "analytical_gradient": "2*x"},
        {"function": "sum(x*x)", "x": [1.0, 2.0], "analytical_gradient": [2.0, 5.0], "dtype": "float32"},
    ],
)
def test_a_whole_check_records_the_same_comparisons_on_both_paths(record, monkeypatch):
    """Given the seed check, a wrong derivation, a vector with a zero gradient and a float32
    check, when each runs with the plain-Python path and again with it switched off, then the
    comparisons, failures and passed are identical."""
    fast = run_check(record, sweep=False, symbolic=False)
    monkeypatch.setattr(plain_floats, "SMALL_ELEMENTS", 0)
    slow = run_check(record, sweep=False, symbolic=False)
    for key in ("comparisons", "failures", "failure", "passed"):
        assert _text(fast[key]) == _text(slow[key]), key
    assert fast["comparisons"][0]["name"] == "analytical_vs_backward_pass_1"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
def test_a_doubled_operand_compares_as_twice_the_tensor(dtype):
    """Given pass-1 gradients with an element near the dtype's largest value (which doubles to
    inf), NaN, -0.0 and a subnormal, when the doubled Operand is compared with 2 x pass 1 in
    torch on both sides, then the records are identical, and so is its tensor."""
    big = torch.finfo(dtype).max
    pass_1 = torch.tensor([big, float("nan"), -0.0, 5e-324, 3.0], dtype=torch.float64).to(dtype)
    pass_2 = torch.tensor([big, 1.0, 0.0, 1e-323, 6.0], dtype=torch.float64).to(dtype)
    twice = comparison.Operand.doubled(comparison.Operand(pass_1))
    assert torch.equal(twice.tensor.nan_to_num(0.0), (2 * pass_1).nan_to_num(0.0))
    kwargs = {"left_label": "l", "right_label": "r", "rtol": 1e-7, "atol": 1e-10}  # the float64 defaults, under test
    fast = compare("c", "x", pass_2, twice, **kwargs)
    slow = comparison.compare_tensors("c", "x", pass_2, 2 * pass_1, **kwargs)
    assert _text(fast) == _text(slow)
    assert json.loads(_text(fast))["worst"]["index"] == [0]
