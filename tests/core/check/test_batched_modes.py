"""Batched gradients and batched forward gradients name batching when a Function cannot be batched.

`torch.func.vmap` over `autograd.grad` (per-sample gradients) calls a custom Function's backward with a
batch of grad_outputs, and vmap over forward AD calls its jvp with a batch of tangents. A backward or jvp
that draws random numbers, or shares one workspace between calls, is right one at a time and wrong (or
refused) batched: gradcheck's check_batched_grad and check_batched_forward_grad fail it, and so does the
check, with a reason that says so.
"""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from support.functions import Cube, CubeWithJvp, NewStyleCube

CUDA = pytest.mark.cuda  # skipped where torch sees no CUDA device (tests/conftest.py)
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]
#: One workspace per device, shared by every call, as a hand-written kernel keeps one.
WORKSPACES: dict = {}


def _inputs(device: str) -> torch.Tensor:
    return torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, device=device)


def _workspace(like: torch.Tensor) -> torch.Tensor:
    return WORKSPACES.setdefault((like.device, like.shape), torch.zeros_like(like))


class RandomBackward(NewStyleCube):
    """x^3 whose backward draws a dropout-like mask that keeps every element: right, and random."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g * (torch.rand_like(g) >= 0.0)


class WorkspaceBackward(NewStyleCube):
    """x^3 whose backward stages its grad_output in a workspace shared by every call."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        workspace = _workspace(g)
        workspace.copy_(g)
        return 3 * x**2 * workspace


class RandomJvp(CubeWithJvp):
    """x^3 whose jvp draws a mask that keeps every element: right along any one tangent, and random."""

    @staticmethod
    def jvp(ctx, t):
        return 3 * ctx.x**2 * t * (torch.rand_like(t) >= 0.0)


class WorkspaceJvp(CubeWithJvp):
    """x^3 whose jvp stages its tangent in a workspace shared by every call."""

    @staticmethod
    def jvp(ctx, t):
        workspace = _workspace(t)
        workspace.copy_(t)
        return 3 * ctx.x**2 * workspace


def _failures(record: dict, comparison: str) -> list[dict]:
    return [f for f in record["failures"] if f["comparison"] == comparison]


@pytest.mark.parametrize("device", DEVICES)
def test_a_random_backward_fails_under_batched_gradients_as_nondeterministic(device):
    """Given x^3 whose backward draws random numbers (that leave its value right), when it is checked, then its
    first failure is still the first order's (nothing else is wrong one call at a time: here none), and its
    batched_grad block fails: the backward draws random numbers, batched by vmap, as check_batched_grad fails
    it, diagnosed nondeterministic."""
    record = check(lambda x: RandomBackward.apply(x).sum(), x=_inputs(device), ledger=False).record
    block = record["function_modes"]["batched_grad"]
    (failure,) = _failures(record, "batched_grad")
    assert record["passed"] is False and block["status"] == "failed"
    assert failure["reason"].startswith("batched by vmap, the backward draws random numbers")
    assert "gradcheck(check_batched_grad=True)" in failure["reason"]
    assert failure["diagnosis"] == "nondeterministic"
    assert all(row["passed"] for row in record["comparisons"])


@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_sharing_a_workspace_fails_under_batched_gradients_naming_the_batch(device):
    """Given x^3 whose backward stages its grad_output in one workspace shared by every call, when it is checked,
    then every first-order comparison passes (one call at a time it is right), and the record fails on
    batched_grad alone: the backward depends on the batch, a probable bug."""
    record = check(lambda x: WorkspaceBackward.apply(x).sum(), x=_inputs(device), ledger=False).record
    assert record["passed"] is False
    assert all(row["passed"] for row in record["comparisons"])
    assert [f["comparison"] for f in record["failures"]] == ["batched_grad"]
    assert record["failure"]["reason"].startswith("batched by vmap, the backward depends on the batch")
    assert record["failure"]["diagnosis"] == "probable_bug"


@pytest.mark.parametrize("device", DEVICES)
def test_a_right_jvp_is_observed_under_batched_forward_gradients(device):
    """Given x^3 with a right backward and jvp, when it is checked, then its batched_forward_grad block is
    observed over three tangents, with one passing comparison for x, and the record passes."""
    record = check(lambda x: CubeWithJvp.apply(x).sum(), x=_inputs(device), ledger=False).record
    block = record["function_modes"]["batched_forward_grad"]
    assert record["passed"] is True
    assert (block["status"], block["tangents"]) == ("observed", 3)
    assert [(row["name"], row["input"], row["passed"]) for row in block["comparisons"]] == [
        ("batched_forward_grad_vs_one_at_a_time", "x", True)
    ]


@pytest.mark.parametrize(
    ("function", "words", "diagnosis"),
    [
        (RandomJvp, "batched by vmap, the jvp draws random numbers", "nondeterministic"),
        (WorkspaceJvp, "batched by vmap, the jvp depends on the batch", "probable_bug"),
    ],
    ids=["random jvp", "jvp sharing a workspace"],
)
@pytest.mark.parametrize("device", DEVICES)
def test_a_jvp_that_cannot_be_batched_fails_under_batched_forward_gradients(device, function, words, diagnosis):
    """Given x^3 whose jvp is right along any one tangent but draws random numbers or shares a workspace, when it
    is checked, then forward mode itself passes, and the record fails on batched_forward_grad alone, its reason
    naming the jvp, batching and gradcheck's check_batched_forward_grad."""
    record = check(lambda x: function.apply(x).sum(), x=_inputs(device), ledger=False).record
    modes = record["function_modes"]
    assert all(row["passed"] for row in modes["forward_ad"]["comparisons"])
    assert [f["comparison"] for f in record["failures"]] == ["batched_forward_grad"]
    assert record["failure"]["reason"].startswith(words)
    assert "gradcheck(check_batched_forward_grad=True)" in record["failure"]["reason"]
    assert record["failure"]["diagnosis"] == diagnosis


def test_batched_forward_gradients_wait_for_forward_mode():
    """Given a Function without a jvp, when it is checked, then batched_forward_grad is skipped, saying that it
    needs forward mode, which was not observed, and the record passes."""
    record = check(lambda x: Cube.apply(x).sum(), x=_inputs("cpu"), ledger=False).record
    block = record["function_modes"]["batched_forward_grad"]
    assert record["passed"] is True
    assert block["status"] == "skipped"
    assert block["reason"].startswith("needs forward mode, which was not observed: forward-mode AD does not apply")


def test_a_batching_failure_lands_in_the_ledger(tmp_path):
    """Given the backward sharing a workspace, when it is checked with a ledger, then the failed record is
    appended as an expectation and an observation, and the ledger verifies."""
    path = tmp_path / "lab.gradcheck.jsonl"
    result = check(lambda x: WorkspaceBackward.apply(x).sum(), x=_inputs("cpu"), ledger=str(path))
    assert result.passed is False and result.record["failure"]["comparison"] == "batched_grad"
    report = verify_ledger_file(path, with_notebook=False)
    assert report["ok"] and report["chain_ok"], report["errors"]
    assert report["last_seq"] == 2
