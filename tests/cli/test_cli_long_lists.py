"""Stories of a long list written in a JSON record (core/values/form.py).

The CLI's spec file, a REST body and the panel's form bring values as nested lists. One of more than
256 numbers is kept as a stored value, like a tensor from Python, so the ledger's lines stay small at any
size a list may have, and the check still runs, verifies and replays.
"""

from __future__ import annotations

import json

from jupyterlab_gradcheck.cli.app import main
from jupyterlab_gradcheck.core.check.record.spec import make_check_id, parse_spec
from jupyterlab_gradcheck.core.values.blobs import decode_values
from jupyterlab_gradcheck.core.values.form import INLINE_ELEMENTS, PENDING, PendingBlobs, blob_header, stored_from_list

#: The issue's bound on a ledger line, blobs apart.
LINE_BOUND = 64 * 1024


def test_a_spec_file_with_a_100000_element_list_appends_small_lines_and_replays(tmp_path, capsys):
    """Given a spec file whose input is a JSON list of 100,000 numbers and whose expectation is written
    as an expression,
    when `jupyter gradcheck run --ledger` records it and `verify --replay` reads it back,
    then both lines are under 64 KB, the list's exact float64 bytes are in the blob store, the check
    passes, and the replay reproduces it."""
    values = [round(-2 + 4 * i / 99_999, 6) for i in range(100_000)]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"function": "sum(sin(x)*x)", "x": values, "analytical_gradient": "sin(x)+x*cos(x)"}))
    ledger = tmp_path / "lab.gradcheck.jsonl"

    assert main(["run", str(spec), "--ledger", str(ledger)]) == 0
    capsys.readouterr()

    lines = ledger.read_bytes().splitlines()
    assert [json.loads(line)["kind"] for line in lines[1:]] == ["expectation", "observation"]
    assert max(len(line) for line in lines) <= LINE_BOUND
    written = json.loads(lines[1])["data"]["inputs"]["x"]
    assert written["stored"]["shape"] == [100_000] and written["stored"]["dtype"] == "float64"
    blob = (tmp_path / "lab.gradcheck.blobs" / f"{written['stored']['sha256']}.safetensors").read_bytes()
    assert decode_values(blob)[2] == values  # every number exactly as written
    assert main(["verify", str(ledger), "--replay"]) == 0
    assert "1 of 1 observations reproduced" in capsys.readouterr().out


def test_a_list_of_256_numbers_stays_inline_and_the_check_id_is_the_lists():
    """Given lists of 256 and of 257 numbers,
    when a record holding each is parsed,
    then the 256 stay an inline list, the 257 become a stored value, and both check ids are the ones
    made from the lists as written, so a check keeps its id (and its history) across versions."""
    for size in (INLINE_ELEMENTS, INLINE_ELEMENTS + 1):
        values = [0.5 + i for i in range(size)]
        spec = parse_spec({"function": "sum(x*x)", "x": values, "analytical_gradient": "2*x"})
        assert spec.id == make_check_id("sum(x*x)", {"x": values}, "float64", "cpu")
        assert (spec.inputs["x"] == values) is (size == INLINE_ELEMENTS)
    stored = spec.inputs["x"]
    assert stored["summary"]["min"] == 0.5 and stored["summary"]["max"] == 256.5
    assert stored["summary"]["head"] == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5]
    assert blob_header(PENDING.get(stored["stored"]["sha256"]))[:2] == ("F64", [257])


def test_a_list_that_is_not_a_real_tensor_is_left_as_written():
    """Given a list of booleans, an empty list and a short list,
    when each is offered for storing, then each is returned unchanged (validation names their problems)."""
    for value in ([True] * 300, [], [1.0, 2.0]):
        assert stored_from_list(value) is value


def test_two_holders_of_the_same_blob_each_keep_it_until_their_own_release():
    """Given one blob pinned by two requests (two notebooks checking the same values at once),
    when the first releases it, then it is still pending for the second; when the second releases it,
    it is gone."""
    cache = PendingBlobs()
    cache.put("a" * 64, b"bytes")
    cache.pin(["a" * 64])
    cache.pin(["a" * 64])
    cache.discard(["a" * 64])
    assert cache.get("a" * 64) == b"bytes"
    cache.discard(["a" * 64])
    assert cache.get("a" * 64) is None and cache.size == 0
