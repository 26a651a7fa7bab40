"""What `verify` catches: every way of editing a ledger after it was written.

Each test starts from an honest notebook ledger (three checks, one failing, one justified
widening) and edits it as someone hiding a failure might, then shows verify names the line
or the reason.
"""

from __future__ import annotations

import shutil

import pytest

from jupyterlab_gradcheck.core.ledger.binding import read_binding, update_binding
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file, verify_notebook, verify_path
from support.ledger import (
    THREE_CHECKS,
    is_observation_of,
    line_number_of,
    lines_of,
    notebook_with_three_checks,
    rechain,
    seal_junk,
    write_lines,
)


@pytest.fixture
def honest(tmp_path):
    """(notebook, ledger path) of an honest ledger of 7 entries, bound to its notebook."""
    notebook, ledger = notebook_with_three_checks(tmp_path / "work")
    return notebook, ledger.path


def _reasons(report) -> list[tuple]:
    return [(e["line"], e["reason"]) for e in report["errors"]]


def test_honest_ledger_verifies_with_its_flags(honest):
    """Given the honest ledger, when verified through its notebook and as a file,
    then both pass, the binding matches, and the widening after a failure is flagged."""
    notebook, path = honest
    for report in (verify_notebook(notebook), verify_ledger_file(path)):
        assert report["ok"] and report["chain_ok"] and report["binding_ok"], report["errors"]
        assert report["entries"] == 7 and report["torn_tail"] is None
        assert report["flags"] == [{"check_id": "cube_wrong", "flag": "widened_after_failure", "seqs": [7]}]
    assert read_binding(notebook)["head"] == report["head"]


