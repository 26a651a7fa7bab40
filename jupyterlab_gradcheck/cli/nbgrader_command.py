"""`jupyter gradcheck nbgrader init COURSE_DIR`: a commented `nbgrader_config.py` for a course.

It writes the two documented lines (`configure(c)`, docs/grading.md) with every gradcheck option
beside them, commented out at its default, so an instructor starts from a file that works and
reads what can be changed. It refuses to overwrite an existing file (exit 2) unless `--force`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import SpecError
from ..core.i18n import _
from .common import EXIT_OK

CONFIG = """# nbgrader configuration for the course {course_id!r}, written by `jupyter gradcheck nbgrader init`.
# docs/grading.md explains every line; nbgrader's own options are in `nbgrader --help-all`.
c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
c.CourseDirectory.course_id = {course_id!r}
# c.CourseDirectory.root = "/srv/courses/{course_id}"  # set it before configure(c), if you set it

from jupyterlab_gradcheck.nbgrader import configure

# The gradcheck preprocessors in nbgrader's lists, the ledger cell added to every notebook that
# calls the checker, and the instructor's ledgers kept out of the students' submissions.
configure(c)

# --- the ledger cell generate_assignment adds ------------------------------------------------
# c.AddLedgerCell.points = 0  # 0: as many points as the notebook's other autograded cells
# c.AddLedgerCell.grade_id = "gradcheck_ledger"

# --- verifying each submission ---------------------------------------------------------------
# c.VerifySubmittedLedger.replay = True  # re-run every recorded observation
# c.VerifySubmittedLedger.compare_class = True  # flag ledgers shared between students
# With a witness (docs/ledger.md, "The witness"): its URL or log, and its key's fingerprint.
# c.VerifySubmittedLedger.witness = "W.jsonl"
# c.VerifySubmittedLedger.witness_key = "sha256:..."  # recorded when the course started
# c.VerifySubmittedLedger.max_delay = 60.0  # seconds an entry may take to reach the witness

# --- the rubric: shares of the ledger cell's points --------------------------------------------
# c.ScoreLedger.widened_after_failure = 0.5  # lost per check widened right after it failed
# c.ScoreLedger.fail_tests_of_widened = True  # its test cells count as failed too
# c.ScoreLedger.expectation_revised_after_observation = 0.25  # lost per unjustified revision
# c.ScoreLedger.revision_justified = 0.1  # lost per justified revision (the second try)
# c.ScoreLedger.shared_with = 1.0  # lost per other student sharing the ledger
# c.ScoreLedger.witness_gap = 0.5  # lost per witness flag
# c.ScoreLedger.rerun_mismatch = 1.0  # lost per disagreement of the autograder's re-run
# c.ScoreLedger.unverified = 0.0  # given to a ledger that does not verify
# c.ScoreLedger.no_checks = 0.0  # given to a notebook that recorded no checks
# c.ScoreLedger.language = "en"  # or "es": the verdict and the comments
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "nbgrader",
        help=_("set up an nbgrader course for gradcheck"),
        description=_("Exit 0: written; 2: bad input (the file exists, no such folder)."),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = actions.add_parser("init", help=_("write a commented nbgrader_config.py into COURSE_DIR"))
    init.add_argument("course_dir", metavar="COURSE_DIR", help=_("the course folder (created if missing)"))
    init.add_argument("--course-id", default=None, help=_("the course id (default: the folder's name)"))
    init.add_argument("--force", action="store_true", help=_("overwrite an existing nbgrader_config.py"))
    parser.set_defaults(handler=run)


def config_text(course_id: str) -> str:
    """The commented nbgrader_config.py for `course_id`."""
    return CONFIG.format(course_id=course_id)


def run(args) -> int:
    folder = Path(args.course_dir)
    target = folder / "nbgrader_config.py"
    if folder.exists() and not folder.is_dir():
        raise SpecError("{path} is a file, not a course folder", path=str(folder), field="course_dir")
    if target.exists() and not args.force:
        raise SpecError("{path} exists; pass --force to overwrite it", path=str(target), field="course_dir")
    folder.mkdir(parents=True, exist_ok=True)
    target.write_text(config_text(args.course_id or folder.resolve().name), encoding="utf-8")
    print(_("wrote {path}").format(path=target), file=sys.stderr)
    return EXIT_OK
