"""A custom autograd Function checked with no `grad=`: its own backward is the expectation,
named by the Function and the SHA-256 of its source, held against finite differences."""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.errors import SpecError
from support.functions import Cube

#: The backward wrong at one element: x1.01 at flat index 3, where 3 x^2 = 0.75 is far from 0.
WRONG_AT_3 = "derivative[3] = derivative[3] * 1.01"
#: The line of support.functions.Cube's backward where a story plants its mistake.
MISTAKE_LINE = "pass  # a story may put a planted mistake on this line (tests/test_api_backward_expectation.py)"


def _cube_module(tmp_path, mistake: str, name: str):
    """A module file defining support.functions.Cube with `mistake` planted in its backward (so that
    its source is readable and can be edited), imported afresh."""
    source = inspect.getsource(Cube).replace(MISTAKE_LINE, mistake)
    assert mistake == "pass" or mistake in source
    (tmp_path / f"{name}.py").write_text(f"import torch\n\n\n{source}")
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


X = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64)


def test_a_correct_backward_passes_with_no_grad_and_names_itself(tmp_path):
    """Given Cube with a correct backward,
    when check(Cube, x=...) and check(lambda x: Cube.apply(x).sum(), x=...) run with no grad=,
    then both pass, the expectation is 'the backward of <module>.Cube [sha256 ...]' with the
    first 16 hex digits of its source's SHA-256, and the record keeps that source."""
    module = _cube_module(tmp_path, "pass", "cube_right")
    direct = check(module.Cube, x=X, ledger=False)
    through = check(lambda x: module.Cube.apply(x).sum(), x=X, ledger=False)
    assert direct.passed and through.passed
    digest = direct.record["function_source"]["sha256"]
    assert len(digest) == 64
    assert direct.record["origin"] == f"the backward of cube_right.Cube [sha256 {digest[:16]}]"
    assert through.record["origin"] == direct.record["origin"]
    # the finite differences are what tested the backward: every element of the x^3 derivative
    fd = through.record["observations"]["finite_difference"]["gradients"]["x"]["value"]
    assert fd == pytest.approx((3 * X**2).tolist(), abs=1e-8)  # central differences of x^3: error ~h^2 ~ 1e-11


def test_a_backward_wrong_at_one_element_fails_naming_it(tmp_path):
    """Given Cube whose backward is x1.01 wrong at element 3,
    when it is checked with no grad=,
    then finite differences disagree with the backward at x[3] (0.7575 against 0.75), and the
    failure names that element as a probable bug."""
    module = _cube_module(tmp_path, WRONG_AT_3, "cube_wrong")
    result = check(lambda x: module.Cube.apply(x).sum(), x=X, ledger=False)
    assert not result.passed
    failure = result.failure
    assert (failure["comparison"], failure["index"], failure["diagnosis"]) == (
        "autograd_vs_finite_difference",
        [3],
        "probable_bug",
    )
    assert failure["right"] == pytest.approx(0.7575, rel=1e-12)  # the backward's own value, exact up to rounding
    assert failure["left"] == pytest.approx(0.75, abs=1e-8)  # central differences of x^3: error ~h^2


def test_editing_the_backward_after_a_failure_is_a_revised_expectation(tmp_path):
    """Given a notebook's ledger where Cube's wrong backward failed,
    when the backward is fixed in its source and the same check runs again,
    then it passes, and the ledger's history of the check records the expectation as revised
    after an observation (the source's hash changed the expectation's text)."""
    notebook = tmp_path / "lab.ipynb"
    wrong = _cube_module(tmp_path, WRONG_AT_3, "cube_edit")
    first = check(wrong.Cube, x=X, notebook=notebook)
    assert not first.passed and first.history["expectation_revised_after_observation"] is False
    fixed = _cube_module(tmp_path, "pass", "cube_edit")
    second = check(fixed.Cube, x=X, notebook=notebook)
    assert second.passed and second.record["id"] == first.record["id"]
    assert second.history["expectation_revised_after_observation"] is True
    assert second.record["origin"] != first.record["origin"]


def test_a_plain_callable_without_grad_is_still_refused():
    """Given a function that goes through no custom Function,
    when it is checked with no grad=, the missing expectation is refused in one line."""
    with pytest.raises(SpecError, match="^analytical_gradient is missing"):
        check(lambda x: (x**3).sum(), x=X, ledger=False)


def test_bad_input_is_refused_before_the_probe_runs_the_function():
    """Given a Cube-like callable that counts its calls and an input of an unknown dtype,
    when it is checked with no grad=, the dtype is refused and the callable never ran."""
    calls = []

    def counted(x):
        calls.append(x)
        return (x**3).sum()

    with pytest.raises(SpecError, match="dtype 'float128'"):
        check(counted, x=[1.0, 2.0], dtype="float128", ledger=False)
    assert calls == []
