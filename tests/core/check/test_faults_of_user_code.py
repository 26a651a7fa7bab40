"""Stories of a fault in the user's code: a finding in the ledger, never a crash.

Scenarios in the manner of PyTorch's own gradcheck tests (test/test_autograd.py): a backward that
raises, a backward whose gradient autograd refuses (the wrong shape), a backward that returns a
sparse gradient for a dense input, and a forward that raises on the declared input.
"""

import math

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check import engine
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file


def doubling(name: str, backward):
    """A custom Function that doubles its input, with `backward` as its backward."""

    def forward(ctx, x):
        return x * 2

    return type(
        name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    )


def unwritten_backward(ctx, grad):
    raise RuntimeError("the backward is not written yet")


def wrong_shape_backward(ctx, grad):
    return grad.sum().reshape(1)


def sparse_backward(ctx, grad):
    return (grad * 2).to_sparse()


RaisingBackward = doubling("RaisingBackward", unwritten_backward)
WrongShapeBackward = doubling("WrongShapeBackward", wrong_shape_backward)
SparseBackward = doubling("SparseBackward", sparse_backward)


def raising_forward(x):
    raise ValueError("no forward for these inputs")


X = torch.tensor([0.25, 0.75], dtype=torch.float64)


def _kinds(path) -> list[tuple[str, bool | None]]:
    """The ledger's entries after its opening note, by kind and whether each failed to run."""
    entries = Ledger(path, bind=False).entries()
    return [(e["kind"], e["data"].get("failed_to_run")) for e in entries if e["kind"] != "note"]


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        (RaisingBackward, "unwritten_backward raised RuntimeError: the backward is not written yet"),
        (WrongShapeBackward, "torch refused what the function under check returned: RuntimeError: Function "),
        (SparseBackward, "the backward gave input x a gradient of layout sparse_coo, where x is strided"),
        (raising_forward, "raising_forward raised ValueError: no forward for these inputs"),
    ],
    ids=["backward raises", "gradient of the wrong shape", "sparse gradient for a dense input", "forward raises"],
)
def test_a_fault_of_the_users_code_is_a_failed_record_in_the_ledger(tmp_path, function, reason):
    """Given a function whose own code is at fault, when it is checked with a ledger, then check()
    returns a failed record whose one failure names the fault (and the code that raised it), the
    ledger holds its expectation and that observation (not a run that failed to complete), and the
    ledger verifies."""
    path = tmp_path / "lab.gradcheck.jsonl"

    result = check(function, [2.0, 2.0], x=X, ledger=str(path))

    assert result.passed is False
    assert result.record["failure"]["comparison"] == "user_code"
    assert result.record["failure"]["reason"].startswith(reason), result.record["failure"]["reason"]
    assert [len(result.record["failures"]), result.record["executed"]] == [1, True]
    assert _kinds(path) == [("expectation", None), ("observation", None)]
    report = verify_ledger_file(path, with_notebook=False)
    assert report["ok"] and report["chain_ok"], report["errors"]


def test_bad_input_is_still_refused_with_nothing_written(tmp_path):
    """Given an expectation with three values for an input of two, when it is checked, then it is
    refused as bad input before anything runs, and the ledger is not even created."""
    path = tmp_path / "lab.gradcheck.jsonl"

    with pytest.raises(SpecError):
        check(RaisingBackward, [2.0, 2.0, 2.0], x=X, ledger=str(path))

    assert not path.exists()


def test_an_error_of_this_package_is_not_taken_for_the_users(monkeypatch):
    """Given a step of the check's own that fails with no frame of the user's code (here the
    environment it records, replaced by a C function that refuses the device's name), when a
    correct function is checked, then the error propagates (the ledger keeps the attempt as failed
    to run) instead of reading as a fault of the user's."""
    monkeypatch.setattr(engine, "capture_environment", math.sqrt)

    with pytest.raises(TypeError, match="must be real number"):
        check(lambda x: x * x, lambda x: 2 * x, x=X, ledger=False)


def test_a_function_out_of_memory_is_not_taken_for_a_fault_of_its_code():
    """Given a function whose allocation fails as torch reports it under a memory cap, when it is
    checked, then the error propagates (a worker's or the machine's limit, kept as failed to run),
    and is not recorded as a fault of the function's code."""

    def allocates(x):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    with pytest.raises(RuntimeError, match="can't allocate memory"):
        check(allocates, [2.0, 2.0], x=X, ledger=False)
