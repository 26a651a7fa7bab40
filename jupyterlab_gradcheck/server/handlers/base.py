"""The base of every handler: authentication resource, JSON in and out, errors in one shape."""

from __future__ import annotations

import json

from jupyter_server.base.handlers import APIHandler
from tornado.web import HTTPError

from ...core.errors import GradcheckError, SpecError
from ...core.i18n import accepted_language, language, translate_text, translate_tree
from ...core.jsonio import loads_strict
from ..errors import error_response
from ..service import SERVICE_SETTING

JSON = "application/json; charset=UTF-8"


class GradcheckHandler(APIHandler):
    """JSON API handler for the `gradcheck` authorization resource.

    Subclasses decorate each method with `@tornado.web.authenticated` and `@authorized`.
    """

    auth_resource = "gradcheck"

    @property
    def service(self):
        return self.settings[SERVICE_SETTING]

    @property
    def reader_language(self) -> str:
        """The language the request asks for in `Accept-Language` (the side panel sends
        JupyterLab's); English when it names none we have. Records and ledgers stay English:
        only what a person reads in the answer is in this language."""
        return accepted_language(self.request.headers.get("Accept-Language"))

    async def _execute(self, transforms, *args, **kwargs):
        """Handle the request in the reader's language, so what the core renders on the way
        (an export's headings) is in it; the ledger threads carry the language with them."""
        with language(self.reader_language):
            return await super()._execute(transforms, *args, **kwargs)

    def json_body(self) -> dict:
        """The request body as a JSON object (strict: no NaN, no duplicate keys)."""
        if not self.request.body:
            raise SpecError("the request body is empty: send a JSON object")
        body = loads_strict(self.request.body)
        if not isinstance(body, dict):
            raise SpecError("the request body must be a JSON object, got {kind}", kind=type(body).__name__)
        return body

    def query(self, name: str, default: str | None = None) -> str | None:
        """One query argument (the last if repeated), or `default`."""
        return self.get_query_argument(name, default)

    def check_xsrf_cookie(self) -> None:
        """jupyter-server's XSRF check, refusing in words that say what to send instead of
        "'_xsrf' argument missing" (a client without a token was never told it needs one)."""
        try:
            super().check_xsrf_cookie()
        except HTTPError as exc:
            if exc.status_code != 403:
                raise
            raise HTTPError(
                403,
                "this request carries no token and no XSRF token: send the server's token "
                "(Authorization: token ...) or, from a browser, the _xsrf cookie with an "
                "X-XSRFToken header",
            ) from None

    def reply(self, payload, status: int = 200) -> None:
        self.set_status(status)
        payload = self.shown(payload)
        self.finish(json.dumps(payload, allow_nan=False), set_content_type=JSON)

    def write_error(self, status_code: int, **kwargs) -> None:
        """Answer every error as `{"code", "message", "field"}` (errors.py decides the status)."""
        exc_info = kwargs.get("exc_info")
        error = exc_info[1] if exc_info else None
        if error is None:
            error = HTTPError(status_code)
        status, body, headers = error_response(error)
        status = getattr(error, "http_status", status)  # an error only one handler meets names its own
        lang = self.reader_language
        if isinstance(error, GradcheckError):
            body["message"] = error.localized(lang)
        body["message"] = translate_text(self._without_root(str(body["message"])), lang)
        self.set_status(status)
        for name, value in headers.items():
            self.set_header(name, value)
        self.finish(json.dumps(body), set_content_type=JSON)

    def shown(self, payload):
        """The answer as the reader sees it. A report (verify) is translated in place; a
        record or a ledger stays English, and an answer holding English texts that the
        catalog wrote gains `shown`: each such text and its translation, for the panel."""
        lang = self.reader_language
        if lang == "en" or not isinstance(payload, dict):
            return payload
        if getattr(self, "translate_in_place", False):
            return translate_tree(payload, lang)
        texts: dict[str, str] = {}
        _collect_shown(payload, lang, texts)
        return {**payload, "shown": texts} if texts else payload

    def _without_root(self, message: str) -> str:
        """A message naming paths relative to the server root, never its absolute folder."""
        service = self.settings.get(SERVICE_SETTING)
        if service is None:
            return message
        import os

        for root in {str(service.root).rstrip("/"), os.path.realpath(service.root).rstrip("/")}:
            if root:
                message = message.replace(root + "/", "").replace(root, ".")
        return message

    def log_exception(self, typ, value, tb) -> None:
        """Expected errors (bad input, busy, timeouts) in one line; the rest with a traceback."""
        if isinstance(value, GradcheckError):
            self.log.warning("%s %s -> %s: %s", self.request.method, self.request.path, value.code, value.message)
        else:
            super().log_exception(typ, value, tb)


def _collect_shown(value, lang: str, texts: dict) -> None:
    """Every string of `value` that the catalog translates, with its translation, into `texts`."""
    if isinstance(value, str):
        if value not in texts and " " in value:
            shown = translate_text(value, lang)
            if shown != value:
                texts[value] = shown
    elif isinstance(value, list):
        for item in value:
            _collect_shown(item, lang, texts)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_shown(item, lang, texts)
