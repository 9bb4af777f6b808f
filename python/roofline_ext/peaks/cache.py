"""The calibration cache: one small JSON file per GPU UUID, read by every later roofline on that card.

Files are written atomically (temporary file in the same directory, fsync, ``os.replace``) under
an exclusive ``filelock`` lock, so two calibrations finishing together leave one complete file,
never a mix. A file that does not parse, that another schema wrote, whose peaks are not finite
positive numbers within what a GPU can do, or whose objects have the wrong shape is ignored with one
line naming it and the reason (the key, as a JSON pointer): a stale or damaged cache must never
silently change a floor, and never stop a command. Those rules are
:meth:`CalibrationRecord.from_dict <roofline_ext.peaks.record.CalibrationRecord.from_dict>`: every
read goes through the record (``load_record``), and ``load`` hands its document on. It is read by the bounded reader of
:mod:`roofline_ext.inputs` (regular files only, at most :data:`MAX_FILE_BYTES`, nesting bounded):
a FIFO, a device or a deeply nested file in the cache cannot hang or crash every ``analyze``.

The raw sweeps a calibration keeps (every configuration's median) go to a second file beside it,
``calibration-<uuid>.raw.json``, which nothing on the analysis path reads: the cache file that
every ``analyze`` parses stays a few kilobytes.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import UserError
from ..inputs import read_json
from .datasheet import lookup, normalize_name
from .measured import MeasuredPeaks
# Re-exported: the schema version, the regimes, the bounds and the shape are the record's, and
# callers have always found them here.
from .record import (MIN_PEAK, REGIMES, SCHEMA_VERSION, SHAPE, CalibrationError, CalibrationRecord,  # noqa: F401
                     EnergySection, problem_of)

__all__ = [
    "SCHEMA_VERSION", "REGIMES", "CACHE_ENV", "cache_dir", "cache_path", "raw_path", "save", "load",
    "load_file", "load_record", "load_record_file", "list_cached", "find_cached", "cached_peaks", "cached_energy",
    "validate", "warn",
]

#: Environment variable that moves the cache (tests, shared lab machines, read-only homes).
CACHE_ENV = "ROOFLINE_EXT_CACHE_DIR"

_APP = "roofline_ext"
_FILE_RE = re.compile(r"^calibration-(.+)\.json$")
_RAW_SUFFIX = ".raw.json"
# How long a writer waits for another writer before giving up with a clear error (a calibration
# writes in milliseconds; a lock held this long belongs to a stuck process).
_LOCK_TIMEOUT_S = 60.0
#: A cache file is a few kilobytes; its raw sweeps go elsewhere.
MAX_FILE_BYTES = 4 * 2**20
def warn(message: str) -> None:
    """One line on stderr, ``roofline-ext: warning: ...``: a cache problem is worth a word, never a
    stop, and never Python's two-line warning format."""
    print(f"roofline-ext: warning: {message}", file=sys.stderr)