def test_changing_any_one_byte_of_any_line_names_that_line(honest):
    """Given the honest ledger, when one byte is changed at the start, middle or end of any
    line (seq 1 through 7), then verify fails and its first error names that line."""
    _notebook, path = honest
    original = lines_of(path)
    for index, line in enumerate(original):
        for position in (1, len(line) // 2, len(line) - 3):
            edited = bytearray(line)
            edited[position] = ord("7") if edited[position] != ord("7") else ord("8")
            write_lines(path, original[:index] + [bytes(edited)] + original[index + 1 :])
            report = verify_ledger_file(path)
            assert not report["ok"]
            assert report["errors"][0]["line"] == index + 1, (index, position, report["errors"])
    write_lines(path, original)
    assert verify_ledger_file(path)["ok"]


def test_deleting_a_line_names_the_gap(honest):
    """Given the honest ledger, when line 5 (seq 4, an observation in the middle; line 1 is the
    genesis entry) is deleted, then verify fails on the line that now follows the gap, line 5,
    for its seq and its prev."""
    _notebook, path = honest
    original = lines_of(path)
    write_lines(path, original[:4] + original[5:])
    reasons = _reasons(verify_ledger_file(path))
    assert (5, "seq 5 where 4 was expected: an entry is missing, repeated or out of order") in reasons
    assert any(line == 5 and "prev does not match" in reason for line, reason in reasons)


def test_swapping_two_lines_names_them(honest):
    """Given the honest ledger, when lines 3 and 4 (seq 2 and 3) are swapped, then verify
    fails naming line 3 (seq 3 where 2 was expected) and line 4."""
    _notebook, path = honest
    original = lines_of(path)
    write_lines(path, [*original[:2], original[3], original[2], *original[4:]])
    reasons = _reasons(verify_ledger_file(path))
    assert reasons[0] == (3, "seq 3 where 2 was expected: an entry is missing, repeated or out of order")
    assert any(line == 4 for line, _ in reasons)


def test_truncating_the_ledger_is_caught_by_the_binding(honest):
    """Given the honest ledger, when its last two lines are cut off (the chain that is left is
    still valid on its own), then verify fails on the binding, saying the ledger was truncated
    from 7 to 5 entries; as a bare file with no notebook beside it, it would pass."""
    notebook, path = honest
    write_lines(path, lines_of(path)[:6])  # the genesis entry and seq 1..5
    report = verify_notebook(notebook)
    assert not report["ok"] and report["chain_ok"] and report["binding_ok"] is False
    [(line, reason)] = _reasons(report)
    assert line is None and reason.startswith("the ledger was truncated: the notebook binding records 7 entries")
    assert "the ledger has 5" in reason
    alone = path.parent / "alone.gradcheck.jsonl"
    shutil.copy(path, alone)
    assert verify_ledger_file(alone)["ok"]


def test_a_ledger_swapped_for_another_is_caught_by_the_binding(honest, tmp_path):
    """Given a second student's ledger of the same length copied over the first one's,
    when the first notebook is verified, then the binding names the mismatch as a swap."""
    notebook, path = honest
    _other_nb, other = notebook_with_three_checks(tmp_path / "other")
    shutil.copy(other.path, path)
    report = verify_notebook(notebook)
    assert report["chain_ok"] and not report["ok"]
    assert "swapped or rewritten" in report["errors"][0]["reason"]


def test_hand_editing_an_observed_value_names_the_line(honest):
    """Given the honest ledger, when the failing check's observed gradient 12.0 is edited to
    6.0 (to agree with the wrong hand derivation), then verify fails with a hash mismatch on
    exactly that observation's line."""
    _notebook, path = honest
    number = line_number_of(path, is_observation_of("cube_wrong"))
    lines = lines_of(path)
    assert b'"observed_gradient":12.0' in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(b'"observed_gradient":12.0', b'"observed_gradient":6.0')
    write_lines(path, lines)
    assert _reasons(verify_ledger_file(path)) == [
        (number, "hash mismatch: entry seq 6 was changed after it was written")
    ]


def test_recomputed_chain_is_caught_by_the_binding(honest):
    """Given the observed value edited and every hash recomputed (the chain is valid again),
    when the notebook is verified, then the binding's head no longer matches."""
    notebook, path = honest

    def edit(entry):
        if entry["kind"] == "observation" and entry["check_id"] == "cube_wrong":
            entry["data"]["record"]["observed_gradient"] = 6.0

    rechain(path, edit)
    report = verify_notebook(notebook)
    assert report["chain_ok"] and not report["binding_ok"]


def test_a_forged_flag_is_caught_even_with_the_chain_and_binding_recomputed(honest):
    """Given the after_failure flag of the widening set to false, the chain recomputed and
    the binding updated (everything a hash can check is consistent), when verified, then
    verify re-derives the flag from the failed observation before it and names the line."""
    notebook, path = honest
    from jupyterlab_gradcheck.core.ledger.store import Ledger

    def edit(entry):
        if entry["kind"] == "tolerance_change":
            entry["data"]["after_failure"] = False

    rechain(path, edit)
    update_binding(notebook, Ledger(path))
    report = verify_notebook(notebook)
    assert report["binding_ok"] and not report["ok"]
    assert _reasons(report) == [(8, "after_failure is recorded as False but the check's latest observation had failed")]


def test_a_tolerance_changed_without_an_entry_is_an_error(tmp_path):
    """Given a check run once, when a writer that bypasses run_and_record appends a new
    expectation for it with a wider tolerance (no justified tolerance_change), then verify
    names that line."""
    from jupyterlab_gradcheck.core.ledger.store import Ledger
    from jupyterlab_gradcheck.core.run import run_and_record

    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    record = run_and_record(THREE_CHECKS[0], ledger, sweep=False)
    spec = {key: record[key] for key in ("id", "function", "inputs", "dtype", "device", "analytical_gradient")}
    ledger.append("expectation", "square", {**spec, "tolerance": {"rtol": 0.5, "atol": 1e-10}})
    assert _reasons(verify_ledger_file(ledger.path)) == [
        (
            4,
            "the tolerance of 'square' changed from {'rtol': 1e-07, 'atol': 1e-10} to "
            "{'rtol': 0.5, 'atol': 1e-10} without a justified tolerance_change entry",
        )
    ]


def test_binding_behind_the_ledger_is_a_warning(honest):
    """Given checks appended after the notebook was last saved (the binding is behind but
    its head is an earlier entry of this ledger), when verified, then it passes with a warning."""
    notebook, path = honest
    from jupyterlab_gradcheck.core.ledger.store import Ledger

    Ledger(path).append("note", None, {"text": "recorded while the notebook was unsaved"})
    report = verify_notebook(notebook)
    assert report["ok"] and report["binding_ok"] is True
    assert any("1 entries behind" in w for w in report["warnings"])


def test_a_folder_is_verified_notebook_by_notebook(honest, tmp_path):
    """Given a folder with an honest notebook and a tampered one, when the folder is
    verified, then the result fails, and the honest notebook's report alone passes."""
    notebook, _path = honest
    bad_nb, bad = notebook_with_three_checks(tmp_path / "work" / "bad")
    write_lines(bad.path, lines_of(bad.path)[:-1])
    result = verify_path(tmp_path / "work")
    assert not result["ok"]
    by_path = {r["path"]: r["ok"] for r in result["reports"]}
    assert by_path == {str(notebook): True, str(bad_nb): False}


def test_a_time_moved_back_is_an_error_even_with_the_chain_recomputed(honest):
    """Given the honest ledger, when the failing check's observation is given a time an hour
    before the entries above it and every hash is recomputed, then verify names that line:
    appends take their time under the ledger's lock, so honest times never go back."""
    _notebook, path = honest

    def edit(entry):
        if entry["kind"] == "observation" and entry["check_id"] == "cube_wrong":
            entry["time"] = "2000-01-01T00:00:00+00:00"

    rechain(path, edit)
    number = line_number_of(path, is_observation_of("cube_wrong"))
    reasons = _reasons(verify_ledger_file(path))
    assert any(
        line == number and "has the time 2000-01-01T00:00:00+00:00, before the entry above it" in reason
        for line, reason in reasons
    ), reasons


def test_junk_sealed_as_a_torn_write_in_the_middle_is_an_error(honest):
    """Given the honest ledger, when the failed observation's line is replaced by junk and a
    note sealing that junk as a torn write is forged after it (chain recomputed around it),
    then verify refuses the seal: an interrupted append leaves a prefix of an entry, not junk."""
    _notebook, path = honest
    number = line_number_of(path, is_observation_of("cube_wrong"))
    seal_junk(path, number)
    reasons = _reasons(verify_ledger_file(path))
    assert (
        number,
        "sealed as a torn write, but these bytes are not the start of an entry (an interrupted "
        "append writes a prefix of one): an entry was replaced",
    ) in reasons, reasons


def test_an_expectation_with_no_outcome_is_named_as_interrupted(tmp_path):
    """Given a ledger whose last expectation has no observation after it (a run cut short) while
    the checks before it have theirs, when verified, then the chain is intact and the report
    names exactly that expectation's check, seq and line as interrupted."""
    from jupyterlab_gradcheck.core.check.record.spec import parse_spec
    from jupyterlab_gradcheck.core.ledger.store import Ledger
    from jupyterlab_gradcheck.core.run import declare, run_and_record

    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    run_and_record(THREE_CHECKS[0], ledger, sweep=False)
    declare(ledger, parse_spec(THREE_CHECKS[1]))  # the expectation is written, then the run is lost
    report = verify_ledger_file(ledger.path)
    assert report["ok"] and report["chain_ok"]
    assert report["interrupted"] == [{"seq": 3, "line": 4, "check_id": "vector_sum"}]


def test_an_expectation_declared_first_and_run_later_is_not_interrupted(tmp_path):
    """Given a check whose expectation is written on its own first (declared before running,
    as the course notebook does) and then run, writing its expectation again and its
    observation, when verified, then nothing is named as interrupted: the later declaration
    supersedes the first."""
    from jupyterlab_gradcheck.core.check.record.spec import parse_spec
    from jupyterlab_gradcheck.core.ledger.store import Ledger
    from jupyterlab_gradcheck.core.run import declare, run_and_record

    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    declare(ledger, parse_spec(THREE_CHECKS[1]))
    run_and_record(THREE_CHECKS[1], ledger, sweep=False)
    report = verify_ledger_file(ledger.path)
    assert report["ok"] and report["interrupted"] == []
    assert not any("has no outcome" in warning for warning in report["warnings"])
