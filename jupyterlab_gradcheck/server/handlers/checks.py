"""`POST checks`: run one check in a worker, with its expectation and observation in the ledger."""

from __future__ import annotations

import asyncio

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import GradcheckHandler


class ChecksHandler(GradcheckHandler):
    """Body `{"notebook", "check"}`; answers `{"record", "ledger"}`.

    A client that closes its connection while its check still waits for a worker cancels it
    (nothing is written); once the check has started it runs to its end and is recorded.
    """

    def initialize(self, **kwargs):
        super().initialize(**kwargs)
        self._client_gone = asyncio.Event()

    def on_connection_close(self) -> None:
        self._client_gone.set()
        super().on_connection_close()

    @web.authenticated
    @authorized
    async def post(self):
        body = self.json_body()
        self.reply(await self.service.run_check(body.get("notebook"), body.get("check"), self._client_gone))
