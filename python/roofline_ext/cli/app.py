"""The ``roofline-ext`` command: parses arguments and dispatches to ``commands/<name>.py``.

Exit codes (documented in the README):
  0  success
  1  a batch finished but at least one task in it failed
  2  bad input (arguments, files, unknown GPU name)
  3  no usable GPU for a command that needs one (the reason is printed)
  130 interrupted (Ctrl-C)
Every error is one line on stderr; ``--debug``, anywhere on the line, adds the traceback and keeps
the code.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
import traceback

from ..errors import RooflineError

# Order here is the order in --help.
COMMANDS = ("info", "peaks", "analyze", "calibrate", "check", "fleet", "report")

_DEBUG_HELP = "show tracebacks and torch's own logs instead of one-line errors"


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = argparse.ArgumentParser(
        prog="roofline-ext",
        description="How close to the hardware's limit is this kernel? Roofline floors from "
        "datasheet, derived and measured GPU peaks.",
    )
    parser.add_argument("--version", action="version", version=f"roofline-ext {__version__}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        # Imported by name so that `roofline-ext peaks` never pays for the torch-using commands'
        # imports; every command module ships with the package.
        importlib.import_module(f".commands.{name}", __package__).register(sub)
    for command in sub.choices.values():
        # `--debug` after the sub-command too (where people add it on a second try). SUPPRESS: a
        # sub-command without it must not overwrite the main parser's value.
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        print(f"roofline-ext: error: a command is needed: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    if args.debug:
        # The runner shows torch's logs about a task only at this level (they are noise otherwise).
        logging.getLogger("roofline_ext").setLevel(logging.DEBUG)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so that a full disk or a closed pipe is ours to report
        return code
    except RooflineError as exc:
        if args.debug:
            # The traceback, then the same line and exit code as without --debug: the exit codes
            # of the README's table do not change with it.
            traceback.print_exc()
        print(f"roofline-ext: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("roofline-ext: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `roofline-ext peaks | head`: the reader left; that is not an error of ours.
        _stdout_to_devnull()
        return 0
    except OSError as exc:
        if args.debug or not _is_stdout_error(exc):
            raise
        # stdout is a full disk or a device that refuses writes: one line and exit 2, like every
        # other output that cannot be written.
        _stdout_to_devnull()
        print(f"roofline-ext: error: cannot write to stdout ({exc.strerror or exc})", file=sys.stderr)
        return 2


def _is_stdout_error(exc: OSError) -> bool:
    # An OSError raised by a print()/flush on stdout carries no filename; one with a file name is
    # from somewhere else and stays a bug with its traceback.
    return exc.filename is None and exc.errno in (errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT,
                                                  errno.EPIPE, errno.EBADF, errno.EROFS)


def _stdout_to_devnull() -> None:
    # Point stdout at devnull, dropping what is still buffered, so the interpreter's final flush
    # does not fail a second time.
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # a stdout that is no file (a test's capture): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
