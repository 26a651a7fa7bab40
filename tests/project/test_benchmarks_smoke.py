"""The benchmark runner's contract and the device-agreement comparison (no timing is asserted).

`make test` already runs `python -m benchmarks --quick`; these tests pin what that run cannot
show: a broken module is an ERROR and a non-zero exit, --quick never writes results.md, the
full report carries the machine, the versions and every figure, and the agreement check
catches a deviating observation.
"""

from __future__ import annotations

import copy
import sys
import types

import pytest

from benchmarks import __main__ as runner
from benchmarks import agreement


def _install(monkeypatch, name: str, run) -> None:
    module = types.ModuleType(f"benchmarks.{name}")
    module.run = run
    monkeypatch.setitem(sys.modules, f"benchmarks.{name}", module)


def _ok_rows(quick: bool) -> list[dict]:
    return [
        {"name": "fake figure", "value": 1.5, "unit": "x", "goal": "<= 2x", "status": "PASS", "note": f"quick={quick}"}
    ]


def test_a_module_that_raises_is_an_error_row_and_a_failing_exit(monkeypatch, capsys):
    """Given one module that works and one whose run() raises,
    when the runner runs them in quick mode,
    then both appear in the one table, the broken one as ERROR with its message, and the exit status is 1."""
    _install(monkeypatch, "bench_fine", _ok_rows)

    def broken(quick):
        raise RuntimeError("the disk went away")

    _install(monkeypatch, "bench_broken", broken)
    monkeypatch.setattr(runner, "discover", lambda only: ["bench_fine", "bench_broken"])
    status = runner.main(["--quick"])
    out = capsys.readouterr().out
    assert status == 1
    assert "| fake figure" in out and "quick=True" in out
    assert "bench_broken: ERROR" in out and "RuntimeError: the disk went away" in out
    assert "1 PASS, 0 MISS, 1 ERROR" in out


def test_a_malformed_row_is_an_error(monkeypatch, capsys):
    """Given a module whose row has no goal, when it runs, then it is reported as ERROR saying so."""
    _install(
        monkeypatch, "bench_sloppy", lambda quick: [{"name": "x", "value": 1, "unit": "", "status": "PASS", "note": ""}]
    )
    monkeypatch.setattr(runner, "discover", lambda only: ["bench_sloppy"])
    assert runner.main(["--quick"]) == 1
    assert "a row lacks goal" in capsys.readouterr().out


def test_quick_mode_never_writes_results_md(monkeypatch, tmp_path):
    """Given a working module,
    when the runner runs in quick mode without and then with --out,
    then the committed results.md is untouched, and --out receives results-quick.md only."""
    _install(monkeypatch, "bench_fine", _ok_rows)
    monkeypatch.setattr(runner, "discover", lambda only: ["bench_fine"])
    committed = runner.HERE / "results.md"
    before = committed.read_bytes() if committed.exists() else None
    assert runner.main(["--quick"]) == 0
    assert runner.main(["--quick", "--out", str(tmp_path)]) == 0
    assert (committed.read_bytes() if committed.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results-quick.json", "results-quick.md"]


def test_full_report_names_machine_versions_date_and_every_figure(monkeypatch, tmp_path):
    """Given a module with a PASS and a MISS carrying a profile,
    when the full run writes its report into --out,
    then results.md names the CPU, the core count, python and torch versions and the date,
    holds both figures with their goals, and keeps the profile of the missed goal."""
    import platform

    import torch

    def rows(quick):
        return _ok_rows(quick) + [
            {
                "name": "slow figure",
                "value": 7.0,
                "unit": "x",
                "goal": "<= 5x",
                "status": "MISS",
                "note": "why",
                "profile": "stage A 80%",
            }
        ]

    _install(monkeypatch, "bench_mixed", rows)
    monkeypatch.setattr(runner, "discover", lambda only: ["bench_mixed"])
    assert runner.main(["--out", str(tmp_path)]) == 0
    text = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "- CPU: " in text and " cores " in text
    assert f"Python {platform.python_version()}, torch {torch.__version__}" in text
    assert " UTC" in text
    assert "| fake figure" in text and "<= 2x" in text and "| slow figure" in text and "MISS" in text
    assert "## Profiles of missed goals" in text and "stage A 80%" in text


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_asked_for_without_a_gpu_fails_with_the_reason(capsys):
    """Given no CUDA device, when the runner is asked for --device cuda, then it exits 2 and says why."""
    assert runner.main(["--quick", "--device", "cuda"]) == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err


def test_agreement_accepts_identical_devices_and_catches_a_deviation():
    """Given the same check run twice on the CPU,
    when the two records are compared, then every observation agrees;
    when one record's backward_pass_1 is off by 1e-3 (far beyond the float64 rtol 1e-7),
    then exactly that comparison disagrees."""
    from jupyterlab_gradcheck.core.check.engine import run_check

    check = next(c for c in agreement.CHECKS if c["id"] == "sin-times-x")
    first = run_check({**check, "device": "cpu"}, sweep=False)
    second = run_check({**check, "device": "cpu"}, sweep=False)
    rows = agreement.compare_records(first, second)
    assert rows and all(row["agrees"] for row in rows)
    shifted = copy.deepcopy(second)
    values = shifted["observations"]["backward_pass_1"]["gradients"]["x"]["value"]
    values[2] += 1e-3
    failing = [row for row in agreement.compare_records(first, shifted) if not row["agrees"]]
    assert [(row["observation"], row["input"]) for row in failing] == [("backward_pass_1", "x")]
    assert failing[0]["max_abs_deviation"] == pytest.approx(1e-3, rel=1e-6)
