"""Authentication and XSRF on a server started with `allow_unauthenticated_access = False`."""

from __future__ import annotations

import json
import os
from http.cookies import SimpleCookie

from jupyter_server.utils import url_path_join

from jupyterlab_gradcheck.server.handlers import ROUTES
from support.routes import implemented_methods

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}


def _valid_body(path: str, notebook: str) -> dict | None:
    """A body each POST route would accept, so a 403 cannot come from a bad body."""
    return {
        "checks": {"notebook": notebook, "check": SEED},
        "tolerance": {"notebook": notebook, "check_id": "x", "rtol": 1e-6, "justification": "j"},
        "expectation": {"notebook": notebook, "check_id": "x", "analytical_gradient": 6, "justification": "j"},
        "verify": {"path": notebook},
    }.get(path)


async def test_every_route_answers_403_without_credentials(api, lab1, ledger_lines):
    """Given a server that requires authentication,
    when each route of the route table is called with no token and no cookie,
    then each answers 403 in the error shape, and nothing is written."""
    for path, handler in ROUTES:
        for method in implemented_methods(handler):
            body = _valid_body(path, lab1) if method == "post" else None
            status, _, payload = await api(method.upper(), path, body, headers={"Authorization": ""}, path=lab1)
            assert status == 403, f"{method.upper()} {path}: {status} {payload}"
            assert payload["code"] == "forbidden", payload
    assert ledger_lines() == []


async def test_a_cookie_post_needs_the_xsrf_token(http_server_client, jp_serverapp, jp_base_url, lab1, ledger_lines):
    """Given a browser-like client logged in with the login cookie (no token in requests),
    when it POSTs a check without the XSRF token,
    then the server answers 403 and appends nothing; with the _xsrf cookie and the
    X-XSRFToken header, as JupyterLab's ServerConnection sends them, the same POST runs."""
    token = jp_serverapp.identity_provider.token
    status_url = url_path_join(jp_base_url, "gradcheck", "status")
    checks_url = url_path_join(jp_base_url, "gradcheck", "checks")
    login = await http_server_client.fetch(f"{status_url}?token={token}")
    jar = SimpleCookie()
    for header in login.headers.get_list("Set-Cookie"):
        jar.load(header)
    login_cookies = [name for name in jar if name.startswith("username-")]
    assert login_cookies, f"no login cookie in {list(jar)}"
    cookie = "; ".join(f"{name}={jar[name].value}" for name in login_cookies)
    body = json.dumps({"notebook": lab1, "check": SEED})

    refused = await http_server_client.fetch(
        checks_url, method="POST", body=body, headers={"Cookie": cookie}, raise_error=False
    )

    assert refused.code == 403, refused.body
    assert json.loads(refused.body)["message"].startswith("this request carries no token and no XSRF token: send")
    assert ledger_lines() == []
    xsrf = "5a1f0c2e9d8b7a64"  # double-submit: any hex value, the same in cookie and header
    accepted = await http_server_client.fetch(
        checks_url,
        method="POST",
        body=body,
        raise_error=False,
        request_timeout=60,
        headers={"Cookie": f"{cookie}; _xsrf={xsrf}", "X-XSRFToken": xsrf},
    )
    assert accepted.code == 200, accepted.body
    assert [e["kind"] for e in ledger_lines()] == ["expectation", "observation"]


async def test_with_a_token_every_route_works_under_the_base_url(
    api, lab1, jp_base_url, jp_fetch, ledger_lines, jp_root_dir
):
    """Given a token and a server under a non-root base URL,
    when a client walks every route (status, a check, the ledger, a justified tolerance and
    expectation change, the three exports, verify, the OpenAPI document),
    then each answers 200 with what it promises, and the routes are not at the root."""
    assert jp_base_url.strip("/"), "this test needs a base URL other than /"
    root_response = await jp_fetch("..", "gradcheck", "status", raise_error=False)
    assert root_response.code == 404

    status, _, info = await api("GET", "status")
    assert status == 200
    assert info["version"] and info["torch"] and info["pool"]["size"] == 2
    assert any(d["id"] == "cpu" and d["available"] for d in info["devices"])

    status, _, ran = await api("POST", "checks", {"notebook": lab1, "check": SEED})
    assert status == 200 and ran["record"]["executed"] is True
    check_id = ran["record"]["id"]

    status, _, view = await api("GET", "ledger", path=lab1)
    assert status == 200
    assert [e["kind"] for e in view["entries"]] == ["note", "expectation", "observation"]  # genesis first
    assert view["entries"][0]["data"]["event"] == "genesis"
    assert view["checks"][check_id]["runs"] == 1
    assert view["chain"]["chain_ok"] is True
    assert view["binding"]["current"]["head"] == ran["ledger"]["head"]

    status, _, tolerance = await api(
        "POST",
        "tolerance",
        {
            "notebook": lab1,
            "check_id": check_id,
            "rtol": 1e-6,
            "justification": "float64 products of this size round to within 1e-6",
        },
    )
    assert status == 200 and tolerance["entry"]["kind"] == "tolerance_change"
    assert tolerance["entry"]["data"]["widened"] is True

    status, _, refused = await api("POST", "tolerance", {"notebook": lab1, "check_id": check_id, "rtol": 1e-5})
    assert (status, refused["code"]) == (400, "justification_required")

    status, _, changed = await api(
        "POST",
        "expectation",
        {
            "notebook": lab1,
            "check_id": check_id,
            "analytical_gradient": "2*x",
            "justification": "write the derivative, not its value",
        },
    )
    assert status == 200 and changed["entry"]["data"]["after_observation"] is True
    assert len(ledger_lines()) == 4

    for export_format, media_type, marker in (
        ("csv", "text/csv", check_id.split("@")[0]),
        ("json", "application/json", '"submissions"'),
        ("html", "text/html", "<html"),
    ):
        status, headers, text = await api("GET", "export", path=lab1, format=export_format)
        assert status == 200, text
        assert headers["Content-Type"].startswith(media_type)
        assert f"lab1.gradcheck.{export_format}" in headers["Content-Disposition"]
        assert marker in (text if isinstance(text, str) else json.dumps(text))

    status, _, verified = await api("POST", "verify", {"path": "work/lab1.gradcheck.jsonl"})
    assert status == 200
    assert verified["reports"][0]["chain_ok"] is True
    assert verified["reports"][0]["entries"] == 4
    # The report names files by API path: the server's own folders are not the client's business.
    assert verified["reports"][0]["ledger"] == "work/lab1.gradcheck.jsonl"
    assert os.path.realpath(jp_root_dir) not in json.dumps(verified)
    status, _, replayed = await api("POST", "verify", {"path": lab1, "replay": True})
    assert status == 200 and replayed["ok"] is True, replayed
    assert replayed["reports"][0]["replay"]["reproduced"] == 1  # the one observation, re-run in a worker

    status, _, document = await api("GET", "openapi.json")
    assert status == 200 and "/checks" in document["paths"]
