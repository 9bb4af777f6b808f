"""Reading a JSON input file the user named (``report``, ``fleet --from``, the calibration cache),
so that no input can hang the run, grow its memory or crash it.

- Only a regular file is opened. A FIFO would block the read for ever and a device (``/dev/zero``)
  would feed it without end, so the kind is checked with ``stat`` before ``open``, and again on the
  open descriptor (opened non-blocking, so a path that became a FIFO in between cannot block).
- At most ``max_bytes`` are read: a file above it is refused from its size, and a file that grows
  while it is read stops at the bound.
- Strict JSON only: ``NaN``/``Infinity`` (which Python's parser takes and no other reader does) and
  numbers that overflow to infinity (``1e400``) are refused; so is nesting deeper than
  ``max_depth``, counted before parsing (Python's parser would recurse until RecursionError).
- After parsing, every number is bounded (:data:`MAX_MAGNITUDE`): ``1e308`` parses, but no figure
  of a roofline-ext document comes near it, and one that does would print a floor of 300 digits.

Every refusal is a ``UserError`` naming the file and, where there is one, the key (a JSON pointer).
This module is at the package root (rank 0): the cache (peaks) and the report layers both use it.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterator

from .errors import UserError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_MAGNITUDE", "read_bytes", "read_json", "check_regular",
           "parse_json", "pointer", "walk_numbers"]

#: Result files of a large batch (KernelBench's 250 tasks with ops) are a few MB; 64 MiB is far
#: above any real one and far below what would hurt a machine.
MAX_BYTES = 64 * 2**20
#: Our documents nest about 8 deep (fleet → results → check → devices → metrics → comparisons).
MAX_DEPTH = 64
#: The largest figure any document holds is a task's FLOP count (KernelBench's largest ~1e14);
#: 1e24 leaves ten orders of headroom and stops 1e308.
MAX_MAGNITUDE = 1e24

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _what(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def check_regular(path: str | os.PathLike) -> os.stat_result:
    """The stat of ``path`` (symlinks followed) if it is a regular file; else a ``UserError`` saying
    what it is instead. Never opens the path."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:  # a loop of links, a path through a file, a NUL in the name
        raise UserError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: {_what(st.st_mode)}, not a regular file")
    return st


def read_bytes(path: str | os.PathLike, max_bytes: int = MAX_BYTES) -> bytes:
    """The content of the regular file ``path``, at most ``max_bytes`` (a ``UserError`` above)."""
    st = check_regular(path)
    if st.st_size > max_bytes:
        raise UserError(f"{path}: {st.st_size} bytes, above the {_size(max_bytes)} an input may have")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):  # replaced between the stat and the open
            raise UserError(f"{path}: {_what(now.st_mode)}, not a regular file")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise UserError(f"{path}: grew above the {_size(max_bytes)} an input may have while it was read")
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


# Strings first (a bracket inside one does not nest), then every bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def _too_deep(text: str, max_depth: int) -> bool:
    """Whether brackets nest deeper than ``max_depth``; stops at the first that does, so a file of a
    million ``[`` costs as little as a shallow one."""
    depth = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif c in "]}":
            depth -= 1
    return False


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a number")
    return value


def pointer(parts: tuple) -> str:
    """A JSON pointer (RFC 6901) of a key path, ``/devices/0/verdict``; ``/`` for the document."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts) or "/"


def walk_numbers(doc: Any) -> Iterator[tuple[tuple, float]]:
    """(key path, value) of every number in ``doc`` (booleans are not numbers), without recursion."""
    stack: list[tuple[tuple, Any]] = [((), doc)]
    while stack:
        parts, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((parts + (k,), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((parts + (i,), v) for i, v in enumerate(node))
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            yield parts, node


def parse_json(text: str, source: str, max_depth: int = MAX_DEPTH) -> Any:
    """Strict, bounded JSON (see the module docstring); ``source`` names the input in errors."""
    if _too_deep(text, max_depth):
        raise UserError(f"{source}: JSON nested deeper than {max_depth} levels; not a roofline-ext result")
    try:
        doc = json.loads(text, parse_constant=_constant, parse_float=_float)
    except (ValueError, RecursionError) as exc:  # int above 4300 digits is a ValueError too
        raise UserError(f"{source}: not valid JSON ({exc})") from None
    for parts, value in walk_numbers(doc):
        if abs(value) > MAX_MAGNITUDE:
            raise UserError(f"{source}: {pointer(parts)} is {value:.6g}, beyond any figure of a "
                            f"roofline-ext result (|x| <= {MAX_MAGNITUDE:g})")
    return doc


def read_json(path: str | os.PathLike, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The strict JSON document in the regular file ``path``: bounded in size, depth and numbers."""
    data = read_bytes(path, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}); not a JSON result") from None
    return parse_json(text.removeprefix("\ufeff"), str(Path(path)), max_depth)
