"""Output files of the CLI (``--json``, ``--csv``, ``--plot``, ``-o``): where they may go, and the one
way they are written.

The rules, so that a mistyped flag never destroys anything:

- An output goes only to a regular file, existing or not, or through a character device
  (``/dev/null``, a terminal): a device is written to as it is, never replaced by a file. A symlink
  is followed: its target is written and the link stays a link. A directory, block device, FIFO or
  socket is refused, never replaced by a file. ``-`` is stdout.
- A name is checked before any work: not empty, not ending in ``/`` (that names a folder), no NUL,
  encodable as a file name, no component longer than the filesystem allows (``NAME_MAX``, 255 bytes
  on most) and the whole within ``PATH_MAX``.
- An output is never a file the same run reads (a task file, ``--new``, an input of ``report``, a
  calibration in the cache: every command's outputs are checked against the cache), and two
  outputs of one run never name the same file (hard links and symlinks included).
- Every output is checked before any work (:func:`check_outputs`), including whether its folder
  takes new files, so a batch never analyzes for minutes and then fails on its output name.
- A write is atomic (:func:`write_bytes`): a temporary file beside the target, then ``os.replace``
  onto the resolved target, so a reader or a crash sees the old file or the new one. An existing
  file keeps its permission bits (and, where the process may set them, its owner). A hard link is
  not kept: the name written gets the new file and the file's other names keep the old content.
  The temporary name is kept within ``NAME_MAX`` too, so a 255-byte name works.
- Every problem is a ``UserError``: one line, exit code 2.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import UserError
from ..peaks.cache import cache_dir

__all__ = ["STDOUT", "check_outputs", "check_name", "write_bytes", "write_text"]

#: The output name that means standard output.
STDOUT = "-"
#: Where pathconf cannot say (Linux's own figures).
_NAME_MAX, _PATH_MAX = 255, 4096
_TEMP_SUFFIX_BYTES = 18  # ".<12 hex>.tmp" plus the leading dot

# What a path is when it is not a regular file (or a character device), for the refusal message.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    """None for a regular file or a character device (written through), else what the path is."""
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
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


def _limit(folder: Path, name: str, default: int) -> int:
    # pathconf of the nearest folder that exists: the filesystem the file would land on.
    probe = folder
    while not probe.is_dir() and probe != probe.parent:
        probe = probe.parent
    try:
        return os.pathconf(probe, name)
    except (OSError, ValueError):
        return default


def check_name(flag: str, given: str | os.PathLike) -> Path:
    """The output name itself, before anything is looked up: a ``UserError`` naming ``flag`` for a
    name no file can have (see the module docstring)."""
    text = os.fspath(given)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if text == "":
        raise UserError(f"{flag}: an empty file name")
    if "\0" in text:
        raise UserError(f"{flag} {text!r}: a file name cannot hold a NUL character")
    if text.endswith(("/", os.sep)) or text in (".", "..") or text.endswith(("/.", "/..")):
        raise UserError(f"{flag} {text}: names a folder (ends in '/'); give a file name")
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        raise UserError(f"{flag} {ascii(text)}: not encodable as a file name here "
                        f"({sys.getfilesystemencoding()})") from None
    path = Path(text)
    name_max = _limit(path.parent, "PC_NAME_MAX", _NAME_MAX)
    for part in raw.split(b"/"):
        if len(part) > name_max:
            raise UserError(f"{flag}: the file name {os.fsdecode(part)[:40]}... is {len(part)} bytes, longer than "
                            f"the {name_max} this filesystem allows")
    path_max = _limit(path.parent, "PC_PATH_MAX", _PATH_MAX)
    if len(os.fsencode(os.path.abspath(text))) >= path_max:
        raise UserError(f"{flag}: the path is {len(os.fsencode(os.path.abspath(text)))} bytes, longer than the "
                        f"{path_max} this system allows")
    return path


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


def _cached_calibrations() -> list[Path]:
    # Every command reads the cache (analyze its peaks, check its baseline, calibrate writes it):
    # no output of any of them may land on a file in it.
    with contextlib.suppress(OSError):
        folder = cache_dir()
        if folder.is_dir():
            return sorted(folder.glob("calibration-*.json"))
    return []


def _read_identities(reads: Iterable[str | os.PathLike | None]) -> dict[tuple, str]:
    out: dict[tuple, str] = {}
    for r in [*reads, *_cached_calibrations()]:
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
    files this run reads (the cached calibrations are added). ``-`` is stdout: at most one output
    may be. Raises ``UserError`` naming the flag and the reason.
    """
    inputs = _read_identities(reads)
    seen: dict[tuple, str] = {}
    checked: dict[str, Path] = {}
    for flag, given in outputs.items():
        if given is None:
            continue
        if os.fspath(given) == STDOUT:
            if ("stdout",) in seen:
                raise UserError(f"{seen[('stdout',)]} and {flag} both name stdout ('-'); give one of them a file")
            seen[("stdout",)] = flag
            checked[flag] = Path(STDOUT)
            continue
        path = check_name(flag, given)
        try:
            target, st = _target(path)
        except UserError as exc:
            raise UserError(f"{flag} {exc}") from None
        ident = _identity(target, st)
        if st is not None and stat.S_ISCHR(st.st_mode):  # /dev/null twice replaces nothing
            checked[flag] = path
            continue
        for key in (ident, ("path", str(target))):
            if key in inputs:
                raise UserError(f"{flag} {path}: is a file this run reads ({inputs[key]}); "
                                "choose another output name")
            if key in seen:
                raise UserError(f"{seen[key]} and {flag} both name {path}; give each output a file of its own")
        if st is not None and not os.access(target, os.W_OK):
            raise UserError(f"{flag} {path}: cannot be written (permission denied)")
        if st is None or not stat.S_ISCHR(st.st_mode):  # a device is written in place: no new file
            _check_folder(path, target.parent)
        seen[ident] = seen[("path", str(target))] = flag
        checked[flag] = path
    return checked


def _open_temp(folder: Path, stem: str, mode: int = 0o666) -> tuple[int, str]:
    # O_EXCL with a random name: never opens an existing file; the umask applies to ``mode`` as to
    # any new file, so a new output gets the user's usual permissions (mkstemp would give 0600).
    # The stem is cut so that the temporary name fits where the output's own name does.
    room = _limit(folder, "PC_NAME_MAX", _NAME_MAX) - _TEMP_SUFFIX_BYTES
    raw = os.fsencode(stem)
    if len(raw) > room:
        stem = os.fsdecode(raw[:room])  # a cut UTF-8 sequence becomes surrogate escapes: still its bytes
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


def _to_stdout(data: bytes) -> Path:
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a stdout without bytes (a test's capture, a closed one): as text
        sys.stdout.write(data.decode("utf-8", "replace"))
    else:
        buffer.write(data)
        buffer.flush()
    return Path(STDOUT)


def _through_device(path: Path, target: Path, data: bytes) -> Path:
    """A character device is written as it is: opened without creating or truncating anything."""
    try:
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to the output ``path`` atomically, by the rules above; returns ``path``."""
    if os.fspath(path) == STDOUT:
        return _to_stdout(data)
    path = Path(path)
    target, st = _target(path)
    if st is not None and stat.S_ISCHR(st.st_mode):
        return _through_device(path, target, data)
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
    """:func:`write_bytes` of ``text`` as UTF-8, newlines as given. Text that is no Unicode (a task
    file name that is not UTF-8 arrives as surrogate escapes) is written as a ``\\udcXX`` escape, so
    the file is valid UTF-8 and the run does not lose it."""
    return write_bytes(path, text.encode("utf-8", "backslashreplace"))
