"""The ``roofline-ext`` command: parses arguments and dispatches to ``commands/<name>.py``.

Exit codes (documented in the README):
  0  success
  1  a batch finished but at least one task in it failed
  2  bad input (arguments, files, unknown GPU name)
  3  no usable GPU for a command that needs one (the reason is printed)
  130 interrupted (Ctrl-C)
Every error is one line on stderr; ``--debug``, anywhere on the line, adds the traceback and keeps
the code. Text goes out in the user's encoding (``PYTHONIOENCODING``, the locale), what it cannot
encode replaced by a ``\\x..`` escape instead of failing; a closed stdout (``>&-``) is the same
one-line error as a full one, said when something is to be printed on it.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import io
import importlib
import logging
import os
import sys
import traceback

from .._version import __version__
from ..errors import RooflineError

# Order here is the order in --help.
COMMANDS = ("info", "peaks", "analyze", "floors", "calibrate", "check", "fleet", "report")

_DEBUG_HELP = "show tracebacks and torch's own logs instead of one-line errors"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="roofline-ext",
        description="How close to the hardware's limit is this kernel? Roofline floors from "
        "datasheet, derived and measured GPU peaks.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"roofline-ext {__version__}")
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


class _ClosedStream(io.TextIOBase):
    """What ``sys.stdout`` is when the process started with descriptor 1 closed (Python sets it to
    None, and ``print`` would drop the output without a word): a write fails as a write to a closed
    descriptor does, so that a command with something to print says so in one line (exit 2)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")

    def flush(self) -> None:
        pass


def _streams() -> None:
    """Standard streams that cannot end a run with a traceback."""
    # A closed descriptor 0-2 is taken by /dev/null first, so that no file this run opens later
    # lands on it (and then receives what a task or a child prints to "stdout").
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = _ClosedStream()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")
    for stream in (sys.stdout, sys.stderr):
        # Task and GPU names are anyone's text (non-ASCII, or file names that are not UTF-8):
        # the user's encoding, with what it cannot encode escaped.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(Exception):
                reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    _streams()
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
    except KeyboardInterrupt as exc:
        if not getattr(exc, "said", False):  # a batch has said in its own line what it kept
            print("roofline-ext: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `roofline-ext peaks | head`: the reader left; that is not an error of ours.
        _stdout_to_devnull()
        return 0
    except OSError as exc:
        if not args.debug and exc.errno in _NAME_ERRNOS and exc.filename is not None:
            # A name the user gave that no file can have, met by a stat before the checks that
            # name it: bad input all the same.
            name = os.fsdecode(exc.filename)
            shown = name if len(name) <= 80 else name[:60] + f"... ({len(os.fsencode(name))} bytes)"
            print(f"roofline-ext: error: {shown}: {exc.strerror}", file=sys.stderr)
            return 2
        if args.debug or not _is_stdout_error(exc):
            raise
        # stdout is a full disk or a device that refuses writes: one line and exit 2, like every
        # other output that cannot be written.
        _stdout_to_devnull()
        print(f"roofline-ext: error: cannot write to stdout ({exc.strerror or exc})", file=sys.stderr)
        return 2


#: OSErrors that a file name causes by itself (too long, a loop of links).
_NAME_ERRNOS = (errno.ENAMETOOLONG, errno.ELOOP)


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
