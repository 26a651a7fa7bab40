"""The line layout: what a reader gets from a line without decoding its record must equal
what decoding the whole line gives."""

from __future__ import annotations

import json

import pytest

from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.ledger.store import (
    GENESIS,
    HASH_SUFFIX_LEN,
    LineError,
    make_line,
    read_entry,
    read_line,
    stored_hash_ok,
)

SPECS = [
    {"function": "x*x", "x": 3, "analytical_gradient": 6},
    {"function": "x*x", "x": 3, "analytical_gradient": 6, "tolerance": {"rtol": 0, "atol": 0}},
    {
        "function": "x*x",
        "x": 3,
        "analytical_gradient": 6,
        "dtype": "float32",
        "finite_difference": {"scheme": "forward", "step": 1e-3, "rtol": 0.5, "atol": 2},
    },
    # names and text that look like the tolerance keys must not be taken for them
    {
        "function": "tolerance*finite_difference",
        "inputs": {"tolerance": 2.0, "finite_difference": 3.0},
        "analytical_gradient": {"tolerance": "finite_difference", "finite_difference": "tolerance"},
        "origin": '"tolerance":{"atol":5,"rtol":5} in a string',
    },
]


def _expectation_line(spec: dict) -> bytes:
    data = parse_spec(spec).to_dict()
    line, _ = make_line(
        {"seq": 1, "time": "t", "kind": "expectation", "check_id": data["id"], "data": data, "prev": GENESIS}
    )
    return line[:-1]


@pytest.mark.parametrize("spec", SPECS)
def test_tolerances_read_without_decoding_equal_the_decoded_ones(spec):
    """Given an expectation line for each spec (including inputs named like the tolerance keys
    and an origin that quotes them), when read without decoding, then its two tolerances are
    exactly those of the decoded record."""
    raw = _expectation_line(spec)
    decoded = read_entry(raw)["data"]
    fast = read_line(raw, decode=False).data
    assert set(fast) == {"tolerance", "finite_difference"}
    for target in ("tolerance", "finite_difference"):
        assert fast[target] == {"rtol": decoded[target]["rtol"], "atol": decoded[target]["atol"]}


def test_fields_read_from_the_line_equal_the_decoded_entry():
    """Given an observation line, when read without decoding its record, then seq, kind,
    check id, prev, time, hash, expectation_seq and passed equal the decoded entry's."""
    entry = {
        "seq": 7,
        "time": "2026-01-01T00:00:00+00:00",
        "kind": "observation",
        "check_id": 'id "quoted" ∂',
        "data": {"expectation_seq": 6, "passed": False, "record": {"id": 'id "quoted" ∂', "passed": False}},
        "prev": "a" * 64,
    }
    line, digest = make_line(entry)
    info = read_line(line[:-1])
    assert (info.seq, info.kind, info.check_id, info.prev, info.time, info.hash) == (
        7,
        "observation",
        'id "quoted" ∂',
        "a" * 64,
        entry["time"],
        digest,
    )
    assert (info.expectation_seq, info.passed, info.failed_to_run, info.hash_ok) == (6, False, False, True)
    assert json.loads(line)["hash"] == digest


def test_the_hash_covers_every_byte_before_it():
    """Given a stored line, then the hash suffix is 75 bytes, and changing any single byte
    before it makes the stored hash wrong."""
    line, _ = make_line(
        {"seq": 1, "time": "t", "kind": "note", "check_id": None, "data": {"text": "abc"}, "prev": GENESIS}
    )
    raw = line[:-1]
    assert raw[-HASH_SUFFIX_LEN:].startswith(b',"hash":"') and stored_hash_ok(raw)
    for position in range(len(raw) - HASH_SUFFIX_LEN):
        edited = bytearray(raw)
        edited[position] ^= 0x01
        assert not stored_hash_ok(bytes(edited)), position


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"seq": 1}', "missing check_id, data, hash, kind, prev, time"),
        (
            b'{"check_id":null,"data":{},"hash":"0","kind":"note","prev":"0","seq":1,"time":"t","x":1}',
            "unexpected key x",
        ),
    ],
)
def test_malformed_lines_say_why(raw, reason):
    """Given lines that are not entries, when read, then LineError gives the precise reason."""
    with pytest.raises(LineError, match=reason):
        read_line(raw)
