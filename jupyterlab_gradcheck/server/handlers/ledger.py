"""The ledger of a notebook: read it, and append justified tolerance and expectation changes."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import GradcheckHandler


class LedgerHandler(GradcheckHandler):
    """`GET ledger?path=NOTEBOOK`: entries, per-check histories, chain report, binding."""

    @web.authenticated
    @authorized
    async def get(self):
        self.reply(await self.service.ledger_view(self.query("path")))


class ToleranceHandler(GradcheckHandler):
    """`POST tolerance`: `{"notebook", "check_id", "rtol"?, "atol"?, "target"?, "justification"}`."""

    @web.authenticated
    @authorized
    async def post(self):
        body = self.json_body()
        self.reply(
            await self.service.change_tolerance(
                body.get("notebook"),
                body.get("check_id"),
                rtol=body.get("rtol"),
                atol=body.get("atol"),
                target=body.get("target", "tolerance"),
                justification=body.get("justification"),
            )
        )


class ExpectationHandler(GradcheckHandler):
    """`POST expectation`: `{"notebook", "check_id", "analytical_gradient", "justification"}`."""

    @web.authenticated
    @authorized
    async def post(self):
        body = self.json_body()
        self.reply(
            await self.service.change_expectation(
                body.get("notebook"),
                body.get("check_id"),
                body.get("analytical_gradient"),
                justification=body.get("justification"),
            )
        )
