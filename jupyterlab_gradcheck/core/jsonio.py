"""Strict JSON reading shared by the CLI and the server.

Python's json module accepts NaN, Infinity and duplicate keys by default; a check record must
not, because a duplicated key silently drops one of the author's values.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import SpecError


def _refuse_constant(name: str) -> Any:
    raise SpecError("JSON constant {name} is not allowed: write a finite number", name=name)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise SpecError("duplicate key {key!r} in JSON object", key=key, field=key)
        for text in (key, value):
            if isinstance(text, str) and not encodable(text):
                raise SpecError(
                    "the JSON string {text!r} holds a lone surrogate, which is not Unicode text",
                    text=text[:40],
                    field=key,
                )
        result[key] = value
    return result


def encodable(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (a `\\ud800` escape decodes to a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def loads_strict(text: str | bytes) -> Any:
    """Parse one JSON document, refusing NaN/Infinity and duplicate keys with a SpecError."""
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_no_duplicates)
    except SpecError:
        raise
    except (ValueError, RecursionError) as exc:
        raise SpecError("malformed JSON: {exc}", exc=exc) from None


def loads_records(text: str) -> list:
    """Read one record, a JSON list of records, or JSON Lines (one record per line)."""
    stripped = text.strip()
    if not stripped:
        raise SpecError("no check record given: the input is empty")
    try:
        document = loads_strict(stripped)
    except SpecError as first_error:
        lines = [line for line in stripped.splitlines() if line.strip()]
        if len(lines) < 2:
            raise first_error
        records = []
        for number, line in enumerate(lines, start=1):
            try:
                records.append(loads_strict(line))
            except SpecError as exc:
                raise SpecError("line {number}: {text}", number=number, text=exc.message) from None
        return records
    if document == []:
        raise SpecError("no check record given: the list is empty")
    return document if isinstance(document, list) else [document]
