"""`GET ledger/blob`: one page of the values of a tensor that a ledger keeps in its blob store.

A record value of more than 256 elements is stored by its SHA-256 beside the ledger
(core/ledger/blob_store.py); the ledger view sends only its shape, dtype and summary. The panel
asks for the values here when a person wants them, a page at a time. Only a blob that an entry
of that ledger names is served (the store folder is never listed or read by name alone), a blob
whose bytes no longer hash to its name is refused as changed, and the values are decoded
torch-free, so the server process stays without torch.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ...core.check.record.stored_values import SHA_PATTERN, PendingBlobs, stored_values_in
from ...core.errors import GradcheckError, LedgerError, SpecError
from ...core.ledger.blob_store import blob_problem, read_blob_values, store_dir_for
from ...core.ledger.line_format import LineError, read_entry
from ...core.ledger.store import LEDGER_SUFFIX, Ledger
from .. import paths
from ..errors import NotFound
from .base import GradcheckHandler

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
