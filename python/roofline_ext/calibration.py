"""Calibration: the measured peaks of one GPU, burst and sustained, and their cache.

A calibration is one JSON-able dict (``calibrate()`` makes it, ``save()`` caches it) holding

- who: the GPU's name, UUID, bus id, compute capability, SMs, clocks, power limit, MIG and ECC
  state; the driver, the CUDA versions, the package version, the date and ``schema_version``;
- ``burst``: HBM bandwidth, the L2 plateau and every precision, each as an *entry* (value, best,
  CV, path, the telemetry it was reached at, the datasheet and clock-derived figures and the
  fractions of both), measured on a card at boost clocks;
- ``sustained`` (full calibrations only): each unit family (HBM, the SIMT pipes, the tensor cores)
  run back to back for ``sustained_s`` seconds, the figure taken once clocks settled, with the SM
  clock, memory clock, power and temperature it was reached at;
- ``peaks``: ``{"burst": {...}, "sustained": {...}}``, the flat mapping ``roofline(measured=...)``
  takes (``bandwidth_tbps``, ``l2_bandwidth_tbps`` in TB/s; ``fp32`` ... ``int8`` in TFLOP/s or TOPS);
- ``warnings``: every reason the figures may not be trusted (other processes, clocks not at boost,
  slowdown reasons, MIG, ECC), one sentence each.

The cache holds one file per GPU UUID in the user cache directory, so that every later roofline on
that card (``analyze``, the Python API) shows the measured roofs next to the datasheet's. Files are
written atomically (temporary file in the same directory, fsync, ``os.replace``) under an exclusive
lock, so two calibrations finishing together leave one complete file, never a mix. A file that
does not parse, or that an older/newer schema wrote, is ignored with a warning naming it: a stale
cache must never silently change a floor.

The measured figures come from ``bandwidth.py`` and ``compute.py`` (the same verified kernels for
burst and sustained); this module only plans the runs, reads telemetry and decides what to keep.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from .errors import UserError

__all__ = [
    "SCHEMA_VERSION",
    "REGIMES",
    "PEAK_KEYS",
    "CalibrationCacheWarning",
    "calibrate",
    "cache_dir",
    "cache_path",
    "save",
    "load",
    "load_file",
    "list_cached",
    "find_cached",
    "cached_peaks",
    "summary_rows",
]

#: Bumped whenever the layout of a calibration changes incompatibly; older files are then ignored
#: (with a warning) instead of being misread.
SCHEMA_VERSION = 1

#: Which measured figures a roofline can use: short runs at boost clocks, or settled after minutes.
REGIMES = ("burst", "sustained")

#: Keys of the flat peak mapping (``peaks[regime]``) that ``roofline(measured=...)`` takes.
PEAK_KEYS = ("bandwidth_tbps", "l2_bandwidth_tbps", "fp64", "fp64_tensor", "fp32", "tf32", "fp16",
             "bf16", "fp8", "int8")

#: Environment variable that moves the cache (tests, shared lab machines, read-only homes).
CACHE_ENV = "ROOFLINE_EXT_CACHE_DIR"

_APP = "roofline_ext"
_FILE_RE = re.compile(r"^calibration-(.+)\.json$")


class CalibrationCacheWarning(UserWarning):
    """A cached calibration was ignored (corrupt, other schema) or lacks what was asked of it."""


def _warn(message: str) -> None:
    # stacklevel 3: point at the caller of the public function, not at this helper.
    warnings.warn(message, CalibrationCacheWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------------
# Cache location, atomic write and lock
# --------------------------------------------------------------------------------------------------

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


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Exclusive lock on ``directory/.lock`` for the duration of the block (blocking).

    ``flock`` is released by the kernel if the process dies, so a crashed calibration never leaves
    the cache locked. Where ``fcntl`` does not exist (Windows) ``msvcrt.locking`` does the same job.
    """
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(directory / ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue  # LK_LOCK gives up after 10 s; a calibration may take minutes
            try:
                yield
            finally:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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


def _validate(cal: Any) -> str | None:
    """Why ``cal`` is not a usable calibration of this schema, or None if it is."""
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
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                return f"peaks.{regime}.{key} is {value!r}, not a positive number"
    return None


def save(cal: Mapping[str, Any]) -> Path:
    """Cache a calibration as the file of its GPU (``cache_path(cal["gpu"]["uuid"])``); returns it.

    Atomic and locked: a concurrent ``save`` of the same GPU waits, and whichever finishes last
    wins whole. Raises ``ValueError`` for a dict that is not a calibration of this schema.
    """
    problem = _validate(cal)
    if problem:
        raise ValueError(f"not a calibration: {problem}")
    path = cache_path(cal["gpu"]["uuid"])
    # allow_nan=False: NaN is not JSON and would make the file unreadable by strict parsers.
    text = json.dumps(cal, indent=1, sort_keys=False, allow_nan=False) + "\n"
    with _locked(path.parent):
        _write_atomic(path, text)
    return path


def load_file(path: str | os.PathLike) -> dict | None:
    """A calibration read from ``path``; None (with a ``CalibrationCacheWarning`` naming the file)
    when it is missing, corrupt or of another schema."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        _warn(f"ignoring calibration file {path}: cannot read it ({exc.strerror or exc})")
        return None
    try:
        cal = json.loads(text)
    except ValueError as exc:
        _warn(f"ignoring calibration file {path}: corrupt JSON ({exc}); "
              "run 'roofline-ext calibrate' to replace it")
        return None
    problem = _validate(cal)
    if problem:
        _warn(f"ignoring calibration file {path}: {problem}; run 'roofline-ext calibrate' to replace it")
        return None
    return cal


def load(uuid: str) -> dict | None:
    """The cached calibration of the GPU with this UUID, or None (see :func:`load_file`)."""
    path = cache_path(uuid)
    cal = load_file(path)
    if cal is not None and cal["gpu"]["uuid"] != uuid:
        _warn(f"ignoring calibration file {path}: it belongs to {cal['gpu']['uuid']}, not {uuid}")
        return None
    return cal


def list_cached() -> list[dict]:
    """Every readable cached calibration, newest first (unreadable ones warned about and skipped)."""
    directory = cache_dir()
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.iterdir()):
        if _FILE_RE.match(path.name) and path.is_file():
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


def _roofline_keys() -> frozenset[str]:
    """The measured-peak keys ``roofline(measured=...)`` accepts.

    ``roofline`` refuses keys it does not know (a typo must not silently drop a roof), and today
    it has no L2 roof: handing it ``l2_bandwidth_tbps`` would fail every analysis on a calibrated
    GPU. So the cache offers exactly what roofline takes, and L2 flows through the day it does.
    """
    try:
        import importlib

        # The module, not the package's `roofline` function of the same name.
        _roofline = importlib.import_module(".roofline", __package__)
        keys = getattr(_roofline, "_MEASURED_KEYS", None)
    except ImportError:
        keys = None
    return frozenset(keys) if keys else frozenset(PEAK_KEYS)


def _peaks_of(cal: Mapping[str, Any], regime: str) -> dict[str, float] | None:
    mapping = (cal.get("peaks") or {}).get(regime) or {}
    accepted = _roofline_keys()
    out = {k: float(v) for k, v in mapping.items()
           if k in PEAK_KEYS and k in accepted and v is not None}
    return out or None


def cached_peaks(*, uuid: str | None = None, gpu_name: str | None = None,
                 regime: str = "burst") -> dict[str, float] | None:
    """Measured peaks for ``roofline(measured=...)`` from the cache, or None when none are cached.

    ``regime`` is ``"burst"`` (default) or ``"sustained"``. Matching is by ``uuid`` when given, else
    by ``gpu_name`` (newest calibration of that part). A cached quick calibration has no sustained
    figures: asking for them warns and returns None rather than silently handing out burst ones.
    Only the keys ``roofline`` accepts are returned (today: no ``l2_bandwidth_tbps``; see
    ``_roofline_keys``); ``find_cached`` gives the whole calibration.
    """
    if regime not in REGIMES:
        raise UserError(f"unknown regime {regime!r}; choose one of: {', '.join(REGIMES)}")
    cal = find_cached(uuid=uuid, gpu_name=gpu_name)
    if cal is None:
        return None
    peaks = _peaks_of(cal, regime)
    if peaks is None and regime == "sustained":
        _warn(f"the cached calibration of {cal['gpu'].get('name')} ({cal['gpu']['uuid']}, "
              f"{cal.get('mode', '?')}, {cal.get('date', '?')}) has no sustained figures; run "
              "'roofline-ext calibrate' (full) to measure them")
    return peaks


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------

#: What a quick calibration measures: HBM and the precisions most kernels are bound by.
QUICK_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
#: What a full calibration measures in its burst phase.
FULL_PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
#: Unit families of the sustained phase: the memory system, the SIMT pipes, the tensor cores. BF16
#: stands for the tensor cores because it is the precision most training runs at and the one that
#: draws the most power per SM (MEASURING.md: 1980 -> ~1470 MHz at 700 W on an H200).
SUSTAINED_FAMILIES = ("hbm", "fp32", "bf16")
DEFAULT_SUSTAINED_S = 30.0

# Settling: the sustained figure is the median over the last third of the window; the run counts
# as settled when that third's SM clock and figure are within this of the middle third's.
_SETTLE_TOLERANCE = 0.02
# Each sustained call is sized to last about this long, so gaps between calls (allocation, filling,
# verification) are a small part of the window and the card never gets time to cool.
_SUSTAINED_CALL_S = 2.0
# Burst clock below this fraction of the maximum: the card did not reach boost.
_BOOST_FRACTION = 0.95
_WARM_START_C = 60

_LABELS = {"hbm": "HBM", "l2": "L2", "fp64": "FP64", "fp64_tensor": "FP64 tensor", "fp32": "FP32",
           "tf32": "TF32", "fp16": "FP16", "bf16": "BF16", "fp8": "FP8", "int8": "INT8"}
#: Order of rows in tables and of entries in the JSON.
ENTRY_ORDER = ("hbm", "l2", "fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
_PEAK_KEY = {"hbm": "bandwidth_tbps", "l2": "l2_bandwidth_tbps"}


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _median_of(stat: Any) -> float | None:
    """The median of a telemetry min/median/max dict (or a plain number)."""
    if isinstance(stat, Mapping):
        stat = stat.get("median")
    return float(stat) if isinstance(stat, (int, float)) and not isinstance(stat, bool) else None


class _Steps:
    """Drives the caller's ``progress(done, total, description)`` from planned step weights.

    Weights are rough seconds, so the bar moves at about the speed of the wall clock; a step may
    report partial progress (the sustained phase does, once per call).
    """

    def __init__(self, progress: Callable[[float, float, str], None] | None, total: float, prefix: str):
        self.progress = progress
        self.total = max(total, 1e-9)
        self.done = 0.0
        self.prefix = prefix

    def report(self, description: str, partial: float = 0.0) -> None:
        if self.progress is not None:
            self.progress(min(self.done + partial, self.total), self.total, f"{self.prefix}{description}")

    @contextlib.contextmanager
    def step(self, description: str, weight: float) -> Iterator[Callable[..., None]]:
        """Yields ``update(fraction, detail=None)`` for progress within the step."""
        self.report(description)

        def update(fraction: float, detail: str | None = None) -> None:
            text = f"{description}: {detail}" if detail else description
            self.report(text, weight * min(max(fraction, 0.0), 1.0))

        yield update
        self.done += weight
        self.report(description)


def _nvml_state(dev: Any) -> dict[str, Any]:
    """A fresh NVML reading of the device (clocks, power, reasons, processes); {} without NVML."""
    from ._native import core_or_none

    core = core_or_none()
    if core is None or not getattr(dev, "pci_bus_id", None):
        return {}
    try:
        return dict(core.nvml_device_by_pci_bus_id(dev.pci_bus_id))
    except Exception:  # NVML unavailable: the warnings that need it are simply not given
        return {}


def _state(dev: Any) -> dict[str, Any]:
    nv = _nvml_state(dev)

    def pick(nv_key: str, attr: str, scale: float = 1.0):
        v = nv.get(nv_key)
        if v is not None:
            return v * scale if scale != 1.0 else v
        return getattr(dev, attr, None)

    procs = nv.get("compute_processes", getattr(dev, "compute_processes", None))
    return {
        "sm_clock_mhz": pick("sm_clock_mhz", "sm_clock_mhz"),
        "mem_clock_mhz": pick("mem_clock_mhz", "mem_clock_mhz"),
        "temperature_c": pick("temperature_c", "temperature_c"),
        "power_draw_w": pick("power_draw_mw", "power_draw_w", 1e-3),
        "clock_event_reasons": nv.get("clock_event_reason_names", getattr(dev, "clock_event_reasons", None)),
        # This process holds a CUDA context on the device by now (device identification creates
        # one), and NVML counts it: everyone else is the count minus one.
        "other_compute_processes": None if procs is None else max(0, int(procs) - 1),
        "ecc_pending": None if nv.get("ecc_pending") is None else ("enabled" if nv["ecc_pending"] else "disabled"),
    }


def _identity(dev: Any) -> dict[str, Any]:
    return {
        "index": dev.index,
        "name": dev.name,
        "uuid": dev.uuid,
        "pci_bus_id": dev.pci_bus_id,
        "compute_capability": f"{dev.cc_major}.{dev.cc_minor}",
        "architecture": dev.architecture,
        "sm_count": dev.sm_count,
        "l2_bytes": dev.l2_bytes,
        "memory_total_bytes": dev.memory_total_bytes,
        "memory_bus_width_bits": dev.memory_bus_width_bits,
        "max_sm_clock_mhz": dev.max_sm_clock_mhz,
        "max_mem_clock_mhz": dev.max_mem_clock_mhz,
        "power_limit_w": dev.power_limit_w,
        "mig_mode": dev.mig_mode,
        "ecc_mode": dev.ecc_mode,
    }


def _start_warnings(dev: Any, state: Mapping[str, Any]) -> list[str]:
    out = []
    others = state.get("other_compute_processes")
    if others:
        out.append(f"{others} other process(es) have a CUDA context on this GPU: they compete for it "
                   "and the figures may be low; calibrate an idle card")
    if dev.mig_mode == "enabled":
        out.append("MIG is enabled: the figures are those of one MIG instance, not of the whole GPU, "
                   "and do not apply to the card without MIG")
    if dev.ecc_mode == "disabled":
        out.append("ECC is disabled: most deployed cards run with ECC on, and figures measured without "
                   "it may not carry over")
    pending = state.get("ecc_pending")
    if pending and dev.ecc_mode and pending != dev.ecc_mode:
        out.append(f"an ECC mode change ({dev.ecc_mode} -> {pending}) is pending a reset: recalibrate after it")
    reasons = [r for r in state.get("clock_event_reasons") or [] if r != "gpu_idle"]
    slow = [r for r in reasons if r in _slowdown_reasons()]
    if slow:
        out.append(f"the GPU was already slowed down at start ({', '.join(slow)}): burst figures will be "
                   "below a cool card's")
    idle = "gpu_idle" in (state.get("clock_event_reasons") or [])
    clock, top = state.get("sm_clock_mhz"), dev.max_sm_clock_mhz
    if clock and top and not idle and clock < _BOOST_FRACTION * top:
        out.append(f"SM clock at start is {clock} MHz, below the {top} MHz boost clock, on a GPU that is "
                   "not idle (locked clocks, application clocks or another workload)")
    temp = state.get("temperature_c")
    if temp is not None and temp >= _WARM_START_C:
        out.append(f"the GPU was already at {temp} C at start: burst figures may be below a cool card's")
    return out


def _slowdown_reasons() -> tuple[str, ...]:
    from .telemetry import SLOWDOWN_REASONS

    return SLOWDOWN_REASONS


# Slowdown reasons that burst figures must not carry: the power cap is how tensor pipes normally run
# at full tilt on a 700 W part, so it is recorded in the telemetry but is not, by itself, a warning.
_BURST_BAD_REASONS = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def _entry_warnings(key: str, entry: Mapping[str, Any], dev: Any, regime: str) -> list[str]:
    out = []
    tel = entry.get("telemetry") or {}
    bad = [r for r in tel.get("throttle_reasons") or [] if r in _BURST_BAD_REASONS]
    if bad:
        out.append(f"{_LABELS.get(key, key)} {regime} figure was reached under {', '.join(bad)}: thermal or "
                   "hardware slowdown; check cooling and power delivery")
    if regime == "burst" and key not in ("hbm", "l2"):
        top = dev.max_sm_clock_mhz
        peak_clock = (tel.get("sm_clock_mhz") or {}).get("max") if isinstance(tel.get("sm_clock_mhz"), Mapping) else None
        if top and peak_clock and peak_clock < _BOOST_FRACTION * top:
            out.append(f"{_LABELS.get(key, key)}: the SM clock never reached boost during the burst "
                       f"measurement (at most {peak_clock:.0f} of {top} MHz): locked or application clocks?")
    frac = entry.get("fraction_of_clock_derived")
    if isinstance(frac, (int, float)) and frac > 1.0 + 1e-6:
        out.append(f"{_LABELS.get(key, key)} {regime} figure is {frac:.1%} of the clock-derived peak at the "
                   "clock observed: a measurement above the silicon's ceiling is a bug; do not trust it")
    return out


# --- adapters to the measurement modules ----------------------------------------------------------
# Burst figures are exactly what bandwidth.py / compute.py report (same functions, same policy), so
# a calibration and a standalone measurement agree; only how often and how long they run differs.

#: Quick mode: the two patterns that give the HBM peak on every GPU measured so far, fewer reps.
_QUICK_PATTERNS = ("read", "copy")


def _measure_bandwidth(device: int, *, quick: bool,
                       progress: Callable[[float, float, str], None] | None = None) -> Any:
    from .bandwidth import measure_bandwidth

    if quick:
        return measure_bandwidth(device, patterns=_QUICK_PATTERNS, reps=15, warmup=3, l2=False,
                                 progress=progress)
    return measure_bandwidth(device, l2=True, progress=progress)


def _telemetry_fields(tel: Mapping[str, Any] | None) -> dict[str, Any]:
    tel = tel or {}
    return {"sm_clock_mhz": _median_of(tel.get("sm_clock_mhz")),
            "mem_clock_mhz": _median_of(tel.get("mem_clock_mhz")),
            "power_w": _median_of(tel.get("power_w")),
            "telemetry": tel or None}


def _config_text(cfg: Mapping[str, Any]) -> str:
    bits = [f"{cfg.get('threads')} threads x unroll {cfg.get('unroll')}"]
    if cfg.get("blocks_per_sm"):
        bits.append(f"persistent grid ({cfg.get('blocks_per_sm')}/SM requested)")
    if cfg.get("load"):
        bits.append(f"{cfg['load']} loads")
    if cfg.get("store") and cfg.get("store") != "plain":
        bits.append(f"{cfg['store']} stores")
    if cfg.get("bulk_bytes"):
        bits.append(f"bulk {cfg['bulk_bytes']} B")
    return ", ".join(bits)


def _bandwidth_entries(bw: Any, dev: Any, sheet: Any) -> dict[str, dict[str, Any]]:
    from .derived import clock_derived_bandwidth

    out: dict[str, dict[str, Any]] = {}
    peak = bw.peak
    fields = _telemetry_fields(peak.telemetry)
    mem = fields["mem_clock_mhz"] or dev.max_mem_clock_mhz
    derived = clock_derived_bandwidth(mem, dev.memory_bus_width_bits)
    ds = sheet.bandwidth_tbps if sheet is not None else None
    out["hbm"] = {
        "label": "HBM", "unit": "TB/s",
        "value": peak.tbps_median, "best": peak.tbps_best, "cv": peak.cv,
        "path": peak.pattern,
        "detail": f"{peak.pattern}, {peak.buffer_bytes / 2**30:.2f} GiB per buffer, {_config_text(peak.config)}",
        "config": dict(peak.config), "reps": peak.reps, "bytes_per_launch": peak.bytes_per_launch,
        "buffer_bytes": peak.buffer_bytes,
        "datasheet": ds, "fraction_of_datasheet": peak.tbps_median / ds if ds else None,
        "clock_derived": derived, "fraction_of_clock_derived": peak.tbps_median / derived if derived else None,
        "patterns": {name: {"tbps": r.tbps_median, "cv": r.cv, "config": dict(r.config),
                            "buffer_bytes": r.buffer_bytes} for name, r in bw.patterns.items()},
        **fields,
    }
    if bw.l2 is not None:
        plateau = bw.l2.plateau
        out["l2"] = {
            "label": "L2", "unit": "TB/s",
            "value": plateau.tbps_median, "best": plateau.tbps_best, "cv": plateau.cv,
            "path": "l2_read",
            "detail": f"reads of a {plateau.working_set_bytes / 2**20:.0f} MiB working set "
                      f"(L2 {bw.l2.l2_bytes / 2**20:.0f} MiB), {_config_text(plateau.config)}",
            "config": dict(plateau.config), "reps": plateau.reps,
            "working_set_bytes": plateau.working_set_bytes,
            # Neither NVIDIA nor the device attributes give an L2 bandwidth to compare with.
            "datasheet": None, "fraction_of_datasheet": None,
            "clock_derived": None, "fraction_of_clock_derived": None,
            **_telemetry_fields(bw.l2.telemetry),
        }
    return out


def _measure_compute(device: int, precision: str, *, quick: bool,
                     progress: Callable[[str], None] | None = None) -> Any:
    """One precision, every path that can run it (the best path's median is the roof)."""
    from .compute import measure_compute

    if quick:
        # Fewer repetitions and a shorter idle before each path keep the quick run within ~15 s;
        # the kernels, their sizing and their verification are the standalone ones.
        return measure_compute(device, precisions=(precision,), reps=12, warmup=3, cooldown_s=0.2,
                               progress=progress)
    return measure_compute(device, precisions=(precision,), progress=progress)


def _compute_entries(comp: Any, dev: Any, sheet: Any) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    entries: dict[str, dict[str, Any]] = {}
    unsupported: dict[str, str] = {}
    for prec, r in comp.precisions.items():
        best = r.best
        if r.status != "ok" or best is None:
            unsupported[prec] = str(r.reason or "unsupported")
            continue
        tel = best.telemetry or {}
        others = {}
        for path, pr in r.paths.items():
            if path != best.path:
                others[path] = pr.tflops_median if pr.ok else f"unsupported: {pr.reason}"
        # compute.py looks the datasheet up by the device name too; fill in if it could not.
        datasheet = best.datasheet or (sheet.peak(prec) if sheet is not None else None)
        detail = best.instruction or best.path
        if best.config:
            detail += " (" + ", ".join(f"{k}={v}" for k, v in best.config.items()) + ")"
        entries[prec] = {
            "label": _LABELS.get(prec, prec), "unit": best.unit,
            "value": best.tflops_median, "best": best.tflops_best, "cv": best.cv,
            "path": best.path, "detail": detail, "instruction": best.instruction,
            "config": dict(best.config), "launch": dict(best.launch), "reps": best.reps,
            "datasheet": datasheet, "fraction_of_datasheet": best.tflops_median / datasheet if datasheet else None,
            "clock_derived": best.clock_derived_peak,
            "fraction_of_clock_derived": best.fraction_of_clock_derived,
            "kernel_clock_mhz": best.kernel_clock_mhz,
            "fraction_of_clock_derived_at_kernel_clock": best.fraction_of_clock_derived_at_kernel_clock,
            "other_paths": others,
            **_telemetry_fields(tel),
        }
        # compute.py reads the SM clock the same way; keep its figure if telemetry had none.
        entries[prec]["sm_clock_mhz"] = entries[prec]["sm_clock_mhz"] or best.sm_clock_mhz
    return entries, unsupported


#: The pattern the sustained HBM phase runs when it was measured: copy is verified on the GPU by a
#: spot check, while read's checksum is recomputed on the host for every call (about a second for
#: 4 GiB), time in which the card would idle and cool, flattering the sustained figure.
_SUSTAINED_HBM_PATTERN = "copy"


def _hbm_for_sustain(hbm: Mapping[str, Any]) -> dict[str, Any]:
    """The HBM entry re-pointed at the pattern the sustained phase runs (see above), with that
    pattern's own burst figure so that the sustained/burst ratio compares like with like."""
    pattern = _SUSTAINED_HBM_PATTERN if _SUSTAINED_HBM_PATTERN in (hbm.get("patterns") or {}) else hbm["path"]
    p = (hbm.get("patterns") or {}).get(pattern)
    if not p or pattern == hbm["path"]:
        return dict(hbm)
    return dict(hbm, path=pattern, value=p["tbps"], config=p["config"], buffer_bytes=p["buffer_bytes"])


def _sustained_runner(device: int, family: str, burst: Mapping[str, Any], dev: Any) -> Callable[[int], float]:
    """``run_once(reps) -> figure`` for one unit family: the burst winner's kernel and configuration,
    called with the measurement modules' own functions (so every call is verified again)."""
    if family == "hbm":
        from .bandwidth import measure_pattern

        pattern, config, size = burst["path"], dict(burst["config"]), int(burst["buffer_bytes"])
        theoretical = dev.theoretical_bandwidth_tbps

        def run_hbm(reps: int) -> float:
            return measure_pattern(device, pattern, size, configs=[config], reps=reps, warmup=1,
                                   theoretical_tbps=theoretical).tbps_median
        return run_hbm
    if family == "l2":
        from .bandwidth import measure_l2

        config, ws = dict(burst["config"]), int(burst["working_set_bytes"])

        def run_l2(reps: int) -> float:
            return measure_l2(device, dev.l2_bytes, sizes=[ws], configs=[config], reps=reps,
                              warmup=1).plateau.tbps_median
        return run_l2

    from ._native import core
    from .compute import measure_path

    _core = core()
    facts = _core.compute_device(device)
    path, config = burst["path"], dict(burst["config"])
    # Fixed loop trips (the burst run's), so every call runs the same kernel without re-sizing it.
    iterations = int((burst.get("launch") or {}).get("iterations") or 0)

    def run_compute(reps: int) -> tuple[float, float | None]:
        r = measure_path(device, family, path, config, reps=reps, warmup=1, iterations=iterations,
                         cooldown_s=0.0, _core=_core, _device=facts)
        return r.tflops_median, r.kernel_clock_mhz
    return run_compute


def _sustain(run_once: Callable[[int], Any], seconds: float, device: int,
             report: Callable[[float], None]) -> dict[str, Any]:
    """Run ``run_once(reps)`` back to back for ``seconds`` under one telemetry sampler.

    ``run_once`` returns the figure, or ``(figure, kernel_clock_mhz)`` when the kernel counts its own
    clock (the compute kernels do: under tensor load it reads ~9% below NVML's SM clock).

    Returns the sustained figure (median over the last third of the window, once clocks had time
    to settle), the telemetry of that third, whether it had settled (last third within 2% of the
    middle third in both SM clock and figure) and the timelines for anyone who wants to look.
    """
    from .telemetry import sampling, summarize

    points: list[tuple[float, float]] = []  # (mid-time of the call, figure)
    kernel_clocks: list[tuple[float, float]] = []  # (mid-time, clock the kernel counted)
    reps = 4
    with sampling(device) as tel:
        t_begin = time.monotonic()
        while True:
            t_call = time.monotonic()
            value = run_once(reps)
            t_end = time.monotonic()
            t_mid = (t_call + t_end) / 2 - t_begin
            if isinstance(value, tuple):
                value, kclock = value
                if kclock:
                    kernel_clocks.append((t_mid, float(kclock)))
            points.append((t_mid, float(value)))
            # Size the next call to last _SUSTAINED_CALL_S, from this one's wall time (kernels plus
            # set-up and verification), so calls stay long against their gaps at any unit's speed.
            elapsed = max(t_end - t_call, 1e-3)
            reps = int(min(max(reps * _SUSTAINED_CALL_S / elapsed, 1), 1_000_000))
            report((t_end - t_begin) / seconds)
            if t_end - t_begin >= seconds:
                break
    duration = time.monotonic() - t_begin

    def window(lo: float, hi: float, at_least: int) -> list[tuple[float, float]]:
        inside = [p for p in points if lo <= p[0] <= hi]
        return inside if len(inside) >= at_least else points[-at_least:]

    last = window(duration * 2 / 3, duration, 3)
    middle = [p for p in points if duration / 3 <= p[0] < duration * 2 / 3]
    w_lo = min(t for t, _ in last)
    samples = tel.samples
    last_samples = [s for s in samples if s.get("t_s", 0.0) >= w_lo]
    mid_samples = [s for s in samples if duration / 3 <= s.get("t_s", 0.0) < w_lo]
    summary = summarize(last_samples) if last_samples else None
    value = statistics.median(v for _, v in last)
    last_kclocks = [c for t, c in kernel_clocks if t >= w_lo]

    def clock_of(ss: list[dict]) -> float | None:
        vals = [s["sm_clock_mhz"] for s in ss if s.get("sm_clock_mhz") is not None]
        return statistics.median(vals) if vals else None

    settled = None
    if middle:
        mid_value = statistics.median(v for _, v in middle)
        settled = abs(value - mid_value) <= _SETTLE_TOLERANCE * max(value, mid_value)
        c_mid, c_last = clock_of(mid_samples), clock_of(last_samples)
        if settled and c_mid and c_last:
            settled = abs(c_last - c_mid) <= _SETTLE_TOLERANCE * max(c_last, c_mid)
    step = max(1, len(samples) // 150)  # keep the stored clock timeline to ~150 points
    return {
        "value": value,
        "duration_s": round(duration, 2),
        "window_s": [round(w_lo, 2), round(duration, 2)],
        "iterations": len(points),
        "settled": settled,
        "sm_clock_mhz": _median_of((summary or {}).get("sm_clock_mhz")),
        "mem_clock_mhz": _median_of((summary or {}).get("mem_clock_mhz")),
        "power_w": _median_of((summary or {}).get("power_w")),
        "temperature_c": _median_of((summary or {}).get("temperature_c")),
        "kernel_clock_mhz": statistics.median(last_kclocks) if last_kclocks else None,
        "throttle_reasons": (summary or {}).get("throttle_reasons", []),
        "telemetry": summary,
        "telemetry_error": tel.error,
        "timeline": [[round(t, 2), round(v, 4)] for t, v in points],
        "clock_timeline": [[round(s.get("t_s", 0.0), 2), s.get("sm_clock_mhz"), s.get("power_w"),
                            s.get("temperature_c")] for s in samples[::step]],
    }


def calibrate(device: int = 0, *, quick: bool = False, sustained_s: float = DEFAULT_SUSTAINED_S,
              progress: Callable[[float, float, str], None] | None = None,
              families: Sequence[str] = SUSTAINED_FAMILIES,
              precisions: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure GPU ``device`` (CUDA index) and return the calibration as a JSON-ready dict.

    ``quick``: HBM bandwidth and FP32/TF32/FP16/BF16 only, no L2, no sustained phase (seconds).
    Otherwise every precision, HBM and L2, then each of ``families`` ("hbm", "fp32", "bf16", or any
    measured precision) run for ``sustained_s`` seconds (0 skips the phase). ``progress`` is called
    as ``progress(done, total, description)`` with rough seconds as units. ``precisions`` overrides
    the list of precisions measured. Raises ``GpuUnavailableError`` when the device cannot be
    measured, ``UserError`` for a bad index. Nothing is cached here: ``save()`` does that.
    """
    from . import __version__
    from .availability import require_measurement
    from .datasheet import lookup
    from .devices import device as get_device

    avail = require_measurement(device)
    t_start = time.monotonic()
    dev = get_device(device)
    state = _state(dev)
    trust = _start_warnings(dev, state)
    sheet = lookup(dev.name)
    precs = tuple(precisions) if precisions else (QUICK_PRECISIONS if quick else FULL_PRECISIONS)
    families = tuple(families) if (not quick and sustained_s and sustained_s > 0) else ()

    # Rough seconds per step, only for the progress bar.
    weights = {"bw": 3.0 if quick else 8.0, "prec": 1.5 if quick else 3.0, "sus": float(sustained_s) + 2.0}
    total = weights["bw"] + weights["prec"] * len(precs) + weights["sus"] * len(families)
    steps = _Steps(progress, total, prefix=f"{'quick' if quick else 'full'} calibration: ")

    entries: dict[str, dict[str, Any]] = {}
    unsupported: dict[str, str] = {}
    raw: dict[str, Any] = {"bandwidth": None, "compute": {}}
    with steps.step("HBM bandwidth" + ("" if quick else " and L2"), weights["bw"]) as update:
        bw = _measure_bandwidth(device, quick=quick,
                                progress=lambda done, of, what: update(done / of if of else 0.0, what))
    raw["bandwidth"] = bw
    entries.update(_bandwidth_entries(bw, dev, sheet))
    for prec in precs:
        label = f"{_LABELS.get(prec, prec)} throughput"
        with steps.step(label, weights["prec"]) as update:
            comp = _measure_compute(device, prec, quick=quick,
                                    progress=lambda line, update=update: update(0.0, line))
        raw["compute"][prec] = comp
        found, missing = _compute_entries(comp, dev, sheet)
        entries.update(found)
        unsupported.update(missing)

    sustained: dict[str, Any] | None = None
    if families:
        sustained = {"duration_s": float(sustained_s), "entries": {}}
        for fam in families:
            burst = entries.get(fam)
            if burst is None:
                unsupported_reason = unsupported.get(fam, "no burst figure to sustain")
                sustained["entries"][fam] = None
                trust.append(f"sustained {_LABELS.get(fam, fam)} skipped: {unsupported_reason}")
                continue
            if fam == "hbm":
                burst = _hbm_for_sustain(burst)
            with steps.step(f"sustained {_LABELS.get(fam, fam)} for {sustained_s:g} s",
                            weights["sus"]) as part:
                run_once = _sustained_runner(device, fam, burst, dev)
                s = _sustain(run_once, float(sustained_s), device, part)
            s.update(_sustained_fractions(fam, s, burst, dev))
            sustained["entries"][fam] = s
        sustained["entries"] = {k: v for k, v in sustained["entries"].items() if v is not None}

    end_state = _state(dev)
    before, after = state.get("other_compute_processes"), end_state.get("other_compute_processes")
    if after and (before or 0) < after:
        trust.append(f"{after - (before or 0)} other process(es) started using the GPU during the "
                     "calibration: the figures may be low; calibrate an idle card")
    for key, e in entries.items():
        trust.extend(_entry_warnings(key, e, dev, "burst"))
    for key, e in ((sustained or {}).get("entries") or {}).items():
        trust.extend(_entry_warnings(key, e, dev, "sustained"))
        if e.get("settled") is False:
            trust.append(f"sustained {_LABELS.get(key, key)}: clocks or figure still moving at the end of "
                         f"the {sustained_s:g} s window; run a longer --sustained")

    build = {}
    try:
        from ._native import core

        build = core().build_info()
    except Exception:  # identity only; the measurement above already proved the core works
        pass
    runtime = build.get("cuda_runtime_version")
    cal: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "roofline_ext.calibration",
        "mode": "quick" if quick else "full",
        "date": _now_iso(),
        "package_version": __version__,
        "driver_version": dev.driver_version,
        "cuda_driver_version": dev.cuda_driver_version,
        "cuda_runtime_version": f"{runtime // 1000}.{(runtime % 1000) // 10}" if runtime else None,
        "wall_s": None,
        "gpu": _identity(dev),
        "state_at_start": state,
        "state_at_end": end_state,
        "availability": avail.to_dict(),
        "datasheet": None if sheet is None else {"sku": sheet.name, "peaks": _datasheet_mapping(sheet)},
        "burst": {"entries": {k: entries[k] for k in ENTRY_ORDER if k in entries}, "unsupported": unsupported},
        "sustained": sustained,
        "peaks": {
            "burst": _peak_mapping(entries),
            "sustained": _peak_mapping((sustained or {}).get("entries") or {}) or None,
        },
        "warnings": _dedupe(trust),
        "raw": raw,
    }
    if cal["peaks"]["sustained"] is None:
        del cal["peaks"]["sustained"]
    cal["wall_s"] = round(time.monotonic() - t_start, 2)
    # Round-trip through JSON now, so that what calibrate() returns is exactly what save() writes;
    # a stray NaN/inf deep in a raw result becomes null instead of failing minutes of measuring.
    return _finite(json.loads(json.dumps(cal, default=_json_default)))


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for i in items:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def _datasheet_mapping(sheet: Any) -> dict[str, float]:
    from .datasheet import UNITS

    out = {"bandwidth_tbps": sheet.bandwidth_tbps}
    out.update({u: sheet.peak(u) for u in UNITS if sheet.peak(u) is not None})
    return out


def _peak_mapping(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    out = {}
    for key, e in entries.items():
        v = e.get("value") if isinstance(e, Mapping) else None
        if isinstance(v, (int, float)) and v > 0 and math.isfinite(v):
            out[_PEAK_KEY.get(key, key)] = float(v)
    return out


def _sustained_fractions(fam: str, s: Mapping[str, Any], burst: Mapping[str, Any], dev: Any) -> dict[str, Any]:
    from .derived import clock_derived_bandwidth, clock_derived_peak

    out: dict[str, Any] = {"label": burst.get("label"), "unit": burst.get("unit"), "path": burst.get("path"),
                           "burst": burst.get("value")}
    out["ratio_to_burst"] = s["value"] / burst["value"] if burst.get("value") else None
    if fam == "hbm":
        cd = clock_derived_bandwidth(s.get("mem_clock_mhz"), dev.memory_bus_width_bits)
    elif fam == "l2":
        cd = None
    else:
        cd = clock_derived_peak(fam, (dev.cc_major, dev.cc_minor), dev.sm_count or 0,
                                s.get("sm_clock_mhz") or 0, consumer="geforce" in str(dev.name).lower())
    out["clock_derived"] = cd
    out["fraction_of_clock_derived"] = s["value"] / cd if cd else None
    if fam not in ("hbm", "l2") and s.get("kernel_clock_mhz"):
        at_kernel = clock_derived_peak(fam, (dev.cc_major, dev.cc_minor), dev.sm_count or 0,
                                       s["kernel_clock_mhz"], consumer="geforce" in str(dev.name).lower())
        out["fraction_of_clock_derived_at_kernel_clock"] = s["value"] / at_kernel if at_kernel else None
    return out


# --------------------------------------------------------------------------------------------------
# Presenting
# --------------------------------------------------------------------------------------------------

def peak_label(key: str) -> str:
    """"HBM (TB/s)", "FP32 (TFLOP/s)", "INT8 (TOP/s)" for a peak key or an entry key."""
    entry = {"bandwidth_tbps": "hbm", "l2_bandwidth_tbps": "l2"}.get(key, key)
    unit = "TB/s" if entry in ("hbm", "l2") else ("TOP/s" if entry == "int8" else "TFLOP/s")
    return f"{_LABELS.get(entry, entry)} ({unit})"


def _pct(x: Any) -> str | None:
    return f"{x:.1%}" if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _at(entry: Mapping[str, Any], key: str) -> str | None:
    bits = []
    # HBM bandwidth follows the memory clock; L2 and the compute units follow the SM clock.
    if key == "hbm":
        if entry.get("mem_clock_mhz"):
            bits.append(f"mem {entry['mem_clock_mhz']:.0f} MHz")
    elif entry.get("sm_clock_mhz"):
        bits.append(f"{entry['sm_clock_mhz']:.0f} MHz")
        if entry.get("kernel_clock_mhz"):
            bits[-1] += f" (kernel {entry['kernel_clock_mhz']:.0f})"
    if entry.get("power_w"):
        bits.append(f"{entry['power_w']:.0f} W")
    return ", ".join(bits) or None


def summary_rows(cal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per measured unit, as strings: what the CLI's table shows (burst and sustained side
    by side, each with the clock and power it was reached at; fractions of datasheet and of the
    clock-derived peak; the path/kernel that reached it). Unsupported units say why."""
    burst = (cal.get("burst") or {}).get("entries") or {}
    unsupported = (cal.get("burst") or {}).get("unsupported") or {}
    sustained = ((cal.get("sustained") or {}).get("entries")) or {}
    rows = []
    for key in ENTRY_ORDER:
        b, s = burst.get(key), sustained.get(key)
        if b is None and s is None:
            if key in unsupported:
                rows.append({"key": key, "label": peak_label(key), "burst": "unsupported",
                             "fraction_of_datasheet": None, "fraction_of_clock_derived": None,
                             "burst_at": None, "sustained": None, "sustained_at": None,
                             "path": str(unsupported[key])})
            continue
        row = {"key": key, "label": peak_label(key), "burst": None, "fraction_of_datasheet": None,
               "fraction_of_clock_derived": None, "burst_at": None, "sustained": None,
               "sustained_at": None, "path": None}
        if b:
            cv = b.get("cv")
            row["burst"] = f"{b['value']:.4g}" + (f" ±{cv:.1%}" if isinstance(cv, (int, float)) else "")
            row["fraction_of_datasheet"] = _pct(b.get("fraction_of_datasheet"))
            row["fraction_of_clock_derived"] = _pct(b.get("fraction_of_clock_derived"))
            at_kernel = _pct(b.get("fraction_of_clock_derived_at_kernel_clock"))
            if at_kernel:
                row["fraction_of_clock_derived"] = f"{row['fraction_of_clock_derived'] or '-'} (k {at_kernel})"
            row["burst_at"] = _at(b, key)
            row["path"] = b.get("path")
        if s:
            ratio = s.get("ratio_to_burst")
            row["sustained"] = f"{s['value']:.4g}" + (f" ({ratio:.0%})" if isinstance(ratio, (int, float)) else "")
            at = _at(s, key)
            if s.get("settled") is False:
                at = (at + ", " if at else "") + "not settled"
            row["sustained_at"] = at
            if row["path"] and s.get("path") and s["path"] != row["path"]:
                row["path"] = f"{row['path']} (sustained: {s['path']})"
            row["path"] = row["path"] or s.get("path")
        rows.append(row)
    return rows
