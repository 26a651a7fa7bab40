"""The hostile-input corpus (tests/corpus/), loaded as cases every surface is tried with.

A case is what one client could send: the text of a check record (what `jupyter gradcheck
run -` reads and what `POST checks` carries as its `check`), the expected fragment of the
one-line error, and where a surface words the refusal differently, its own fragment.

- `expressions.txt`: hostile expressions, each tried as the `function` of a check and as the
  analytical gradient of one (two records per line); `shapes.txt`: expressions the parser
  accepts whose shapes cannot work with the declared inputs, tried the same way;
- `records.jsonl`: well-formed JSON that is not an acceptable record (wrong types for every
  field, unknown fields, huge shapes, ragged lists, NaN, booleans, nulls...);
- `bodies/`: text that is not acceptable JSON (malformed, duplicate keys, NaN constants,
  bytes that are not UTF-8), and `bodies/generated.jsonl`: recipes for bodies of 10 MB,
  built here rather than committed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
#: A file that a hostile expression would create if anything of it were ever executed.
MARKER = "gradcheck-pwned"
#: The inputs every expression case is evaluated over: x has two elements, y is a scalar.
INPUTS = {"x": [0.5, 2.0], "y": 3.0}
TEN_MB = 10 * 1024 * 1024

_ESCAPE = re.compile(r"\\(U[0-9a-fA-F]{8}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[ntr0\\])")
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


@dataclass
class Case:
    """One hostile input and the refusal it must meet."""

    name: str
    #: The check record as the client sends it: bytes (for raw bodies) or a JSON value.
    body: bytes
    #: Fragments of the expected one-line error; any one of them may appear (case ignored).
    error: list[str]
    #: Fragments where a surface words the refusal differently: "rest", "widget".
    override: dict = field(default_factory=dict)
    #: For the REST API: "wrapped" sends {"notebook", "check": <body>}; "raw" sends the body
    #: itself as the whole request.
    rest_body: str = "wrapped"
    #: The value of the record when the body is JSON (None for raw text).
    record: object = None
    #: Which field of the inline panel the widget test types an expression into.
    widget_field: str | None = None
    #: Raw text for the panel's inputs field (bodies only), when it applies.
    widget_inputs: bytes | None = None

    def expected(self, surface: str) -> list[str]:
        """The fragments that surface's message may contain."""
        return _fragments(self.override.get(surface, self.error))

    def matches(self, surface: str, message: str) -> bool:
        """Whether `message` carries one of the expected fragments (case ignored)."""
        return any(fragment.lower() in message.lower() for fragment in self.expected(surface))


