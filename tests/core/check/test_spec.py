"""The record validator: the seed form, the full form, and one-line refusals."""

from __future__ import annotations

import json

import pytest

from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.jsonio import loads_strict

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}


def test_seed_record_is_accepted_verbatim():
    """Given the seed record, when parsed, then x is the input, defaults are float64 on cpu
    with dtype-dependent tolerances, and the id is derived from the function."""
    spec = parse_spec(SEED)
    record = spec.to_dict()
    assert record["inputs"] == {"x": 3}
    assert (record["dtype"], record["device"]) == ("float64", "cpu")
    assert record["tolerance"] == {"rtol": 1e-7, "atol": 1e-10}
    assert record["id"].startswith("x*x@")
    assert spec.tolerance_explicit is False
    assert parse_spec(dict(SEED)).id == spec.id


def test_full_form_keeps_what_was_written():
    """Given the full form with nested inputs and explicit tolerances, when parsed, then the
    written tolerance is kept and flagged explicit."""
    spec = parse_spec(
        {
            "id": "vector-sum",
            "function": "(x*w).sum()",
            "inputs": {"x": [1, 2], "w": [3, 4]},
            "dtype": "float32",
            "device": "auto",
            "analytical_gradient": {"x": "w", "w": "x"},
            "tolerance": {"rtol": 1e-3},
            "finite_difference": {"scheme": "richardson", "step": 1e-2},
            "origin": "d/dx of sum(x*w) is w",
            "destination": "x.grad and w.grad",
        }
    )
    assert spec.id == "vector-sum"
    assert spec.tolerance["rtol"] == 1e-3 and spec.tolerance_explicit
    assert spec.finite_difference["scheme"] == "richardson" and spec.finite_difference["step"] == 1e-2
    assert spec.shapes == {"x": [2], "w": [2]}


@pytest.mark.parametrize(
    "record, field, message",
    [
        ({"function": "x*x", "x": 3}, "analytical_gradient", "write the expectation before running"),
        ({"function": "x*x", "x": 3, "analytical_gradient": 6, "colour": 1}, "colour", "unknown field 'colour'"),
        ({"function": "x*x", "x": [[1, 2], [3]], "analytical_gradient": 6}, "inputs.x", "ragged list"),
        ({"function": "x*x", "x": "3", "analytical_gradient": 6}, "inputs.x", "found string"),
        ({"function": "x*x", "x": True, "analytical_gradient": 6}, "inputs.x", "found boolean true"),
        ({"function": "x*x", "x": None, "analytical_gradient": 6}, "inputs.x", "found null"),
        ({"function": "x*x", "x": 3, "analytical_gradient": 6, "dtype": "int8"}, "dtype", "dtype 'int8'"),
        ({"function": "x*x", "x": 3, "analytical_gradient": 6, "device": "tpu"}, "device", "device 'tpu'"),
        (
            {"function": "x*x", "x": 3, "analytical_gradient": 6, "tolerance": {"rtol": -1}},
            "tolerance.rtol",
            "non-negative",
        ),
        (
            {"function": "x*x", "x": 3, "analytical_gradient": 6, "tolerance": {"rel": 1}},
            "tolerance.rel",
            "unknown field 'rel'",
        ),
        (
            {"function": "x*x", "x": 3, "analytical_gradient": 6, "finite_difference": {"scheme": "spline"}},
            "finite_difference.scheme",
            "not one of",
        ),
        (
            {"function": "x*x", "x": 3, "analytical_gradient": 6, "finite_difference": {"step": 0}},
            "finite_difference.step",
            "positive",
        ),
        (
            {"function": "abs(x)", "x": 3, "analytical_gradient": 1, "finite_difference": {"scheme": "complex_step"}},
            "finite_difference.scheme",
            "abs is not",
        ),
        ({"function": "x*x", "x": [1, 2], "analytical_gradient": [1, 2, 3]}, "analytical_gradient", "shape [3]"),
        (
            {"function": "x*y", "inputs": {"x": 1, "y": 2}, "analytical_gradient": 1},
            "analytical_gradient",
            "map each input",
        ),
        ({"function": "3", "x": 1, "analytical_gradient": 0}, "x", "unknown field 'x'"),
        ({"function": 7, "x": 1, "analytical_gradient": 0}, "function", "must be a string"),
        ({"function": "x*x", "x": [0] * 100_001, "analytical_gradient": 0}, "inputs.x", "more than 100000 elements"),
    ],
)
def test_bad_records_are_refused_with_the_field(record, field, message):
    """Given a record with one mistake, when parsed, then a one-line SpecError names the field."""
    with pytest.raises(SpecError) as raised:
        parse_spec(record)
    assert raised.value.field == field
    assert message in raised.value.message


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"function": "x*x", "x": NaN, "analytical_gradient": 6}', "NaN is not allowed"),
        ('{"function": "x*x", "x": Infinity, "analytical_gradient": 6}', "Infinity is not allowed"),
        ('{"function": "x*x", "x": 3, "x": 4, "analytical_gradient": 6}', "duplicate key 'x'"),
        ('{"function": "x*x", "x": 3', "malformed JSON"),
    ],
)
def test_strict_json(text, message):
    """Given JSON that Python would silently accept or that is cut short, when read strictly,
    then it is refused with a message naming why."""
    with pytest.raises(SpecError, match=message):
        loads_strict(text)


def test_normalised_record_is_json():
    """Given a parsed record, when serialised, then it is plain JSON and parses back the same."""
    record = parse_spec(SEED).to_dict()
    assert parse_spec(json.loads(json.dumps(record))).to_dict() == record


@pytest.mark.parametrize(
    "field, record",
    [
        ("tolerance.rtol", {"tolerance": {"rtol": 1.0}}),
        ("tolerance.rtol", {"tolerance": {"rtol": 1e308}}),
        ("finite_difference.rtol", {"finite_difference": {"rtol": 5}}),
    ],
)
def test_a_relative_tolerance_of_one_or_more_is_refused_at_declaration(field, record):
    """Given a check declared with a relative tolerance of 1 or more (it would accept any
    gradient of the right sign, whatever is written later),
    when the record is parsed,
    then it is refused, naming the field, before anything runs."""
    with pytest.raises(SpecError, match="checks nothing|check nothing") as caught:
        parse_spec({"function": "x*x", "x": 3, "analytical_gradient": 6, **record})
    assert caught.value.field == field


def test_an_instructor_may_raise_the_relative_tolerance_limit():
    """Given an instructor's limit of 10 for relative tolerances,
    when a check declares rtol 2,
    then it is accepted with that tolerance."""
    from jupyterlab_gradcheck.core.expr.parser import Limits

    spec = parse_spec(
        {"function": "x*x", "x": 3, "analytical_gradient": 6, "tolerance": {"rtol": 2}}, limits=Limits(max_rtol=10.0)
    )
    assert spec.tolerance["rtol"] == 2.0


def test_a_tolerance_change_to_one_or_more_is_refused_and_writes_nothing(tmp_path):
    """Given a ledger with a check in it,
    when its tolerance is changed to rtol 1 with a justification,
    then the change is refused and the ledger is byte for byte as it was."""
    from jupyterlab_gradcheck.core.ledger.store import Ledger
    from jupyterlab_gradcheck.core.run import run_and_record

    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    run_and_record({"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6}, ledger, sweep=False)
    before = ledger.path.read_bytes()
    with pytest.raises(SpecError, match="check nothing"):
        ledger.change_tolerance("square", rtol=1.0, justification="to make it pass")
    assert ledger.path.read_bytes() == before
