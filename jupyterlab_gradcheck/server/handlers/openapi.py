"""`GET openapi.json`: the OpenAPI 3 description of these routes, shipped in the package."""

from __future__ import annotations

from importlib.resources import files

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import JSON, GradcheckHandler


class OpenAPIHandler(GradcheckHandler):
    """The shipped `openapi.json`, as it is."""

    @web.authenticated
    @authorized
    async def get(self):
        document = files("jupyterlab_gradcheck.server").joinpath("openapi.json").read_bytes()
        self.finish(document, set_content_type=JSON)
