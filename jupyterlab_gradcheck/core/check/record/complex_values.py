"""Complex values in a record, and PyTorch's convention for their gradients.

A record holds JSON, which has no complex numbers, so a complex value (an input, an
expectation, a grad_output, an observed gradient) is written as two real values of the same
shape, `{"real": nested, "imag": nested}`. Real values keep their plain form, so a record of a
real check is exactly what it was before complex values existed.

The gradient of a real loss L with respect to a complex z is PyTorch's: dL/dRe(z) + i dL/dIm(z)
(twice the conjugate Wirtinger derivative dL/d conj(z)). For a complex output f and grad_output
v the loss is L = sum(Re(conj(v) f)) = sum(v.real f.real + v.imag f.imag), which is what
`f.backward(v)` differentiates. Finite differences then take two real differences per complex
element, its real part shifted and then its imaginary part, combined as d_re + i d_im.

The torch-free part (record values) is used by the spec parser, which the server runs before
anything is queued; the tensor part is imported lazily.
"""

from __future__ import annotations

#: The complex dtypes of a record, each with the real dtype of its parts.
COMPLEX_DTYPES = {"complex128": "float64", "complex64": "float32"}

#: The sentence a record carries wherever an input or the output is complex.
CONVENTION = (
    "PyTorch's convention: the gradient of the real loss L = sum(Re(conj(grad_output) * f)) with "
    "respect to a complex z is dL/dRe(z) + i dL/dIm(z) (the conjugate Wirtinger derivative, times 2); "
    "finite differences shift the real and the imaginary part of each complex element in turn"
)


def is_complex_dtype(dtype: str) -> bool:
    """Whether a record's dtype name is complex."""
    return dtype in COMPLEX_DTYPES


def is_complex_value(value) -> bool:
    """Whether a record value is in the complex form `{"real": ..., "imag": ...}`."""
    return isinstance(value, dict) and set(value) == {"real", "imag"}


def holds_complex(value) -> bool:
    """Whether a value given through the Python API holds a Python complex number anywhere."""
    level = [value]
    while level:  # depth by depth, not element by element through recursion (a tensor's tolist is long)
        if set(map(type, level)) <= {float, int}:  # plain numbers only, read at C speed: nothing complex or nested
            return False
        nested = []
        for item in level:
            if isinstance(item, complex):
                return True
            if isinstance(item, (list, tuple)):
                nested.extend(item)
        level = nested
    return False


def as_record_value(value):
    """A value with Python complex numbers in it, as the record's `{"real", "imag"}` form; else unchanged."""
    if not holds_complex(value):
        return value
    return {"real": _part(value, "real"), "imag": _part(value, "imag")}


def grad_output_value(raw):
    """A grad_output in the record's form: one complex value, or, for a function of several outputs
    whose entries cannot form one value (one is None, or their shapes differ), one value per output."""
    if isinstance(raw, (list, tuple)) and holds_complex(raw) and (None in raw or not _rectangular(list(raw))):
        return [as_record_value(item) for item in raw]
    return as_record_value(raw)


def per_output_values(value, count: int):
    """One complex value whose first dimension has `count` entries, as `count` values (a grad_output
    written for `count` outputs of one shape); any other value unchanged."""
    if is_complex_value(value) and isinstance(value["real"], list) and len(value["real"]) == count:
        return [{"real": real, "imag": imag} for real, imag in zip(value["real"], value["imag"])]
    return value


def _rectangular(value) -> bool:
    """Whether nested lists have one length at each depth (numbers at the leaves)."""
    level = [value]
    while any(isinstance(item, (list, tuple)) for item in level):
        if not all(isinstance(item, (list, tuple)) for item in level) or len({len(item) for item in level}) != 1:
            return False
        level = [inner for item in level for inner in item]
    return True


def _part(value, which: str):
    if isinstance(value, (list, tuple)):
        return [_part(item, which) for item in value]
    if isinstance(value, complex):
        return getattr(value, which)
    if which == "imag" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return 0.0
    return value  # anything else is left for shape_of to name


