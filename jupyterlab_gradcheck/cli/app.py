"""Entry point of `jupyter gradcheck` (the `jupyter-gradcheck` console script)."""

from __future__ import annotations

import argparse
import importlib
import sys

from ..core.errors import GradcheckError
from ..core.i18n import _, language
from ..core.run import exit_code
from .common import add_language_argument, language_in

#: Subcommand modules, each with `add_parser(subparsers)` and `run(args) -> int`.
COMMANDS = (
    "run_command",
    "tolerance_command",
    "verify_command",
    "export_command",
    "witness_command",
    "nbgrader_command",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jupyter gradcheck",
        description=_(
            "Check PyTorch gradients: the expectation written first, every observation kept in a tamper-evident ledger."
        ),
    )
    add_language_argument(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:  # a subcommand not yet present in this checkout
            if exc.name != f"{__package__}.{name}":
                raise
            continue
        module.add_parser(subparsers)
    for subparser in subparsers.choices.values():  # --language before or after the subcommand
        add_language_argument(subparser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with language(language_in(argv)):  # the help texts too are in the chosen language
        parser = build_parser()
        args = parser.parse_args(argv)
        try:
            return args.handler(args)
        except GradcheckError as exc:  # how the CLI reports an error: core/run.py REPORTED
            print(_("error: {message}").format(message=exc.localized()), file=sys.stderr)
            return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
