"""`GET status`: the version handshake the side panel makes before anything else."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import GradcheckHandler


class StatusHandler(GradcheckHandler):
    """Package version, torch version, devices and the worker pool."""

    @web.authenticated
    @authorized
    async def get(self):
        self.reply(await self.service.status())
