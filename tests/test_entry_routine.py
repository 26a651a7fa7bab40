"""One entry routine: the CLI, the kernel (the widget's and check()'s path), the Python API and the
server's worker all take a check from parse to its appended outcome through `core.run.run_spec`.

The runtime stories count its calls with a profile hook (tests/support/entry.py); the source story
reads the surfaces with `ast` and finds none that parses, admits, declares or runs a check itself.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from jupyterlab_gradcheck import api
from jupyterlab_gradcheck.cli.app import main
from jupyterlab_gradcheck.core.errors import DeviceUnavailable, LedgerError, OverBudget, SpecError
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.run import REPORTED, exit_code, http_status
from jupyterlab_gradcheck.kernel.kernel_run import run_attested
from support.entry import counting_entries

ROOT = Path(__file__).resolve().parents[1]
SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}
#: The steps of the entry routine that no surface may take on its own.
STEPS = {"parse_spec", "resolve_and_admit", "refuse_bad_callable", "LedgeredRun", "run_check", "estimate_cost"}
#: The surfaces' modules that run checks, and the one that must call run_spec in each.
SURFACES = {
    "jupyterlab_gradcheck/cli/run_command.py": "run",
    "jupyterlab_gradcheck/kernel/kernel_run.py": "run_attested",
    "jupyterlab_gradcheck/server/service.py": "run_check",
    "jupyterlab_gradcheck/server/worker.py": "_run_check",
}


def _names_in(function: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(function) if isinstance(node, ast.Name)} | {
        node.attr for node in ast.walk(function) if isinstance(node, ast.Attribute)
    }


def test_the_cli_runs_each_record_through_the_entry_routine(tmp_path, capsys):
    """Given a spec file of two records, when `jupyter gradcheck run --ledger` runs it,
    then run_spec is called once per record and the ledger holds both expectations and observations."""
    spec = tmp_path / "two.json"
    spec.write_text(json.dumps([SEED, {"function": "sum(x*x)", "x": [1, 2], "analytical_gradient": "2*x"}]))
    ledger = tmp_path / "lab1.gradcheck.jsonl"
    with counting_entries() as calls:
        code = main(["run", str(spec), "--ledger", str(ledger)])
    assert (code, len(calls)) == (0, 2)
    kinds = [json.loads(line)["kind"] for line in ledger.read_text().splitlines()]
    assert kinds == ["note", "expectation", "observation", "expectation", "observation"]


def test_the_kernel_and_the_python_api_run_through_the_entry_routine(tmp_path):
    """Given the seed record, when the kernel runs it into a ledger (as the widget does) and
    check() runs a Python callable into another, then run_spec is called once for each, and each
    ledger's last entry is that check's observation."""
    first, second = Ledger(tmp_path / "a.gradcheck.jsonl"), tmp_path / "b.gradcheck.jsonl"
    with counting_entries() as calls:
        record, attestation = run_attested(dict(SEED), first)
        result = api.check(lambda x: x * x * x, lambda x: 3 * x * x, x=[1.0, 2.0], ledger=str(second))
    assert len(calls) == 2
    assert (record["observed_gradient"], attestation["seq"]) == (6.0, 2)
    assert result.passed is True
    assert json.loads(second.read_text().splitlines()[-1])["kind"] == "observation"


def test_bad_input_is_refused_by_the_entry_routine_before_anything_is_written(tmp_path):
    """Given a record with a forbidden construct, when the kernel runs it into a ledger,
    then run_spec raises SpecError and no ledger file is created."""
    path = tmp_path / "a.gradcheck.jsonl"
    with counting_entries() as calls, pytest.raises(SpecError, match="not allowed|unknown name"):
        run_attested({"function": "__import__('os')", "x": 1, "analytical_gradient": 0}, Ledger(path))
    assert len(calls) == 1
    assert not path.exists()


def test_no_surface_takes_the_steps_of_a_check_by_itself():
    """Given the function of each surface that runs a check, when its source is read,
    then it calls run_spec and names none of the routine's steps (parse, admit, declare, run)."""
    wrong = {}
    for path, name in SURFACES.items():
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        [function] = [
            n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
        ]
        names = _names_in(function)
        if "run_spec" not in names or names & STEPS:
            wrong[path] = sorted(names & STEPS) or ["no run_spec"]
    assert wrong == {}


def test_every_surface_reports_an_error_by_the_one_table():
    """Given the core's errors, when each is reported, then the CLI's exit code and the REST status come
    from REPORTED: bad input (a spec, an unavailable device, a check over budget) exits 2 and answers 400,
    a ledger that cannot be written exits 2 and answers 500."""
    assert [(exit_code(e), http_status(e)) for e in (SpecError("x"), DeviceUnavailable("x"), OverBudget("x"))] == [
        (2, 400)
    ] * 3
    assert (exit_code(LedgerError("x")), http_status(LedgerError("x"))) == (2, 500)
    assert REPORTED[-1][0].__name__ == "GradcheckError"  # the most general class is the last row


def test_one_check_walks_few_files_and_parses_its_record_once(tmp_path):
    """Given the seed record and a ledger, when run_spec takes it from parse to append (after one warm-up
    run), then a profile of the calls enters at most 21 files of the package (55 before its modules were
    merged by concept) and parses the record once (parse_spec of a record, not of a parsed spec)."""
    import sys

    from jupyterlab_gradcheck.core.check.environment import available_devices
    from jupyterlab_gradcheck.core.check.record.spec import CheckSpec
    from jupyterlab_gradcheck.core.run import Admission, run_spec

    package = str(ROOT / "jupyterlab_gradcheck")
    ledger, admission = Ledger(tmp_path / "lab1.gradcheck.jsonl"), Admission(devices=available_devices())
    run_spec(dict(SEED), ledger, admission=admission)
    files, parses = set(), []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            files.add(frame.f_code.co_filename)
            if frame.f_code.co_name == "parse_spec" and not isinstance(frame.f_locals.get("record"), CheckSpec):
                parses.append(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        run_spec(dict(SEED), ledger, admission=admission)
    finally:
        sys.setprofile(None)
    assert (len(files) <= 21, len(parses)) == (True, 1), sorted(files)
