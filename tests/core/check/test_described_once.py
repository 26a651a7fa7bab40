"""A record's tensors with the same bits are stored once (core/values/tensors.py).

Each stored form costs a summary, a safetensors file and its SHA-256; a check at 10^4 elements
describes backward_pass_1, after_clear_none, autograd_grad and observed_gradient, which a
deterministic backward makes equal bit for bit. These stories hold the reused values to exactly
what a fresh description gives, and keep tensors that only compare equal apart.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck import api
from jupyterlab_gradcheck.core.values import tensors
from jupyterlab_gradcheck.core.values.tensors import Descriptions, describe, same_bits


def _counting(monkeypatch) -> list:
    """Every tensor a description computes the stored form for, in order."""
    calls = []
    original = tensors.to_value

    def counting(tensor):
        if tensor.numel() > 256:
            calls.append(tensor)
        return original(tensor)

    monkeypatch.setattr(tensors, "to_value", counting)
    return calls


def test_equal_bits_are_stored_once_and_described_as_fresh(monkeypatch):
    """Given three tensors of 1,000 float64 elements, two with the same bits,
    when one Descriptions describes all three,
    then the stored form is computed twice, and every description equals describe()'s exactly
    (same hash, summary, shape, dtype, device), each a value of its own."""
    calls = _counting(monkeypatch)
    a = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    same, other = a.clone(), a * 2
    descriptions = Descriptions()
    found = [descriptions.describe(t) for t in (a, same, other)]
    assert len(calls) == 2
    assert found == [describe(a), describe(same), describe(other)]
    assert found[0]["value"] is not found[1]["value"]  # a change to one record field leaves the other alone
    assert found[0]["value"]["stored"]["sha256"] == found[1]["value"]["stored"]["sha256"]


def test_equal_values_with_other_bits_are_not_shared():
    """Given 0.0 and -0.0 (equal, different bits), float32 against float64 and a NaN against itself,
    when their bits are compared,
    then only the NaN with its own bits counts as the same: a stored form names exact bytes."""
    zeros = torch.zeros(300, dtype=torch.float64)
    assert torch.equal(zeros, -zeros) and not same_bits(zeros, -zeros)
    assert not same_bits(zeros, zeros.float())
    nan = torch.full((300,), float("nan"), dtype=torch.float64)
    assert same_bits(nan, nan.clone())


def test_small_tensors_stay_inline(monkeypatch):
    """Given two equal tensors of 3 elements (inline values),
    when described,
    then both are the inline lists describe() writes, and no stored form is computed."""
    calls = _counting(monkeypatch)
    descriptions = Descriptions()
    t = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    assert descriptions.describe(t) == descriptions.describe(t.clone()) == describe(t)
    assert descriptions.describe(t)["value"] == [1.0, 2.0, 3.0]
    assert calls == []


def test_a_large_check_stores_pass_one_once(monkeypatch):
    """Given (sin(x) * x).sum() at 1,000 elements with autograd's own gradient as the expectation,
    when api.check runs it without a ledger,
    then pass 1, after_clear_none, autograd_grad, the analytical tensor and observed_gradient name one
    blob, pass 2 (twice pass 1) another, and the stored form is computed once per distinct tensor: 3
    times (pass 1, pass 2, finite differences), not 7."""
    calls = _counting(monkeypatch)
    x = torch.randn(1000, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    expected = torch.cos(x) * x + torch.sin(x)
    leaf = x.clone().requires_grad_(True)
    (torch.sin(leaf) * leaf).sum().backward()
    record = api.check(lambda x: (torch.sin(x) * x).sum(), grad=leaf.grad, x=x, ledger=False).record
    assert record["passed"] is True
    observations = record["observations"]
    pass_1 = observations["backward_pass_1"]["gradients"]["x"]["value"]["stored"]["sha256"]
    for name in ("after_clear_none", "autograd_grad"):
        assert observations[name]["gradients"]["x"]["value"]["stored"]["sha256"] == pass_1
    assert record["observed_gradient"]["stored"]["sha256"] == pass_1
    assert record["analytical"]["x"]["value"]["stored"]["sha256"] == pass_1
    assert observations["backward_pass_2_accumulated"]["gradients"]["x"]["value"]["stored"]["sha256"] != pass_1
    assert len(calls) == 3
    assert torch.allclose(leaf.grad, expected, rtol=0, atol=1e-12)  # the expectation is the true derivative


def test_bits_are_compared_at_every_element_width():
    """Given tensors of 2, 4 and 8 bytes an element and a complex one, each against a copy and against a copy
    with one element's sign flipped, when their bits are compared, then the copies are the same and the flipped
    ones are not: each element is compared as an integer of its own width, no element left out."""
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64):
        t = torch.linspace(1, 2, 301).to(dtype)
        flipped = t.clone()
        flipped[300] = -flipped[300]
        assert same_bits(t, t.clone()), dtype
        assert not same_bits(t, flipped), dtype
