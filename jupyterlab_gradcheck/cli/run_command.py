"""`jupyter gradcheck run SPEC`: run check records and print the completed records as JSON.

Every record is validated (and its device resolved) before any of them runs, so bad input
exits 2 having executed nothing and appended nothing. Exit 1 means a comparison failed: a
finding, recorded like any other result.
"""

from __future__ import annotations

import json
import sys

from ..core.check.environment import available_devices
from ..core.i18n import _, localize
from ..core.jsonio import loads_records
from ..core.run import Admission, admit, run_spec
from ..core.values.blobs import require_blobs, store_dir_for
from ..core.values.tensors import reading_store
from .common import EXIT_FINDING, EXIT_OK, open_ledger, read_text


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help=_("run check records and print the completed records as JSON"),
        description=_(
            "Run one check record, a JSON list of records, or JSON Lines. "
            "Exit 0: every comparison passed; 1: some failed (recorded); 2: bad input (nothing run)."
        ),
    )
    parser.add_argument("spec", help=_("a JSON file, or - for standard input"))
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--ledger", help=_("append expectation and observation to this ledger file"))
    where.add_argument(
        "--notebook", help=_("append to the ledger beside this notebook (lab1.ipynb -> lab1.gradcheck.jsonl)")
    )
    parser.add_argument("--no-sweep", action="store_true", help=_("leave the step sweep out of the records"))
    parser.set_defaults(handler=run)


def _summary_line(record: dict) -> str:
    """One line per check on standard error: the verdict and, for a failure, its reason."""
    failure = record.get("failure")
    if record["passed"]:
        line = _("PASS {id}: observed {observed}").format(
            id=record["id"], observed=json.dumps(record["observed_gradient"])
        )
        floor = record.get("detection_floor")
        shadow = record.get("float64_shadow") or {}
        if floor:  # a low precision: what a pass could not see (core/check/first_order.py)
            line += _(" (blind below {floor} relative error at one element, in {dtype}").format(
                floor=f"{floor['relative']:.2g}", dtype=record["dtype"]
            )
            if shadow.get("status") == "observed":  # the same code in float64 (core/check/engine.py)
                line += _("; the {wide} shadow passed)").format(wide=shadow["dtype"])
            elif shadow.get("status") == "not_run":
                line += _("; no {wide} shadow: {reason})").format(
                    wide=shadow["dtype"], reason=localize(shadow["reason"])
                )
            else:
                line += ")"
        return line
    if failure:
        return _("FAIL ({diagnosis}) {id}: {reason}").format(
            diagnosis=failure["diagnosis"], id=record["id"], reason=localize(failure["reason"])
        )
    verdict = record["observations"]["torch_gradcheck"]
    return _("FAIL {id}: torch gradcheck {status}: {reason}").format(
        id=record["id"], status=verdict["status"], reason=localize(verdict["reason"])
    )


def run(args) -> int:
    records = loads_records(read_text(args.spec))
    admission = Admission(devices=available_devices())
    specs = [admit(record, admission).spec for record in records]  # every record before any runs
    ledger = open_ledger(args.ledger, args.notebook)
    store = None if ledger is None else store_dir_for(ledger.path)
    require_blobs(store, records)  # a stored value names a blob of the ledger's store, or is refused
    sweep = False if args.no_sweep else None
    with reading_store(store):
        results = [run_spec(spec, ledger, admission=admission, sweep=sweep).record for spec in specs]
    for record in results:
        print(_summary_line(record), file=sys.stderr)
    output = results[0] if len(results) == 1 else results
    print(json.dumps(output, indent=2))
    return EXIT_OK if all(r["passed"] for r in results) else EXIT_FINDING
