"""A real jupyter-server with the extension enabled, authentication required, two workers.

pytest-jupyter starts one server per test in this process; its base URL (`/a%40b/`) is not
the root, so every test also runs under a base-URL prefix.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import nbformat
import pytest

from support.server import server_config

# pytest-jupyter's server plugin is registered in the top-level tests/conftest.py:
# pytest only honours pytest_plugins there.


@pytest.fixture
def jp_server_config():
    return server_config()


@pytest.fixture
def lab1(jp_root_dir) -> str:
    """An empty notebook at work/lab1.ipynb under the server root; returns its API path."""
    notebook = Path(jp_root_dir) / "work" / "lab1.ipynb"
    notebook.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(notebook))
    return "work/lab1.ipynb"


@pytest.fixture
def api(jp_fetch):
    """`await api(method, route, body=None, **query)` -> (status, headers, JSON or text)."""

    async def call(method: str, route: str, body=None, headers=None, **query):
        response = await jp_fetch(
            "gradcheck",
            route,
            method=method,
            params=query or None,
            headers=headers,
            body=None if body is None else json.dumps(body),
            raise_error=False,
            request_timeout=60,
        )
        text = response.body.decode("utf-8") if response.body else ""
        kind = response.headers.get("Content-Type", "")
        payload = json.loads(text) if kind.startswith("application/json") and text else text
        return response.code, response.headers, payload

    return call


@pytest.fixture
def ledger_lines(jp_root_dir):
    """The decoded entries the checks wrote to a ledger file under the root, after its genesis
    entry (empty when the file does not exist; fails when it does not open with a genesis)."""

    def read(api_path: str = "work/lab1.gradcheck.jsonl") -> list[dict]:
        path = Path(jp_root_dir) / api_path
        if not path.exists():
            return []
        genesis, *entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert (genesis["seq"], genesis["data"]["event"]) == (0, "genesis"), genesis
        return entries

    return read


@pytest.fixture
def wait_pool(api):
    """`await wait_pool(predicate, what)`: poll GET status until `predicate(pool)` holds."""

    async def wait(predicate, what: str, limit: float = 30.0) -> dict:
        deadline = time.monotonic() + limit
        while True:
            _, _, status = await api("GET", "status")
            if predicate(status["pool"]):
                return status
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; pool: {status['pool']}")
            await asyncio.sleep(0.05)

    return wait


@pytest.fixture
def notebook_kernel(jp_fetch, jp_serverapp):
    """`session, run = await notebook_kernel("work/lab1.ipynb")`: a real kernel started by the
    server through the sessions API (as JupyterLab starts one for an open notebook), and
    `await run(code)` -> (status, outputs) executing code in it (outputs: the iopub contents of
    its displays, results and errors)."""
    clients = []

    async def start(api_path: str):
        body = {"path": api_path, "type": "notebook", "name": Path(api_path).name, "kernel": {"name": "python3"}}
        answer = await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
        session = json.loads(answer.body)
        client = jp_serverapp.kernel_manager.get_kernel(session["kernel"]["id"]).client()
        client.start_channels()
        clients.append(client)
        await client.wait_for_ready(timeout=120)

        async def run(code: str) -> tuple[str, list[dict]]:
            outputs = []

            def keep(message):
                if message["header"]["msg_type"] in ("display_data", "execute_result", "error", "stream"):
                    outputs.append(message["content"])

            reply = await client.execute_interactive(code, timeout=180, output_hook=keep)
            return reply["content"]["status"], outputs

        return session, run

    yield start
    for client in clients:
        client.stop_channels()


@pytest.fixture
def rename(jp_fetch):
    """`await rename(old, new)`: the rename JupyterLab makes (contents, then the session's path)."""

    async def call(old: str, new: str, session: dict | None = None) -> None:
        await jp_fetch("api", "contents", old, method="PATCH", body=json.dumps({"path": new}))
        if session is not None:
            body = {"path": new, "name": Path(new).name}
            await jp_fetch("api", "sessions", session["id"], method="PATCH", body=json.dumps(body))

    return call
