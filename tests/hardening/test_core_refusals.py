"""Refusals the hostile-input corpus found missing in the core's validation.

Each was accepted (or crashed later, after a ledger append) before; each is now bad input:
a one-line SpecError before anything runs.
"""

from __future__ import annotations

import pytest

from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.jsonio import loads_records

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6}


def test_a_keyword_given_twice_is_refused():
    """Given `sum(x, dim=0, dim=0)` (ast accepts a repeated keyword; only compile() refuses it),
    when parsed, then it is refused naming the keyword, instead of reaching the engine."""
    with pytest.raises(SpecError, match="keyword 'dim' is given twice"):
        parse_spec({"function": "sum(x, dim=0, dim=0)", "x": [1.0, 2.0], "analytical_gradient": [1, 1]})


def test_an_empty_list_of_records_is_refused():
    """Given `[]` on standard input, when read, then it is refused: before, the CLI ran nothing
    and exited 0 as if every check had passed."""
    with pytest.raises(SpecError, match="no check record given: the list is empty"):
        loads_records("[]")


@pytest.mark.parametrize("device", ["cpu\n", "cuda:0\n"])
def test_a_device_with_a_trailing_newline_is_refused_by_its_format(device):
    """Given a device with a trailing newline (which `$` in a regular expression lets through),
    when parsed, then the format check refuses it."""
    with pytest.raises(SpecError, match="is not cpu, cuda, cuda:N, mps or auto"):
        parse_spec({**SEED, "device": device})


@pytest.mark.parametrize(
    "text",
    [
        '{"function": "x*x", "x": 3, "analytical_gradient": 6, "origin": "\\ud800"}',
        '{"function": "x*x", "x": 3, "analytical_gradient": 6, "\\udfff": 1}',
    ],
)
def test_a_lone_surrogate_in_json_is_refused(text):
    """Given JSON whose string escapes decode to a lone surrogate, when read, then it is refused:
    before, it was accepted and crashed the ledger write with UnicodeEncodeError."""
    with pytest.raises(SpecError, match="lone surrogate"):
        loads_records(text)


@pytest.mark.parametrize("field", ["origin", "destination"])
def test_a_lone_surrogate_in_free_text_from_python_is_refused(field):
    """Given a record built in Python (no JSON on the way) with a lone surrogate in free text,
    when parsed, then it is refused before the ledger could fail to encode it."""
    with pytest.raises(SpecError, match=f"{field} holds a lone surrogate"):
        parse_spec({**SEED, field: "d\udce9riv\u00e9e"})


@pytest.mark.parametrize("text", ["x*1if x else x", "0x1for x in x"])
def test_python_syntax_warnings_do_not_reach_the_user(text, recwarn):
    """Given text on which Python's parser warns (`1if`: invalid decimal literal), when parsed,
    then the refusal is the only thing said: no SyntaxWarning escapes to become a second line
    on the command line's standard error."""
    with pytest.raises(SpecError, match="is not allowed"):
        parse_spec({"function": text, "x": 3, "analytical_gradient": 6})
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


@pytest.mark.parametrize("text", ["x*x # = 2*x, checked by hand", "0#__"])
def test_a_comment_is_refused(text):
    """Given an expression with a comment (found by fuzzing: `0#__` was accepted and kept
    verbatim), when parsed, then it is refused: a comment checks nothing, yet the ledger and the
    exports would show it beside the expression as if it were part of it."""
    with pytest.raises(SpecError, match=r"a comment \(#\) is not allowed"):
        parse_spec({"function": text, "x": 3, "analytical_gradient": 6})


@pytest.mark.parametrize("function", ["x.sum(keepdim=True)", "mean(x, keepdim=False)", "max(x, keepdim=True)"])
def test_keepdim_without_dim_is_refused(function):
    """Given a reduction with keepdim and no dim (the validator accepted `x.sum(keepdim=True)`,
    then torch refused it inside the worker, after the expectation was appended), when parsed,
    then it is bad input naming the missing dim."""
    with pytest.raises(SpecError, match="keepdim needs dim"):
        parse_spec({"function": function, "x": [1.0, 2.0], "analytical_gradient": [1, 1]})


def test_class_indices_from_a_float_input_are_refused_with_the_constant_form():
    """Given cross_entropy over a batch whose targets come from an input (inputs are floating
    point and differentiated, so they cannot be class indices), when parsed, then it is refused
    before it runs, and the message shows the constant list that can be written instead."""
    with pytest.raises(SpecError) as raised:
        parse_spec(
            {
                "function": "cross_entropy(z, t)",
                "inputs": {"z": [[1.0, 2.0], [0.0, 1.0]], "t": [0, 1]},
                "analytical_gradient": {"z": 0, "t": 0},
            }
        )
    assert "class indices are constant integers, e.g. cross_entropy(z, [0, 2])" in raised.value.message


def test_a_constant_too_large_for_the_element_limits_is_refused():
    """Given one_hot with 10**12 classes (a constant no input limit sees), when parsed, then
    the intermediate-element limit refuses it before anything is built."""
    with pytest.raises(SpecError, match="has 1000000000000 elements; the limit is"):
        parse_spec(
            {"function": "(one_hot(0, 1000000000000).sum() * x).sum()", "x": [1.0, 2.0], "analytical_gradient": [1, 1]}
        )
