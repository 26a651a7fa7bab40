"""`jupyter gradcheck witness --log W.jsonl --port N [--ip IP]`: run the outside witness.

It keeps a hash-chained log of every ledger head its clients report and signs each receipt
with its own key (`W.jsonl.key`, created on first start). Clients report to it when
`GRADCHECK_WITNESS_URL` and `GRADCHECK_WITNESS_TOKEN` are set; the witness reads the same
`GRADCHECK_WITNESS_TOKEN`. Under JupyterHub it runs as a managed service (see docs/ledger.md).
"""

from __future__ import annotations

import os

from ..core.errors import SpecError
from ..core.i18n import _
from .common import EXIT_OK


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "witness",
        help=_("run the witness service that signs every ledger head it is told of"),
        description=_(
            "Run the witness: a small HTTP service (POST heads, GET log, GET public-key) "
            "whose signed log lets a grader catch a rewritten, truncated, swapped or deleted ledger."
        ),
    )
    parser.add_argument("--log", required=True, help=_("the witness's log file (JSON Lines); its key is LOG.key"))
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=_("port to listen on (default: from JUPYTERHUB_SERVICE_URL under a hub, else 8765)"),
    )
    parser.add_argument("--ip", default="127.0.0.1", help=_("address to listen on (default 127.0.0.1)"))
    parser.set_defaults(handler=run)


def run(args) -> int:
    from urllib.parse import urlparse

    import tornado.ioloop

    from ..witness.app import hub_auth_from_environment, make_app

    token = os.environ.get("GRADCHECK_WITNESS_TOKEN", "")
    hub_auth = hub_auth_from_environment()
    if not token and hub_auth is None:
        raise SpecError("set GRADCHECK_WITNESS_TOKEN (the shared token clients send), or run under JupyterHub")
    port = args.port
    service_url = os.environ.get("JUPYTERHUB_SERVICE_URL")
    if port is None:
        port = urlparse(service_url).port if service_url else 8765
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    app = make_app(args.log, token, prefix=prefix, hub_auth=hub_auth)
    app.listen(port, address=args.ip)
    print(
        _("witness listening on {url} (log {log})").format(url=f"http://{args.ip}:{port}{prefix}", log=args.log),
        flush=True,
    )
    tornado.ioloop.IOLoop.current().start()
    return EXIT_OK
