"""JSON export (everything) and notebook export (one file carrying its ledger)."""

from __future__ import annotations

import hashlib
import json

import nbformat

from jupyterlab_gradcheck.core.ledger.store import canonical_json
from support.ledger import lines_of, notebook_with_three_checks


def test_json_export_holds_every_entry_as_written(tmp_path, gradcheck_cli):
    """Given a notebook ledger, when exported as JSON through the script, then the document
    holds every entry, each of which rehashes to its own hash, plus the verify report and
    each check's history (runs, failures kept, tolerance history)."""
    notebook, ledger = notebook_with_three_checks(tmp_path)
    code, out, err = gradcheck_cli("export", str(notebook), "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert (document["format"], document["version"]) == ("jupyterlab-gradcheck-export", 1)
    [submission] = document["submissions"]
    assert [e["hash"] for e in submission["entries"]] == [json.loads(raw)["hash"] for raw in lines_of(ledger.path)]
    for entry in submission["entries"]:
        body = {k: v for k, v in entry.items() if k != "hash"}
        assert hashlib.sha256(canonical_json(body).encode()).hexdigest() == entry["hash"]
    assert submission["verify"]["ok"] and submission["chain_ok"] and submission["binding_ok"]
    assert (submission["status"], submission["witnessed"]) == ("ok", None)  # exported without a witness
    cube = submission["checks"]["cube_wrong"]
    assert (cube["runs"], len(cube["failures_kept"]), cube["failures_kept"][0]["seq"]) == (1, 1, 6)
    assert cube["tolerance_history"][0]["after_failure"] is True
    assert cube["latest_observation_seq"] == 6


def test_notebook_export_embeds_the_ledger_and_verifies_alone(tmp_path, gradcheck_cli):
    """Given a notebook and its ledger, when exported as a notebook, then the copy holds
    every ledger line verbatim in metadata.gradcheck.embedded, verifies on its own (with
    the ledger file gone) and with replay; a line edited inside the copy fails verify."""
    notebook, ledger = notebook_with_three_checks(tmp_path / "work")
    out = tmp_path / "submission.ipynb"
    code, _out, err = gradcheck_cli("export", str(notebook), "--format", "notebook", "-o", str(out))
    assert code == 0, err
    meta = nbformat.read(str(out), as_version=4).metadata["gradcheck"]
    assert meta["embedded"]["lines"] == [raw.decode() for raw in lines_of(ledger.path)]
    assert (meta["entries"], meta["ledger"]) == (7, "lab1.gradcheck.jsonl")
    ledger.path.unlink()

    code, stdout, err = gradcheck_cli("verify", str(out), "--replay")
    assert code == 0, stdout + err
    assert "3 of 3 observations reproduced" in stdout

    document = json.loads(out.read_text())
    lines = document["metadata"]["gradcheck"]["embedded"]["lines"]
    assert '"observed_gradient":12.0' in lines[6]  # line 7: seq 6, after the genesis entry
    lines[6] = lines[6].replace('"observed_gradient":12.0', '"observed_gradient":6.0')
    out.write_text(json.dumps(document))
    code, stdout, _err = gradcheck_cli("verify", str(out))
    assert code == 1
    assert "line 7: hash mismatch" in stdout


def test_notebook_export_refuses_what_is_not_a_notebook(tmp_path, gradcheck_cli):
    """Given a ledger file, when exported with --format notebook, then exit 2 with a
    one-line message, and nothing is written."""
    _notebook, ledger = notebook_with_three_checks(tmp_path, tolerance_change=False)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = gradcheck_cli("export", str(ledger.path), "--format", "notebook")
    assert (code, out) == (2, "")
    assert err.strip() == "error: --format notebook needs a notebook (.ipynb), got lab1.gradcheck.jsonl"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
