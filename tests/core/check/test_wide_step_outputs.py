"""A failing element's bound counts the outputs it moves at a wide step where they came out equal.

In a row where some outputs moved, an equal output is either one the element does not touch or one it
moved by less than its rounding. Counted 0 either way, a correct function with a large, slowly moving
output beside a fast one would be failed and its backward blamed. The refinement tells the two apart
for the elements that fail, at WIDE times their step, before refining them (docs/tolerances.md).
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.fd.finite_difference import WIDE
from support.checks import fd_comparison


def _offset_beside_double(x):
    """Two outputs of one element: x * 1e-7 + 1e5 (over the default step it moves by 1.2e-12, below 1e5's last bit,
    1.5e-11, so its two evaluations are equal) and 2 x (which moves)."""
    return torch.cat([x * 1e-7 + 1e5, 2 * x])


def _declared(gradient: float, function=_offset_beside_double, x: float = 0.3, **more) -> dict:
    return {"function": function, "inputs": {"x": [x]}, "analytical_gradient": [gradient], **more}


def test_an_output_moved_below_its_rounding_beside_one_that_moved_is_not_blamed_on_the_backward():
    """Given cat([x * 1e-7 + 1e5, 2 x]) at 0.3 with its correct gradient 2.0000001, when it is checked, then the
    element (whose default finite difference, 2, leaves the first output unseen) is refined, its refinement finds
    both outputs moving at the wide step, counts the first in its bound, and the check passes."""
    current = run_check(_declared(2.0000001), sweep=False)
    assert current["passed"] is True
    refinement = current["observations"]["finite_difference"]["refinement"]["x"]
    assert refinement["wide_step"] == {"multiple": WIDE, "outputs_moved": 2, "forward_evaluations": 2}
    # the first output's rounding at the refinement steps: eps * 2e5 / (2 * 4h) ~ 9e-7, then the margins
    assert 1e-6 < fd_comparison(current)["error_bound"]["at_worst"] < 1e-4


def test_a_backward_wrong_by_1e_4_of_its_scale_is_still_caught():
    """Given the same function with an expectation 2e-4 too high (1e-4 of the gradient's scale, 2), when it is
    checked, then it still fails as a probable bug: the first output's rounding allows about 4e-5, not 2e-4."""
    record = run_check(_declared(2.0000001 + 2e-4), sweep=False)
    assert record["passed"] is False
    assert record["failure"]["comparison"] == "analytical_vs_backward_pass_1"
    fd = fd_comparison(record)
    assert fd["passed"] is True  # the finite differences agree with autograd, which the expectation does not


def test_an_output_that_is_not_finite_at_the_wide_step_adds_nothing():
    """Given cat([sqrt(x) * 1e-8 + 1e5, 2 x]) at x = 1e-3 (the first output moves by 1.9e-12 over the step, below
    1e5's last bit), where the wide step (about 6e-3) leaves sqrt's domain,
    when it is checked, then only 2 x counts as moved at the wide step, the first output adds nothing to the bound,
    and the element fails as a probable bug: nothing is excused on a value that is not there."""

    def root_beside_double(x):
        return torch.cat([torch.sqrt(x) * 1e-8 + 1e5, 2 * x])

    gradient = 0.5e-8 / 1e-3**0.5 + 2.0
    record = run_check(_declared(gradient, root_beside_double, x=1e-3), sweep=False)
    refinement = record["observations"]["finite_difference"]["refinement"]["x"]
    assert refinement["wide_step"]["outputs_moved"] == 1
    assert record["passed"] is False and record["failure"]["diagnosis"] == "probable_bug"


def test_a_function_that_raises_at_the_wide_step_is_refined_as_before_and_the_record_says_why():
    """Given the offset-beside-double function refusing any x above 0.31 (0.3 + the wide step, about 6e-3, reaches
    it), when it is checked, then the refinement records that the wide step could not be evaluated and added
    nothing, and the element fails as a probable bug."""

    def refusing_above(x):
        if bool((x > 0.305).any()):
            raise ValueError("x out of range")
        return _offset_beside_double(x)

    record = run_check(_declared(2.0000001, refusing_above), sweep=False)
    wide = record["observations"]["finite_difference"]["refinement"]["x"]["wide_step"]
    assert wide["outputs_moved"] is None and wide["reason"].startswith("the function could not be evaluated")
    assert record["passed"] is False and record["failure"]["diagnosis"] == "probable_bug"
