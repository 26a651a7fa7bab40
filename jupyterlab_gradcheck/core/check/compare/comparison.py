"""Compare two gradients element by element, keeping the worst element (principle 6).

A comparison passes when every element satisfies |left - right| <= atol + rtol * |right|
(the reference is the right-hand side). It records the largest absolute and relative
errors, the tolerance used, and the element that violates the tolerance most (or, when all
pass, the one with the largest error), with its index and both values.

Complex tensors (core/check/record/complex_values.py) are compared by the modulus of the difference.

Two paths compute the same record: tensors of up to SMALL_ELEMENTS real elements on the CPU are
compared in plain Python floats (plain_floats.py), larger ones with torch (`compare_tensors`), and
both give bit-identical records (comparison_record.py writes them). A caller comparing the same
tensor several times wraps it once in an `Operand`, so that its elements are read once, and hands
several comparisons to `compare_rows` (stacked_rows.py), which runs same-shaped ones as the rows of
one stacked tensor (the same records).
"""

from __future__ import annotations

import torch

from .comparison_record import INF, comparison_record, finite_or_none
from .described_once import same_bits
from .plain_floats import compare_floats, plain_number, plain_values
from .tensors import to_value


class Operand:
    """A tensor to compare, and its elements as Python floats when the plain path suits it."""

    __slots__ = ("_tensor", "_make", "shape", "values")

    def __init__(self, tensor):
        self._tensor, self._make, self.shape = tensor, None, tensor.shape
        #: The elements (exact: every real dtype fits a double), or None for the torch path.
        self.values = plain_values(tensor)

    @property
    def tensor(self):
        """The tensor (made on first use for a `doubled` operand)."""
        if self._tensor is None:
            self._tensor = self._make()
        return self._tensor

    @classmethod
    def doubled(cls, operand: Operand) -> Operand:
        """`Operand(2 * operand.tensor)`. In float64 the doubling is exact (or overflows to inf)
        in Python floats as in torch, so the plain values are doubled without a tensor; other
        dtypes round (and overflow) in their own precision, so torch doubles them."""
        tensor = operand.tensor
        if operand.values is None or tensor.dtype != torch.float64:
            return cls(2 * tensor)
        twice = cls.__new__(cls)
        twice._tensor, twice._make, twice.shape = None, lambda: 2 * tensor, operand.shape
        twice.values = [2 * value for value in operand.values]
        return twice


def compare(
    name: str, input_name: str, left, right, *, left_label: str, right_label: str, rtol: float, atol: float, bound=None
) -> dict:
    """One comparison record between two same-shaped tensors (or `Operand`s of them).

    `bound`, a tensor shaped like `right`, adds an allowance of its own to each element's
    tolerance (a finite difference's rounding bound, core/check/fd/error_bound.py); the record
    then carries `error_bound` with its largest value and its value at the worst element.
    """
    left = left if isinstance(left, Operand) else Operand(left)
    right = right if isinstance(right, Operand) else Operand(right)
    extra = None
    if bound is not None:
        extra = Operand(bound).values if left.values is not None and right.values is not None else None
        if extra is None or len(extra) != len(right.values):
            return compare_tensors(
                name,
                input_name,
                left.tensor,
                right.tensor,
                left_label=left_label,
                right_label=right_label,
                rtol=rtol,
                atol=atol,
                bound=bound,
            )
    if (
        left.values is not None
        and right.values is not None
        and left.shape == right.shape
        and plain_number(rtol)
        and plain_number(atol)
    ):
        return compare_floats(
            name,
            input_name,
            left.values,
            right.values,
            right.shape,
            left_label=left_label,
            right_label=right_label,
            rtol=rtol,
            atol=atol,
            extra=extra,
        )
    if bound is None and identical(left.tensor, right.tensor, rtol, atol):
        return identical_record(name, input_name, left.tensor, right.tensor, left_label, right_label, rtol, atol)
    return compare_tensors(
        name,
        input_name,
        left.tensor,
        right.tensor,
        left_label=left_label,
        right_label=right_label,
        rtol=rtol,
        atol=atol,
        bound=bound,
    )


def identical(left, right, rtol, atol) -> bool:
    """Whether two real tensors hold the same finite bits (pass 1 and the pass after clearing, say) under
    non-negative plain tolerances: then every error is 0 and the comparison's record is known without it."""
    return (
        plain_number(rtol)
        and plain_number(atol)
        and rtol >= 0
        and atol >= 0
        and left.numel() > 0
        and left.is_floating_point()
        and not left._is_zerotensor()
        and same_bits(left, right)
        and bool(torch.isfinite(right).all())
    )


def identical_record(name, input_name, left, right, left_label, right_label, rtol, atol) -> dict:
    """`compare_tensors`' record of two `identical` tensors, written directly: every error is 0, so it passes,
    and its worst element is the first (argmax of an all-zero error), each value read in float64."""
    zero = torch.zeros((), dtype=torch.float64)
    first_left = left.detach().reshape(-1)[0].to("cpu", torch.float64)
    first_right = right.detach().reshape(-1)[0].to("cpu", torch.float64)
    labels = (name, input_name, left_label, right_label)
    worst = (0, to_value(first_left), to_value(first_right), zero, zero)
    return comparison_record(*labels, rtol, atol, True, zero, zero, right.shape, *worst)


def compare_tensors(name, input_name, left, right, *, left_label, right_label, rtol, atol, bound=None) -> dict:
    """The torch path, for tensors of any size and device, real or complex.

    Complex tensors are compared in complex128: the error is the modulus |left - right| and the
    tolerance is relative to |right|, so a wrong imaginary part fails as a wrong real part does;
    the worst element's values are written in the record's complex form.
    """
    wide = torch.complex128 if left.is_complex() or right.is_complex() else torch.float64
    left64 = left.detach().to("cpu", wide).broadcast_to(right.shape)
    right64 = right.detach().to("cpu", wide)
    error = (left64 - right64).abs()
    extra = None if bound is None else bound.detach().to("cpu", torch.float64).reshape(right64.shape)
    size = right64.abs()
    bound = atol + rtol * size if extra is None else atol + rtol * size + extra
    excess = torch.where(torch.isnan(error), INF, error - bound)
    passed = bool((excess <= 0).all())
    # every error of a passing comparison is finite (a NaN or inf one exceeds its bound): its largest is the worst
    worst_flat = int(torch.argmax(excess.reshape(-1) if not passed else error.reshape(-1)))
    # Relative to a reference of exactly 0 the error is infinite (reported as null), not 1e307.
    relative = torch.where(error == 0, 0.0, torch.where(right64 == 0, INF, error / size))
    result = comparison_record(
        name,
        input_name,
        left_label,
        right_label,
        rtol,
        atol,
        passed,
        error.max(),
        relative.max(),
        right64.shape,
        worst_flat,
        to_value(left64.reshape(-1)[worst_flat]),
        to_value(right64.reshape(-1)[worst_flat]),
        error.reshape(-1)[worst_flat],
        relative.reshape(-1)[worst_flat],
    )
    if extra is not None:
        result["error_bound"] = {
            "max": finite_or_none(extra.max()) if extra.numel() else 0.0,
            "at_worst": finite_or_none(extra.reshape(-1)[worst_flat]),
        }
    return result
