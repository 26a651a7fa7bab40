"""A callable's source and signature are read once per code object: closures made by one factory
share both, and a check of each new closure must not tokenize its file again. What was read must
still be right for each closure: its defaults, a signature of its own, an edited function."""

from __future__ import annotations

import inspect
import textwrap

import pytest

from jupyterlab_gradcheck.core.check.autograd.observations import check_signature
from jupyterlab_gradcheck.core.check.record import source as callable_source
from jupyterlab_gradcheck.core.check.record.source import function_source
from jupyterlab_gradcheck.core.errors import SpecError


def _scaled(k):
    def loss(x):
        return (k * x * x).sum()

    return loss


def _with_default(default: bool):
    if default:

        def loss(x, w=2.0):
            return (w * x).sum()
    else:

        def loss(x, w):
            return (w * x).sum()

    return loss


def test_closures_of_one_factory_share_one_reading_of_their_source(monkeypatch):
    """Given two closures made by one factory, when the source of each is asked for,
    then the file is read once and both get the same text and hash, the text of `loss`."""
    reads = []
    real = inspect.getsource
    monkeypatch.setattr(inspect, "getsource", lambda f: reads.append(f) or real(f))
    first, second = _scaled(2.0), _scaled(3.0)
    assert first is not second and first.__code__ is second.__code__
    one, two = function_source(first), function_source(second)
    assert len(reads) == 1
    assert one == two and one["text"].startswith("def loss(x):")
    assert one["text"] == textwrap.dedent(inspect.getsource(second)).rstrip("\n")
    assert one["sha256"] == callable_source.source_hash(one["text"])


def test_a_returned_copy_cannot_change_what_the_next_check_reads():
    """Given a source read once, when the caller edits the dict it got, then the next read is unchanged."""
    function = _scaled(1.0)
    function_source(function)["text"] = "edited"
    assert function_source(_scaled(5.0))["text"].startswith("def loss(x):")


def test_a_closure_without_the_default_its_twin_had_is_still_refused(monkeypatch):
    """Given a factory whose closures differ only in whether w has a default, when the one with the
    default is accepted for input x alone, then the one without is still refused, naming w."""
    asked = []
    real = inspect.signature
    monkeypatch.setattr(inspect, "signature", lambda f, **options: asked.append(f) or real(f, **options))
    check_signature(_with_default(True), ["x"])
    check_signature(_with_default(True), ["x"])
    assert len(asked) == 1  # the second closure of the same code and defaults is not asked again
    with pytest.raises(SpecError, match=r"takes \(x, w\)"):
        check_signature(_with_default(False), ["x"])


def test_a_function_with_a_signature_of_its_own_is_asked_as_itself():
    """Given two closures of one code, one carrying a `__signature__` that takes only `a`, when each is
    checked with input x, then the plain one is accepted and the other refused."""
    plain, declared = _scaled(1.0), _scaled(1.0)
    declared.__signature__ = inspect.Signature([inspect.Parameter("a", inspect.Parameter.KEYWORD_ONLY)])
    check_signature(plain, ["x"])
    with pytest.raises(SpecError, match=r"takes \(a\)"):
        check_signature(declared, ["x"])


def test_a_function_defined_again_is_read_again():
    """Given a function compiled from one text and then from an edited text, when each is read, then each
    gets its own text: a new code object is a new reading."""
    scope: dict = {}
    exec(compile("def f(x):\n    return x\n", "<cell-1>", "exec"), scope)
    import linecache

    linecache.cache["<cell-1>"] = (18, None, ["def f(x):\n", "    return x\n"], "<cell-1>")
    first = function_source(scope["f"])
    exec(compile("def f(x):\n    return 2 * x\n", "<cell-2>", "exec"), scope)
    linecache.cache["<cell-2>"] = (22, None, ["def f(x):\n", "    return 2 * x\n"], "<cell-2>")
    second = function_source(scope["f"])
    assert first["text"] == "def f(x):\n    return x"
    assert second["text"] == "def f(x):\n    return 2 * x"
    assert first["sha256"] != second["sha256"]
