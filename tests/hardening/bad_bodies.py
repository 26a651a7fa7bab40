"""A generated corpus of hostile requests for every route: what one client could send.

Random bytes, deep nesting, numbers beyond the float range, NaN, 10 MB bodies, unknown keys,
every field of every route with every wrong type, odd encodings and long or escaping paths.
Each request is `(name, method, route, query, body)`; the generator is seeded, so every run
sends the same requests and a failure names one that can be sent again.
"""

from __future__ import annotations

import json
import random

#: The notebook every request names when it names a valid one (its ledger must not change).
NOTEBOOK = "work/lab1.ipynb"
#: Values of the wrong type for any field.
WRONG_TYPES = [None, True, 0, -1, 1.5, "", "x", [], {}, [[]], "\u0000", "a" * 5000, {"$ref": "#"}]
#: Numbers written as JSON text: beyond float range, denormal, integers of 20 to 5,000 digits.
NUMBERS = [
    "1" * 20,
    "9" * 310,
    "-" + "9" * 320,
    "1" * 400,
    "7" * 5000,
    "1e308",
    "1e309",
    "-1e999",
    "1e-400",
    "4.9e-324",
    "123456789012345678901234567890.5",
    "-0",
    "1E+99999",
]
#: Non-finite constants some JSON libraries accept.
NON_FINITE = ["NaN", "Infinity", "-Infinity", "nan", "inf"]
#: Paths that must be refused, or found not to exist, without a 5xx or the root in a message.
PATHS = [
    "a" * 256 + ".ipynb",
    "work/" + "b" * 1000 + ".ipynb",
    "/".join(["d"] * 2500) + ".ipynb",
    "../" * 50 + "etc/passwd",
    "/etc/passwd",
    "~/lab.ipynb",
    "work/\u0000lab.ipynb",
    "%2e%2e/lab.ipynb",
    "work\\..\\..\\lab.ipynb",
    "\U0001f600" * 100 + ".ipynb",
    "a/" * 3000,
    "",
    ".",
    "work/",
    "//",
    "work/lab1.ipynb/../../../x.ipynb",
    "con.ipynb",
    " work/lab1.ipynb",
    "work/lab1.ipynb\n",
]
#: Every POST route's fields, each with a value that names nothing real.
ROUTES = {
    "checks": {
        "notebook": NOTEBOOK,
        "check": {"function": "x*x", "x": 3, "analytical_gradient": "2*x", "tolerance": {"rtol": 1e-7, "atol": 0}},
    },
    "tolerance": {
        "notebook": NOTEBOOK,
        "check_id": "no-such-check",
        "rtol": 1e-6,
        "atol": 0,
        "target": "tolerance",
        "justification": "why",
    },
    "expectation": {
        "notebook": NOTEBOOK,
        "check_id": "no-such-check",
        "analytical_gradient": "2*x",
        "justification": "why",
    },
    "verify": {"path": "work/no-such.ipynb", "replay": False, "deep": False},
}
#: The field that names a path on each POST route.
PATH_FIELD = {"checks": "notebook", "tolerance": "notebook", "expectation": "notebook", "verify": "path"}
TEN_MB = 10 * 1024 * 1024


def _dumps(value) -> bytes:
    return json.dumps(value).encode()


def _with_number(route: str, text: str) -> list[bytes]:
    """The route's base body with `text` (raw JSON number text) in each numeric-capable field."""
    bodies = []
    for field in ROUTES[route]:
        marker = "\u0001marker\u0001"
        body = dict(ROUTES[route], **{field: marker})
        bodies.append(_dumps(body).replace(json.dumps(marker).encode(), text.encode()))
    if route == "checks":
        for inner in ("x", "analytical_gradient"):
            marker = "\u0001inner\u0001"
            check = dict(ROUTES["checks"]["check"], **{inner: marker})
            bodies.append(
                _dumps({"notebook": NOTEBOOK, "check": check}).replace(json.dumps(marker).encode(), text.encode())
            )
        check = dict(ROUTES["checks"]["check"], tolerance={"rtol": "\u0001t\u0001", "atol": 0})
        bodies.append(_dumps({"notebook": NOTEBOOK, "check": check}).replace(b'"\\u0001t\\u0001"', text.encode()))
    return bodies


