"""The ledger through the command line, as a new user drives it: run, tolerance, verify.

One story, in order: three checks run into a notebook's ledger (one fails); a tolerance
change without a justification is refused and changes nothing; with one it is recorded and
flagged; verify passes; five kinds of tampering each make verify fail and say where; replay
passes on the honest ledger and catches an edit whose chain was recomputed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from support.ledger import (
    JUSTIFICATION,
    THREE_CHECKS,
    is_observation_of,
    line_number_of,
    lines_of,
    rechain,
    write_lines,
)

SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")


def _script(*args, cwd=None):
    """The real script, for the module-scoped setup (the conftest fixture is per test)."""
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=240)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A notebook with three checks run into its ledger by `jupyter-gradcheck run --notebook`."""
    folder = tmp_path_factory.mktemp("cli")
    notebook = folder / "lab1.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(notebook))
    (folder / "checks.json").write_text(json.dumps(THREE_CHECKS))
    code, out, err = _script("run", "checks.json", "--notebook", "lab1.ipynb", "--no-sweep", cwd=folder)
    return folder, code, json.loads(out), err


@pytest.fixture(scope="module")
def justified(recorded, tmp_path_factory):
    """A copy of the recorded notebook after a justified widening of the failing check."""
    folder = tmp_path_factory.mktemp("justified")
    for name in ("lab1.ipynb", "lab1.gradcheck.jsonl"):
        shutil.copy(recorded[0] / name, folder / name)
    code, _out, err = _script(
        "tolerance",
        "--notebook",
        str(folder / "lab1.ipynb"),
        "--check",
        "cube_wrong",
        "--rtol",
        "0.9",
        "--justification",
        JUSTIFICATION,
    )
    assert code == 0, err
    return folder


def _copy_of(folder, destination):
    for name in ("lab1.ipynb", "lab1.gradcheck.jsonl"):
        shutil.copy(folder / name, destination / name)
    return destination / "lab1.ipynb", destination / "lab1.gradcheck.jsonl"


def test_three_checks_one_failing_land_in_the_notebook_ledger(recorded):
    """Given three checks, one with a wrong hand derivation, when run with --notebook,
    then the run exits 1 (a finding), the ledger beside the notebook holds an expectation
    then an observation for each, and the notebook's metadata binds the ledger's head."""
    folder, code, records, _err = recorded
    assert code == 1
    assert [r["passed"] for r in records] == [True, True, False]
    genesis, *entries = [json.loads(raw) for raw in lines_of(folder / "lab1.gradcheck.jsonl")]
    assert genesis["data"]["event"] == "genesis"
    assert [e["kind"] for e in entries] == ["expectation", "observation"] * 3
    binding = nbformat.read(str(folder / "lab1.ipynb"), as_version=4).metadata["gradcheck"]
    assert binding == {
        "ledger": "lab1.gradcheck.jsonl",
        "ledger_id": genesis["data"]["ledger_id"],
        "entries": 6,
        "head": entries[-1]["hash"],
    }


def test_tolerance_change_needs_a_justification(recorded, gradcheck_cli, tmp_path):
    """Given a copy of the recorded ledger, when the failing check's tolerance is changed without a
    justification (and with a blank one), then exit 2 and the ledger is byte-identical;
    with a justification, exit 0 and the appended entry says widened, after_failure true."""
    notebook, ledger = _copy_of(recorded[0], tmp_path)
    before = ledger.read_bytes()
    for extra in ([], ["--justification", "  "]):
        code, out, err = gradcheck_cli(
            "tolerance", "--ledger", str(ledger), "--check", "cube_wrong", "--rtol", "0.9", *extra
        )
        assert (code, out) == (2, "")
        assert err.startswith("error: a written justification is required")
        assert ledger.read_bytes() == before

    code, out, err = gradcheck_cli(
        "tolerance", "--ledger", str(ledger), "--check", "cube_wrong", "--rtol", "0.9", "--justification", JUSTIFICATION
    )
    assert code == 0, err
    entry = json.loads(out)
    assert (entry["seq"], entry["kind"], entry["check_id"]) == (7, "tolerance_change", "cube_wrong")
    assert entry["data"]["after_failure"] is True and entry["data"]["widened"] is True
    assert ledger.read_bytes().startswith(before) and len(lines_of(ledger)) == 8  # genesis + 7
    binding = nbformat.read(str(notebook), as_version=4).metadata["gradcheck"]
    assert (binding["entries"], binding["head"]) == (7, entry["hash"])


