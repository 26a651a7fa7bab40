"""Hypothesis over the expression parser and the record validator.

Whatever text or record arrives, the core answers in one of two ways: it accepts it, or it
raises SpecError with a one-line message. No other exception escapes, and nothing is ever
executed: an audit hook watches for code execution, imports, file opens and process starts
while the parser and validator work. What is accepted is also checked to be inside the
language (declared names and listed functions only, printable ASCII, no dunder) and to be
writable to a ledger (strict JSON, UTF-8).

1,000 examples per property in `make test`; `HYPOTHESIS_PROFILE=fuzz` (used by `make fuzz`)
runs 100,000 (`GRADCHECK_FUZZ_EXAMPLES` changes that number for a shorter or longer run).
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading

import pytest
from figures import record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyterlab_gradcheck.core.check.record.spec import DEVICE_PATTERN, DTYPES, INPUT_FIELDS, OUTPUT_FIELDS, parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.expr.parser import DEFAULT_LIMITS, FUNCTIONS, parse_expression
from jupyterlab_gradcheck.core.jsonio import loads_records
from jupyterlab_gradcheck.core.values.form import numel

for _name, _examples in (("hardening", 1_000), ("fuzz", int(os.environ.get("GRADCHECK_FUZZ_EXAMPLES", 100_000)))):
    settings.register_profile(
        _name,
        max_examples=_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
PROFILE = settings.get_profile("fuzz" if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else "hardening")
EXAMPLES = PROFILE.max_examples

# ---------------------------------------------------------------- never executing anything
#: Audit events that mean something was executed, imported, opened or started.
_FORBIDDEN_EVENTS = (
    "exec",
    "import",
    "open",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "subprocess.Popen",
    "os.fork",
    "ctypes.dlopen",
    "socket.connect",
    "builtins.input",
)
_WATCH = {"on": False, "seen": [], "thread": None}


def _audit(event: str, args) -> None:
    # Only the thread that runs the parser: a thread an earlier test left (a server's, a pool's)
    # may open a file at any moment, and that is not the parser's doing.
    if _WATCH["on"] and event.startswith(_FORBIDDEN_EVENTS) and threading.get_ident() == _WATCH["thread"]:
        _WATCH["seen"].append((event, repr(args)[:120]))


sys.addaudithook(_audit)  # hooks cannot be removed; it only records while a property runs


class _Watched:
    """Record forbidden audit events while the parser or validator runs."""

    def __enter__(self):
        _WATCH["seen"] = []
        _WATCH["thread"] = threading.get_ident()
        _WATCH["on"] = True

    def __exit__(self, *exc_info):
        _WATCH["on"] = False
        assert not _WATCH["seen"], f"executed, imported or opened something: {_WATCH['seen'][:3]}"


# Warm every lazy import of the parser and validator, so that an import seen later is news.
parse_spec({"function": "sin(x).sum() + y", "x": [1.0], "y": 2, "analytical_gradient": {"x": "cos(x)", "y": 1}})

# ---------------------------------------------------------------- strategies
NAMES = [
    "x",
    "y",
    "w",
    "z",
    "torch",
    "os",
    "sys",
    "__import__",
    "__class__",
    "__builtins__",
    "_",
    "self",
    "lambda",
    "None",
    "True",
    "eval",
    "exec",
    "open",
    "getattr",
    "print",
    "type",
]
FUNCTION_NAMES = sorted(FUNCTIONS) + [
    "zeros",
    "empty",
    "load",
    "save",
    "system",
    "item",
    "backward",
    "__subclasses__",
    "_C",
    "nn",
    "real",
    "grad",
    "fill_",
]
NUMBERS = [
    "0",
    "1",
    "2",
    "0.5",
    "64",
    "65",
    "1e12",
    "1e13",
    "1e308",
    "1e400",
    "10**10",
    "9**9**9",
    "0x10",
    "1j",
    "99999999999999999999",
    "-1",
    "True",
]
TOKENS = (
    NAMES
    + NUMBERS
    + FUNCTION_NAMES
    + [
        "+",
        "-",
        "*",
        "/",
        "**",
        "@",
        "//",
        "%",
        "<",
        ">",
        "==",
        "<=",
        ">=",
        "!=",
        "&",
        "|",
        "^",
        "~",
        ":=",
        "=",
        ",",
        ":",
        ".",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "'",
        '"',
        "f'",
        "b'",
        "\\",
        "#",
        ";",
        "\n",
        "\t",
        " ",
        "...",
        "for",
        "in",
        "if",
        "else",
        "not",
        "and",
        "or",
        "import",
        "from",
        "yield",
        "await",
        "is",
        "dim=",
        "keepdim=",
        "min=",
        "max=",
        "*x",
        "**{}",
        "\u200b",
        "\u0445",
        "\uff58",
        "\x00",
        "\u202e",
        "\ufeff",
        "x.sum()",
        "torch.sin(",
        "x[0]",
        "x[1:]",
    ]
)


def _structured():
    """Expressions built like real ones, from allowed and forbidden parts."""
    leaves = st.sampled_from(NAMES + NUMBERS)

    def extend(inner):
        name = st.sampled_from(FUNCTION_NAMES)
        binary = st.sampled_from(["+", "-", "*", "/", "**", "@", "//", "%", "<", ">=", "==", " and ", " if x else "])
        keyword = st.sampled_from(["dim", "keepdim", "min", "max", "start", "out", "dtype", "input"])
        return st.one_of(
            st.tuples(inner, binary, inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
            st.tuples(st.sampled_from(["-", "+", "~", "not "]), inner).map("".join),
            st.tuples(name, st.lists(inner, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(name, st.lists(inner, max_size=2)).map(lambda t: f"torch.{t[0]}({', '.join(t[1])})"),
            st.tuples(inner, name, st.lists(inner, max_size=2)).map(lambda t: f"({t[0]}).{t[1]}({', '.join(t[2])})"),
            st.tuples(inner, name).map(lambda t: f"({t[0]}).{t[1]}"),
            st.tuples(name, inner, keyword, inner).map(lambda t: f"{t[0]}({t[1]}, {t[2]}={t[3]})"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.tuples(inner, st.sampled_from(["0", "-1", "1:", ":2", "::0", "::-1", "0, 1", "...", "None"])).map(
                lambda t: f"{t[0]}[{t[1]}]"
            ),
            st.tuples(inner, inner).map(lambda t: f"[v for v in {t[0]}] + {t[1]}"),
            st.tuples(inner).map(lambda t: f"(lambda: {t[0]})()"),
            st.tuples(inner).map(lambda t: f"f'{{{t[0]}}}'"),
            st.tuples(inner).map(lambda t: f"(z := {t[0]})"),
        )

    return st.recursive(leaves, extend, max_leaves=24)


def _valid():
    """Expressions from allowed parts only (arity respected), to explore what is accepted."""
    leaves = st.sampled_from(["x", "y", "w", "0.5", "2", "3", "64", "1e12"])
    one_argument = st.sampled_from([name for name, f in FUNCTIONS.items() if f.min_args == 1])
    two_arguments = st.sampled_from(
        [name for name, f in FUNCTIONS.items() if f.min_args <= 2 <= f.max_args and name != "where"]
    )

    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "@", " < "]), inner).map(lambda t: f"({''.join(t)})"),
            st.tuples(inner, st.sampled_from(["2", "-1", "0.5", "64", "y"])).map(lambda t: f"({t[0]})**{t[1]}"),
            st.tuples(one_argument, inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(one_argument, inner).map(lambda t: f"torch.{t[0]}({t[1]})"),
            st.tuples(two_arguments, inner, inner).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            st.tuples(inner, st.sampled_from(["sum()", "mean(dim=0)", "sum(keepdim=True)", "pow(2)", "exp()"])).map(
                lambda t: f"({t[0]}).{t[1]}"
            ),
            st.tuples(inner, st.sampled_from(["0", "-1", "1:", "0, 1", "::2"])).map(lambda t: f"({t[0]})[{t[1]}]"),
            st.tuples(inner, inner, inner).map(lambda t: f"where({t[0]} > 0, {t[1]}, {t[2]})"),
            st.tuples(inner).map(lambda t: f"-{t[0]}"),
        )

    return st.recursive(leaves, extend, max_leaves=12)


EXPRESSIONS = st.one_of(
    _valid(),
    st.text(max_size=80),
    st.lists(st.sampled_from(TOKENS), max_size=40).map("".join),
    st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join),
    _structured(),
)
DECLARED = st.sets(st.sampled_from(["x", "y", "w", "torch", "sin", "__class__", "_x", "x1"]), max_size=4)

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=16,
)
NUMBERS_OR_LISTS = st.recursive(
    st.one_of(st.integers(-(10**6), 10**6), st.floats(allow_nan=True, allow_infinity=True, width=64)),
    lambda inner: st.lists(inner, min_size=0, max_size=4),
    max_leaves=24,
)
KEYS = st.one_of(
    st.sampled_from(INPUT_FIELDS + OUTPUT_FIELDS + ("x", "y", "w", "__proto__", "torch", "sin")), st.text(max_size=10)
)
FIELD_VALUES = {
    "function": st.one_of(EXPRESSIONS, JSON_VALUES),
    "analytical_gradient": st.one_of(
        EXPRESSIONS,
        NUMBERS_OR_LISTS,
        st.dictionaries(KEYS, st.one_of(EXPRESSIONS, NUMBERS_OR_LISTS), max_size=3),
        JSON_VALUES,
    ),
    "inputs": st.one_of(st.dictionaries(KEYS, NUMBERS_OR_LISTS, max_size=4), JSON_VALUES),
    "x": st.one_of(NUMBERS_OR_LISTS, JSON_VALUES),
    "y": st.one_of(NUMBERS_OR_LISTS, JSON_VALUES),
    "dtype": st.one_of(st.sampled_from(DTYPES + ("float128", "int64", "FLOAT64", "float64 ")), JSON_VALUES),
    "device": st.one_of(
        st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:99", "mps", "auto", "cpu\n", "gpu", "meta"]), JSON_VALUES
    ),
    "tolerance": st.one_of(
        st.dictionaries(
            st.sampled_from(["rtol", "atol", "btol"]),
            st.one_of(st.floats(allow_nan=True, allow_infinity=True), JSON_VALUES),
            max_size=3,
        ),
        JSON_VALUES,
    ),
    "finite_difference": st.one_of(
        st.dictionaries(
            st.sampled_from(["scheme", "step", "rtol", "atol", "order"]),
            st.one_of(
                st.sampled_from(["central", "forward", "richardson", "complex_step", "adaptive", "backward"]),
                st.floats(allow_nan=True, allow_infinity=True),
                JSON_VALUES,
            ),
            max_size=4,
        ),
        JSON_VALUES,
    ),
}
SEEDS = [
    {"function": "x*x", "x": 3, "analytical_gradient": 6},
    {
        "function": "(x*y).sum()",
        "inputs": {"x": [1.0, 2.0], "y": [3.0, 4.0]},
        "analytical_gradient": {"x": "y", "y": "x"},
        "tolerance": {"rtol": 1e-7},
        "finite_difference": {"scheme": "central"},
    },
]


@st.composite
def records(draw):
    """A record near a valid one (a seed with a few fields changed), or any JSON value."""
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON_VALUES)
    result = dict(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.one_of(st.sampled_from(sorted(FIELD_VALUES)), KEYS))
        if draw(st.integers(0, 5)) == 0:
            result.pop(key, None)
        else:
            result[key] = draw(FIELD_VALUES.get(key, JSON_VALUES))
    return result


# ---------------------------------------------------------------- properties
def _one_line(error: SpecError) -> None:
    assert error.message and "\n" not in error.message, repr(error.message)
    assert error.field is None or isinstance(error.field, str)


def _inside_the_language(expression, declared) -> None:
    source = expression.source
    assert set(source) <= set(map(chr, range(32, 127))) | {"\t"}, repr(source)
    assert "__" not in source, source
    assert expression.names <= set(declared), (expression.names, declared)
    assert expression.functions <= set(FUNCTIONS), expression.functions
    assert len(source) <= DEFAULT_LIMITS.max_expression_length


def test_the_expression_parser_accepts_or_refuses_and_never_executes():
    """Given arbitrary text, token soups and structured expressions with forbidden parts, when
    parsed against random declared names, then the parser returns a checked expression inside
    the language or raises a one-line SpecError, and never executes, imports or opens anything."""
    counts = {"examples": 0, "accepted": 0, "refused": 0}

    @PROFILE
    @given(text=EXPRESSIONS, declared=DECLARED)
    def parse(text, declared):
        counts["examples"] += 1
        with _Watched():
            try:
                expression = parse_expression(text, declared)
            except SpecError as error:
                counts["refused"] += 1
                _one_line(error)
                return
        counts["accepted"] += 1
        _inside_the_language(expression, declared)

    parse()
    record(
        "fuzz: expression parser examples (accepted / refused / other exceptions)",
        f"{counts['examples']} ({counts['accepted']} / {counts['refused']} / 0)",
    )
    assert counts["examples"] >= EXAMPLES and counts["accepted"] > 0 and counts["refused"] > 0


def test_the_record_validator_accepts_or_refuses_and_never_executes():
    """Given records near a valid one with fields replaced by hostile values, and arbitrary
    JSON, when validated, then the validator returns a spec that is within the limits and
    writable to a ledger, or raises a one-line SpecError, and never executes anything."""
    counts = {"examples": 0, "accepted": 0, "refused": 0}

    @PROFILE
    @given(value=records())
    def validate(value):
        counts["examples"] += 1
        with _Watched():
            try:
                spec = parse_spec(value)
                normalised = spec.to_dict()
            except SpecError as error:
                counts["refused"] += 1
                _one_line(error)
                return
        counts["accepted"] += 1
        line = json.dumps(normalised, allow_nan=False, ensure_ascii=False)
        line.encode("utf-8")  # a ledger line is UTF-8
        # each input written as a list is within the list cap; the total follows memory (core/run.py)
        assert all(numel(shape) <= DEFAULT_LIMITS.max_list_elements for shape in spec.shapes.values())
        assert spec.dtype in DTYPES and DEVICE_PATTERN.match(spec.device)
        for key in ("rtol", "atol"):
            assert math.isfinite(spec.tolerance[key]) and spec.tolerance[key] >= 0
        _inside_the_language(spec.expression, spec.inputs)

    validate()
    record(
        "fuzz: record validator examples (accepted / refused / other exceptions)",
        f"{counts['examples']} ({counts['accepted']} / {counts['refused']} / 0)",
    )
    assert counts["examples"] >= EXAMPLES and counts["accepted"] > 0 and counts["refused"] > 0


def test_the_json_reader_accepts_or_refuses():
    """Given arbitrary text and JSON-ish text (NaN, duplicate keys, JSON Lines), when read as
    records, then the strict reader returns a list of values or raises a one-line SpecError."""
    counts = {"examples": 0}
    pieces = st.sampled_from(
        [
            "{",
            "}",
            "[",
            "]",
            '"x"',
            ":",
            ",",
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "0",
            '"\\ud800"',
            '"\\u0000"',
            "true",
            "null",
            "\n",
            " ",
            '"function"',
            '"x*x"',
            '"x"',
        ]
    )
    texts = st.one_of(
        st.text(max_size=60), st.lists(pieces, max_size=30).map("".join), JSON_VALUES.map(lambda v: json.dumps(v))
    )

    @PROFILE
    @given(text=texts)
    def read(text):
        counts["examples"] += 1
        with _Watched():
            try:
                result = loads_records(text)
            except SpecError as error:
                _one_line(error)
                return
        assert isinstance(result, list) and result

    read()
    record("fuzz: strict JSON reader examples", counts["examples"])
    assert counts["examples"] >= EXAMPLES


def test_the_audit_hook_sees_execution():
    """Given the audit hook this module relies on, when code really is executed and a file
    really is opened while it watches, then it reports both (so its silence above means
    something), while parsing a hostile expression stays silent."""
    with pytest.raises(AssertionError, match="executed, imported or opened"):
        with _Watched():
            eval(compile("0", "<probe>", "eval"))  # noqa: S307 - the probe the hook must see
    with pytest.raises(AssertionError, match="executed, imported or opened"):
        with _Watched():
            open(os.devnull).close()
    with pytest.raises(SpecError), _Watched():
        parse_expression("__import__('os').system('touch gradcheck-pwned')", {"x"})
