"""verify and the blob store: a changed, a missing and a swapped blob are each an error of the entry
that names it (its seq and check id), exit 1; an intact store verifies OK, exit 0.
"""

from __future__ import annotations

import json

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.cli.app import main
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from jupyterlab_gradcheck.core.values.blobs import blob_path, referenced_shas, store_dir_for
from jupyterlab_gradcheck.core.values.form import PENDING


@pytest.fixture
def two_checks(tmp_path):
    """A ledger with two checks of 1000 elements each: (ledger, [(observation seq, check id, its input's sha)])."""
    ledger = tmp_path / "lab.gradcheck.jsonl"
    made = []
    for scale in (1.0, 2.0):
        x = torch.linspace(-1, 1, 1000, dtype=torch.float64) * scale
        result = check(lambda x: (x**3).sum(), lambda x: 3 * x**2, x=x, ledger=ledger)
        made.append((result.record["id"], result.record["inputs"]["x"]["stored"]["sha256"]))
    entries = Ledger(ledger).entries()
    observations = [e for e in entries if e["kind"] == "observation"]
    PENDING.clear()  # what verify sees is the store, never this process's memory
    return ledger, [(obs["seq"], check_id, sha) for obs, (check_id, sha) in zip(observations, made)]


def _verify_json(ledger, capsys) -> tuple[int, dict]:
    code = main(["verify", str(ledger), "--json"])
    return code, json.loads(capsys.readouterr().out)["reports"][0]


def test_an_intact_store_verifies(two_checks, capsys):
    """Given two checks whose tensors are in the store, when verified, then exit 0 and no blob error."""
    ledger, _ = two_checks
    report = verify_ledger_file(ledger, with_notebook=False)
    assert report["ok"] and report["blob_errors"] == []
    assert main(["verify", str(ledger)]) == 0


@pytest.mark.parametrize("tamper", ["changed", "missing", "swapped"])
def test_a_tampered_blob_is_an_error_of_its_entry(two_checks, tamper, capsys):
    """Given two checks' blobs, when the second check's input blob is edited (one bit), deleted, or
    replaced by a copy of the first check's input blob, then verify exits 1 and names the second
    check's entries (expectation and observation), its check id and the sha, as "missing" for a deleted
    blob and "changed" otherwise; the first check has no blob error."""
    ledger, ((_, _, first_sha), (second_seq, second_id, second_sha)) = two_checks
    target = blob_path(store_dir_for(ledger), second_sha)
    if tamper == "changed":
        raw = bytearray(target.read_bytes())
        raw[-3] ^= 0x01
        target.write_bytes(bytes(raw))
    elif tamper == "missing":
        target.unlink()
    else:
        target.write_bytes(blob_path(store_dir_for(ledger), first_sha).read_bytes())
    code, report = _verify_json(ledger, capsys)
    assert code == 1
    problem = "missing" if tamper == "missing" else "changed"
    named = [e for e in report["blob_errors"] if e["sha"] == second_sha]
    assert {(e["seq"], e["check_id"], e["problem"]) for e in named} == {
        (second_seq - 1, second_id, problem),  # the expectation names the input too
        (second_seq, second_id, problem),
    }
    assert all(e["sha"] == second_sha for e in report["blob_errors"])
    reasons = " ".join(str(e["reason"]) for e in report["errors"])
    assert f"entry seq {second_seq} ({second_id}): blob {second_sha} is {problem}" in reasons
    assert main(["verify", str(ledger)]) == 1
    assert f"blob {second_sha} is {problem}" in capsys.readouterr().out  # the plain report says it too


def test_each_blob_is_hashed_once_per_run(two_checks, monkeypatch):
    """Given two checks whose expectation and observation lines both name each input blob, when verified,
    then each distinct blob file is hashed once."""
    ledger, _ = two_checks
    from jupyterlab_gradcheck.core.values import blobs as blob_store

    hashed = []
    original = blob_store.blob_digest
    monkeypatch.setattr(blob_store, "blob_digest", lambda store, sha: hashed.append(sha) or original(store, sha))
    verify_ledger_file(ledger, with_notebook=False)
    shas = {sha for entry in Ledger(ledger).entries() for sha in referenced_shas(entry.get("data"))}
    assert sorted(hashed) == sorted(shas)
