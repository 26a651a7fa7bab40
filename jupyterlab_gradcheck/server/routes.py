"""The route table: every REST route of the extension, in one place.

Paths are relative to `{base_url}gradcheck/`. The OpenAPI file (`openapi.json`) describes the
same routes, and a test keeps the two in step and checks that every handler method is
authenticated and authorized.
"""

from __future__ import annotations

import re

from .handlers.checks import ChecksHandler
from .handlers.ledger import ExpectationHandler, LedgerHandler, ToleranceHandler
from .handlers.ledger_blob import LedgerBlobHandler
from .handlers.openapi import OpenAPIHandler
from .handlers.reports import ExportHandler, VerifyHandler
from .handlers.status import StatusHandler

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
