"""`jupyter gradcheck verify PATH [--replay]`: is this ledger the one that was written?

PATH is a ledger, a notebook (its ledger file, or the ledger embedded by the notebook
export) or a folder of them. Exit 0: every chain and binding is intact (and, with
`--replay`, every recorded value reproduces; with `--witness`, every ledger is witnessed,
late or on time); 1: something differs, named line by line, or a ledger is unwitnessed;
2: PATH cannot be read. Over a folder, a progress bar is drawn on standard error when it is a
terminal (cli/common.py); piped or redirected output has none.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import SpecError
from ..core.i18n import N_, _, localize
from ..core.ledger.verify import verify_path
from ..core.report.submissions import class_pairs, pair_lines
from .common import EXIT_FINDING, EXIT_OK, add_witness_argument, progress_bar, witness_options


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "verify",
        help=_("check a ledger's hash chain and notebook binding; --replay re-runs it"),
        description=_(
            "Verify ledgers: hash chain, order, recorded flags and the notebook binding. "
            "Exit 0: intact; 1: a difference was found (each is named); 2: bad input."
        ),
    )
    parser.add_argument("path", help=_("a ledger (.gradcheck.jsonl), a notebook (.ipynb) or a folder"))
    parser.add_argument(
        "--replay",
        action="store_true",
        help=_(
            "also re-run every recorded observation in its recorded dtype and device "
            "(CPU when absent) and confirm each value within the recorded tolerance"
        ),
    )
    parser.add_argument(
        "--deep",
        action="store_true",
        help=_("also decode every record and check each line is in canonical form (implied by --replay)"),
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help=_(
            "with --replay over a folder: worker processes sharing the submissions "
            "(default: one per CPU; 1 replays in this process)"
        ),
    )
    parser.add_argument(
        "--ledger-only",
        action="store_true",
        help=_(
            "verify a ledger file alone, without the notebook beside it: for a check from "
            "inside the running notebook, whose saved copy is older than its kernel"
        ),
    )
    add_witness_argument(parser, N_("hold every ledger against what the witness saw"))
    parser.add_argument("--json", action="store_true", help=_("print the full report as JSON"))
    parser.set_defaults(handler=run)


def _lines(report: dict) -> list[str]:
    status = "FAIL" if not report["ok"] else "UNWITNESSED" if _unwitnessed(report) else "OK  "
    out = [
        _("{status} {path}: {entries} entries, head {head}").format(
            status=status, path=report["path"], entries=report["entries"], head=report["head"][:16]
        )
    ]
    if report.get("checks"):
        out.append(_("  checks: {checks}").format(checks=", ".join(report["checks"])))
    for error in report["errors"]:
        where = _("line {line}: ").format(line=error["line"]) if error.get("line") else ""
        out.append(_("  error: {where}{reason}").format(where=where, reason=localize(error["reason"])))
    for warning in report["warnings"]:
        out.append(_("  warning: {warning}").format(warning=localize(warning)))
    for flag in report.get("flags") or []:
        out.append(
            _("  flag: {check_id}: {flag} (seq {seqs})").format(
                check_id=flag["check_id"], flag=flag["flag"], seqs=", ".join(map(str, flag["seqs"]))
            )
        )
    witness = report.get("witness")
    if witness is not None:
        out.append(
            _("  witness: saw this ledger ({count} of {entries} entries, from {student}): {verdict}").format(
                verdict=_("witnessed") if witness["witnessed"] else _("not witnessed"),
                count=witness["seen"],
                entries=report["entries"],
                student=witness.get("student") or _("nobody"),
            )
            if witness["seen"]
            else _("  witness: never saw this ledger: unwitnessed")
        )
        for flag in witness["flags"]:
            out.append(_("  witness flag: {flag}: {reason}").format(flag=flag["flag"], reason=localize(flag["reason"])))
    replay = report.get("replay")
    if replay is not None:
        out.append(
            _(
                "  replay: {reproduced} of {observations} observations reproduced, {differ} differ, {skipped} skipped"
            ).format(
                reproduced=replay["reproduced"],
                observations=replay["observations"],
                differ=len(replay["differs"]),
                skipped=len(replay["skipped"]),
            )
        )
        for item in replay["differs"]:
            for difference in item["differences"]:
                out.append(
                    _("  replay: line {line} ({check_id}): {difference}").format(
                        line=item["line"], check_id=item["check_id"], difference=localize(difference)
                    )
                )
        for item in replay["notes"]:
            out.append(_("  replay note: line {line}: {note}").format(line=item["line"], note=localize(item["note"])))
        for item in replay["skipped"]:
            out.append(
                _("  replay skipped: line {line}: {reason}").format(line=item["line"], reason=localize(item["reason"]))
            )
            out.extend(_source_lines(item.get("source")))
    return out


def _unwitnessed(report: dict) -> bool:
    """Whether a witness was asked and does not hold this ledger as witnessed: no tampering shown,
    but never clean (exit 1)."""
    return (report.get("witness") or {}).get("witnessed") is False


def _source_lines(source: dict | None) -> list[str]:
    """A Python callable's recorded source, indented under the line that skipped it."""
    if not source:
        return []
    out = [_("    recorded source (sha256 {sha256}):").format(sha256=source["sha256"])]
    out += [f"      | {line}" for line in source["text"].splitlines()]
    if source.get("truncated_from"):
        out.append(
            _("      ... (the first {kept} of {chars} characters)").format(
                kept=len(source["text"]), chars=source["truncated_from"]
            )
        )
    return out


def run(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise SpecError("--jobs must be at least 1, got {jobs}", jobs=args.jobs, field="jobs")
    bar = progress_bar() if Path(args.path).is_dir() else None
    try:
        result = verify_path(
            args.path,
            replay=args.replay,
            deep=args.deep,
            jobs=args.jobs,
            ledger_only=args.ledger_only,
            progress=bar,
            **witness_options(args),
        )
    finally:
        if bar is not None:
            bar.close()
    pairs = class_pairs(result["reports"], args.path) if Path(args.path).is_dir() else []
    if args.json:
        print(json.dumps({**result, "shared": pairs}, indent=2, ensure_ascii=False, default=str))
    else:
        for report in result["reports"]:
            print("\n".join(_lines(report)))
        if not result["reports"]:
            print(_("nothing to verify under {path}: no notebooks or ledgers").format(path=args.path))
        for line in pair_lines(pairs):
            print(line)
    clean = result["ok"] and not pairs and not any(_unwitnessed(r) for r in result["reports"])
    return EXIT_OK if clean else EXIT_FINDING
