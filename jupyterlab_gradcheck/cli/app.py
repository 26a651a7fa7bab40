"""Entry point of `jupyter gradcheck` (the `jupyter-gradcheck` console script)."""

from __future__ import annotations

import argparse
import importlib
import sys

from ..core.errors import GradcheckError
from .common import EXIT_BAD_INPUT

#: Subcommand modules, each with `add_parser(subparsers)` and `run(args) -> int`.
COMMANDS = ("run_command", "tolerance_command", "verify_command", "export_command", "witness_command")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jupyter gradcheck",
        description="Check PyTorch gradients: the expectation written first, every observation "
        "kept in a tamper-evident ledger.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:  # a subcommand not yet present in this checkout
            if exc.name != f"{__package__}.{name}":
                raise
            continue
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except GradcheckError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