@pytest.fixture
def copy(justified, tmp_path):
    """A fresh copy of the notebook and its ledger (after the justified change) to tamper with."""
    return _copy_of(justified, tmp_path)


def test_verify_passes_on_the_honest_ledger(copy, gradcheck_cli):
    """Given the honest ledger, when verified as a ledger and as a notebook, then exit 0 and
    the widening after the failure is reported as a flag."""
    notebook, ledger = copy
    for path in (ledger, notebook):
        code, out, err = gradcheck_cli("verify", str(path))
        assert code == 0, out + err
        assert out.startswith(f"OK   {path}: 7 entries")
        assert "flag: cube_wrong: widened_after_failure (seq 7)" in out


def _tamper_cases(ledger):
    lines = lines_of(ledger)
    observation = line_number_of(ledger, is_observation_of("cube_wrong"))
    byte = bytearray(lines[2])  # line 3 (line 1 is the genesis entry)
    byte[40] = ord("Z") if byte[40] != ord("Z") else ord("Y")
    edited_value = lines[observation - 1].replace(b'"observed_gradient":12.0', b'"observed_gradient":6.0')
    return {
        "one byte": (lines[:2] + [bytes(byte)] + lines[3:], "error: line 3: "),
        "deleted line": (lines[:4] + lines[5:], "error: line 5: seq 5 where 4 was expected"),
        "swapped lines": ([*lines[:2], lines[3], lines[2], *lines[4:]], "error: line 3: seq 3 where 2 was expected"),
        "truncated": (lines[:6], "error: the ledger was truncated: the notebook binding records 7 entries"),
        "edited value": (
            lines[: observation - 1] + [edited_value] + lines[observation:],
            f"error: line {observation}: hash mismatch",
        ),
    }


@pytest.mark.parametrize("case", ["one byte", "deleted line", "swapped lines", "truncated", "edited value"])
def test_verify_fails_on_tampering_and_says_where(copy, gradcheck_cli, case):
    """Given the honest ledger edited in one way, when the notebook is verified, then exit 1
    and the output names the line (or, for truncation, the binding) that gives it away."""
    notebook, ledger = copy
    lines, expected = _tamper_cases(ledger)[case]
    write_lines(ledger, lines)
    code, out, err = gradcheck_cli("verify", str(notebook))
    assert code == 1, out + err
    assert out.startswith(f"FAIL {notebook}")
    assert expected in out, out


def test_replay_passes_honest_and_catches_a_recomputed_chain(copy, gradcheck_cli):
    """Given the honest ledger, when verified with --replay, then exit 0; given the failing
    observation's value hand-edited and every hash recomputed, when verified as a ledger
    file alone (no binding to betray it), then plain verify exits 0 but --replay exits 1
    and names the line and the value."""
    notebook, ledger = copy
    code, out, err = gradcheck_cli("verify", str(notebook), "--replay")
    assert code == 0, out + err
    assert "replay: 3 of 3 observations reproduced, 0 differ, 0 skipped" in out

    def edit(entry):
        if entry["kind"] == "observation" and entry["check_id"] == "cube_wrong":
            entry["data"]["record"]["observed_gradient"] = 6.0

    notebook.unlink()  # the ledger alone: hashing has nothing left to compare against
    rechain(ledger, edit)
    code, out, err = gradcheck_cli("verify", str(ledger))
    assert code == 0, out + err
    code, out, err = gradcheck_cli("verify", str(ledger), "--replay")
    assert code == 1, out + err
    line = line_number_of(ledger, is_observation_of("cube_wrong"))
    assert (
        f"replay: line {line} (cube_wrong): observed_gradient: recorded 6.0, replayed 12.0 (rtol=1e-07, atol=1e-10)"
    ) in out


def test_verify_of_a_missing_path_is_bad_input(tmp_path, gradcheck_cli):
    """Given a path that does not exist, when verified, then exit 2 with a one-line message."""
    code, out, err = gradcheck_cli("verify", str(tmp_path / "nothing.ipynb"))
    assert (code, out) == (2, "")
    assert err.strip() == f"error: no file or folder at {tmp_path / 'nothing.ipynb'}"
