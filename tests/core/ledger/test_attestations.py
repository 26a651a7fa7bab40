"""Attestations in a notebook's outputs bind its ledger where no front end wrote the metadata."""

from __future__ import annotations

import json

import nbformat

from jupyterlab_gradcheck.core.ledger.binding import MIME_TYPE, attestation_for
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file, verify_notebook, verify_path
from jupyterlab_gradcheck.core.run import LedgeredRun, refuse_bad_callable, run_and_record
from support.ledger import THREE_CHECKS, lines_of, new_notebook, write_lines


def _attested_notebook(folder, checks=THREE_CHECKS):
    """A notebook saved as nbconvert saves it: no metadata binding, one code cell per check whose
    output carries that check's attestation. Returns (notebook path, ledger)."""
    notebook = new_notebook(folder / "lab1.ipynb")
    ledger = Ledger.for_notebook(notebook, bind=False)
    document = nbformat.read(str(notebook), as_version=4)
    for count, spec in enumerate(checks, start=1):
        _record, entry = LedgeredRun.declare(ledger, refuse_bad_callable(spec)).run(sweep=False)
        cell = nbformat.v4.new_code_cell(f"check_record({spec['id']!r})", execution_count=count)
        cell.outputs = [
            nbformat.v4.new_output(
                "display_data", data={MIME_TYPE: attestation_for(ledger, entry), "text/plain": "attested"}
            )
        ]
        document.cells.append(cell)
    document.cells[0].source = "from jupyterlab_gradcheck.api import check_record\n" + document.cells[0].source
    nbformat.write(document, str(notebook))
    return notebook, ledger


def test_a_notebook_saved_without_metadata_binds_through_its_attestations(tmp_path):
    """Given three checks whose outputs attest their entries and no metadata binding,
    when the notebook and its ledger are verified, then both pass with the binding ok from the
    attestations, recording the newest attested seq and hash."""
    notebook, ledger = _attested_notebook(tmp_path)
    for report in (verify_notebook(notebook), verify_ledger_file(ledger.path)):
        assert report["ok"] and report["binding_ok"] is True, report["errors"]
        assert report["binding"]["source"] == "attestations" and report["binding"]["attested"] == 3
        assert report["binding"]["recorded"]["entries"] == 6 == report["last_seq"]


def test_truncating_an_attested_ledger_names_the_cell(tmp_path):
    """Given the attested notebook, when the ledger loses its last check (a valid chain on its
    own, and no metadata to compare with), then verify fails naming the cell whose output
    attests the missing entry and the seq it attests."""
    notebook, ledger = _attested_notebook(tmp_path)
    last = ledger.entries()[-1]["hash"]
    write_lines(ledger.path, lines_of(ledger.path)[:-2])
    report = verify_notebook(notebook)
    assert report["chain_ok"] and not report["ok"]
    assert [e["reason"] for e in report["errors"]] == [
        f"cell 3 [3] attests entry seq 6 (hash {last[:12]}), which the ledger lacks (it ends at seq 4): "
        "the ledger was truncated"
    ]


def test_a_rewritten_or_replaced_ledger_disagrees_with_the_attestations(tmp_path):
    """Given the attested notebook, when its ledger is replaced by a fresh run of the same checks
    (a new ledger id), then verify names the attested entries the new ledger lacks."""
    notebook, ledger = _attested_notebook(tmp_path)
    ledger.path.unlink()
    fresh = Ledger.for_notebook(notebook, bind=False)
    for spec in THREE_CHECKS:
        run_and_record(spec, fresh, sweep=False)
    report = verify_notebook(notebook)
    assert not report["ok"]
    assert any(
        "attest 3 entries of ledger" in e["reason"] and "replaced by another" in e["reason"] for e in report["errors"]
    ), report["errors"]


def test_a_deleted_ledger_is_an_error_not_a_notebook_without_checks(tmp_path):
    """Given a notebook whose cells call the checker and whose outputs attest three entries,
    when its ledger is deleted, then verify fails saying the ledger was deleted; a notebook that
    calls the checker with no outputs at all fails too; one that never calls it only warns."""
    notebook, ledger = _attested_notebook(tmp_path)
    ledger.path.unlink()
    result = verify_path(notebook)
    assert not result["ok"]
    assert (
        "attest 3 entries of lab1.gradcheck.jsonl, which is missing: the ledger was deleted"
        in result["reports"][0]["errors"][0]["reason"]
    )
    document = json.loads(notebook.read_text())
    for cell in document["cells"]:
        cell["outputs"] = []
    notebook.write_text(json.dumps(document))
    assert "the notebook calls the checker" in verify_notebook(notebook)["errors"][0]["reason"]
    plain = new_notebook(tmp_path / "plain" / "notes.ipynb")
    report = verify_notebook(plain)
    assert report["ok"] and report["errors"] == [] and "no checks recorded" in report["warnings"][0]


def test_a_binding_that_leaves_the_notebooks_folder_is_an_error(tmp_path):
    """Given a notebook whose binding names ../other/x.gradcheck.jsonl (a clean ledger kept
    elsewhere), when verified, then it fails naming the binding, and the ledger is not followed."""
    notebook, _ledger = _attested_notebook(tmp_path / "sub")
    document = json.loads(notebook.read_text())
    document["metadata"]["gradcheck"] = {"ledger": "../other/x.gradcheck.jsonl", "entries": 0, "head": "0" * 64}
    notebook.write_text(json.dumps(document))
    report = verify_notebook(notebook)
    assert not report["ok"] and "outside the notebook's folder" in report["errors"][0]["reason"]


def test_a_folder_verifies_the_ledger_beside_a_notebook_bound_to_another(tmp_path):
    """Given a notebook whose binding names a clean ledger while its real ledger stays beside it,
    when the folder is verified, then the real ledger is verified and reported too, not skipped,
    and its report is an error saying the notebook beside it binds another ledger."""
    notebook, ledger = _attested_notebook(tmp_path)
    clean = Ledger(tmp_path / "clean.gradcheck.jsonl")
    run_and_record(THREE_CHECKS[0], clean, sweep=False)
    document = json.loads(notebook.read_text())
    document["metadata"]["gradcheck"] = {"ledger": "clean.gradcheck.jsonl", "entries": 2, "head": clean.head()["head"]}
    notebook.write_text(json.dumps(document))
    reports = verify_path(tmp_path)["reports"]
    assert sorted(r["ledger"].rsplit("/", 1)[-1] for r in reports) == ["clean.gradcheck.jsonl", "lab1.gradcheck.jsonl"]
    real = next(r for r in reports if r["ledger"].endswith("lab1.gradcheck.jsonl"))
    assert not real["ok"] and real["errors"][0]["reason"].startswith(
        "lab1.ipynb, beside this ledger, binds clean.gradcheck.jsonl instead: two ledgers for one notebook"
    )
