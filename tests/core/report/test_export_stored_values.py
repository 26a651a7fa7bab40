"""Exports of a ledger whose checks hold stored values: the CSV shows each large tensor's dtype, shape,
summary and hash; the JSON export keeps the stored form as written and names the blob store; the
notebook export copies the blobs beside the copy, where verify finds them.
"""

from __future__ import annotations

import csv
import io
import json

import nbformat
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.store import ledger_path_for
from jupyterlab_gradcheck.core.values.blobs import referenced_shas
from jupyterlab_gradcheck.core.values.form import PENDING
from support.ledger import new_notebook


def _notebook_with_a_large_check(folder):
    notebook = new_notebook(folder / "lab1.ipynb")
    x = torch.arange(1000, dtype=torch.float64) / 1000
    result = check("sum(x*x)", 2 * x, x=x, notebook=notebook)
    PENDING.clear()  # the exports read the store, as a grader's machine would
    return notebook, result


def test_csv_shows_dtype_shape_summary_and_hash(tmp_path, gradcheck_cli):
    """Given a check of 1000 elements, when exported as CSV, then its inputs cell says float64[1000], the
    min 0 and max 0.999 of 0..999/1000 and the blob's first 12 hex digits, and holds no list of 1000."""
    notebook, result = _notebook_with_a_large_check(tmp_path)
    code, out, err = gradcheck_cli("export", str(notebook), "--format", "csv")
    assert code == 0, err
    [row] = list(csv.DictReader(io.StringIO(out)))
    sha = result.record["inputs"]["x"]["stored"]["sha256"]
    assert '"x":"float64[1000] min 0 max 0.999 mean 0.4995 norm' in row["inputs"]
    assert f"sha256 {sha[:12]}..." in row["inputs"]
    assert row["observed"].startswith("float64[1000] min 0 max 1.998")
    assert len(out) < 4000  # one row: the 1000 values of three tensors would be ~60 KB


def test_json_export_keeps_stored_forms_and_names_the_store(tmp_path, gradcheck_cli):
    """Given the check, when exported as JSON, then the entries keep the stored forms as written and the
    submission names the blob folder beside the ledger, which holds every blob they reference."""
    notebook, result = _notebook_with_a_large_check(tmp_path)
    code, out, err = gradcheck_cli("export", str(notebook), "--format", "json")
    assert code == 0, err
    [submission] = json.loads(out)["submissions"]
    store = tmp_path / "lab1.gradcheck.blobs"
    assert submission["blob_store"] == str(store)
    shas = {sha for entry in submission["entries"] for sha in referenced_shas(entry["data"])}
    assert shas == set(referenced_shas(result.record))
    assert {f"{sha}.safetensors" for sha in shas} <= {p.name for p in store.iterdir()}


def test_notebook_export_carries_the_store_and_verifies_with_replay(tmp_path, gradcheck_cli):
    """Given the check, when exported as a notebook into another folder and the original folder is
    removed, then the copy's folder holds lab1.gradcheck.blobs with the blobs, the copy names it, and
    verify --replay of the copy alone passes and reproduces the observation."""
    notebook, _result = _notebook_with_a_large_check(tmp_path / "work")
    out = tmp_path / "handed-in" / "lab1.submission.ipynb"
    code, _out, err = gradcheck_cli("export", str(notebook), "--format", "notebook", "-o", str(out))
    assert code == 0, err
    meta = nbformat.read(str(out), as_version=4).metadata["gradcheck"]
    assert meta["embedded"]["blob_store"] == "lab1.gradcheck.blobs"
    ledger_path_for(notebook).unlink()
    for blob in (tmp_path / "work" / "lab1.gradcheck.blobs").iterdir():
        blob.unlink()
    code, stdout, err = gradcheck_cli("verify", str(out), "--replay")
    assert code == 0, stdout + err
    assert "1 of 1 observations reproduced" in stdout
