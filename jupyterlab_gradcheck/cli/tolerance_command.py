"""`jupyter gradcheck tolerance`: change a check's tolerance, with a written justification.

The change is an entry in the ledger (old, new, justification, widened or tightened, and
`after_failure` when the check's latest observation had failed). Without a justification it
is refused with exit 2 and the ledger is left byte for byte as it was.
"""

from __future__ import annotations

import json

from ..core.errors import SpecError
from ..core.i18n import _
from ..core.ledger.binding import refresh_binding
from .common import EXIT_OK, open_ledger


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "tolerance",
        help=_("change a check's tolerance (a justification is required)"),
        description=_(
            "Append a tolerance_change entry to a ledger. Exit 0: recorded; 2: refused "
            "(no justification, unknown check, bad value); nothing is written when refused."
        ),
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--ledger", help=_("the ledger file (lab1.gradcheck.jsonl)"))
    where.add_argument("--notebook", help=_("the notebook whose ledger to change (its binding is updated)"))
    parser.add_argument("--check", required=True, metavar="ID", help=_("the check id, as in the ledger"))
    parser.add_argument("--rtol", type=float, help=_("new relative tolerance"))
    parser.add_argument("--atol", type=float, help=_("new absolute tolerance"))
    parser.add_argument(
        "--target",
        choices=("tolerance", "finite_difference"),
        default="tolerance",
        help=_("which tolerance: analytical vs autograd (default) or finite difference vs autograd"),
    )
    parser.add_argument(
        "--justification",
        metavar="TEXT",
        help=_("why the tolerance changes (required; kept in the ledger and shown to graders)"),
    )
    parser.set_defaults(handler=run)


def run(args) -> int:
    ledger = open_ledger(args.ledger, args.notebook)
    if not ledger.path.is_file():
        raise SpecError("no ledger at {path}: run a check into it first", path=ledger.path, field="ledger")
    entry = ledger.change_tolerance(
        args.check, rtol=args.rtol, atol=args.atol, target=args.target, justification=args.justification
    )
    refresh_binding(ledger)
    print(json.dumps(entry, indent=2, ensure_ascii=False))
    return EXIT_OK
