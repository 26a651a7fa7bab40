"""Versions of the finite-difference policy, so that a recorded verdict keeps its meaning.

Every completed record says which policy made it (`"policy": N`). A replay of an old ledger
runs each record under the policy it names, so it reproduces the verdict that was recorded,
while a new check runs under the current one. A record written before the policy was versioned
has no field and was made by policy 1.

- **1**: step eps^(1/3) * max(1, |x_i|) (unbounded); one tolerance `{rtol, atol}` for every
  element; shifted copies evaluated in one batch unchecked; torch's gradcheck in slow mode up to
  1000 input elements.
- **2**: the step's scale is bounded (`STEP_SCALE_CAP`) and the step actually taken,
  (x_i + h) - x_i, is used in the quotient; each element's tolerance adds the rounding bound of
  its own difference (core/check/fd/error_bound.py); elements that still fail are re-estimated with
  Richardson extrapolation over smaller steps before the comparison fails, and the record says
  what was tried (core/check/fd/refinement.py); a batched evaluation is checked against a separate
  one and refused, with the reason recorded, when they differ; torch's gradcheck runs in fast
  mode (its slow mode costs as much as our whole check; ours is the element-by-element verdict).
- **3**: as 2, and an input whose general path would cost COLOURED_FROM_WORK element
  evaluations or more takes one difference per colour of its learned sparse Jacobian
  (core/check/fd/coloured_path.py); `finite_difference.mode` auto projects an input whose exhaustive
  comparison is predicted over its time budget (core/check/fd/time_budget.py). Under 2, every input takes
  the general path (after the diagonal chain) and auto means exhaustive, as when it was made.
- **4**: as 3, and a scalar function of one scalar (the course's first exercises) gets
  torch's gradcheck in slow mode: its Jacobian is one entry, which slow mode compares exactly, in
  less time than fast mode's random projection of it (0.6-0.8 ms against 1.0 ms for x*x).
- **5**: as 4, and torch's gradcheck leaves out its undefined-gradient test where the
  function's graph holds only PyTorch's own derivative formulas (core/check/autograd/custom_functions.py
  `only_built_in_formulas`). That test hands a backward undefined output gradients; in such a
  graph it can only reach formulas PyTorch's own test suite runs it on. Where the graph holds
  anything else (a custom Function, an extension's node, an in-place copy into a view) it runs,
  and a custom Function's backward is tested that way by the check itself as well
  (core/check/autograd/undefined_grad.py). The record's gradcheck settings say when it was left out.
  And the step sweep's series ride along in the batched call of the first input's finite
  differences (core/check/fd/sweep_riders.py): that call then holds more copies, so an estimate's
  last bits may differ from policy 4's where a batched kernel rounds by the batch's size.
- **6**: as 5, and an element's rounding bound counts the outputs it moves even where
  their two evaluations came out equal (core/check/fd/error_bound.py `moved_outputs`): a row of
  evaluations that are all equal (one output, or several of which the element moved none beyond its
  rounding), an element's own body value on a diagonal chain, and the rows its learned pattern gives
  it on the coloured path, wherever they are computed in the differences' own dtype. Two equal
  evaluations say only that the change of f is below its rounding, not that the derivative is 0;
  under 5 such an element had a bound of 0, so a correct `x * 1e-7 + 1e5` (whose change over the
  step is below 1e5's last bit) was failed as a probable bug. In a row where other outputs moved, an
  equal one may be an output the element does not touch, and it still counts 0.
- **7** (current): as 6, and a function of several outputs whose graph holds a custom Function is
  observed in forward mode and batched over its differentiable outputs, as `gradcheck` checks a
  tuple of outputs (core/check/autograd/forward_and_batched_outputs.py), and a function of several outputs gets the second
  order it asks for: the Hessian of sum_k sum(v_k * f_k), with gradgradcheck on the whole function
  (core/check/autograd/second_order.py `second_order_of_outputs`); under 1-6 all three were recorded as
  skipped for it. And an element that fails at the default step looks, before it is refined, for the
  outputs it moves at WIDE times its step (core/check/fd/refinement.py `touched_outputs`): those that
  came out equal at a refinement step count in its bound there, as policy 6 counts an all-equal row.
  Under 6, in a row where other outputs moved, an equal output counted 0 whether the element moved
  it below its rounding or not at all, so a correct `cat([x * 1e-7 + 1e5, 2 x])` was failed as a
  probable bug. Passing elements are not touched: their finite differences are those of 6.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SpecError

#: The policy of new checks.
CURRENT = 7
#: The policy of an executed record with no "policy" field (written before versions existed).
UNVERSIONED = 1
#: Largest |x| the default step grows with under policy 2: beyond it the step stays
#: eps^(1/3) * STEP_SCALE_CAP, because a step that grows with |x| without bound (0.06 at 1e4)
#: measures curvature instead of slope; the rounding it costs is in each element's bound.
STEP_SCALE_CAP = 16.0


@dataclass(frozen=True)
class Policy:
    """What one policy version does."""

    version: int
    bounded_step: bool  #: step scale min(max(1, |x|), STEP_SCALE_CAP) and the exact step taken
    error_bound: bool  #: each element's default tolerance adds its own rounding bound
    refine: bool  #: failing elements are re-estimated (Richardson, smaller steps) before failing
    batch_guard: bool  #: a batched evaluation is checked against a separate evaluation
    gradcheck_fast: bool  #: torch's gradcheck always in fast mode
    coloured: bool = False  #: large enough inputs take one difference per colour of a learned sparse Jacobian
    auto_budget: bool = False  #: mode auto projects an input whose exhaustive comparison is over budget
    gradcheck_slow_scalar: bool = False  #: torch's gradcheck in slow mode for a scalar function of one scalar
    #: torch's gradcheck tests undefined gradients only where the graph goes through a custom Function
    undefined_grad_for_functions: bool = False
    sweep_rides: bool = False  #: the step sweep's series are evaluated in the call of the finite differences
    #: an element's rounding bound counts the outputs it moves whose two evaluations are equal (an all-equal row,
    #: a diagonal chain's own output, the coloured path's pattern rows)
    equal_evaluations_bounded: bool = False
    #: a function of several outputs gets forward mode and batched gradients (through a custom Function) and its
    #: second order (else skipped)
    several_output_modes: bool = False
    #: a refined element's bound counts the outputs it moves at a wide step where they came out equal
    wide_step_outputs: bool = False


POLICIES = {
    1: Policy(1, bounded_step=False, error_bound=False, refine=False, batch_guard=False, gradcheck_fast=False),
    2: Policy(2, bounded_step=True, error_bound=True, refine=True, batch_guard=True, gradcheck_fast=True),
    3: Policy(
        3,
        bounded_step=True,
        error_bound=True,
        refine=True,
        batch_guard=True,
        gradcheck_fast=True,
        coloured=True,
        auto_budget=True,
    ),
    4: Policy(
        4,
        bounded_step=True,
        error_bound=True,
        refine=True,
        batch_guard=True,
        gradcheck_fast=True,
        coloured=True,
        auto_budget=True,
        gradcheck_slow_scalar=True,
    ),
    5: Policy(
        5,
        bounded_step=True,
        error_bound=True,
        refine=True,
        batch_guard=True,
        gradcheck_fast=True,
        coloured=True,
        auto_budget=True,
        gradcheck_slow_scalar=True,
        undefined_grad_for_functions=True,
        sweep_rides=True,
    ),
    6: Policy(
        6,
        bounded_step=True,
        error_bound=True,
        refine=True,
        batch_guard=True,
        gradcheck_fast=True,
        coloured=True,
        auto_budget=True,
        gradcheck_slow_scalar=True,
        undefined_grad_for_functions=True,
        sweep_rides=True,
        equal_evaluations_bounded=True,
    ),
    7: Policy(
        7,
        bounded_step=True,
        error_bound=True,
        refine=True,
        batch_guard=True,
        gradcheck_fast=True,
        coloured=True,
        auto_budget=True,
        gradcheck_slow_scalar=True,
        undefined_grad_for_functions=True,
        sweep_rides=True,
        equal_evaluations_bounded=True,
        several_output_modes=True,
        wide_step_outputs=True,
    ),
}
#: Element evaluations (elements x the larger of input and output numel) from which, under policy 3,
#: the coloured path is tried: below, the general path's 2n batched copies cost less than learning the
#: pattern (about 1.5 ms; the general path of a 1-D banded loss crosses it between 128 and 256 elements).
COLOURED_FROM_WORK = 1 << 15


def policy_version(record: dict) -> int:
    """The policy a record asks for: its own field, 1 for an executed record without one, else CURRENT."""
    value = record.get("policy")
    if value is None:
        return UNVERSIONED if record.get("executed") is True else CURRENT
    if isinstance(value, bool) or not isinstance(value, int) or value not in POLICIES:
        raise SpecError(
            "policy {value!r} is not one of {choices}",
            value=value,
            choices=", ".join(map(str, POLICIES)),
            field="policy",
        )
    return value


def policy(version: int) -> Policy:
    """The Policy of a version number."""
    return POLICIES[version]


def gradcheck_fast(rules: Policy, input_elements: int, output_elements: int) -> bool | None:
    """torch's gradcheck mode under `rules` for a function of that many input and output elements: True
    fast, False slow, None chosen by size as policy 1 did (core/check/autograd/torch_gradcheck.py FAST_MODE_ABOVE)."""
    if rules.gradcheck_slow_scalar and input_elements == 1 and output_elements == 1:
        return False
    return True if rules.gradcheck_fast else None


def gradcheck_undefined_grad(rules: Policy, built_in_only: bool) -> bool:
    """Whether torch's gradcheck runs its undefined-gradient test for a function whose graph holds only PyTorch's
    own derivative formulas (`built_in_only`) or not (policy 5: only where it holds something else)."""
    return not (rules.undefined_grad_for_functions and built_in_only)
