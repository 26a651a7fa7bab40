"""The witness's HTTP surface: `POST heads`, `GET log`, `GET public-key`.

Standalone, a client proves itself with the shared token (`GRADCHECK_WITNESS_TOKEN`, sent as
`Authorization: token ...`) and names its user in the report. As a JupyterHub managed service
(`JUPYTERHUB_API_TOKEN` and `JUPYTERHUB_SERVICE_PREFIX` set by the hub), a client sends its own
hub token and the witness takes the user from the hub, never from the report; only the
shared token (the instructor's) may read the whole log. The log and its signing are the core's
(core.ledger.witness_log); this module only speaks HTTP.
"""

from __future__ import annotations

import hmac
import json
import os

from tornado import web

from ..core.errors import GradcheckError
from ..core.ledger.witness_log import WitnessLog, read_log

MAX_BODY = 64 * 1024


class _Base(web.RequestHandler):
    """Token checks and JSON answers shared by the witness's routes."""

    def initialize(self, log: WitnessLog, token: str, hub_auth=None):
        self.log, self.token, self.hub_auth = log, token, hub_auth

    def check_xsrf_cookie(self) -> None:  # token-authenticated API: no cookies are accepted
        return None

    def _presented(self) -> str:
        header = self.request.headers.get("Authorization", "")
        return header[6:].strip() if header.lower().startswith("token ") else ""

    def is_instructor(self) -> bool:
        presented = self._presented()
        return bool(self.token) and bool(presented) and hmac.compare_digest(presented, self.token)

    async def hub_user(self) -> str | None:
        """The hub user who owns the presented token, when the witness runs under a hub.

        Asked without blocking the event loop (one slow hub answer must not hold up every other
        report). Only a user's token names a user: a service's token (the hub also answers for
        those, with `kind: service`) names no student, so it is refused like an unknown one.
        """
        if self.hub_auth is None or not self._presented():
            return None
        model = await self.hub_auth.user_for_token(self._presented(), sync=False)
        if not isinstance(model, dict) or model.get("kind", "user") != "user":
            return None
        return model.get("name") or None

    def answer(self, payload, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(payload))

    def refuse(self, status: int, code: str, message: str) -> None:
        self.answer({"code": code, "message": message}, status)


class HeadsHandler(_Base):
    """`POST heads`: record a reported head; answers the signed receipt."""

    async def post(self):
        # The instructor's shared token is checked first: it is never sent on to the hub.
        user = None if self.is_instructor() else await self.hub_user()
        if user is None and not self.is_instructor():
            return self.refuse(403, "forbidden", "a witness token (Authorization: token ...) is required")
        if len(self.request.body) > MAX_BODY:
            return self.refuse(400, "bad_input", f"the report is over {MAX_BODY} bytes")
        try:
            report = json.loads(self.request.body.decode("utf-8"))
            if user is not None and isinstance(report, dict):
                report["user"] = user  # the hub's word, not the client's
            receipt = self.log.append(report)
        except ValueError as exc:  # bad JSON, bad UTF-8, or a SpecError naming the field
            message = exc.message if isinstance(exc, GradcheckError) else f"the body is not JSON: {exc}"
            return self.refuse(400, "bad_input", message)
        self.answer({"receipt": receipt, "public_key": self.log.public_key})


class LogHandler(_Base):
    """`GET log`: every receipt (instructor's token), or a hub user's own receipts."""

    async def get(self):
        receipts = read_log(self.log.path)
        if self.is_instructor():
            return self.answer({"receipts": receipts, "public_key": self.log.public_key})
        user = await self.hub_user()
        if user is None:
            return self.refuse(403, "forbidden", "a witness token (Authorization: token ...) is required")
        self.answer({"receipts": [r for r in receipts if r.get("user") == user], "public_key": self.log.public_key})


class PublicKeyHandler(_Base):
    """`GET public-key`: the key that signs every receipt (public, no token needed)."""

    def get(self):
        self.answer({"public_key": self.log.public_key})


def make_app(log_path: str, token: str, *, prefix: str = "/", hub_auth=None) -> web.Application:
    """The witness application over the log at `log_path`."""
    log = WitnessLog(log_path)
    options = {"log": log, "token": token, "hub_auth": hub_auth}
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    return web.Application(
        [
            (prefix + "heads", HeadsHandler, options),
            (prefix + "log", LogHandler, options),
            (prefix + "public-key", PublicKeyHandler, options),
        ]
    )


def hub_auth_from_environment():
    """HubAuth for the service's own hub when it runs as a JupyterHub managed service, else None."""
    if not os.environ.get("JUPYTERHUB_API_TOKEN") or not os.environ.get("JUPYTERHUB_SERVICE_PREFIX"):
        return None
    from jupyterhub.services.auth import HubAuth

    return HubAuth(api_token=os.environ["JUPYTERHUB_API_TOKEN"], cache_max_age=60)