def cache_dir() -> Path:
    """Directory of the calibration cache (not created here).

    ``$ROOFLINE_EXT_CACHE_DIR`` if set; else platformdirs' user cache directory for ``roofline_ext``;
    else (platformdirs not installed, as on some GPU machines) ``$XDG_CACHE_HOME/roofline_ext``,
    ``~/.cache/roofline_ext`` when that is unset too.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    try:
        import platformdirs
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / _APP
    return Path(platformdirs.user_cache_dir(_APP, appauthor=False))


def _safe_uuid(uuid: str) -> str:
    # UUIDs are "GPU-xxxxxxxx-...", but a MIG or odd driver could hand us anything: keep the name a
    # single, portable path component.
    if not uuid or not isinstance(uuid, str):
        raise ValueError("a calibration needs the GPU's UUID to be cached")
    return re.sub(r"[^A-Za-z0-9._-]", "_", uuid)


def cache_path(uuid: str) -> Path:
    """The cache file of the GPU with this UUID."""
    return cache_dir() / f"calibration-{_safe_uuid(uuid)}.json"


def raw_path(uuid: str) -> Path:
    """The file beside the cache file that holds the calibration's raw sweeps."""
    return cache_dir() / f"calibration-{_safe_uuid(uuid)}{_RAW_SUFFIX}"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Exclusive lock on ``directory/.lock`` for the duration of the block.

    filelock uses ``flock`` (``msvcrt`` on Windows): the kernel releases it if the process dies, so
    a crashed calibration never leaves the cache locked.
    """
    import filelock

    directory.mkdir(parents=True, exist_ok=True)
    try:
        with filelock.FileLock(str(directory / ".lock"), timeout=_LOCK_TIMEOUT_S):
            yield
    except filelock.Timeout as exc:
        raise UserError(f"calibration cache {directory} is locked by another process for over "
                        f"{_LOCK_TIMEOUT_S:g} s") from exc


def _fsync_dir(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk; not possible on Windows.
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that readers see the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def validate(cal: Any) -> str | None:
    """Why ``cal`` is not a usable calibration of this schema, or None if it is: the rules of
    :meth:`CalibrationRecord.from_dict <roofline_ext.peaks.record.CalibrationRecord.from_dict>`
    (:func:`roofline_ext.peaks.record.problem_of`), which every read of the cache goes through."""
    return problem_of(cal)


def save(cal: Mapping[str, Any]) -> Path:
    """Cache a calibration as the file of its GPU (``cache_path(cal["gpu"]["uuid"])``); returns it.

    The ``raw`` sweeps, when present, go to :func:`raw_path` instead. Atomic and locked: a
    concurrent ``save`` of the same GPU waits, and whichever finishes last wins whole. Raises
    ``ValueError`` for a dict that is not a calibration of this schema.
    """
    try:
        record = CalibrationRecord.from_dict(cal)
    except CalibrationError as exc:
        raise CalibrationError(f"not a calibration: {exc}") from exc
    uuid = str(record.gpu.uuid)  # from_dict: a non-empty string
    path = cache_path(uuid)
    small = {k: v for k, v in cal.items() if k != "raw" and not k.startswith("_")}
    # allow_nan=False: NaN is not JSON and would make the file unreadable by strict parsers.
    text = json.dumps(small, indent=1, allow_nan=False) + "\n"
    with _locked(path.parent):
        _write_atomic(path, text)
        if cal.get("raw") is not None:
            _write_atomic(raw_path(uuid), json.dumps({"gpu": {"uuid": uuid}, "date": cal.get("date"),
                                                      "raw": cal["raw"]}, allow_nan=False) + "\n")
    return path


def load_record_file(path: str | os.PathLike[str]) -> CalibrationRecord | None:
    """The calibration read from ``path``, validated (:meth:`CalibrationRecord.from_dict`); None
    (with one warning line naming the file) when it is missing, corrupt, of another schema or
    holds impossible peaks."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    try:
        # Regular files only (a FIFO would block the read for ever, a device feed it anything),
        # bounded in size and depth; strict JSON (Python's parser would take NaN/Infinity).
        cal = read_json(path, max_bytes=MAX_FILE_BYTES)
    except UserError as exc:
        why = str(exc).removeprefix(f"{path}: ").replace("not valid JSON", "corrupt JSON", 1)
        warn(f"ignoring calibration file {path}: {why}; run 'roofline-ext calibrate' to replace it")
        return None
    try:
        return CalibrationRecord.from_dict(cal)
    except CalibrationError as exc:
        warn(f"ignoring calibration file {path}: {exc}; run 'roofline-ext calibrate' to replace it")
        return None


