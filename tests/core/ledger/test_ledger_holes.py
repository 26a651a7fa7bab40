"""The ledger's holes, closed without a witness: seals only at a restart, one ledger per notebook,
and a failure that stays in the grade whatever later checks are added."""

from __future__ import annotations

import hashlib
import json

from jupyterlab_gradcheck.core.ledger.store import Ledger, make_line, read_entry
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file, verify_notebook
from jupyterlab_gradcheck.core.report.exports import export_notebook
from jupyterlab_gradcheck.core.report.submissions import renamed_rerun_flags
from support.ledger import lines_of, notebook_with_three_checks, write_lines


def _torn_then_sealed(tmp_path, restart: bool) -> Ledger:
    """A ledger of two notes whose third append was cut short, sealed by a note that does or does
    not say it was written at a restart (everything else as the store writes it)."""
    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    for text in ("one", "two"):
        ledger.note(text)
    head = read_entry(lines_of(ledger.path)[-1])
    torn = make_line({"seq": 3, "time": head["time"], "kind": "note", "check_id": None, "data": {}, "prev": "0"})[0]
    torn = torn[: len(torn) // 2]
    data = {
        "event": "torn_tail_sealed",
        "lines": [{"line": 4, "bytes": len(torn), "sha256": hashlib.sha256(torn).hexdigest()}],
    }
    if restart:
        data["restart"] = True
    seal, _ = make_line(
        {"seq": 3, "time": head["time"], "kind": "note", "check_id": None, "data": data, "prev": head["hash"]}
    )
    write_lines(ledger.path, lines_of(ledger.path) + [torn, seal.rstrip(b"\n")])
    return ledger


def test_a_seal_is_valid_only_as_recorded_by_a_restarted_writer(tmp_path):
    """Given the same torn write sealed by a note with restart: true, and by one without, when
    each is verified, then the first passes with the sealed-write warning and the second is an
    error saying a seal is valid only for the last write before a restart."""
    for folder in ("ok", "bad"):
        (tmp_path / folder).mkdir()
    good = verify_ledger_file(_torn_then_sealed(tmp_path / "ok", restart=True).path)
    assert (good["ok"], len(good["sealed"])) == (True, 1)
    bad = verify_ledger_file(_torn_then_sealed(tmp_path / "bad", restart=False).path)
    assert [e["reason"] for e in bad["errors"]] == [
        "a torn-write seal not recorded by a restarted writer: a seal is valid only for the last write before a restart"
    ]


def test_the_store_seals_a_torn_tail_as_a_restarted_writer(tmp_path):
    """Given a ledger whose last append was cut short, when a new writer appends, then the seal
    it writes records restart: true and the ledger verifies."""
    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    ledger.note("one")
    with open(ledger.path, "ab") as handle:
        handle.write(b'{"check_id":null,"data":{"te')
    Ledger(ledger.path).note("after the restart")
    [seal] = [e for e in Ledger(ledger.path).entries() if e["data"].get("event") == "torn_tail_sealed"]
    assert seal["data"]["restart"] is True and verify_ledger_file(ledger.path)["ok"]


def test_an_embedded_ledger_is_an_error_beside_another_file_and_fine_beside_its_own_copy(tmp_path):
    """Given a notebook export (its ledger embedded) beside the ledger it was made from, when it
    is verified, then there is no error; when the ledger file then gains an entry the export does
    not hold, the error names the notebook, the embedded ledger and the file."""
    notebook, ledger = notebook_with_three_checks(tmp_path)
    exported = tmp_path / "lab1.submission.ipynb"
    export_notebook(notebook, exported)
    assert verify_notebook(exported)["errors"] == []
    ledger.note("after the export")
    [error] = [e["reason"] for e in verify_notebook(exported)["errors"]]
    assert error.startswith(
        "lab1.submission.ipynb embeds a ledger (lab1.gradcheck.jsonl) that differs from the ledger file"
    )


def _history(check_id, seq, *, failed, tolerance, analytical=6, function="x*x*x"):
    expectation = {"function": function, "inputs": {"x": 2}, "dtype": "float64", "device": "cpu"}
    return {
        "check_id": check_id,
        "expectation": {**expectation, "analytical_gradient": analytical},
        "expectation_seq": seq,
        "tolerance": tolerance,
        "finite_difference_tolerance": None,
        "failures_kept": [{"seq": seq + 1}] if failed else [],
    }


def test_a_failed_computation_re_run_under_a_new_id_keeps_its_flag():
    """Given 'cube' failed at rtol 1e-7, when the same computation is declared again as
    'cube_again' at rtol 0.5, then it is flagged widened_after_failure after 'cube'; declared with
    another expectation instead, expectation_revised_after_observation; another function, nothing."""
    failed = _history("cube", 1, failed=True, tolerance={"rtol": 1e-7, "atol": 1e-10})
    wider = _history("cube_again", 3, failed=False, tolerance={"rtol": 0.5, "atol": 1e-10})
    revised = _history("cube_fixed", 3, failed=False, tolerance={"rtol": 1e-7, "atol": 1e-10}, analytical=12)
    other = _history("square", 3, failed=False, tolerance={"rtol": 0.5, "atol": 1e-10}, function="x*x")
    assert renamed_rerun_flags({"cube": failed, "cube_again": wider}) == [
        {"check_id": "cube_again", "flag": "widened_after_failure", "seqs": [3], "after": "cube"}
    ]
    assert [f["flag"] for f in renamed_rerun_flags({"cube": failed, "cube_fixed": revised})] == [
        "expectation_revised_after_observation"
    ]
    assert renamed_rerun_flags({"cube": failed, "square": other}) == []
    assert json.dumps(renamed_rerun_flags({"cube_again": wider})) == "[]"  # no failure before it