def as_number(value):
    """A record value's element (`to_value` of one element) as a Python number: complex for the complex form."""
    return complex(value["real"], value["imag"]) if is_complex_value(value) else value


def complex_text(real, imag, part=repr) -> str:
    """A complex value as `a+bi`, element by element through nested lists, as the side panel writes it:
    `complex_text([1.0, 2.0], [0.5, -1.0])` -> `[1.0+0.5i, 2.0-1.0i]`; `part` writes each real number."""
    if isinstance(real, list):
        imaginary = imag if isinstance(imag, list) else [None] * len(real)
        return "[" + ", ".join(complex_text(r, i, part) for r, i in zip(real, imaginary)) + "]"
    if not isinstance(real, (int, float)) or not isinstance(imag, (int, float)):
        return f"{real}+{imag}i"
    negative = imag < 0 or (imag == 0 and str(imag).startswith("-"))
    return f"{part(real)}{'-' if negative else '+'}{part(abs(imag))}i"


def single_value(raw, names: list) -> bool:
    """Whether an analytical_gradient dict is one complex value rather than a mapping of inputs to values
    (inputs named exactly real and imag keep the mapping's reading), or one stored value
    (core/check/record/stored_values.py) rather than a mapping."""
    if isinstance(raw, dict) and "stored" in raw and set(raw) <= {"stored", "summary"} and "stored" not in names:
        return True
    return is_complex_value(raw) and sorted(names) != ["imag", "real"]


def expectation_value(raw, names: list):
    """An analytical_gradient with the Python complex numbers in its values in the record's complex form."""
    if isinstance(raw, dict) and not single_value(raw, names):
        return {key: as_record_value(item) for key, item in raw.items()}
    return as_record_value(raw)


def refuse_unsupported(
    dtype: str, inputs: dict, expectation: dict, *, expression, scheme: str, mode: str, hessian
) -> None:
    """SpecError, before anything runs, for what a check cannot do with complex values.

    `expectation` maps each input to its parsed expectation (a value, a callable or an Expression). Expressions are real-valued
    (the expression language and SymPy's opinion have no complex numbers); the complex step, the
    projected mode and the second order are defined here for real inputs only.
    """
    from ...errors import SpecError
    from ...expr.parser import Expression

    complex_dtype = is_complex_dtype(dtype)
    if not complex_dtype:
        for where, values in (("inputs", inputs), ("analytical_gradient", expectation)):
            for name, value in values.items():
                if is_complex_value(value):
                    raise SpecError(
                        "{where}.{name} is complex but dtype {dtype} is real: use complex128 or complex64",
                        where=where,
                        name=name,
                        dtype=dtype,
                        field=f"{where}.{name}",
                    )
        return
    if expression is not None:
        raise SpecError(
            "dtype {dtype} needs a Python callable: expressions are real-valued", dtype=dtype, field="dtype"
        )
    if any(isinstance(value, Expression) for value in expectation.values()):
        raise SpecError(
            "analytical_gradient: with dtype {dtype} write a value or a callable, not an expression "
            "(expressions are real-valued)",
            dtype=dtype,
            field="analytical_gradient",
        )
    for refused, field in (
        (scheme == "complex_step", "finite_difference.scheme"),
        (mode == "projected", "finite_difference.mode"),
        (hessian is not None, "hessian"),
    ):
        if refused:
            raise SpecError(
                "{what} is for real inputs; with dtype {dtype} leave it out", what=field, dtype=dtype, field=field
            )


def refuse_complex_grad_output(value, output) -> None:
    """SpecError for a complex grad_output of a real output: its imaginary part would be dropped.

    Called on the one forward pass made before a ledger entry is written (core/check/autograd/several_outputs.py), so
    nothing is, and again where the grad_output becomes a tensor."""
    if is_complex_value(value) and not output.is_complex():
        from ...errors import SpecError

        raise SpecError(
            "grad_output is complex but the output is real ({dtype})",
            dtype=str(output.dtype).replace("torch.", ""),
            field="grad_output",
        )
