"""No 5xx for any input: the generated hostile corpus (bad_bodies.py) against every route of a
real jupyter server.

Every request must be answered below 500. A refusal (4xx) carries the `{"code", "message",
"field"}` body with a one-line message that never shows the server's root folder, and leaves
the notebook's ledger byte for byte as it was; a request that turns out acceptable (a number
that is large but finite, an ignored extra key) may append its check, as any client's would.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import bad_bodies
import nbformat
import pytest
from figures import record

from support.server import one_worker_config

SEED = {"function": "x*x", "x": 3, "analytical_gradient": "2*x"}


@pytest.fixture
def jp_server_config():
    """The extension on, authentication required, one worker."""
    return one_worker_config()


def _problems(status: int, text: str, root: str) -> list[str]:
    if status >= 500:
        return [f"HTTP {status}: {text[:200]!r}"]
    if status < 400:
        return []
    try:
        body = json.loads(text)
    except ValueError:
        return [f"HTTP {status} answered with text that is not JSON: {text[:120]!r}"]
    problems = []
    if not isinstance(body, dict) or set(body) != {"code", "message", "field"}:
        return [f"HTTP {status} error body {text[:120]!r}"]
    if "\n" in body["message"] or not body["message"]:
        problems.append("the message is empty or has more than one line")
    if root in body["message"]:
        problems.append(f"the message shows the server root: {body['message'][:200]!r}")
    return problems


async def test_no_request_of_the_corpus_gets_a_5xx(jp_fetch, jp_root_dir):
    """Given a notebook whose ledger holds one honest check,
    when every request of the generated corpus (over 1,000, on every route) is sent,
    then none is answered 5xx, every refusal is a one-line error body without the server's
    root, a refused request leaves the ledger as it was, and an honest check still runs."""
    root = Path(jp_root_dir)
    (root / "work").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), str(root / bad_bodies.NOTEBOOK))

    async def send(method, route, query, body):
        response = await jp_fetch(
            "gradcheck",
            route,
            method=method,
            params=query or None,
            body=body,
            headers={"Content-Type": "application/json"},
            raise_error=False,
            request_timeout=120,
        )
        return response.code, response.body.decode("utf-8", errors="replace")

    status, _ = await send("POST", "checks", {}, json.dumps({"notebook": bad_bodies.NOTEBOOK, "check": SEED}).encode())
    assert status == 200
    ledger = root / "work" / "lab1.gradcheck.jsonl"
    requests = bad_bodies.requests()
    statuses, failures = Counter(), {}

    for name, method, route, query, body in requests:
        before = ledger.read_bytes()
        status, text = await send(method, route, query, body)
        statuses[status] += 1
        problems = _problems(status, text, str(root))
        if status >= 400 and ledger.read_bytes() != before:
            problems.append("a refused request changed the ledger")
        if problems:
            failures[name] = problems

    record(
        "generated hostile requests, every route (no 5xx)",
        f"{len(requests) - len(failures)} of {len(requests)}; statuses {dict(sorted(statuses.items()))}",
    )
    assert len(requests) >= 1000
    assert not failures, f"{len(failures)} of {len(requests)} requests answered badly:\n" + "\n".join(
        f"{name}: {'; '.join(problems)}" for name, problems in list(failures.items())[:40]
    )
    status, text = await send(
        "POST", "checks", {}, json.dumps({"notebook": bad_bodies.NOTEBOOK, "check": {**SEED, "x": 4}}).encode()
    )
    assert status == 200 and json.loads(text)["record"]["passed"] is True
