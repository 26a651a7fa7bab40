"""What the route table answers, read from the handler classes."""

from __future__ import annotations

from jupyterlab_gradcheck.server.handlers import GradcheckHandler

HTTP_METHODS = ("get", "post", "put", "patch", "delete", "head", "options")


def implemented_methods(handler) -> list[str]:
    """The HTTP methods a route answers beyond those jupyter-server's APIHandler gives every
    API route (its unauthenticated OPTIONS for CORS preflight)."""
    return [m for m in HTTP_METHODS if getattr(handler, m) is not getattr(GradcheckHandler, m)]