def _fragments(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def decode_escapes(text: str) -> str:
    """`\\u200b` and friends decoded, so the corpus file shows every invisible character."""

    def one(match: re.Match) -> str:
        code = match.group(1)
        if code in _SIMPLE:
            return _SIMPLE[code]
        return chr(int(code[1:], 16))

    return _ESCAPE.sub(one, text)


def expression_cases(file_name: str = "expressions.txt") -> list[Case]:
    """Two records per hostile expression: as the function, and as x's analytical gradient."""
    cases = []
    lines = (CORPUS / file_name).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fragments, separator, expression = line.partition(" :: ")
        assert separator, f"{file_name} line {number} has no ' :: '"
        expression = decode_escapes(expression)
        as_function = {"function": expression, "inputs": INPUTS, "analytical_gradient": {"x": [1.0, 1.0], "y": 1.0}}
        as_gradient = {
            "function": "x * y",
            "inputs": INPUTS,
            "analytical_gradient": {"x": expression, "y": "x[0] + x[1]"},
        }
        for where, record in (("function", as_function), ("analytical_gradient", as_gradient)):
            cases.append(
                Case(
                    name=f"{file_name}:{number}:{where}",
                    body=_dumps(record),
                    error=fragments.split(" || "),
                    record=record,
                    widget_field=where,
                )
            )
    return cases


def _expand(value):
    """`{"$fill": [shape], "value": v}` becomes the nested list of that shape (huge shapes)."""
    if isinstance(value, dict):
        if "$fill" in value:
            shape, item = value["$fill"], value.get("value", 0.0)
            for size in reversed(shape):
                item = [item] * size if not isinstance(item, list) else [list(item) for _ in range(size)]
            return item
        if "$repeat" in value:
            return value["$repeat"] * value["times"]
        return {key: _expand(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item) for item in value]
    return value


def record_cases() -> list[Case]:
    """Well-formed JSON that is not an acceptable check record."""
    cases = []
    lines = (CORPUS / "records.jsonl").read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        spec = json.loads(line)
        record = _expand(spec["record"])
        cases.append(
            Case(
                name=f"records.jsonl: {spec['name']}",
                body=_dumps(record),
                error=_fragments(spec["error"]),
                override=spec.get("override", {}),
                record=record,
            )
        )
    return cases


def body_cases() -> list[Case]:
    """Text that is not acceptable JSON, from files and from the 10 MB recipes."""
    cases = []
    index = CORPUS / "bodies" / "index.jsonl"
    for number, line in enumerate(index.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        spec = json.loads(line)
        if "file" in spec:
            body = (CORPUS / "bodies" / spec["file"]).read_bytes()
            name = f"bodies/{spec['file']}"
        else:
            body = generate(spec["generate"])
            name = f"bodies/generated: {spec['generate']}"
        cases.append(
            Case(
                name=name,
                body=body,
                error=_fragments(spec["error"]),
                override=spec.get("override", {}),
                rest_body=spec.get("rest_body", "wrapped"),
                widget_inputs=body if spec.get("widget") == "inputs" else None,
            )
        )
    return cases


def generate(recipe: str) -> bytes:
    """A 10 MB body of the named kind (see bodies/index.jsonl)."""
    seed_head = b'{"function": "x*x", "analytical_gradient": 6, '
    if recipe == "long_function":
        text = b"x+" * (TEN_MB // 2) + b"x"
        return b'{"function": "' + text + b'", "x": 3, "analytical_gradient": 6}'
    if recipe == "long_origin":
        return seed_head + b'"x": 3, "origin": "' + b"a" * TEN_MB + b'"}'
    if recipe == "huge_list":
        count = TEN_MB // 2
        return seed_head + b'"x": [' + b",".join([b"0"] * count) + b"]}"
    if recipe == "deep_list":
        depth = TEN_MB // 2
        return seed_head + b'"x": ' + b"[" * depth + b"0" + b"]" * depth + b"}"
    if recipe == "long_integer":
        return seed_head + b'"x": ' + b"7" * TEN_MB + b"}"
    if recipe == "many_fields":
        fields = b", ".join(b'"k%07d": 0' % i for i in range(TEN_MB // 14))
        return seed_head + b'"x": 3, ' + fields + b"}"
    if recipe == "garbage":
        return bytes(range(256)) * (TEN_MB // 256)
    if recipe == "inputs_huge":  # what the inline panel's inputs field could be given
        count = TEN_MB // 2
        return b'{"x": [' + b",".join([b"0"] * count) + b"]}"
    if recipe == "many_records":
        record = b'{"function": "x*x", "x": 3, "analytical_gradient": 6}\n'
        count = TEN_MB // len(record)
        return record * count + b'{"function": "__import__(\'os\')", "x": 3, "analytical_gradient": 6}\n'
    raise ValueError(f"unknown recipe {recipe!r}")


_INFINITE = "\u0000infinite\u0000"


def _dumps(value) -> bytes:
    """JSON text of a record; an infinite float is written 1e400, which a JSON parser reads as
    infinity (the spelling `Infinity` is refused earlier, by the strict reader)."""

    def mark(item):
        if isinstance(item, float) and item in (float("inf"), float("-inf")):
            return ("-" if item < 0 else "") + _INFINITE
        if isinstance(item, dict):
            return {key: mark(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [mark(inner) for inner in item]
        return item

    text = json.dumps(mark(value), ensure_ascii=False)
    marker = json.dumps(_INFINITE)[1:-1]
    return text.replace(f'"-{marker}"', "-1e400").replace(f'"{marker}"', "1e400").encode("utf-8")


def all_cases() -> list[Case]:
    """Every case of the corpus, in file order."""
    return expression_cases() + expression_cases("shapes.txt") + record_cases() + body_cases()


def count_engine_entries(set_attribute=setattr) -> dict:
    """Wrap every way into the engine with a counter; a refused case must leave it at zero.

    `set_attribute` is `setattr` in a driver process, or pytest's `monkeypatch.setattr`.
    """
    from jupyterlab_gradcheck.core.check import engine
    from jupyterlab_gradcheck.core.expr import evaluator

    counts = {"run_check": 0, "compile_expression": 0}

    def counted(name, original):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)

        return wrapper

    run_check = counted("run_check", engine.run_check)
    compile_expression = counted("compile_expression", evaluator.compile_expression)
    for module, name, wrapper in (
        (engine, "run_check", run_check),
        (engine, "compile_expression", compile_expression),
        (evaluator, "compile_expression", compile_expression),
    ):
        set_attribute(module, name, wrapper)
    return counts
