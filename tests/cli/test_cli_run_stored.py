"""`jupyter gradcheck run` with stored values in the spec: a blob of the ledger's store is read and the
check runs; a sha that names no blob is bad input (exit 2, one line, the ledger untouched).
"""

from __future__ import annotations

import json

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.cli.app import main
from jupyterlab_gradcheck.core.values.form import PENDING


def _stored_input(tmp_path):
    """A ledger with one check of 400 elements, and that check's stored input x."""
    ledger = tmp_path / "lab.gradcheck.jsonl"
    x = torch.linspace(0, 1, 400, dtype=torch.float64)
    record = check("sum(x*x)", "2*x", x=x, ledger=ledger).record
    PENDING.clear()  # a new process: only the store has the bytes
    return ledger, record["inputs"]["x"]


def test_a_stored_input_is_read_from_the_ledgers_store(tmp_path, capsys):
    """Given a spec whose x is the stored value of an earlier check in the ledger, when run against that
    ledger, then the check runs on the same 400 values and passes (exit 0)."""
    ledger, x = _stored_input(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"function": "sum(x*x)", "x": x, "analytical_gradient": "2*x", "id": "again"}))
    assert main(["run", str(spec), "--ledger", str(ledger), "--no-sweep"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["passed"] and record["inputs"]["x"] == x


def test_a_stored_value_naming_no_blob_is_bad_input(tmp_path, capsys):
    """Given the same spec with its sha changed to one no store holds, when run, then exit 2 with one line
    naming the stored value, and the ledger's bytes are unchanged."""
    ledger, x = _stored_input(tmp_path)
    before = ledger.read_bytes()
    forged = {**x, "stored": {**x["stored"], "sha256": "f" * 64}}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"function": "sum(x*x)", "x": forged, "analytical_gradient": "2*x"}))
    assert main(["run", str(spec), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: stored value {'f' * 16}: no such blob in this process or in lab.gradcheck.blobs"
    assert ledger.read_bytes() == before
