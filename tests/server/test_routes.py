"""The route table: every route authenticated and authorized, and described in openapi.json."""

from __future__ import annotations

import json
from importlib.resources import files

from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyterlab_gradcheck.server.handlers import ROUTES
from support.routes import implemented_methods


def decorators_of(method) -> list:
    """The code objects of the wrappers around a method, outermost first."""
    codes = []
    while hasattr(method, "__wrapped__"):
        codes.append(method.__code__)
        method = method.__wrapped__
    return codes


def test_every_handler_method_is_authenticated_then_authorized():
    """Given the route table,
    when each handler method is unwrapped,
    then its outer wrapper is tornado's `authenticated` and the next is jupyter-server's
    `authorized` (on the `gradcheck` resource), so a new route without them fails here."""
    authenticated_code = web.authenticated(lambda self: None).__code__
    authorized_code = authorized(lambda self: None).__code__
    seen = 0
    for path, handler in ROUTES:
        assert handler.auth_resource == "gradcheck", path
        for name in implemented_methods(handler):
            wrappers = decorators_of(getattr(handler, name))
            assert wrappers[:2] == [authenticated_code, authorized_code], f"{name.upper()} {path}"
            seen += 1
    assert seen == 9  # 5 GET + 4 POST routes


def test_openapi_document_describes_exactly_the_route_table():
    """Given the shipped openapi.json,
    when its paths and operations are compared with the route table,
    then every route and method is described, and nothing else is."""
    document = json.loads(files("jupyterlab_gradcheck.server").joinpath("openapi.json").read_text())
    described = {(path, method) for path, operations in document["paths"].items() for method in operations}
    routed = {(f"/{path}", method) for path, handler in ROUTES for method in implemented_methods(handler)}

    assert document["openapi"].startswith("3.")
    assert described == routed
