"""Stories of checks far past the old 100,000-element cap: on the CPU at 10^5-10^6, on cuda at 10^7.

The whole check runs as a user calls it, with a ledger: the record stays small (the large values go
to the ledger's blob store), `verify` holds the ledger and its blobs, and a planted one-element bug is
still found and named at that size.
"""

from __future__ import annotations

import json

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.store import canonical_json, jsonable
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file

SIZES = [("cpu", 2 * 10**5), pytest.param("cuda", 10**7, marks=pytest.mark.cuda)]
#: Largest record and ledger line, blobs apart, at any n (the issue's bound).
LINE_BOUND = 64 * 1024


def _elementwise(x):
    return (torch.sin(x) * x).sum()


def _gradient(x):
    return torch.sin(x) + x * torch.cos(x)


def _input(n: int, device: str):
    generator = torch.Generator().manual_seed(5)
    return (torch.rand(n, dtype=torch.float64, generator=generator) * 4 - 2).to(device)


@pytest.mark.parametrize("device, n", SIZES)
def test_a_large_elementwise_check_passes_with_a_small_record_and_a_verified_ledger(tmp_path, device, n):
    """Given (sin(x)*x).sum() at n elements on the device and its derivative written by hand,
    when it is checked with a ledger,
    then it passes on that device, the record and every ledger line stay under 64 KB, and verify
    finds the ledger and its blobs intact."""
    x = _input(n, device)
    ledger = tmp_path / "scale.gradcheck.jsonl"
    result = check(_elementwise, grad=_gradient(x), x=x, ledger=str(ledger))
    assert result.passed, result.record.get("failure")
    assert result.record["device"].startswith(device)
    assert len(canonical_json(jsonable(result.record)).encode()) <= LINE_BOUND
    lines = ledger.read_bytes().splitlines()
    assert max(len(line) for line in lines) <= LINE_BOUND
    observation = json.loads(lines[-1])["data"]["record"]
    assert observation["observations"]["backward_pass_1"]["gradients"]["x"]["shape"] == [n]
    report = verify_ledger_file(ledger)
    assert report["ok"] and not report["errors"], report["errors"]


@pytest.mark.parametrize("device, n", SIZES)
def test_a_planted_bug_in_one_element_is_named_at_scale(device, n):
    """Given the same function at n elements and an expectation wrong by 1e-3 at one element,
    when it is checked, then it fails and the failure names exactly that element."""
    x = _input(n, device)
    wrong = _gradient(x)
    planted = n // 3 + 7
    wrong[planted] += 1e-3
    result = check(_elementwise, grad=wrong, x=x, ledger=False)
    assert not result.passed
    assert result.failure["index"] == [planted]
