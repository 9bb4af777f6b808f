"""The calibration cache: one small JSON file per GPU UUID, read by every later roofline on that card.

Files are written atomically (temporary file in the same directory, fsync, ``os.replace``) under
an exclusive ``filelock`` lock, so two calibrations finishing together leave one complete file,
never a mix. A file that does not parse, that another schema wrote, whose peaks are not finite
positive numbers within what a GPU can do, or whose objects have the wrong shape is ignored with one
line naming it and the reason (the key, as a JSON pointer): a stale or damaged cache must never
silently change a floor, and never stop a command. It is read by the bounded reader of
:mod:`roofline_ext.inputs` (regular files only, at most :data:`MAX_FILE_BYTES`, nesting bounded):
a FIFO, a device or a deeply nested file in the cache cannot hang or crash every ``analyze``.

The raw sweeps a calibration keeps (every configuration's median) go to a second file beside it,
``calibration-<uuid>.raw.json``, which nothing on the analysis path reads: the cache file that
every ``analyze`` parses stays a few kilobytes.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import UserError
from ..inputs import read_json
from ..schema import NUMBER, problem
from .measured import MeasuredPeaks
from .units import PEAK_KEYS, ROOFLINE_PEAK_KEYS, UNITS

__all__ = [
    "SCHEMA_VERSION", "REGIMES", "CACHE_ENV", "cache_dir", "cache_path", "raw_path", "save", "load",
    "load_file", "list_cached", "find_cached", "cached_peaks", "validate", "warn",
]

#: Bumped whenever the layout of a calibration changes incompatibly; older files are then ignored
#: (with a warning) instead of being misread.
SCHEMA_VERSION = 1

#: Which measured figures a roofline can use: short runs at boost clocks, or settled after minutes.
REGIMES = ("burst", "sustained")

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
#: No GPU's peak is below this (TB/s, TFLOP/s, TOPS; the slowest FP64 of a GeForce is ~0.1): a
#: smaller one is a broken file (a 1e-300 TB/s roof would print a floor of 300 digits).
MIN_PEAK = 1e-3

_ENTRY = {"value": NUMBER, "best": NUMBER, "cv": NUMBER, "clock_derived": NUMBER, "clock_derived_max": NUMBER,
          "ratio_to_burst": NUMBER, "label": str, "unit": str, "path": str, "points": {"*": NUMBER},
          "sm_clock_mhz": NUMBER, "mem_clock_mhz": NUMBER, "power_w": NUMBER, "fraction_of_datasheet": NUMBER,
          "fraction_of_clock_derived": NUMBER}
#: What the readers of a calibration (the roofline, the tables, the charts, the report) open by key.
SHAPE = {
    "schema_version": int, "date": str, "mode": str, "fixture": str, "wall_s": NUMBER,
    "gpu": {"uuid": str, "name": str, "index": int, "sm_count": int, "compute_capability": str,
            "max_sm_clock_mhz": NUMBER, "max_mem_clock_mhz": NUMBER, "memory_bus_width_bits": int,
            "power_limit_w": NUMBER},
    "peaks": {"*": {"*": NUMBER}},
    "burst": {"entries": {"*": _ENTRY}}, "sustained": {"entries": {"*": _ENTRY}},
    "hostlink": {"h2d": {"value": NUMBER, "cv": NUMBER, "label": str},
                 "d2h": {"value": NUMBER, "cv": NUMBER, "label": str}, "link": {}},
    "datasheet": {"peaks": {"*": NUMBER}},
    "timing": {"total_s": NUMBER, "budget_s": NUMBER, "burst_s": NUMBER, "sustained_s": NUMBER}, "warnings": [str],
}


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


def _is_peak(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def validate(cal: Any) -> str | None:
    """Why ``cal`` is not a usable calibration of this schema, or None if it is.

    Every peak must be a finite positive number; where the calibration recorded the clock-derived
    ceiling of an entry, the peak may not exceed it by more than 10% (a figure above the hardware's
    own limit is a broken file or a broken measurement, and would make a floor nobody can reach).
    """
    if not isinstance(cal, dict):
        return f"not a JSON object but {type(cal).__name__}"
    version = cal.get("schema_version")
    if version != SCHEMA_VERSION:
        return f"schema version {version!r}, this roofline-ext reads {SCHEMA_VERSION}"
    gpu = cal.get("gpu")
    if not isinstance(gpu, dict) or not isinstance(gpu.get("uuid"), str) or not gpu.get("uuid"):
        return "no gpu.uuid"
    peaks = cal.get("peaks")
    if not isinstance(peaks, dict) or not isinstance(peaks.get("burst"), dict):
        return "no peaks.burst"
    for regime, mapping in peaks.items():
        if not isinstance(mapping, dict):
            return f"peaks.{regime} is not an object"
        for key, value in mapping.items():
            if value is not None and not _is_peak(value):
                return f"peaks.{regime}.{key} is {value!r}, not a finite positive number"
            if value is not None and value < MIN_PEAK:
                return f"peaks.{regime}.{key} = {value:g} is below {MIN_PEAK:g}, slower than any GPU"
            ceiling = _ceiling(cal, regime, key)
            if value is not None and ceiling is not None and value > 1.10 * ceiling:
                return (f"peaks.{regime}.{key} = {value:g} is above its clock-derived ceiling "
                        f"{ceiling:g} (+10%), which no card reaches")
    # Last, so that the peaks' own rules say what is wrong with a peak: the shape of everything else.
    return problem(cal, SHAPE)


def _ceiling(cal: Mapping[str, Any], regime: str, key: str) -> float | None:
    """The clock-derived ceiling of a peak key (at boost clock: the highest a card can reach): the
    one the calibration recorded; else the one its GPU record implies (a hand-edited file without
    entries); else the datasheet figure of its part. None when nothing bounds it."""
    from .units import entry_key

    entries = ((cal.get(regime) or {}).get("entries") or {}) if isinstance(cal.get(regime), dict) else {}
    entry = entries.get(entry_key(key)) if isinstance(entries, dict) else None
    if isinstance(entry, dict):
        recorded = [float(entry[f]) for f in ("clock_derived_max", "clock_derived") if _is_peak(entry.get(f))]
        if recorded:
            return max(recorded)
    raw_gpu = cal.get("gpu")
    gpu: Mapping[str, Any] = raw_gpu if isinstance(raw_gpu, dict) else {}
    return _device_ceiling(gpu, key) or _datasheet_ceiling(gpu.get("name"), key)


def _device_ceiling(gpu: Mapping[str, Any], key: str) -> float | None:
    from .derived import _cc_tuple, derived_peaks

    try:
        major, minor = _cc_tuple(gpu.get("compute_capability"))
        derived = derived_peaks(major, minor, gpu.get("sm_count"), gpu.get("max_sm_clock_mhz"),
                                gpu.get("max_mem_clock_mhz"), gpu.get("memory_bus_width_bits"),
                                consumer="geforce" in str(gpu.get("name", "")).lower())
    except (TypeError, ValueError):  # no or a malformed record: nothing to derive from
        return None
    value = derived.bandwidth_tbps if key == "bandwidth_tbps" else getattr(derived, key, None)
    return value if _is_peak(value) else None


def _datasheet_ceiling(name: Any, key: str) -> float | None:
    from .datasheet import lookup

    sku = lookup(name) if isinstance(name, str) else None
    if sku is None:
        return None
    value = sku.bandwidth_tbps if key == "bandwidth_tbps" else sku.peak(key) if key in UNITS else None
    return value if _is_peak(value) else None


def save(cal: Mapping[str, Any]) -> Path:
    """Cache a calibration as the file of its GPU (``cache_path(cal["gpu"]["uuid"])``); returns it.

    The ``raw`` sweeps, when present, go to :func:`raw_path` instead. Atomic and locked: a
    concurrent ``save`` of the same GPU waits, and whichever finishes last wins whole. Raises
    ``ValueError`` for a dict that is not a calibration of this schema.
    """
    problem = validate(cal)
    if problem:
        raise ValueError(f"not a calibration: {problem}")
    uuid = cal["gpu"]["uuid"]
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


def load_file(path: str | os.PathLike) -> dict | None:
    """A calibration read from ``path``; None (with one warning line naming the file) when it is
    missing, corrupt, of another schema or holds impossible peaks."""
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
    problem = validate(cal)
    if problem:
        warn(f"ignoring calibration file {path}: {problem}; run 'roofline-ext calibrate' to replace it")
        return None
    return cal


def load(uuid: str) -> dict | None:
    """The cached calibration of the GPU with this UUID, or None (see :func:`load_file`)."""
    path = cache_path(uuid)
    cal = load_file(path)
    if cal is not None and cal["gpu"]["uuid"] != uuid:
        warn(f"ignoring calibration file {path}: it belongs to {cal['gpu']['uuid']}, not {uuid}")
        return None
    return cal


def list_cached() -> list[dict]:
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
    from .datasheet import lookup, normalize_name

    if normalize_name(a) == normalize_name(b):
        return True
    sa, sb = lookup(a), lookup(b)
    return sa is not None and sa is sb


def find_cached(*, uuid: str | None = None, gpu_name: str | None = None) -> dict | None:
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
    """The peaks ``roofline(measured=...)`` takes from one calibration and regime, or None.

    Only the keys the roofline model uses (``ROOFLINE_PEAK_KEYS``; today no L2): the model refuses
    keys it does not know, so that a typo never silently drops a roof.
    """
    mapping = (cal.get("peaks") or {}).get(regime) or {}
    values = {k: float(v) for k, v in mapping.items()
              if k in PEAK_KEYS and k in ROOFLINE_PEAK_KEYS and v is not None}
    if not values:
        return None
    gpu = cal.get("gpu") or {}
    mix, note = _mix_envelope(cal, regime)
    return MeasuredPeaks(peaks=values, regime=regime, uuid=gpu.get("uuid"), gpu_name=gpu.get("name"),
                         date=cal.get("date"), mode=cal.get("mode"), mix=mix, mix_note=note)


def _mix_envelope(cal: Mapping[str, Any], regime: str) -> tuple[dict[str, float] | None, str | None]:
    """The read:write envelope the measured HBM roof is read from, for one regime, and a note when
    it is not the burst sweep itself; (None, None) without a sweep.

    Points that are not finite positive figures, or that lie above the HBM ceiling (+10%, as for
    peaks), are left out. The sweep is a burst measurement; the sustained phase runs one pattern,
    so the sustained envelope is the burst one scaled by that pattern's sustained/burst ratio (HBM
    slows by the same factor at every mix only approximately, hence the note)."""
    entries = ((cal.get("burst") or {}).get("entries") or {}) if isinstance(cal.get("burst"), Mapping) else {}
    entry = entries.get("hbm_mix") if isinstance(entries, Mapping) else None
    points = entry.get("points") if isinstance(entry, Mapping) else None
    if not isinstance(points, Mapping):
        return None, None
    ceiling = _ceiling(cal, "burst", "bandwidth_tbps")
    envelope = {str(k): float(v) for k, v in points.items()
                if _is_peak(v) and (ceiling is None or v <= 1.10 * ceiling)}
    if not envelope:
        return None, None
    if regime == "burst":
        return envelope, None
    sustained = ((cal.get("sustained") or {}).get("entries") or {}).get("hbm") \
        if isinstance(cal.get("sustained"), Mapping) else None
    if not isinstance(sustained, Mapping) or not _is_peak(sustained.get("ratio_to_burst")):
        return None, None
    ratio = float(sustained["ratio_to_burst"])
    pattern = sustained.get("path") or "HBM"
    return ({k: v * ratio for k, v in envelope.items()},
            f"the burst read:write envelope x {ratio:.3f}, the sustained/burst ratio of {pattern} "
            "(the sustained phase runs that one pattern)")


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
