"""The checks of a written value read a plain level of floats at C speed (record_values._real_shape) and
look for Python complex numbers depth by depth (complex_values.holds_complex); both must refuse and
find exactly what the element-by-element checks did, with the same first problem named."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.values.form import holds_complex, shape_of


@pytest.mark.parametrize(
    "value,shape",
    [
        (2.5, []),
        (3, []),
        ([1.0, 2.0, 3.0], [3]),
        ([[1.0, 2], [3, 4.0]], [2, 2]),
        ([[[0.5]] * 3] * 2, [2, 3, 1]),
        ([2**63, -1.0], [2]),
    ],
)
def test_a_rectangular_list_of_numbers_has_its_shape(value, shape):
    """Given numbers and rectangular nested lists of floats, ints or both, when their shape is read,
    then it is the list's shape ([] for a number)."""
    assert shape_of(value, "inputs.x") == shape


@pytest.mark.parametrize(
    "value,message",
    [
        ([1.0, math.inf], "inputs.x: inf is not a finite number"),
        ([[1.0, 2.0], [math.nan, 1.0]], "inputs.x: nan is not a finite number"),
        ([math.inf, "a"], "inputs.x: expected a number or a list of numbers, found string 'a'"),
        ([math.inf, True], "inputs.x: expected a number or a list of numbers, found boolean true"),
        ([1.0, None], "inputs.x: expected a number or a list of numbers, found null"),
        ([1.0, [2.0]], "inputs.x: ragged list (numbers and lists mixed at depth 1)"),
        ([[1.0], [2.0, 3.0]], "inputs.x: ragged list (lengths [1, 2] at depth 1)"),
        ([1.0, 2**70], "inputs.x: an integer of about 22 digits is out of range (at most 2**63)"),
    ],
)
def test_the_first_problem_of_a_list_is_named_as_before(value, message):
    """Given a level of floats with an infinity or a NaN, and levels where a wrong type, a ragged row or
    a huge integer sits beside an infinity, when the shape is read, then the refusal names the type
    before any non-finite number, as the element-by-element checks did."""
    with pytest.raises(SpecError) as raised:
        shape_of(value, "inputs.x")
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "value,found",
    [
        (1.0, False),
        ([1.0, 2, 3.0], False),
        ([[1.0, 2.0], [3.0, 4.0]], False),
        ((1.0, (2.0, 3)), False),
        (1j, True),
        ([1.0, 2.0, 3 + 0j], True),
        ([[1.0, 2.0], [3.0, 4j]], True),
        ((1.0, [2.0, (3j,)]), True),
        ([np.complex128(1 + 2j)], True),
        ([True, 1.0], False),
        ({"real": [1.0], "imag": [2.0]}, False),
    ],
)
def test_a_complex_number_is_found_at_any_depth(value, found):
    """Given floats, ints, nested lists and tuples, with or without a Python complex number (or a
    subclass of complex, numpy's complex128) at some depth, when searched, then one is found exactly
    where there is one; the record's {"real", "imag"} form is not itself a Python complex."""
    assert holds_complex(value) is found
