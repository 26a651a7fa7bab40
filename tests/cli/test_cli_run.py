"""The `jupyter gradcheck run` command, driven as a new user drives it: through the script."""

from __future__ import annotations

import json
import resource

import pytest

OBSERVATIONS = (
    "backward_pass_1",
    "backward_pass_2_accumulated",
    "after_clear_none",
    "autograd_grad",
    "finite_difference",
    "torch_gradcheck",
)


def test_seed_record_runs_as_written(gradcheck_cli, seed_text):
    """Given the seed record exactly as the course writes it,
    when it is piped to `jupyter-gradcheck run -`,
    then it exits 0 and comes back executed, observed 6.0 and passed, with six observations
    each on a scalar float64 cpu tensor."""
    code, out, err = gradcheck_cli("run", "-", stdin=seed_text)
    assert code == 0, err
    record = json.loads(out)
    assert record["executed"] is True
    assert record["observed_gradient"] == 6.0
    assert record["passed"] is True
    assert tuple(record["observations"]) == OBSERVATIONS
    for name in OBSERVATIONS[:5]:
        described = record["observations"][name]["gradients"]["x"]
        assert (described["shape"], described["dtype"], described["device"]) == ([], "float64", "cpu"), name
    verdict = record["observations"]["torch_gradcheck"]
    assert (verdict["status"], verdict["dtype"], verdict["device"]) == ("passed", "float64", "cpu")
    assert record["observations"]["backward_pass_2_accumulated"]["gradients"]["x"]["value"] == 12.0


def test_wrong_hand_derivation_is_a_finding_with_exit_1(run_record):
    """Given x*x at x=2 declared with derivative 3*x,
    when it runs,
    then it exits 1, the failure names the worst element and both values, the diagnosis is
    probable_bug, and SymPy says the hand derivation disagrees."""
    code, record, _ = run_record({"function": "x*x", "x": 2, "analytical_gradient": "3*x"})
    assert code == 1
    failure = record["failure"]
    assert failure["comparison"] == "analytical_vs_backward_pass_1"
    assert (failure["index"], failure["left"], failure["right"]) == ([], 6.0, 4.0)
    assert failure["diagnosis"] == "probable_bug"
    assert "hand derivation gives 6" in failure["reason"]
    assert record["symbolic"]["analytical_agrees"] is False
    assert record["symbolic"]["autograd_agrees"] is True
    assert "hand derivation disagrees" in record["symbolic"]["reason"]


def test_bad_input_exits_2_naming_the_problem(run_record, tmp_path):
    """Given hostile functions from the issue,
    when each is run,
    then each exits 2 with a one-line message naming the construct, no file is created and
    no large allocation happens."""
    marker = tmp_path / "x"
    cases = {
        f"__import__('os').system('touch {marker}')": "dunder name '__import__'",
        "x.__class__": "dunder name '__class__'",
        "(lambda: 1)()": "only named functions can be called",
        "torch.zeros(10**6, 10**6)": "function 'zeros' is not in the allowed list",
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    for function, expected in cases.items():
        code, record, err = run_record({"function": function, "x": 1, "analytical_gradient": 1})
        assert code == 2, function
        assert record is None
        assert err.strip().count("\n") == 0 and expected in err, err
    assert not marker.exists()
    # ru_maxrss is in KiB: a child that had tried 10**12 elements would be far past 4 GiB.
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < max(before, 4 * 1024 * 1024)


def test_list_with_one_bad_record_runs_nothing(gradcheck_cli, tmp_path):
    """Given a list holding a good record and a bad one, with a ledger,
    when run,
    then it exits 2 naming the bad field and the ledger file is not even created."""
    ledger = tmp_path / "lab.gradcheck.jsonl"
    records = [
        {"function": "x*x", "x": 3, "analytical_gradient": 6},
        {"function": "x*x", "x": [1, [2]], "analytical_gradient": 6},
    ]
    code, out, err = gradcheck_cli("run", "-", "--ledger", str(ledger), stdin=json.dumps(records))
    assert code == 2
    assert "inputs.x: ragged list" in err
    assert out == ""
    assert not ledger.exists()


def test_json_lines_and_files_are_accepted(gradcheck_cli, tmp_path):
    """Given two records as JSON Lines in a file,
    when the file is run,
    then both come back as a list in order, and the exit code reflects the failing one."""
    spec = tmp_path / "checks.jsonl"
    spec.write_text(
        '{"function": "x*x", "x": 3, "analytical_gradient": 6}\n'
        '{"function": "torch.sin(x)", "x": 0.5, "analytical_gradient": "torch.sin(x)"}\n'
    )
    code, out, _ = gradcheck_cli("run", str(spec), "--no-sweep")
    records = json.loads(out)
    assert [r["passed"] for r in records] == [True, False]
    assert code == 1
    assert "step_sweep" not in records[0]


@pytest.mark.parametrize("device", ["cuda", "cuda:3", "mps"])
def test_unavailable_device_is_bad_input(run_record, device):
    """Given a record asking for a device torch does not report,
    when run,
    then it exits 2 and the message names the device and why it is absent."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.device_count() > 3:
        pytest.skip("this machine has that CUDA device")
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    code, record, err = run_record({"function": "x*x", "x": 3, "analytical_gradient": 6, "device": device})
    assert code == 2 and record is None
    assert f"device '{device if device != 'cuda' else 'cuda:0'}' is not available" in err


def test_help_is_available_for_every_subcommand(gradcheck_cli):
    """Given the installed script, when asked for --help, then it lists its subcommands."""
    code, out, _ = gradcheck_cli("--help")
    assert code == 0
    for command in ("run", "tolerance", "verify", "export"):
        assert command in out
    code, out, _ = gradcheck_cli("run", "--help")
    assert code == 0 and "--ledger" in out and "--notebook" in out
