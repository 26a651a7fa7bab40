"""The REST handlers and their route table: each handler validates, calls the service, and answers JSON."""

from __future__ import annotations

import asyncio
import json
import re
from importlib.resources import files

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.web import HTTPError

from ..core.errors import GradcheckError, LedgerError, SpecError
from ..core.i18n import accepted_language, language, translate_text, translate_tree
from ..core.jsonio import loads_strict
from ..core.ledger.store import LEDGER_SUFFIX, Ledger, LineError, read_entry
from ..core.values.blobs import blob_problem, read_blob_values, store_dir_for
from ..core.values.form import SHA_PATTERN, PendingBlobs, stored_values_in
from . import service as paths
from .errors import NotFound, error_response
from .service import SERVICE_SETTING

# --------------------   init


# -------------------- base
# The base of every handler: authentication resource, JSON in and out, errors in one shape.

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


# -------------------- status
# `GET status`: the version handshake the side panel makes before anything else.


class StatusHandler(GradcheckHandler):
    """Package version, torch version, devices and the worker pool."""

    @web.authenticated
    @authorized
    async def get(self):
        self.reply(await self.service.status())


# -------------------- checks
# `POST checks`: run one check in a worker, with its expectation and observation in the ledger.


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


# -------------------- ledger
# The ledger of a notebook: read it, and append justified tolerance and expectation changes.


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


# -------------------- ledger blob
# `GET ledger/blob`: one page of the values of a tensor that a ledger keeps in its blob store.
#
# A record value of more than 256 elements is stored by its SHA-256 beside the ledger
# (core/values/blobs.py); the ledger view sends only its shape, dtype and summary. The panel
# asks for the values here when a person wants them, a page at a time. Only a blob that an entry
# of that ledger names is served (the store folder is never listed or read by name alone), a blob
# whose bytes no longer hash to its name is refused as changed, and the values are decoded
# torch-free, so the server process stays without torch.

#: The most values one page holds: a 10^7-element tensor is read a page at a time, and a page
#: of float64 values stays under about 250 KB of JSON.
MAX_PAGE = 10_000

#: Values in a page when the request names no limit (what the panel's "Show values" asks for).
DEFAULT_PAGE = 1_000


#: No pending bytes: a page is read from the store on disk, what the ledger's reader sees, never
#: from blobs this process still holds for an append.
_STORE_ONLY = PendingBlobs(budget=0)


class BlobChanged(GradcheckError):
    """A referenced blob whose bytes no longer hash to its name: edited, or another file copied in."""

    code = "blob_changed"
    http_status = 409


class LedgerBlobHandler(GradcheckHandler):
    """`GET ledger/blob?path=NOTEBOOK_OR_LEDGER&sha=SHA256&offset=0&limit=1000`."""

    @web.authenticated
    @authorized
    async def get(self):
        sha = self.query("sha")
        if sha is None or not SHA_PATTERN.fullmatch(sha):
            raise SpecError("sha must be 64 lowercase hexadecimal digits", field="sha")
        offset = _count(self.query("offset"), "offset", 0, minimum=0)
        limit = _count(self.query("limit"), "limit", DEFAULT_PAGE, minimum=1, maximum=MAX_PAGE)
        ledger_path = self._ledger_path(self.query("path"))
        ledgers = self.service.ledgers
        self.reply(await ledgers.call(ledger_path, _read_page, ledger_path, sha, offset, limit))

    def _ledger_path(self, api_path):
        """The ledger a notebook or ledger API path names, inside the root."""
        root = self.service.root
        if isinstance(api_path, str) and api_path.endswith(LEDGER_SUFFIX):
            return paths.resolve(root, api_path, field="path")
        notebook = paths.resolve(root, api_path, field="path", suffix=".ipynb")
        ledger = Ledger.for_notebook(notebook, bind=False).path
        paths.ensure_inside(root, ledger, field="path", shown=paths.to_api_path(root, ledger))
        if not ledger.is_file():
            raise NotFound("{name} {path!r} has no ledger yet", name="path", path=api_path, field="path")
        return ledger


