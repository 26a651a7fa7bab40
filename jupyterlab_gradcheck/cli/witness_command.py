"""`jupyter gradcheck witness --log W.jsonl --port N [--ip IP] --students S.json`: run the outside witness.

It keeps a hash-chained log of every ledger head its clients report and signs each receipt
with its own key (`W.jsonl.key`, created on first start readable by the witness's OS user
alone; its public half in `W.jsonl.pub`). Standalone, each student reports with a token of
their own, listed in the class list S.json (token -> user name), which
`--students S.json --mint ana bob ...` fills; the instructor's `GRADCHECK_WITNESS_TOKEN` reads
the whole log. Under JupyterHub it runs as a managed service and takes each user from the hub
(see docs/jupyterhub.md).
"""

from __future__ import annotations

import os
import sys

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
    parser.add_argument(
        "--log", help=_("the witness's log file (JSON Lines); its key is LOG.key, its public key LOG.pub")
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=_("port to listen on (default: from JUPYTERHUB_SERVICE_URL under a hub, else 8765)"),
    )
    parser.add_argument("--ip", default="127.0.0.1", help=_("address to listen on (default 127.0.0.1)"))
    parser.add_argument(
        "--students",
        metavar="S.json",
        help=_(
            "the class list, each student's own token -> user name ({example}); required unless "
            "the witness runs under JupyterHub"
        ).format(example='{"<token>": "ana"}'),
    )
    parser.add_argument(
        "--mint",
        nargs="+",
        metavar="USER",
        help=_("give each USER without a token in --students a new one, print USER TOKEN lines, and exit"),
    )
    parser.set_defaults(handler=run)


def mint(args) -> int:
    from ..witness.service import mint_tokens

    if not args.students:
        raise SpecError("--mint needs --students S.json, the file the tokens go to")
    for user, token in mint_tokens(args.students, args.mint).items():
        print(f"{user} {token}")
    return EXIT_OK


def run(args) -> int:
    if args.mint:
        return mint(args)
    from urllib.parse import urlparse

    import tornado.ioloop

    from ..witness.service import Students, hub_auth_from_environment, make_app

    if not args.log:
        raise SpecError("--log W.jsonl is required to run the witness")
    token = os.environ.get("GRADCHECK_WITNESS_TOKEN", "")
    hub_auth = hub_auth_from_environment()
    if not args.students and hub_auth is None:
        raise SpecError("give --students S.json (each student's token -> user name), or run under JupyterHub")
    students = Students(args.students) if args.students else None
    port = args.port
    service_url = os.environ.get("JUPYTERHUB_SERVICE_URL")
    if port is None:
        port = urlparse(service_url).port if service_url else 8765
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    app = make_app(args.log, token, prefix=prefix, hub_auth=hub_auth, students=students)
    log = app.settings["witness_log"]
    if log.dropped_tail:
        print(
            _("witness: dropped {count} bytes of a half-written last line of {log} (never answered)").format(
                count=log.dropped_tail, log=args.log
            ),
            file=sys.stderr,
        )
    app.listen(port, address=args.ip)
    print(
        _("witness listening on {url} (log {log}, key {fingerprint})").format(
            url=f"http://{args.ip}:{port}{prefix}", log=args.log, fingerprint=log_fingerprint(log)
        ),
        flush=True,
    )
    tornado.ioloop.IOLoop.current().start()
    return EXIT_OK


def log_fingerprint(log) -> str:
    """The fingerprint of the log's key, printed at start for the instructor to record."""
    from ..witness.log import public_key_fingerprint

    return public_key_fingerprint(log.public_key)
