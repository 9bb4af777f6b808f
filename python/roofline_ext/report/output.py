"""Where a command may write: only the regular file the user named, never a folder or a device.

Checked before any work starts, so a bad ``-o`` costs nothing; written atomically (temporary file
in the same folder, then ``os.replace``), so a reader sees the old file or the new one.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

from ..errors import UserError
from .writers import write_atomic


def check_output_path(path: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = (),
                      what: str = "output") -> Path:
    """The path to write, or a one-line UserError saying why not (a folder, a device, a missing
    folder, one of the inputs)."""
    p = Path(path)
    if not str(path).strip():
        raise UserError(f"the {what} file name is empty")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UserError(f"cannot write the {what} to {p}: {exc.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, pipe or socket)"
        raise UserError(f"cannot write the {what} to {p}: it is {kind}; name a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"cannot write the {what} to {p}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot write the {what} to {p}: the folder {parent} is not writable")
    for i in inputs:
        try:
            if st is not None and os.path.samefile(p, i):
                raise UserError(f"cannot write the {what} to {p}: it is one of the input files")
        except FileNotFoundError:
            continue
    return p


def write_output(path: Path, text: str) -> None:
    """Atomically replace the (already checked) ``path`` with ``text``."""
    try:
        write_atomic(path, text)
        # The temporary file was private (0600); the result is an ordinary file of the user's.
        os.chmod(path, 0o666 & ~_umask())
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
