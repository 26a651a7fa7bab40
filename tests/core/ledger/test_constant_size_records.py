"""Records of constant size: a check of 10^5 elements writes a record and a ledger append of at most
64 KB, its tensors going to the blob store beside the ledger; 256-element values stay inline.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.store import Ledger, canonical_json
from jupyterlab_gradcheck.core.values.blobs import blob_problem, referenced_shas, store_dir_for
from jupyterlab_gradcheck.core.values.form import is_stored_value

#: The issue's bound on a record and on one append, whatever n.
LIMIT = 64 * 1024

N = 100_000


def _function(x):
    return (torch.sin(x) * x).sum()


def _gradient(planted: bool):
    def gradient(x):
        out = torch.cos(x) * x + torch.sin(x)
        if planted:
            out = out.clone()
            out[4321] += 1.0  # one wrong element: the failure block names it as the worst
        return out

    return gradient


@pytest.mark.parametrize(
    ("dtype", "planted"),
    [(torch.float64, False), (torch.float64, True), (torch.float32, False)],
    ids=["float64-passing", "float64-failing", "float32-passing"],
)
def test_a_check_of_100000_elements_writes_a_small_record_and_append(tmp_path, dtype, planted):
    """Given x of 10^5 elements and the ledger of a notebook, when the check runs, then the record is at
    most 64 KB, the two lines it appends (expectation, observation) are at most 64 KB together, every
    tensor the record names is a blob in the store beside the ledger, and a planted wrong element is the
    failure's worst element."""
    torch.manual_seed(1)
    ledger = tmp_path / "lab.gradcheck.jsonl"
    result = check(_function, _gradient(planted), x=torch.randn(N, dtype=dtype), ledger=ledger)
    record_bytes = len(canonical_json(result.record).encode())
    appended = ledger.stat().st_size  # a new ledger: its genesis line and the check's two lines
    assert record_bytes <= LIMIT, record_bytes
    assert appended <= LIMIT, appended
    assert result.passed is (not planted)
    assert is_stored_value(result.record["inputs"]["x"])
    assert result.record["inputs"]["x"]["stored"]["dtype"] == str(dtype).replace("torch.", "")
    shas = referenced_shas(result.record)
    assert len(shas) >= 4  # the input, the expectation and at least autograd's and the differences' gradients
    store = store_dir_for(ledger)
    assert all(blob_problem(store, sha) is None for sha in shas)
    if planted:
        assert result.record["failure"]["index"] == [4321]
    entries = Ledger(ledger).entries()
    assert [e["kind"] for e in entries][-2:] == ["expectation", "observation"]


def test_a_second_check_appends_no_more_than_the_first(tmp_path):
    """Given a ledger that already holds a check of 10^5 elements, when a second check of the same size
    is appended, then the file grows by at most 64 KB (the blobs go to the store, not the line)."""
    ledger = tmp_path / "lab.gradcheck.jsonl"
    check(_function, _gradient(False), x=torch.randn(N, dtype=torch.float64), ledger=ledger)
    before = ledger.stat().st_size
    check(_function, _gradient(False), x=torch.randn(N, dtype=torch.float64), ledger=ledger)
    assert ledger.stat().st_size - before <= LIMIT
    blobs = os.listdir(store_dir_for(ledger))
    assert all(name.endswith(".safetensors") and len(name) == 64 + len(".safetensors") for name in blobs)


def test_values_of_256_elements_stay_inline_exactly_as_before():
    """Given x of 256 elements (the course's size), when checked without a ledger, then the input, the
    observed gradient and autograd's observation are the nested lists they always were, byte for byte
    as `json.dumps(tensor.tolist())`; one element more and the input is stored."""
    x = torch.arange(256, dtype=torch.float64) / 100
    record = check(_function, _gradient(False), x=x, ledger=False).record
    assert json.dumps(record["inputs"]["x"]) == json.dumps(x.tolist())
    leaf = x.clone().requires_grad_(True)
    _function(leaf).backward()
    observed = record["observations"]["backward_pass_1"]["gradients"]["x"]["value"]
    assert json.dumps(observed) == json.dumps(leaf.grad.tolist())  # the same backward pass: bit for bit
    assert record["observations"]["backward_pass_1"]["gradients"]["x"]["shape"] == [256]
    bigger = check(_function, _gradient(False), x=torch.zeros(257, dtype=torch.float64), ledger=False).record
    assert is_stored_value(bigger["inputs"]["x"])
    assert bigger["inputs"]["x"]["stored"]["shape"] == [257]


def test_a_large_tensor_held_fixed_is_stored_and_names_the_check():
    """Given a callable with a 1000-element weight held fixed, when checked twice with two different weights,
    then the record keeps each weight as a stored value (not 1000 numbers) and the two checks' ids differ."""
    first, second = torch.ones(1000, dtype=torch.float64), torch.full((1000,), 2.0, dtype=torch.float64)
    ids = []
    for weight in (first, second):
        record = check(
            lambda x, w: (x * w).sum(),
            lambda x: weight,
            x=torch.zeros(1000, dtype=torch.float64),
            fixed={"w": weight},
            ledger=False,
        ).record
        assert record["passed"] and is_stored_value(record["fixed"]["w"])
        assert record["fixed"]["w"]["summary"]["mean"] == float(weight[0])
        ids.append(record["id"])
    assert ids[0] != ids[1]