def requests() -> list[tuple[str, str, str, dict, bytes | None]]:
    """Every hostile request of the corpus, in a fixed order."""
    rng = random.Random(20261203)
    out = []

    def post(name, route, body):
        out.append((f"{route}: {name}", "POST", route, {}, body))

    for route in ROUTES:
        for i in range(40):
            post(f"random bytes #{i}", route, rng.randbytes(rng.randint(1, 2000)))
        for i in range(10):
            post(
                f"random printable #{i}",
                route,
                "".join(
                    rng.choice('{}[]":,0123456789.eE+-truefalsnul \\/x') for _ in range(rng.randint(1, 400))
                ).encode(),
            )
        for depth in (100, 1000, 10_000, 100_000):
            post(f"array nesting {depth}", route, b"[" * depth + b"]" * depth)
            post(f"object nesting {depth}", route, b'{"a":' * depth + b"1" + b"}" * depth)
            post(f"nesting {depth}, unclosed", route, b'{"notebook":' + b"[" * depth)
        for text in NUMBERS + NON_FINITE:
            for i, body in enumerate(_with_number(route, text)):
                post(f"number {text[:12]}... at field {i}", route, body)
        post("10 MB of spaces", route, b" " * TEN_MB + _dumps(ROUTES[route]))
        post("10 MB string value", route, _dumps(dict(ROUTES[route], justification="j" * TEN_MB)))
        for key in ("zzz", "__proto__", "constructor", "", "\u0000", "notebook\u200b"):
            post(f"unknown key {key!r}", route, _dumps(dict(ROUTES[route], **{key: 1})))
        for field in ROUTES[route]:
            for i, wrong in enumerate(WRONG_TYPES):
                post(f"{field} = wrong type #{i}", route, _dumps(dict(ROUTES[route], **{field: wrong})))
        if route == "checks":
            for field in ROUTES["checks"]["check"]:
                for i, wrong in enumerate(WRONG_TYPES):
                    check = dict(ROUTES["checks"]["check"], **{field: wrong})
                    post(f"check.{field} = wrong type #{i}", route, _dumps({"notebook": NOTEBOOK, "check": check}))
        text = json.dumps(ROUTES[route])
        for encoding in ("utf-16", "utf-16-be", "utf-32", "utf-8-sig"):
            post(f"encoded {encoding}", route, text.encode(encoding))
        post("latin-1 text", route, text.replace("why", "pourquoi é").encode("latin-1"))
        post("overlong utf-8", route, text.encode().replace(b"/", b"\xc0\xaf"))
        post("lone surrogate escape", route, text.replace("why", "\\ud800").encode())
        post("truncated utf-8", route, text.encode() + b"\xe2\x82")
        for i, path in enumerate(PATHS):
            post(f"path #{i}", route, _dumps(dict(ROUTES[route], **{PATH_FIELD[route]: path})))
        post("empty body", route, b"")
        post("JSON array", route, b"[]")
        post("JSON lines", route, _dumps(ROUTES[route]) + b"\n" + _dumps(ROUTES[route]))
        post("duplicate keys", route, b'{"notebook": "a", "notebook": "b", "path": "a", "path": "b"}')
    for route, extra in (("ledger", {}), ("export", {"format": "csv"})):
        for i, path in enumerate(PATHS):
            out.append((f"{route}: path #{i}", "GET", route, {"path": path, **extra}, None))
        for text in NUMBERS:
            out.append((f"{route}: path {text[:12]}...", "GET", route, {"path": text, **extra}, None))
        out.append((f"{route}: no path", "GET", route, dict(extra), None))
        for i in range(10):
            noise = "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 300)))
            out.append((f"{route}: random path #{i}", "GET", route, {"path": noise, **extra}, None))
    for value in ("xml", "", "CSV ", "../csv", "j" * 5000):
        out.append((f"export: format {value[:8]!r}", "GET", "export", {"path": NOTEBOOK, "format": value}, None))
    return out
