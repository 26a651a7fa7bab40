"""The hostile-input corpus through the REST API of a real jupyter server.

One server (pytest-jupyter, token authentication, the extension with one real worker) takes
every case as `POST gradcheck/checks`: each must answer 400 with a `{"code", "message",
"field"}` body whose message is one line carrying the expected fragment, leave the notebook's
ledger byte for byte as it was, create no marker file and restart no worker. The server must
still run an honest check afterwards.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import corpus
import nbformat
import pytest
from figures import record

from support.server import one_worker_config

NOTEBOOK = "work/lab1.ipynb"
SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6}


@pytest.fixture
def jp_server_config():
    """The extension on, authentication required, one worker."""
    return one_worker_config()


def _request_body(case: corpus.Case) -> bytes:
    if case.rest_body == "raw":
        return case.body
    return b'{"notebook": "' + NOTEBOOK.encode() + b'", "check": ' + case.body + b"}"


async def _post(jp_fetch, body: bytes):
    response = await jp_fetch(
        "gradcheck",
        "checks",
        method="POST",
        body=body,
        raise_error=False,
        headers={"Content-Type": "application/json"},
        request_timeout=120,
    )
    return response.code, response.body.decode("utf-8", errors="replace")


def _problems(case: corpus.Case, status: int, text: str) -> list[str]:
    problems = []
    if status != 400:
        problems.append(f"HTTP {status}, not 400")
    try:
        body = json.loads(text)
    except ValueError:
        return problems + [f"the answer is not JSON: {text[:120]!r}"]
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        return problems + [f"no message in {text[:120]!r}"]
    if set(body) != {"code", "message", "field"}:
        problems.append(f"the error body has keys {sorted(body)}")
    if "\n" in message:
        problems.append("the message has more than one line")
    if not case.matches("rest", message):
        problems.append(f"message {message[:200]!r} lacks {case.expected('rest')}")
    return problems


async def test_every_corpus_case_is_refused_by_the_rest_api(jp_fetch, jp_root_dir):
    """Given a notebook whose ledger holds one honest check, when every corpus case is POSTed
    to gradcheck/checks, then each answers 400 with a one-line message naming the problem, the
    ledger is unchanged, no marker file appears, no worker was restarted, and an honest check
    still runs afterwards."""
    root = Path(jp_root_dir)
    (root / "work").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), str(root / NOTEBOOK))
    status, _ = await _post(jp_fetch, json.dumps({"notebook": NOTEBOOK, "check": SEED}).encode())
    assert status == 200
    ledger = root / "work" / "lab1.gradcheck.jsonl"
    honest = ledger.read_bytes()
    markers = [root / corpus.MARKER, root / "work" / corpus.MARKER, Path(os.getcwd()) / corpus.MARKER]

    failures = {}
    cases = corpus.all_cases()
    for case in cases:
        status, text = await _post(jp_fetch, _request_body(case))
        problems = _problems(case, status, text)
        if ledger.read_bytes() != honest:
            problems.append("the ledger changed")
            ledger.write_bytes(honest)  # so that the next case is judged on its own
        if any(marker.exists() for marker in markers):
            problems.append("a marker file appeared")
        if problems:
            failures[case.name] = problems

    record("corpus cases through the REST API (records, all refused)", f"{len(cases) - len(failures)} of {len(cases)}")
    response = await jp_fetch("gradcheck", "status", method="GET")
    pool = json.loads(response.body)["pool"]
    status, text = await _post(
        jp_fetch, json.dumps({"notebook": NOTEBOOK, "check": {**SEED, "x": 4, "analytical_gradient": 8}}).encode()
    )
    assert not failures, f"{len(failures)} of {len(cases)} cases not refused properly:\n" + "\n".join(
        f"{name}: {'; '.join(problems)}" for name, problems in failures.items()
    )
    assert pool["restarts"] == 0, pool
    assert status == 200 and json.loads(text)["record"]["passed"] is True
    assert ledger.read_bytes().startswith(honest)
