"""Output files of the CLI (``--json``, ``--csv``, ``--plot``): where they may go, and the one way
they are written.

The rules, so that a mistyped flag never destroys anything:

- An output goes only to a regular file, existing or not. A symlink is followed: its target is
  written and the link stays a link. A directory, device node, FIFO or socket is refused, never
  replaced by a file.
- An output is never a file the same run reads (a task file, ``--new``, a cached calibration), and
  two outputs of one run never name the same file (hard links and symlinks included).
- Every output is checked before any work (:func:`check_outputs`), including whether its folder
  takes new files, so a batch never analyzes for minutes and then fails on its output name.
- A write is atomic (:func:`write_bytes`): a temporary file beside the target, then ``os.replace``
  onto the resolved target, so a reader or a crash sees the old file or the new one. An existing
  file keeps its permission bits (and, where the process may set them, its owner). A hard link is
  not kept: the name written gets the new file and the file's other names keep the old content.
- Every problem is a ``UserError``: one line, exit code 2.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import UserError

__all__ = ["check_outputs", "write_bytes", "write_text"]

# What a path is when it is not a regular file, for the refusal message.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    """None for a regular file, else what the path is instead."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _target(path: Path) -> tuple[Path, os.stat_result | None]:
    """The file a write to ``path`` lands on (symlinks followed) and its stat, None if it does not
    exist yet; a ``UserError`` for anything but a regular file."""
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target, None
    except OSError as exc:  # a symlink loop, a path through a file
        raise UserError(f"{path}: cannot be written ({exc.strerror})") from None
    what = _kind(st.st_mode)
    if what is not None:
        shown = f"{path} (-> {target})" if target != Path(os.path.abspath(path)) else str(path)
        raise UserError(f"{shown} is {what}, not a regular file; outputs go only to regular files")
    return target, st


def _check_folder(path: Path, folder: Path) -> None:
    """The folder exists, is one, and takes a new file: probed with a file created and removed
    at once, since permission bits say nothing to root, a read-only mount or /proc."""
    # Named as the user wrote it, unless a symlink took the output elsewhere.
    shown = path.parent if os.path.realpath(path.parent) == str(folder) else folder
    if not folder.exists():
        raise UserError(f"{path}: the folder {shown} does not exist")
    if not folder.is_dir():
        raise UserError(f"{path}: {shown} is not a folder")
    try:
        fd, probe = _open_temp(folder, ".roofline-ext-probe")
    except OSError as exc:
        raise UserError(f"{path}: cannot create files in {shown} ({exc.strerror})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _identity(target: Path, st: os.stat_result | None) -> tuple:
    # Two names of one file (hard link, symlink) share device and inode; a file that does not exist
    # yet is known only by its resolved path.
    return ("inode", st.st_dev, st.st_ino) if st is not None else ("path", str(target))


def _read_identities(reads: Iterable[str | os.PathLike | None]) -> dict[tuple, str]:
    out: dict[tuple, str] = {}
    for r in reads:
        if r is None:
            continue
        p = Path(r)
        with contextlib.suppress(OSError):
            st = os.stat(p)
            out[_identity(Path(os.path.realpath(p)), st)] = str(p)
        out[("path", os.path.realpath(p))] = str(p)
    return out


def check_outputs(outputs: Mapping[str, str | os.PathLike | None],
                  reads: Iterable[str | os.PathLike | None] = ()) -> dict[str, Path]:
    """Check every named output before any work; returns ``{flag: path}`` for those given.

    ``outputs`` maps a flag (``"--json"``) to its path, or None when not given; ``reads`` are the
    files this run reads. Raises ``UserError`` naming the flag and the reason.
    """
    inputs = _read_identities(reads)
    seen: dict[tuple, str] = {}
    checked: dict[str, Path] = {}
    for flag, given in outputs.items():
        if given is None:
            continue
        if str(given) == "":
            raise UserError(f"{flag}: an empty file name")
        path = Path(given)
        try:
            target, st = _target(path)
        except UserError as exc:
            raise UserError(f"{flag} {exc}") from None
        ident = _identity(target, st)
        for key in (ident, ("path", str(target))):
            if key in inputs:
                raise UserError(f"{flag} {path}: is a file this run reads ({inputs[key]}); "
                                "choose another output name")
            if key in seen:
                raise UserError(f"{seen[key]} and {flag} both name {path}; give each output a file of its own")
        if st is not None and not os.access(target, os.W_OK):
            raise UserError(f"{flag} {path}: cannot be written (permission denied)")
        _check_folder(path, target.parent)
        seen[ident] = seen[("path", str(target))] = flag
        checked[flag] = path
    return checked


def _open_temp(folder: Path, stem: str, mode: int = 0o666) -> tuple[int, str]:
    # O_EXCL with a random name: never opens an existing file; the umask applies to ``mode`` as to
    # any new file, so a new output gets the user's usual permissions (mkstemp would give 0600).
    for _ in range(100):
        name = os.path.join(folder, f"{stem}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def _keep_owner_and_mode(fd: int, st: os.stat_result) -> None:
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        # Only root may give a file away; anyone else writes a file of their own, as any editor does.
        with contextlib.suppress(OSError):
            os.fchown(fd, st.st_uid, st.st_gid)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to the output ``path`` atomically, by the rules above; returns ``path``."""
    path = Path(path)
    target, st = _target(path)
    tmp = None
    try:
        fd, tmp = _open_temp(target.parent, f".{target.name}")
        try:
            if st is not None:
                _keep_owner_and_mode(fd, st)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException as exc:  # Ctrl-C too: never leave the temporary file behind
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`write_bytes` of ``text`` as UTF-8, newlines as given."""
    return write_bytes(path, text.encode("utf-8"))