def _count(text, name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
    """A whole-number query argument within bounds; SpecError naming it otherwise."""
    if text is None:
        return default
    if text.isdigit() and len(text) <= 12 and minimum <= int(text) and (maximum is None or int(text) <= maximum):
        return int(text)
    if maximum is None:
        raise SpecError(
            "{name} must be a whole number of at least {minimum}, got {value!r}",
            name=name,
            minimum=minimum,
            value=text[:20],
            field=name,
        )
    raise SpecError(
        "{name} must be a whole number from {minimum} to {maximum}, got {value!r}",
        name=name,
        minimum=minimum,
        maximum=maximum,
        value=text[:20],
        field=name,
    )


def _read_page(ledger_path, sha: str, offset: int, limit: int) -> dict:
    """The page, after checking that an entry names `sha` and that its blob is whole."""
    dtype = _referenced_dtype(Ledger(ledger_path), sha)
    if dtype is None:
        raise NotFound("no entry of this ledger names the blob {sha}", sha=sha[:16], field="sha")
    store = store_dir_for(ledger_path)
    try:
        page = read_blob_values(store, sha, offset=offset, limit=limit, dtype=dtype, pending=_STORE_ONLY)
    except LedgerError:  # the blob's bytes are hashed once, by the read; the problem named after
        problem = blob_problem(store, sha)
        if problem == "missing":
            raise NotFound(
                "the blob {sha} is missing from {store}", sha=sha[:16], store=store.name, field="sha"
            ) from None
        if problem == "changed":
            raise BlobChanged(
                "the blob {sha} is changed: its bytes no longer hash to its name", sha=sha[:16], field="sha"
            ) from None
        raise
    return {"sha256": sha, **page}


def _referenced_dtype(ledger: Ledger, sha: str) -> str | None:
    """The dtype that an entry's stored value of `sha` names (complex blobs read as pairs), or
    None when no entry names it. Lines without the sha's text are skipped undecoded."""
    needle = sha.encode("ascii")
    for _number, raw, complete in ledger.iter_raw_lines():
        if not complete or needle not in raw:
            continue
        try:
            data = read_entry(raw).get("data")
        except LineError:
            continue
        for value in stored_values_in(data):
            if value["stored"].get("sha256") == sha:
                return str(value["stored"].get("dtype"))
    return None


# -------------------- reports
# Grading: export a notebook's (or a folder's) ledgers, and verify them as the CLI does.


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


# -------------------- openapi
# `GET openapi.json`: the OpenAPI 3 description of these routes, shipped in the package.


class OpenAPIHandler(GradcheckHandler):
    """The shipped `openapi.json`, as it is."""

    @web.authenticated
    @authorized
    async def get(self):
        document = files("jupyterlab_gradcheck.server").joinpath("openapi.json").read_bytes()
        self.finish(document, set_content_type=JSON)


# -------------------- routes
# The route table: every REST route of the extension, in one place.
#
# Paths are relative to `{base_url}gradcheck/`. The OpenAPI file (`openapi.json`) describes the
# same routes, and a test keeps the two in step and checks that every handler method is
# authenticated and authorized.

PREFIX = "gradcheck"

ROUTES = (
    ("status", StatusHandler),
    ("checks", ChecksHandler),
    ("ledger", LedgerHandler),
    ("ledger/blob", LedgerBlobHandler),
    ("tolerance", ToleranceHandler),
    ("expectation", ExpectationHandler),
    ("export", ExportHandler),
    ("verify", VerifyHandler),
    ("openapi.json", OpenAPIHandler),
)


def url_patterns() -> list[tuple[str, type]]:
    """Tornado patterns, before jupyter-server prefixes them with the base URL."""
    return [(f"/{PREFIX}/{re.escape(path)}", handler) for path, handler in ROUTES]
