"""The ``roofline-ext`` command: parses arguments and dispatches to ``commands/<name>.py``.

Exit codes (documented in the README):
  0  success
  1  a batch finished but at least one task in it failed
  2  bad input (arguments, files, unknown GPU name)
  3  no usable GPU for a command that needs one (the reason is printed)
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import RooflineError

# Order here is the order in --help.
COMMANDS = ("info", "peaks", "analyze", "calibrate", "check", "fleet", "report")


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = argparse.ArgumentParser(
        prog="roofline-ext",
        description="How close to the hardware's limit is this kernel? Roofline floors from "
        "datasheet, derived and measured GPU peaks.",
    )
    parser.add_argument("--version", action="version", version=f"roofline-ext {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        # Imported by name so that `roofline-ext peaks` never pays for the torch-using commands'
        # imports; every command module ships with the package.
        importlib.import_module(f".commands.{name}", __package__).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except RooflineError as exc:
        if args.debug:
            raise
        print(f"roofline-ext: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("roofline-ext: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `roofline-ext peaks | head`: the reader left; that is not an error of ours. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
