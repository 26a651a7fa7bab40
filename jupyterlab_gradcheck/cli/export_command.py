"""`jupyter gradcheck export PATH... --format csv|submission-csv|json|html|notebook [--replay] [-o OUT]`.

CSV, JSON and HTML take ledgers, notebooks or folders (a folder in nbgrader's layout
`submitted/<student>/<assignment>/` fills in student and assignment) and write one file, to
standard output without `-o`. `csv` has one row per check; `submission-csv` one row per student
and assignment, with `student_id` and `assignment` as `nbgrader export` names them, so the two
CSVs join directly (docs/grading.md). `notebook` takes one notebook and writes a copy with its
whole ledger embedded in the metadata, which `verify` accepts on its own. `--replay` re-runs every
observation first, so one export also shows a forgery whose hashes were recomputed. Over a
folder, a progress bar is drawn on standard error when it is a terminal, as `verify` draws it.
Submissions of different students that share a ledger are named in `shared_with` (CSV), in a
section of the HTML, and in JSON (core.ledger.copies).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import SpecError
from ..core.i18n import N_, _, active_language, ngettext
from .common import EXIT_OK, add_witness_argument, witness_options

FORMATS = ("csv", "submission-csv", "json", "html", "notebook")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help=_("export ledgers for grading: csv, json, html, or a notebook with its ledger"),
        description=_("Export ledgers. Exit 0: written; 2: bad input (unknown path, wrong format)."),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help=_("ledgers, notebooks or folders"))
    parser.add_argument("--format", required=True, choices=FORMATS, help=_("what to write"))
    add_witness_argument(parser, N_("hold every submission against what the witness saw, adding the witnessed column"))
    parser.add_argument(
        "--replay",
        action="store_true",
        help=_(
            "csv/json/html: also re-run every observation (as verify --replay) and report it (CSV column replay_ok)"
        ),
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help=_("with --replay: worker processes sharing the submissions (default: one per CPU)"),
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help=_("file to write (default: standard output; for notebook, NAME.submission.ipynb)"),
    )
    parser.set_defaults(handler=run)


def run(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise SpecError("--jobs must be at least 1, got {jobs}", jobs=args.jobs, field="jobs")
    for path in args.paths:
        if not Path(path).exists():
            raise SpecError("no file or folder at {path}", path=path, field="path")
    if args.format == "notebook":
        from ..core.report.exports import export_notebook

        if len(args.paths) != 1:
            raise SpecError("--format notebook takes exactly one notebook", field="path")
        if args.replay:
            raise SpecError(
                "--replay applies to csv, json and html; verify the notebook export with "
                "`jupyter gradcheck verify --replay`",
                field="replay",
            )
        source = Path(args.paths[0])
        out = Path(args.output) if args.output else source.with_name(source.stem + ".submission.ipynb")
        export_notebook(source, out)
        print(_("wrote {path}").format(path=out), file=sys.stderr)
        return EXIT_OK
    from ..core.report.submissions import collect
    from .common import progress_bar

    bar = progress_bar() if any(Path(path).is_dir() for path in args.paths) else None
    try:
        submissions = collect(args.paths, replay=args.replay, jobs=args.jobs, progress=bar, **witness_options(args))
    finally:
        if bar is not None:
            bar.close()
    if args.format == "csv":
        from ..core.report.exports import to_csv as render
    elif args.format == "submission-csv":
        from ..core.report.grading import to_submission_csv as render
    elif args.format == "json":
        from ..core.report.exports import to_json as render
    else:
        from ..core.report.html_export import to_html as render
    text = render(submissions, language=active_language()) if args.format == "html" else render(submissions)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8", newline="")
        print(
            ngettext(
                "wrote {path} ({count} submission)", "wrote {path} ({count} submissions)", len(submissions)
            ).format(path=args.output, count=len(submissions)),
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return EXIT_OK
