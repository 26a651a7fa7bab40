"""`POST checks`: run one check in a worker, with its expectation and observation in the ledger."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import GradcheckHandler


class ChecksHandler(GradcheckHandler):
    """Body `{"notebook", "check"}`; answers `{"record", "ledger"}`."""

    @web.authenticated
    @authorized
    async def post(self):
        body = self.json_body()
        self.reply(await self.service.run_check(body.get("notebook"), body.get("check")))
