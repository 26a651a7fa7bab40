"""A `torch.library` custom op is named by the op and hashed by the functions its author wrote.

Checked with no `grad=`, a custom op's expectation is the backward that `register_autograd` gave
it. torch runs that backward inside a Function it generates (`GeneratedBackwardFor_...`), whose
code is torch's and the same for every op: the expectation and the record name the user's
forward, setup_context and backward instead.
"""

from __future__ import annotations

import inspect
import textwrap

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.record.source import function_source, source_hash

X = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64)


def sine(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


sin_right = torch.library.custom_op("gradcheck_story::sin_right", sine, mutates_args=())
sin_off = torch.library.custom_op("gradcheck_story::sin_off", sine, mutates_args=())


def keep_x(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def cos_backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return grad_output * torch.cos(x)


def off_backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return grad_output * 1.1 * torch.cos(x)


sin_right.register_autograd(cos_backward, setup_context=keep_x)
sin_off.register_autograd(off_backward, setup_context=keep_x)


def _text(*functions) -> str:
    """The functions' sources as a record keeps an op's: two blank lines between."""
    return "\n\n\n".join(textwrap.dedent(inspect.getsource(f)).rstrip("\n") for f in functions)


def _comparison(result, name: str) -> dict:
    return next(c for c in result.record["comparisons"] if c["name"] == name)


def test_two_ops_with_different_backwards_have_different_hashes_and_keep_their_backwards(tmp_path):
    """Given two custom ops with one forward and one setup_context, one backward right and one 10% off,
    when each is checked with no grad= into one ledger,
    then each expectation is named after its op with the hash of its own forward, setup_context and
    backward, the record keeps that text, and only the op whose backward is off disagrees with finite
    differences."""
    ledger = tmp_path / "ops.gradcheck.jsonl"
    right = check(sin_right, x=X, ledger=ledger)
    off = check(sin_off, x=X, ledger=ledger)
    for result, backward, name in (
        (right, cos_backward, "gradcheck_story::sin_right"),
        (off, off_backward, "gradcheck_story::sin_off"),
    ):
        text = _text(sine, keep_x, backward)
        assert result.record["function_source"] == {"text": text, "sha256": source_hash(text)}
        assert result.record["origin"] == f"the backward of {name} [sha256 {source_hash(text)[:16]}]"
    assert right.record["function_source"]["sha256"] != off.record["function_source"]["sha256"]
    assert "GeneratedBackwardFor" not in right.record["origin"] + off.record["origin"]
    assert _comparison(right, "autograd_vs_finite_difference")["passed"] is True
    failed = _comparison(off, "autograd_vs_finite_difference")
    assert failed["passed"] is False
    # the backward's value at x=-1 is 1.1 cos(-1); central differences err by ~h^2 ~ 1e-11 (1e-8 allows it)
    assert abs(failed["worst"]["right"] - failed["worst"]["left"] * 1.1) < 1e-8


def test_a_backward_registered_again_is_read_again():
    """Given an op whose backward is registered, read, then replaced by register_autograd,
    when its source is read again, then it holds the new backward (nothing read before is reused)."""

    @torch.library.custom_op("gradcheck_story::sin_again", mutates_args=())
    def sin_again(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x)

    sin_again.register_autograd(off_backward, setup_context=keep_x)
    before = function_source(sin_again)
    sin_again.register_autograd(cos_backward, setup_context=keep_x)
    after = function_source(sin_again)
    assert before["text"].endswith(_text(off_backward)) and after["text"].endswith(_text(cos_backward))
    assert before["sha256"] != after["sha256"]
