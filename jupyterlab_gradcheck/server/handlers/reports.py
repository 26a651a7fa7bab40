"""Grading: export a notebook's (or a folder's) ledgers, and verify them as the CLI does."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import GradcheckHandler


class ExportHandler(GradcheckHandler):
    """`GET export?path=&format=csv|json|html`: the export file, as a download."""

    @web.authenticated
    @authorized
    async def get(self):
        text, media_type, filename = await self.service.export(self.query("path"), self.query("format", "json"))
        self.set_header("Content-Disposition", f'attachment; filename="{filename}"')
        self.finish(text, set_content_type=media_type)


class VerifyHandler(GradcheckHandler):
    """`POST verify`: `{"path", "replay", "deep"}`; the report of `jupyter gradcheck verify --json`,
    its lines in the reader's language (a report is read, not kept)."""

    translate_in_place = True

    @web.authenticated
    @authorized
    async def post(self):
        body = self.json_body()
        self.reply(await self.service.verify(body.get("path"), body.get("replay", False), body.get("deep", False)))
