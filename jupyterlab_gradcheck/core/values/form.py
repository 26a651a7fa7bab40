"""Stored values: a tensor of more than `INLINE_ELEMENTS` elements in a record, by its hash.

A record keeps a large tensor (an input, an expectation, an observation's value) not as a nested
JSON list but as its *stored form*:

    {"stored": {"sha256": "<64 hex>", "shape": [100, 100], "dtype": "float64", "bytes": 80128},
     "summary": {"min": ..., "max": ..., "mean": ..., "norm": ..., "nonfinite": 0, "head": [...]}}

The bytes are a safetensors file holding one tensor named "value" (a complex tensor as its
`view_as_real` pair), kept in a content-addressed store beside the ledger
(core/values/blobs.py) and named by the SHA-256 of the file. So a record and a ledger line
stay small whatever the tensors' size, and the chained line still covers the tensor through its
hash. Values of at most `INLINE_ELEMENTS` elements (the course's exercises) stay inline.

Between the check that produced a blob and the append that writes it, its bytes wait in this
process's pending cache (`PENDING`), bounded in bytes. Torch-free, so the server process can
validate the form and take a worker's blobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import struct
import sys
import threading
from array import array
from collections import Counter, OrderedDict

from ..errors import LedgerError, SpecError
from ..expr.parser import DEFAULT_LIMITS, Limits

# -------------------- stored values

#: Values with more elements than this are stored; at most this many stay inline, as they always were.
INLINE_ELEMENTS = 256

#: Values of the summary's head: the first elements, flattened.
HEAD_ELEMENTS = 8

#: The dtypes a stored value may name, each with the safetensors dtype of its file and the
#: number of real values per element (2 for a complex dtype, stored as its `view_as_real` pair).
STORED_DTYPES = {"float64": ("F64", 1), "float32": ("F32", 1), "float16": ("F16", 1), "bfloat16": ("BF16", 1)}
STORED_DTYPES |= {"complex128": ("F64", 2), "complex64": ("F32", 2), "bool": ("BOOL", 1), "uint8": ("U8", 1)}
STORED_DTYPES |= {f"int{bits}": (f"I{bits}", 1) for bits in (8, 16, 32, 64)}
#: The safetensors dtypes a blob may hold.
FILE_DTYPES = {code for code, _ in STORED_DTYPES.values()}

#: The byte budget of the pending cache. The blobs of the check under way are pinned until its
#: append (`PendingBlobs.holding`), whatever their size; past the budget, older blobs are evicted,
#: so runs without a ledger (`check(..., ledger=False)`) cannot grow the cache forever.
PENDING_BUDGET_BYTES = int(os.environ.get("GRADCHECK_PENDING_BLOB_BYTES", 2 * 1024**3))

#: A blob's name: the SHA-256 of its bytes, in lowercase hex.
SHA_PATTERN = re.compile(r"[0-9a-f]{64}")
_STORED_KEYS = {"sha256", "shape", "dtype", "bytes"}
_SUMMARY_KEYS = {"min", "max", "mean", "norm", "nonfinite", "head"}


def is_stored_value(value) -> bool:
    """Whether a record value is in the stored form `{"stored": {...}, "summary": {...}}`."""
    return isinstance(value, dict) and "stored" in value and set(value) <= {"stored", "summary"}


def stored_sha(value) -> str:
    """The SHA-256 a stored value names."""
    return value["stored"]["sha256"]


def stored_shape(value, field: str = "value", limits: Limits = DEFAULT_LIMITS) -> list[int]:
    """The shape of a stored value after checking its form; SpecError naming the first problem.

    The rank limit applies as to a list; `record_values.shape_of` applies the element cap.
    """
    stored = value.get("stored")
    if not isinstance(stored, dict) or set(stored) != _STORED_KEYS:
        raise SpecError(
            '{where}: a stored value is {{"stored": {{"sha256", "shape", "dtype", "bytes"}}, "summary": {{...}}}}',
            where=field,
            field=field,
        )
    sha, shape, dtype, size = stored["sha256"], stored["shape"], stored["dtype"], stored["bytes"]
    if not isinstance(sha, str) or not SHA_PATTERN.fullmatch(sha):
        raise SpecError("{where}: a stored value's sha256 is 64 lowercase hex digits", where=field, field=field)
    if dtype not in STORED_DTYPES:
        raise SpecError(
            "{where}: a stored value's dtype {dtype} is not one of {names}",
            where=field,
            dtype=str(dtype)[:30],
            names=", ".join(STORED_DTYPES),
            field=field,
        )
    if (
        not isinstance(shape, list)
        or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 2**31 for n in shape)
        or not isinstance(size, int)
        or isinstance(size, bool)
        or size < 8
    ):
        raise SpecError(
            "{where}: a stored value's shape is a list of sizes and its bytes a file size", where=field, field=field
        )
    if len(shape) > limits.max_input_rank:
        raise SpecError(
            "{where}: a stored value of shape {shape} has more than {max_input_rank} dimensions",
            where=field,
            shape=shape[:8],
            max_input_rank=limits.max_input_rank,
            field=field,
        )
    summary = value.get("summary")
    if summary is not None and (not isinstance(summary, dict) or not set(summary) <= _SUMMARY_KEYS):
        raise SpecError(
            "{where}: a stored value's summary holds only min, max, mean, norm, nonfinite and head",
            where=field,
            field=field,
        )
    return list(shape)


def stored_values_in(data):
    """Every stored value anywhere in `data` (a record, an entry's data), in order of appearance.

    Lists of plain numbers (inline values) are skipped at C speed, so the walk costs little
    beside the canonical JSON of the same data.
    """
    found = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if is_stored_value(item) and isinstance(item.get("stored"), dict):
                found.append(item)
                continue
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            if item and set(map(type, item)) <= {float, int}:
                continue
            stack.extend(reversed(item))
    return found


def without_summaries(value):
    """`value` with each stored value reduced to its `stored` part (hash, shape, dtype, size): what
    names the tensor. A check's id and the comparison of two expectations read this, so a summary
    computed again (on another device, in another order) never makes the same tensor differ."""
    if isinstance(value, dict):
        if is_stored_value(value):
            return {"stored": value["stored"]}
        return {key: without_summaries(item) for key, item in value.items()}
    if isinstance(value, list) and value and not set(map(type, value)) <= {int, float}:
        return [without_summaries(item) for item in value]
    return value


def safetensors_blob(code: str, shape: list[int], raw: bytes) -> bytes:
    """A safetensors file holding one tensor named "value": an 8-byte little-endian header length, the
    JSON header (no metadata) padded with spaces to a multiple of 8 bytes, the raw little-endian data.
    Byte for byte what `safetensors.torch.save({"value": t})` writes (a test holds it to that), made
    here without the package and without a second copy of the data."""
    header = json.dumps(
        {"value": {"dtype": code, "shape": list(shape), "data_offsets": [0, len(raw)]}}, separators=(",", ":")
    ).encode("utf-8")
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + raw


def blob_header(blob: bytes) -> tuple[str, list[int], int, int]:
    """(safetensors dtype, shape, data start, data end) of the one tensor "value" in a blob; LedgerError
    when the bytes are not such a file."""
    if len(blob) < 8:
        raise LedgerError("a blob shorter than its header")
    (length,) = struct.unpack("<Q", blob[:8])
    if length > len(blob) - 8:
        raise LedgerError("a blob's header runs past its end")
    try:
        header = json.loads(blob[8 : 8 + length])
        entry = header["value"]
        begin, end = entry["data_offsets"]
        dtype, shape = entry["dtype"], list(entry["shape"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LedgerError("a blob's header does not describe one tensor named value") from exc
    start = 8 + length
    if dtype not in FILE_DTYPES or not 0 <= begin <= end <= len(blob) - start:
        raise LedgerError("a blob's header names dtype {dtype} or offsets past its end", dtype=str(dtype)[:10])
    return dtype, shape, start + begin, start + end


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of a blob's bytes, as its name in the store."""
    return hashlib.sha256(data).hexdigest()


class PendingBlobs:
    """Blob bytes produced in this process (or received from a worker) and not yet needed again,
    keyed by SHA-256, oldest evicted first past `budget` bytes.

    A blob that is pinned is never evicted: those a thread puts inside `holding()` (one check, from
    its inputs to its appends) until the block ends, and those put with `pin=True` (a worker's
    blobs in the server) until `discard`. So one check's blobs always wait for its append, whatever
    their size, while runs without a ledger cannot grow the cache past the budget. Thread-safe: the
    server's handlers and a kernel's background threads share it.
    """

    def __init__(self, budget: int = PENDING_BUDGET_BYTES):
        self.budget = budget
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._pinned: Counter[str] = Counter()
        self._holds = threading.local()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def holding(self):
        """Within the block, the blobs this thread puts are pinned (see the class)."""
        stack = self._holds.__dict__.setdefault("stack", [])
        held: set[str] = set()
        stack.append(held)
        try:
            yield
        finally:
            # By identity: a nested hold's set can equal this one's, and must not be removed for it.
            del stack[next(i for i, other in enumerate(stack) if other is held)]
            with self._lock:
                self._pinned.subtract(held)
                self._pinned = +self._pinned  # drop the counts that reached zero
                self._evict()

    def put(self, sha: str, data: bytes, *, verify: bool = False, pin: bool = False) -> None:
        """Keep `data` under `sha`; with `verify`, refuse bytes whose hash is not `sha` (bytes that
        crossed a process boundary); with `pin`, keep them until `discard`."""
        if verify and sha256_hex(data) != sha:
            raise SpecError("blob {sha}: its bytes do not hash to its name", sha=sha[:16])
        with self._lock:
            for held in self._holds.__dict__.get("stack", []):
                if sha not in held:
                    held.add(sha)
                    self._pinned[sha] += 1
            if pin:
                self._pinned[sha] += 1
            if sha in self._blobs:
                self._blobs.move_to_end(sha)
                return
            self._blobs[sha] = bytes(data)
            self._size += len(data)
            self._evict()

    def _evict(self) -> None:
        """Drop the oldest blobs that are not pinned while over the budget, keeping the newest."""
        for sha in list(self._blobs)[:-1]:
            if self._size <= self.budget:
                return
            if not self._pinned[sha]:
                self._size -= len(self._blobs.pop(sha))

    def get(self, sha: str) -> bytes | None:
        """The bytes kept under `sha`, or None."""
        with self._lock:
            data = self._blobs.get(sha)
            if data is not None:
                self._blobs.move_to_end(sha)
            return data

    def __contains__(self, sha: str) -> bool:
        with self._lock:
            return sha in self._blobs

    def pin(self, shas) -> None:
        """Keep the blobs named until as many `discard`s: a server request that parsed them, until its appends."""
        with self._lock:
            for sha in shas:
                if sha in self._blobs:
                    self._pinned[sha] += 1

    def discard(self, shas) -> None:
        """Release one pin of each blob named, and forget it once no pin is left (the server, once an append
        has written a worker's blobs): two requests holding the same bytes each keep them until their own."""
        with self._lock:
            for sha in shas:
                if self._pinned[sha] > 1:
                    self._pinned[sha] -= 1
                    continue
                data = self._blobs.pop(sha, None)
                self._size -= 0 if data is None else len(data)
                self._pinned.pop(sha, None)

    @property
    def size(self) -> int:
        """Bytes held now."""
        return self._size

    def clear(self) -> None:
        """Forget every blob (tests, and a worker after it has handed its blobs over)."""
        with self._lock:
            self._blobs.clear()
            self._pinned.clear()
            self._size = 0


#: The process-wide pending cache.
PENDING = PendingBlobs()


# -------------------- empty values
# An empty array in a record: `{"shape": [0, 5]}`, written by its shape.
#
# A nested list cannot say the shape of an array with no elements when a leading size is 0 (a
# (0, 5) tensor and a (0,) tensor are both `[]`), and a function of it needs that shape
# (`mm` of (0, 5) by (5, 10)). An empty input has no element to compare: its gradient is empty, the
# check compares the other inputs, and says so. Torch-free, as the rest of record/.


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


# -------------------- complex values
# Complex values in a record, and PyTorch's convention for their gradients.
#
# A record holds JSON, which has no complex numbers, so a complex value (an input, an
# expectation, a grad_output, an observed gradient) is written as two real values of the same
# shape, `{"real": nested, "imag": nested}`. Real values keep their plain form, so a record of a
# real check is exactly what it was before complex values existed.
#
# The gradient of a real loss L with respect to a complex z is PyTorch's: dL/dRe(z) + i dL/dIm(z)
# (twice the conjugate Wirtinger derivative dL/d conj(z)). For a complex output f and grad_output
# v the loss is L = sum(Re(conj(v) f)) = sum(v.real f.real + v.imag f.imag), which is what
# `f.backward(v)` differentiates. Finite differences then take two real differences per complex
# element, its real part shifted and then its imaginary part, combined as d_re + i d_im.
#
# The torch-free part (record values) is used by the spec parser, which the server runs before
# anything is queued; the tensor part is imported lazily.

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
    (core/values/form.py) rather than a mapping."""
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
    from ..errors import SpecError
    from ..expr.parser import Expression

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
        from ..errors import SpecError

        raise SpecError(
            "grad_output is complex but the output is real ({dtype})",
            dtype=str(output.dtype).replace("torch.", ""),
            field="grad_output",
        )


# -------------------- record values
# Validation of numeric values written in a record: numbers and rectangular nested lists, a
# complex value's two parts `{"real": ..., "imag": ...}` of one shape (core/values/form.py),
# or an empty array by its shape `{"shape": [0, 5]}` (core/values/form.py).
#
# Torch-free, so the server can refuse a ragged list or a huge shape before anything runs.


def shape_of(value, field: str, limits: Limits = DEFAULT_LIMITS) -> list[int]:
    """Shape of a number or rectangular nested list, of a complex value's parts, of an empty array
    (core/values/form.py) or of a stored value (form.py); SpecError naming the first problem, or a value over an
    instructor's element cap (`Limits.max_input_elements`, when one is set)."""
    shape = _shape_of(value, field, limits)
    if limits.max_input_elements is not None and math.prod(shape) > limits.max_input_elements:
        raise SpecError(
            "{where}: more than {max_input_elements} elements",
            where=field,
            max_input_elements=limits.max_input_elements,
            field=field,
        )
    return shape


def _shape_of(value, field: str, limits: Limits) -> list[int]:
    if is_stored_value(value):  # by its hash, shape and dtype (core/values/form.py)
        return stored_shape(value, field, limits)
    if is_empty_value(value):
        return empty_shape(value, field, limits.max_input_rank)
    if not is_complex_value(value):
        return _real_shape(value, field, limits)
    real = _real_shape(value["real"], f"{field}.real", limits)
    imag = _real_shape(value["imag"], f"{field}.imag", limits)
    if real != imag:
        raise SpecError(
            "{where}: the real part has shape {real} but the imaginary part has shape {imag}",
            where=field,
            real=real,
            imag=imag,
            field=field,
        )
    return real


def _real_shape(value, field: str, limits: Limits) -> list[int]:
    shape: list[int] = []
    level = [value]
    while True:
        if set(map(type, level)) == {float} and all(map(math.isfinite, level)):
            return shape  # the common innermost level, checked at C speed; any other goes through the checks below
        for item in level:
            if not isinstance(item, list) and not _is_number(item):
                raise SpecError(
                    "{where}: expected a number or a list of numbers, found {found}",
                    where=field,
                    found=_describe(item),
                    field=field,
                )
        if all(_is_number(item) for item in level):
            for item in level:
                _check_finite(item, field)
            return shape
        if not all(isinstance(item, list) for item in level):
            raise SpecError(
                "{where}: ragged list (numbers and lists mixed at depth {count})",
                where=field,
                count=len(shape),
                field=field,
            )
        lengths = {len(item) for item in level}
        if len(lengths) != 1:
            raise SpecError(
                "{where}: ragged list (lengths {lengths} at depth {count})",
                where=field,
                lengths=sorted(lengths),
                count=len(shape),
                field=field,
            )
        length = lengths.pop()
        if length == 0:
            raise SpecError("{where}: empty list at depth {count}", where=field, count=len(shape), field=field)
        shape.append(length)
        if len(shape) > limits.max_input_rank:
            raise SpecError(
                "{where}: more than {max_input_rank} dimensions",
                where=field,
                max_input_rank=limits.max_input_rank,
                field=field,
            )
        if math.prod(shape) > limits.max_list_elements:
            raise SpecError(
                "{where}: more than {max_list_elements} elements written as a list (a larger tensor comes from "
                "Python, as a stored value)",
                where=field,
                max_list_elements=limits.max_list_elements,
                field=field,
            )
        level = [inner for item in level for inner in item]


def numel(shape: list[int]) -> int:
    """Number of elements of a shape (1 for a scalar)."""
    return math.prod(shape)


def _is_number(item) -> bool:
    return isinstance(item, (int, float)) and not isinstance(item, bool)


def _check_finite(item, field: str) -> None:
    if isinstance(item, float) and not math.isfinite(item):
        raise SpecError("{where}: {item} is not a finite number", where=field, item=item, field=field)
    if isinstance(item, int) and abs(item) > 2**63:
        # described by its size: a float conversion of a 310-digit integer would overflow
        digits = int(item.bit_length() * math.log10(2)) + 1
        raise SpecError(
            "{where}: an integer of about {digits} digits is out of range (at most 2**63)",
            where=field,
            digits=digits,
            field=field,
        )


def _describe(item) -> str:
    if item is None:
        return "null"
    if isinstance(item, bool):
        return f"boolean {str(item).lower()}"
    if isinstance(item, str):
        return f"string {item[:30]!r}"
    return type(item).__name__


# -------------------- listed values
# A long list written in a record, kept as a stored value: the ledger line stays small whatever the surface.
#
# A tensor from Python becomes a stored value where torch runs (core/values/tensors.py). A record
# written as JSON (the CLI's spec file, a REST body, the panel's form) brings its values as nested lists instead;
# one of more than INLINE_ELEMENTS numbers is packed here, torch-free, as the float64 it was parsed to (exact for
# every JSON number), named by its SHA-256 and put in the pending cache, so the expectation and observation lines
# hold its hash and summary, and the store its bytes, exactly as for a tensor. The check's own dtype applies when
# the value becomes a tensor, as it did for the list.


def stored_from_list(value):
    """`value` as a stored value when it is a rectangular nested list of more than INLINE_ELEMENTS real
    numbers (validated before: record_values.shape_of); anything else, unchanged."""
    if not isinstance(value, list):
        return value
    shape, flat = _flattened(value)
    if shape is None or len(flat) <= INLINE_ELEMENTS:
        return value
    data = array("d", flat)
    if sys.byteorder != "little":
        data.byteswap()
    blob = safetensors_blob("F64", shape, data.tobytes())
    sha = sha256_hex(blob)
    PENDING.put(sha, blob)
    return {
        "stored": {"sha256": sha, "shape": shape, "dtype": "float64", "bytes": len(blob)},
        "summary": _summary(flat),
    }


def stored_mapping(value):
    """`stored_from_list` of a value, or of each entry of a mapping from input names to values."""
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value) and "stored" not in value:
        return {key: stored_from_list(item) for key, item in value.items()}
    return stored_from_list(value)


def _flattened(value: list) -> tuple[list[int] | None, list]:
    """(shape, the numbers in row-major order), or (None, []) for anything but a rectangular list of reals."""
    shape, level = [], value
    while isinstance(level, list):
        shape.append(len(level))
        if not level:
            return None, []
        level = level[0]
    flat = value
    for _ in range(len(shape) - 1):
        flat = [item for row in flat for item in row]
    if not all(type(item) in (int, float) for item in flat) or len(flat) != math.prod(shape):
        return None, []
    return shape, [float(item) for item in flat]


def _summary(flat: list[float]) -> dict:
    """The summary a stored value carries (min, max, mean, norm, nonfinite, head); JSON numbers are finite."""
    return {
        "min": min(flat),
        "max": max(flat),
        "mean": math.fsum(flat) / len(flat),
        "norm": math.sqrt(math.fsum(item * item for item in flat)),
        "nonfinite": 0,
        "head": flat[:HEAD_ELEMENTS],
    }
