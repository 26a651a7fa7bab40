"""POST checks with more than 256 elements: the worker hands its blobs to the server with its answer,
and the server writes them beside the ledger before the line that names them; a stored value naming
a blob nobody has is 400 with nothing appended.
"""

from __future__ import annotations

from pathlib import Path

from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from jupyterlab_gradcheck.core.values.blobs import blob_problem, referenced_shas
from jupyterlab_gradcheck.core.values.form import PENDING


async def test_a_large_check_writes_its_blobs_beside_the_ledger(api, lab1, jp_root_dir, ledger_lines):
    """Given a check of 1000 elements written as a list (the side panel's form), when POSTed, then the
    answer's record names its tensors by hash, every blob the ledger lines name is in
    work/lab1.gradcheck.blobs with its bytes matching its name, the server let go of them after the
    append, and the ledger verifies."""
    x = [i / 1000 for i in range(1000)]
    check = {"function": "sum(x*x)", "x": x, "analytical_gradient": "2*x"}
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": check})
    assert status == 200, body
    assert body["record"]["passed"] is True
    observed = body["record"]["observed_gradient"]
    assert observed["stored"]["shape"] == [1000] and observed["stored"]["dtype"] == "float64"
    store = Path(jp_root_dir) / "work" / "lab1.gradcheck.blobs"
    shas = {sha for entry in ledger_lines() for sha in referenced_shas(entry["data"])}
    assert observed["stored"]["sha256"] in shas
    assert all(blob_problem(store, sha) is None for sha in shas)
    assert all(sha not in PENDING for sha in shas)
    report = verify_ledger_file(Path(jp_root_dir) / "work" / "lab1.gradcheck.jsonl", with_notebook=False)
    assert report["ok"], report["errors"]


async def test_a_stored_value_naming_no_blob_is_400(api, lab1, ledger_lines):
    """Given a check whose x is a stored value whose sha no store holds, when POSTed, then 400 with one line
    naming it, and no ledger line is written."""
    forged = {
        "stored": {"sha256": "e" * 64, "shape": [1000], "dtype": "float64", "bytes": 8080},
        "summary": {"min": 0.0, "max": 1.0, "mean": 0.5, "norm": 18.0, "nonfinite": 0, "head": [0.0]},
    }
    status, _, body = await api(
        "POST",
        "checks",
        {"notebook": lab1, "check": {"function": "sum(x*x)", "x": forged, "analytical_gradient": "2*x"}},
    )
    assert status == 400, body
    assert body["message"] == f"stored value {'e' * 16}: no such blob in this process or in lab1.gradcheck.blobs"
    assert ledger_lines() == []
