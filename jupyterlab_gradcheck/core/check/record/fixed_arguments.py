"""Arguments a Python callable is given but not differentiated: held fixed, and recorded.

`check(fn, x=..., fixed={"k": 3, "causal": True, "shape": (2, 3), "w": weights})` passes `k`,
`causal`, `shape` and `w` to every call of `fn` (the Python API binds the objects themselves) and
compares the gradient of the inputs alone, as `torch.autograd.gradcheck` leaves non-tensor
arguments and tensors that do not require grad alone. The record keeps them under `fixed` as
JSON values (a tuple or a tensor as a nested list; a tensor above 256 elements as a stored value,
core/check/record/stored_values.py), so that a reader sees what the function was
evaluated with and the check's id changes with them. An expression has no held arguments.
"""

from __future__ import annotations

from ...errors import SpecError
from .stored_values import is_stored_value, stored_shape

#: Elements a recorded fixed value may hold (a tensor held fixed is kept whole in the record).
MAX_FIXED_ELEMENTS = 100_000


def fixed_value(value):
    """The JSON form of one held argument (or of any tensor the Python API is given): tuples and tensors as
    nested lists, the rest as given. Any tensor is read, autograd's zero placeholder included."""
    if hasattr(value, "detach") and hasattr(value, "tolist"):
        value = value.detach()
        if getattr(value, "_is_zerotensor", lambda: False)():
            # autograd's zero placeholder (the gradient of sgn, say) has no storage to read: its zeros
            return _zeros(list(value.shape))
        return value.to("cpu").tolist()
    if isinstance(value, (list, tuple)):
        return [fixed_value(item) for item in value]
    return value


def _zeros(shape: list[int]):
    return 0.0 if not shape else [_zeros(shape[1:]) for _ in range(shape[0])]


def _count(value) -> int:
    """Values a fixed argument writes into the record: a stored value writes its hash and summary, so one."""
    return sum(_count(item) for item in value) if isinstance(value, list) else 1


def _plain_argument(value) -> bool:
    if isinstance(value, list):
        return all(_plain_argument(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def parse_fixed(raw, inputs: dict, is_callable: bool) -> dict:
    """The record's `fixed` mapping, validated; {} when absent."""
    if raw is None or raw == {}:
        return {}
    if not is_callable:
        raise SpecError("fixed holds the held arguments of a Python callable; an expression has none", field="fixed")
    if not isinstance(raw, dict):
        raise SpecError("fixed must map argument names to values", field="fixed")
    for name, value in raw.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError("fixed argument name {name!r} is not a Python identifier", name=name, field="fixed")
        if name in inputs:
            raise SpecError(
                "{name!r} is both an input and a fixed argument: an argument is either differentiated or held fixed",
                name=name,
                field=f"fixed.{name}",
            )
        if is_stored_value(value):  # a tensor above 256 elements, by its hash (stored_values.py)
            stored_shape(value, f"fixed.{name}")
        elif not _plain_argument(value):
            raise SpecError(
                "fixed.{name} must be a number, true/false, null, a string or a nested list of them",
                name=name,
                field=f"fixed.{name}",
            )
    if sum(_count(value) for value in raw.values()) > MAX_FIXED_ELEMENTS:
        raise SpecError("fixed holds more than {limit} values", limit=MAX_FIXED_ELEMENTS, field="fixed")
    return dict(raw)