def load_file(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """:func:`load_record_file` as the JSON document (what the dict readers above this layer take)."""
    record = load_record_file(path)
    return record.to_dict() if record is not None else None


def load_record(uuid: str) -> CalibrationRecord | None:
    """The cached calibration of the GPU with this UUID, or None (see :func:`load_record_file`)."""
    path = cache_path(uuid)
    record = load_record_file(path)
    if record is not None and record.gpu.uuid != uuid:
        warn(f"ignoring calibration file {path}: it belongs to {record.gpu.uuid}, not {uuid}")
        return None
    return record


def load(uuid: str) -> dict[str, Any] | None:
    """:func:`load_record` as the JSON document."""
    record = load_record(uuid)
    return record.to_dict() if record is not None else None


def list_cached() -> list[dict[str, Any]]:
    """Every readable cached calibration, newest first (unreadable ones warned about and skipped)."""
    directory = cache_dir()
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.iterdir()):
        # Not only regular files: a FIFO or a link to a device named like a calibration gets its
        # warning from load_file (which never opens one), rather than passing without a word.
        if _FILE_RE.match(path.name) and not path.name.endswith(_RAW_SUFFIX):
            cal = load_file(path)
            if cal is not None:
                cal = dict(cal)
                cal["_path"] = str(path)  # where --show found it; never written back
                out.append(cal)
    out.sort(key=lambda c: str(c.get("date", "")), reverse=True)
    return out


def _same_gpu_name(a: str, b: str) -> bool:
    """Whether two GPU names mean the same part: equal once normalized, or one datasheet SKU."""
    if normalize_name(a) == normalize_name(b):
        return True
    sa, sb = lookup(a), lookup(b)
    return sa is not None and sa is sb


def find_cached(*, uuid: str | None = None, gpu_name: str | None = None) -> dict[str, Any] | None:
    """The cached calibration for a GPU: by UUID if given, else the newest whose GPU name matches
    ``gpu_name`` ("NVIDIA H200", "H200" and "h200 sxm" all name the same part)."""
    if uuid:
        return load(uuid)
    if not gpu_name:
        return None
    for cal in list_cached():
        name = cal["gpu"].get("name")
        if isinstance(name, str) and _same_gpu_name(name, gpu_name):
            return cal
    return None


def measured_peaks_of(cal: Mapping[str, Any], regime: str) -> MeasuredPeaks | None:
    """The peaks ``roofline(measured=...)`` takes from one calibration and regime, or None
    (:meth:`CalibrationRecord.measured_peaks <roofline_ext.peaks.record.CalibrationRecord.measured_peaks>`)."""
    return CalibrationRecord.read(cal).measured_peaks(regime)


def cached_peaks(*, uuid: str | None = None, gpu_name: str | None = None,
                 regime: str = "burst") -> MeasuredPeaks | None:
    """Measured peaks for ``roofline(measured=...)`` from the cache, or None when none are cached.

    ``regime`` is ``"burst"`` (default) or ``"sustained"``. Matching is by ``uuid`` when given, else
    by ``gpu_name`` (newest calibration of that part). A cached quick calibration has no sustained
    figures: asking for them warns and returns None rather than silently handing out burst ones.
    ``find_cached`` gives the whole calibration.
    """
    if regime not in REGIMES:
        raise UserError(f"unknown regime {regime!r}; choose one of: {', '.join(REGIMES)}")
    cal = find_cached(uuid=uuid, gpu_name=gpu_name)
    if cal is None:
        return None
    peaks = measured_peaks_of(cal, regime)
    if peaks is None and regime == "sustained":
        warn(f"the cached calibration of {cal['gpu'].get('name')} ({cal['gpu']['uuid']}, "
             f"{cal.get('mode', '?')}, {cal.get('date', '?')}) has no sustained figures; run "
             "'roofline-ext calibrate' (full) to measure them")
    return peaks


def cached_energy(*, uuid: str | None = None, gpu_name: str | None = None) -> EnergySection | None:
    """The energy part of the cached calibration of a GPU (matched as :func:`cached_peaks` matches),
    or None when nothing is cached or the calibration has none (cached before calibration measured
    energy: such a file loads as it always did). A section that says ``skipped`` is returned as is,
    so the caller can say why; ``model.energy.EnergyCosts.from_calibration`` makes costs of it."""
    cal = find_cached(uuid=uuid, gpu_name=gpu_name)
    return CalibrationRecord.read(cal).energy if cal is not None else None
