"""An empty array in a record: `{"shape": [0, 5]}`, written by its shape.

A nested list cannot say the shape of an array with no elements when a leading size is 0 (a
(0, 5) tensor and a (0,) tensor are both `[]`), and a function of it needs that shape
(`mm` of (0, 5) by (5, 10)). An empty input has no element to compare: its gradient is empty, the
check compares the other inputs, and says so. Torch-free, as the rest of record/.
"""

from __future__ import annotations

from ...errors import SpecError


def is_empty_value(value) -> bool:
    """Whether a record value is the form `{"shape": [...]}` of an empty array."""
    return isinstance(value, dict) and set(value) == {"shape"}


def as_empty_value(value):
    """A tensor (or array) with no elements as `{"shape": [...]}`; any other value unchanged."""
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype") and 0 in tuple(shape):
        return {"shape": [int(n) for n in shape]}
    return value


def empty_shape(value, field: str, max_rank: int) -> list[int]:
    """The shape of an empty value; SpecError unless it is a list of at most `max_rank` sizes, one of them 0."""
    shape = value["shape"]
    if (
        not isinstance(shape, list)
        or len(shape) > max_rank
        or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 2**31 for n in shape)
        or 0 not in shape
    ):
        raise SpecError(
            '{where}: an empty array is written {{"shape": [...]}} with at most {max_rank} sizes, one of them 0',
            where=field,
            max_rank=max_rank,
            field=field,
        )
    return list(shape)
