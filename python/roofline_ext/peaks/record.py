"""One GPU's calibration as the cache stores it, typed: :class:`CalibrationRecord` and its parts.

A calibration travels as the JSON document ``calibrate()`` writes and the cache keeps; until now
every reader opened it by key chains (``((cal.get("burst") or {}).get("entries") or {}).get(...)``)
and the cache validated it in a function of its own. Here the two meet:

- :meth:`CalibrationRecord.from_dict` *is* the cache's validation (:func:`problem_of`: the schema
  version, the GPU's UUID, every peak finite, positive, above :data:`MIN_PEAK` and within 10% of
  its clock-derived ceiling, then the shape of everything else); it raises
  :class:`CalibrationError` with the same one-line reason the cache's warning prints.
- :meth:`CalibrationRecord.read` is the same record without those rules, for readers of documents
  the rules never saw (a report's input, a check backend's calibration): a section that is
  missing or not an object reads as empty, as the readers' ``.get(...) or {}`` chains did.
- :meth:`CalibrationRecord.to_dict` returns the document the record was made from, deep-copied:
  the record types what the readers open and keeps every other key (telemetry, raw sweeps,
  timelines) as stored, so keys, values and their order round-trip byte for byte. A calibration's
  JSON keys are its interface with files already on disk; the record must never rename one.

The sub-records (:class:`GpuRecord`, :class:`BurstEntry`, :class:`SustainedEntry`,
:class:`MixEnvelope`, :class:`HostLinkEntry`, :class:`HostLinkSection`, :class:`EnergySection` and
its :class:`EnergyEntry`) hold the figures as stored:
a number stays the int or float the file had (the reports print it as written), a value of the
wrong type reads as None.

The ``energy`` section (the sustained phase's energy part, ``calibration/energy_phase.py``) came
after schema 1 was fixed and is optional within it: a calibration cached before it has no
``energy`` key and reads as before (``energy`` is None), one that skipped it says why. Its
measured figures are held to the rule peaks are held to: a J per unit that is not a finite positive
number makes the file unusable, since an energy floor would be built on it.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, TypeGuard

from ..schema import NUMBER, problem
from .datasheet import lookup
from .derived import cc_tuple, derived_peaks
from .measured import MeasuredPeaks
from .units import PEAK_KEYS, ROOFLINE_PEAK_KEYS, UNITS, entry_key

__all__ = [
    "SCHEMA_VERSION", "REGIMES", "MIN_PEAK", "CEILING_MARGIN", "SHAPE", "CalibrationError", "problem_of",
    "GpuRecord", "BurstEntry", "SustainedEntry", "MixEnvelope", "HostLinkEntry", "HostLinkSection",
    "EnergyEntry", "EnergySection", "MAX_J_PER_UNIT", "CalibrationRecord",
]

#: Bumped whenever the layout of a calibration changes incompatibly; older files are then ignored
#: (with a warning) instead of being misread.
SCHEMA_VERSION = 1

#: Which measured figures a roofline can use: short runs at boost clocks, or settled after minutes.
REGIMES = ("burst", "sustained")

#: No GPU's peak is below this (TB/s, TFLOP/s, TOPS; the slowest FP64 of a GeForce is ~0.1): a
#: smaller one is a broken file (a 1e-300 TB/s roof would print a floor of 300 digits).
MIN_PEAK = 1e-3

#: How far a peak (or a mix point) may exceed its clock-derived ceiling: measurement noise and a
#: boost clock a little above the nominal one, never a card faster than its silicon.
CEILING_MARGIN = 1.10

#: No unit of work costs this much (J per FLOP or per byte; an H200 spends ~1e-11 on an FP64 FLOP
#: and ~1e-10 on an HBM byte): a larger figure is a broken file, not a card.
MAX_J_PER_UNIT = 1e-6

_ENERGY_ENTRY = {"status": str, "reason": str, "label": str, "per": str, "unit": str, "source": str, "path": str,
                 "origin": str,
                 "j_per_unit": NUMBER, "j_total_per_unit": NUMBER, "uncertainty": NUMBER,
                 "relative_uncertainty": NUMBER, "power_w": NUMBER, "idle_w": NUMBER, "window_s": NUMBER,
                 "resolution_j": NUMBER, "update_interval_s": NUMBER, "sm_clock_mhz": NUMBER,
                 "mem_clock_mhz": NUMBER, "temperature_c": NUMBER, "kernel_duty": NUMBER, "throttle_reasons": [str]}
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
    "energy": {"status": str, "reason": str, "entries": {"*": _ENERGY_ENTRY}, "peers": {"*": [_ENERGY_ENTRY]},
               "idle": {"power_w": NUMBER, "uncertainty_w": NUMBER, "window_s": NUMBER},
               "counter": {"update_interval_s": NUMBER, "resolution_j": NUMBER}},
    "timing": {"total_s": NUMBER, "budget_s": NUMBER, "burst_s": NUMBER, "sustained_s": NUMBER}, "warnings": [str],
}

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class CalibrationError(ValueError):
    """A document that is not a usable calibration of this schema; the message is the one-line reason."""


# --- reading values as stored ------------------------------------------------------------------------

def _number(value: Any) -> float | None:
    """A number as stored (an int stays an int: the reports print it as the file has it), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _object(value: Any) -> Mapping[str, Any]:
    """An object of the document, read-only; anything else (missing, null, a list) reads as empty."""
    return MappingProxyType(value) if isinstance(value, dict) else _EMPTY


def _is_peak(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


# --- the validation -------------------------------------------------------------------------------

def problem_of(cal: Any) -> str | None:
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
            if value is not None and ceiling is not None and value > CEILING_MARGIN * ceiling:
                return (f"peaks.{regime}.{key} = {value:g} is above its clock-derived ceiling "
                        f"{ceiling:g} (+10%), which no card reaches")
    # Then the shape of everything else (so that the peaks' own rules say what is wrong with a peak),
    # and last the energy figures' own rule, on a section whose shape is known by then.
    return problem(cal, SHAPE) or _energy_problem(cal.get("energy"))


def _energy_problem(section: Any) -> str | None:
    """Why a calibration's ``energy`` section cannot be built on, or None: every figure that
    counted (status "ok") needs a finite positive J per unit below :data:`MAX_J_PER_UNIT` and a
    finite non-negative uncertainty (a free or infinite unit would make every floor meaningless)."""
    if not isinstance(section, dict):
        return None
    figures = [(f"energy.entries.{key}", e) for key, e in (section.get("entries") or {}).items()]
    figures += [(f"energy.peers.{key}.{i}", e) for key, peers in (section.get("peers") or {}).items()
                for i, e in enumerate(peers if isinstance(peers, list) else [])]
    for where, e in figures:
        if not isinstance(e, dict) or e.get("status") != "ok":
            continue
        j = e.get("j_per_unit")
        if not _is_peak(j) or j > MAX_J_PER_UNIT:
            return f"{where}.j_per_unit is {j!r}, not a finite positive energy per unit of work"
        u = e.get("uncertainty")
        if not (isinstance(u, (int, float)) and not isinstance(u, bool) and math.isfinite(u) and u >= 0):
            return f"{where}.uncertainty is {u!r}, not a finite non-negative number"
    return None


def _ceiling(cal: Mapping[str, Any], regime: str, key: str) -> float | None:
    """The clock-derived ceiling of a peak key (at boost clock: the highest a card can reach): the
    one the calibration recorded; else the one its GPU record implies (a hand-edited file without
    entries); else the datasheet figure of its part. None when nothing bounds it."""
    entries = _object(_object(cal.get(regime)).get("entries"))
    entry = entries.get(entry_key(key))
    if isinstance(entry, dict):
        recorded = [float(entry[f]) for f in ("clock_derived_max", "clock_derived") if _is_peak(entry.get(f))]
        if recorded:
            return max(recorded)
    gpu = _object(cal.get("gpu"))
    return _device_ceiling(gpu, key) or _datasheet_ceiling(gpu.get("name"), key)


def _device_ceiling(gpu: Mapping[str, Any], key: str) -> float | None:
    try:
        major, minor = cc_tuple(gpu.get("compute_capability"))
        derived = derived_peaks(major, minor, gpu.get("sm_count"), gpu.get("max_sm_clock_mhz"),
                                gpu.get("max_mem_clock_mhz"), gpu.get("memory_bus_width_bits"),
                                consumer="geforce" in str(gpu.get("name", "")).lower())
    except (TypeError, ValueError):  # no or a malformed record: nothing to derive from
        return None
    value = derived.bandwidth_tbps if key == "bandwidth_tbps" else getattr(derived, key, None)
    return float(value) if _is_peak(value) else None


def _datasheet_ceiling(name: Any, key: str) -> float | None:
    sku = lookup(name) if isinstance(name, str) else None
    if sku is None:
        return None
    value = sku.bandwidth_tbps if key == "bandwidth_tbps" else sku.peak(key) if key in UNITS else None
    return float(value) if _is_peak(value) else None


# --- the sub-records ------------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuRecord:
    """The card a calibration was made on (``gpu``), as ``device.listing`` identified it."""

    uuid: str | None = None
    name: str | None = None
    index: int | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None
    architecture: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bus_width_bits: int | None = None
    max_sm_clock_mhz: float | None = None
    max_mem_clock_mhz: float | None = None
    power_limit_w: float | None = None
    mig_mode: str | None = None
    ecc_mode: str | None = None

    @classmethod
    def read(cls, doc: Mapping[str, Any]) -> GpuRecord:
        return cls(uuid=_text(doc.get("uuid")), name=_text(doc.get("name")), index=_int(doc.get("index")),
                   pci_bus_id=_text(doc.get("pci_bus_id")), compute_capability=_text(doc.get("compute_capability")),
                   architecture=_text(doc.get("architecture")), sm_count=_int(doc.get("sm_count")),
                   l2_bytes=_int(doc.get("l2_bytes")), memory_bus_width_bits=_int(doc.get("memory_bus_width_bits")),
                   max_sm_clock_mhz=_number(doc.get("max_sm_clock_mhz")),
                   max_mem_clock_mhz=_number(doc.get("max_mem_clock_mhz")),
                   power_limit_w=_number(doc.get("power_limit_w")), mig_mode=_text(doc.get("mig_mode")),
                   ecc_mode=_text(doc.get("ecc_mode")))


@dataclass(frozen=True)
class _Entry:
    """What burst and sustained entries share (:func:`_entry_fields` reads it); ``doc`` is the entry
    as stored (read-only)."""

    key: str
    value: float | None = None
    best: float | None = None
    cv: float | None = None
    label: str | None = None
    unit: str | None = None
    path: str | None = None
    config: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    clock_derived: float | None = None
    clock_derived_max: float | None = None
    fraction_of_clock_derived: float | None = None
    fraction_of_clock_derived_at_kernel_clock: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_w: float | None = None
    kernel_clock_mhz: float | None = None
    telemetry: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    doc: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False)


@dataclass(frozen=True)
class BurstEntry(_Entry):
    """One unit's burst figure (``burst.entries.<unit>``): what it reached at boost clocks, how, and
    the clocks and power it was reached at. ``doc`` is the entry as stored (read-only)."""

    fraction_of_datasheet: float | None = None
    #: HBM only: each access pattern's best figure, ``{"read": {"tbps", "cv", "config", ...}}``.
    patterns: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    #: L2 only: the curve's plateaus (``{"tbps", ...}``; small sets held in the near partition, large
    #: ones read half across the crossbar) and the curve itself, ``{"MiB": TB/s}``.
    near_plateau: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    far_plateau: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    curve_mib_tbps: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def read(cls, key: str, doc: Mapping[str, Any]) -> BurstEntry:
        return cls(key=key, doc=doc, **_entry_fields(doc),
                   fraction_of_datasheet=_number(doc.get("fraction_of_datasheet")),
                   patterns=MappingProxyType({str(k): _object(v) for k, v in _object(doc.get("patterns")).items()}),
                   near_plateau=_object(doc.get("near_plateau")), far_plateau=_object(doc.get("far_plateau")),
                   curve_mib_tbps=_object(doc.get("curve_mib_tbps")))

    def ceiling(self) -> float | None:
        """The clock-derived ceiling this entry recorded (the larger of its two), or None."""
        recorded = [float(v) for v in (self.clock_derived_max, self.clock_derived) if _is_peak(v)]
        return max(recorded) if recorded else None

    def pattern_figure(self, pattern: str) -> float | None:
        """HBM: the best figure of one access pattern (``read``, ``copy``), else the entry's own value
        when the entry's winner is that pattern; None when the calibration did not measure it."""
        tbps = self.patterns.get(pattern, _EMPTY).get("tbps")
        if tbps:
            return _number(tbps)
        return self.value if self.path == pattern else None

    def pattern_config(self, pattern: str) -> Mapping[str, Any] | None:
        """HBM: the winning kernel configuration of one access pattern, else the entry's own when its
        winner is that pattern; None when neither is recorded."""
        cfg = self.patterns.get(pattern, _EMPTY).get("config")
        if not cfg and self.path == pattern:
            cfg = self.doc.get("config")
        return _object(cfg) if cfg else None


@dataclass(frozen=True)
class SustainedEntry(_Entry):
    """One unit's sustained figure (``sustained.entries.<unit>``): run back to back for the window,
    taken once clocks settled; ``ratio_to_burst`` relates it to the burst figure."""

    burst: float | None = None
    ratio_to_burst: float | None = None
    #: True once the last third matched the middle third; False still moving; None too short to tell.
    settled: bool | None = None
    #: The window's throttle report (``measure.throttle``), None when the calls' windows were unknown.
    throttle: Mapping[str, Any] | None = None

    @classmethod
    def read(cls, key: str, doc: Mapping[str, Any]) -> SustainedEntry:
        settled = doc.get("settled")
        throttle = doc.get("throttle")
        return cls(key=key, doc=doc, **_entry_fields(doc), burst=_number(doc.get("burst")),
                   ratio_to_burst=_number(doc.get("ratio_to_burst")),
                   settled=settled if isinstance(settled, bool) else None,
                   throttle=_object(throttle) if isinstance(throttle, dict) else None)


def _entry_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The fields burst and sustained entries share, read from a stored entry."""
    numbers = ("value", "best", "cv", "clock_derived", "clock_derived_max", "fraction_of_clock_derived",
               "fraction_of_clock_derived_at_kernel_clock", "sm_clock_mhz", "mem_clock_mhz", "power_w",
               "kernel_clock_mhz")
    out: dict[str, Any] = {k: _number(doc.get(k)) for k in numbers}
    out.update(label=_text(doc.get("label")), unit=_text(doc.get("unit")), path=_text(doc.get("path")),
               config=_object(doc.get("config")), telemetry=_object(doc.get("telemetry")))
    return out


@dataclass(frozen=True)
class MixEnvelope:
    """The HBM read:write envelope (``burst.entries.hbm_mix``): ``points`` ``{"R:W": TB/s}`` as stored
    (what the hierarchy chart draws); :meth:`envelope` is what the measured HBM roof may use."""

    points: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    value: float | None = None
    clock_derived: float | None = None
    doc: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False)

    @classmethod
    def read(cls, doc: Mapping[str, Any]) -> MixEnvelope:
        return cls(points=_object(doc.get("points")), value=_number(doc.get("value")),
                   clock_derived=_number(doc.get("clock_derived")), doc=doc)

    def envelope(self, ceiling: float | None) -> dict[str, float]:
        """The points that are finite positive figures and not above ``ceiling`` (+10%, as for peaks)."""
        return {str(k): float(v) for k, v in self.points.items()
                if _is_peak(v) and (ceiling is None or v <= CEILING_MARGIN * ceiling)}


#: The read share (reads / all bytes) of each HBM pattern the sustained phase can run.
_READ_SHARE = {"write": 0.0, "copy": 0.5, "triad": 2 / 3, "read": 1.0}


def _sustained_ratios_by_read_share(patterns: Any) -> list[tuple[float, float, str]]:
    """(read share, sustained/burst ratio, pattern) of each sustained HBM pattern, by share."""
    out = []
    for name, doc in _object(patterns).items():
        ratio = _object(doc).get("ratio_to_burst")
        if name in _READ_SHARE and _is_peak(ratio):
            out.append((_READ_SHARE[name], float(ratio), str(name)))
    return sorted(out)


def _interpolated_ratio(point: str, by_share: list[tuple[float, float, str]], default: float) -> float:
    """The ratio at a "R:W" point: linear in read share between the nearest patterns, the end
    pattern's beyond them; ``default`` for a key that is not R:W."""
    try:
        r, w = (float(x) for x in point.split(":"))
        share = r / (r + w)
    except (ValueError, ZeroDivisionError):
        return default
    if share <= by_share[0][0]:
        return by_share[0][1]
    for (s0, r0, _), (s1, r1, _) in zip(by_share, by_share[1:]):
        if share <= s1:
            return r0 + (r1 - r0) * (share - s0) / (s1 - s0)
    return by_share[-1][1]


@dataclass(frozen=True)
class HostLinkEntry:
    """One direction of the pinned host<->device copies (``hostlink.h2d`` / ``hostlink.d2h``), GB/s."""

    direction: str
    value: float | None = None
    best: float | None = None
    cv: float | None = None
    label: str | None = None
    unit: str | None = None
    theoretical: float | None = None
    fraction_of_theoretical: float | None = None
    doc: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False)

    @classmethod
    def read(cls, direction: str, doc: Mapping[str, Any]) -> HostLinkEntry:
        return cls(direction=direction, value=_number(doc.get("value")), best=_number(doc.get("best")),
                   cv=_number(doc.get("cv")), label=_text(doc.get("label")), unit=_text(doc.get("unit")),
                   theoretical=_number(doc.get("theoretical")),
                   fraction_of_theoretical=_number(doc.get("fraction_of_theoretical")), doc=doc)


@dataclass(frozen=True)
class HostLinkSection:
    """The calibration's ``hostlink`` section: both directions and the link they ran over."""

    h2d: HostLinkEntry | None = None
    d2h: HostLinkEntry | None = None
    #: The link as ``measure.hostlink`` described it (kind, gen, width, formula, theoretical rate).
    link: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    warnings: tuple[str, ...] = ()

    @classmethod
    def read(cls, doc: Mapping[str, Any]) -> HostLinkSection:
        h2d, d2h = doc.get("h2d"), doc.get("d2h")
        warnings = doc.get("warnings")
        return cls(h2d=HostLinkEntry.read("h2d", _object(h2d)) if h2d else None,
                   d2h=HostLinkEntry.read("d2h", _object(d2h)) if d2h else None,
                   link=_object(doc.get("link")),
                   warnings=tuple(w for w in warnings if isinstance(w, str)) if isinstance(warnings, list) else ())

    def direction(self, name: str) -> HostLinkEntry | None:
        """``h2d`` or ``d2h``; None when not measured (or another name)."""
        return self.h2d if name == "h2d" else self.d2h if name == "d2h" else None


@dataclass(frozen=True)
class EnergyEntry:
    """One unit's energy per unit of work (``energy.entries.<key>``: fp64 ... int8, hbm_read,
    hbm_write, hbm_copy): above idle and whole-board, the uncertainty, the kernel, and what the
    counter and the telemetry saw during its window. ``status`` is "ok" only for a figure that
    counted; otherwise ``reason`` says why not (unsupported, failed, unresolved, error)."""

    key: str
    status: str | None = None
    reason: str | None = None
    label: str | None = None
    per: str | None = None
    source: str | None = None
    path: str | None = None
    #: "own" (the tool's kernel) or "library" (a library product measured beside it).
    origin: str | None = None
    j_per_unit: float | None = None
    j_total_per_unit: float | None = None
    uncertainty: float | None = None
    relative_uncertainty: float | None = None
    power_w: float | None = None
    idle_w: float | None = None
    window_s: float | None = None
    resolution_j: float | None = None
    update_interval_s: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None
    kernel_duty: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    doc: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False)

    @classmethod
    def read(cls, key: str, doc: Mapping[str, Any]) -> EnergyEntry:
        numbers = ("j_per_unit", "j_total_per_unit", "uncertainty", "relative_uncertainty", "power_w", "idle_w",
                   "window_s", "resolution_j", "update_interval_s", "sm_clock_mhz", "mem_clock_mhz",
                   "temperature_c", "kernel_duty")
        reasons = doc.get("throttle_reasons")
        fields: dict[str, Any] = {k: _number(doc.get(k)) for k in numbers}
        fields.update({k: _text(doc.get(k)) for k in ("status", "reason", "label", "per", "source", "path", "origin")})
        return cls(key=key, **fields,
                   throttle_reasons=tuple(r for r in reasons if isinstance(r, str)) if isinstance(reasons, list) else (),
                   doc=doc)

    @property
    def counted(self) -> bool:
        """Whether this is a figure an energy floor may be built on (measured, verified, resolved)."""
        u = self.uncertainty
        return (self.status == "ok" and _is_peak(self.j_per_unit) and u is not None and math.isfinite(u)
                and u >= 0)

    @property
    def pj_per_unit(self) -> float | None:
        return self.j_per_unit * 1e12 if self.j_per_unit is not None else None


@dataclass(frozen=True)
class EnergySection:
    """The calibration's ``energy`` section: ``status`` "measured" (some unit counted), "failed"
    (none did) or "skipped" (``reason`` says why: a quick run, --no-energy, no counter, ...); the
    idle power and its uncertainty, the counter's update interval and resolution as measured on the
    idle card, every unit's :class:`EnergyEntry` of the tool's own kernel, and (``peers``, empty for
    a calibration made before they were measured) the library products measured beside them."""

    status: str | None = None
    reason: str | None = None
    idle_w: float | None = None
    idle_uncertainty_w: float | None = None
    update_interval_s: float | None = None
    resolution_j: float | None = None
    entries: Mapping[str, EnergyEntry] = field(default_factory=lambda: _EMPTY)
    peers: Mapping[str, tuple[EnergyEntry, ...]] = field(default_factory=lambda: _EMPTY)
    doc: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False)

    @classmethod
    def read(cls, doc: Mapping[str, Any]) -> EnergySection:
        idle, counter = _object(doc.get("idle")), _object(doc.get("counter"))
        peers = {str(k): tuple(EnergyEntry.read(str(k), _object(e)) for e in v if isinstance(e, dict))
                 for k, v in _object(doc.get("peers")).items() if isinstance(v, list)}
        return cls(status=_text(doc.get("status")), reason=_text(doc.get("reason")),
                   idle_w=_number(idle.get("power_w")), idle_uncertainty_w=_number(idle.get("uncertainty_w")),
                   update_interval_s=_number(counter.get("update_interval_s")),
                   resolution_j=_number(counter.get("resolution_j")),
                   entries=MappingProxyType({str(k): EnergyEntry.read(str(k), _object(e))
                                             for k, e in _object(doc.get("entries")).items() if isinstance(e, dict)}),
                   peers=MappingProxyType(peers), doc=doc)

    def counted(self) -> dict[str, EnergyEntry]:
        """The own kernels' entries an energy floor may be built on, by key."""
        return {k: e for k, e in self.entries.items() if e.counted}

    def counted_peers(self) -> list[EnergyEntry]:
        """The library peers' figures that counted (measured, output checked, resolved)."""
        return [e for peers in self.peers.values() for e in peers if e.counted]


# --- the record -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CalibrationRecord:
    """One GPU's calibration. Make it with :meth:`from_dict` (validated, as the cache reads) or
    :meth:`read` (as stored, unvalidated); :meth:`to_dict` gives the stored document back."""

    gpu: GpuRecord
    schema_version: int | None = None
    mode: str | None = None
    date: str | None = None
    fixture: str | None = None
    package_version: str | None = None
    driver_version: str | None = None
    cuda_runtime_version: str | None = None
    wall_s: float | None = None
    #: ``peaks``: per regime the flat mapping ``{peak key: value}`` that ``roofline(measured=...)`` takes.
    peak_maps: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    burst: Mapping[str, BurstEntry] = field(default_factory=lambda: _EMPTY)
    #: Units the burst phase could not run on this card, with the reason.
    unsupported: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    sustained: Mapping[str, SustainedEntry] = field(default_factory=lambda: _EMPTY)
    mix: MixEnvelope | None = None
    hostlink: HostLinkSection | None = None
    #: The sustained phase's energy part; None for a calibration made before it existed.
    energy: EnergySection | None = None
    warnings: tuple[str, ...] = ()
    _doc: Mapping[str, Any] = field(default_factory=lambda: _EMPTY, repr=False, compare=False)

    @classmethod
    def from_dict(cls, doc: Any) -> CalibrationRecord:
        """The calibration in ``doc``, validated as the cache reads it (:func:`problem_of`); raises
        :class:`CalibrationError` with the one-line reason when it is none."""
        why = problem_of(doc)
        if why is not None:
            raise CalibrationError(why)
        return cls.read(doc)

    @classmethod
    def read(cls, doc: Mapping[str, Any]) -> CalibrationRecord:
        """The record of ``doc`` without the validation (copied: later changes to ``doc`` do not
        reach it). A section that is missing or of the wrong type reads as empty."""
        own = copy.deepcopy(dict(doc))
        burst_section, sustained_section = _object(own.get("burst")), _object(own.get("sustained"))
        burst_entries = _object(burst_section.get("entries"))
        sustained_entries = _object(sustained_section.get("entries"))
        mix = burst_entries.get("hbm_mix")
        hostlink = own.get("hostlink")
        energy = own.get("energy")
        warnings = own.get("warnings")
        return cls(
            gpu=GpuRecord.read(_object(own.get("gpu"))),
            schema_version=_int(own.get("schema_version")), mode=_text(own.get("mode")),
            date=_text(own.get("date")), fixture=_text(own.get("fixture")),
            package_version=_text(own.get("package_version")), driver_version=_text(own.get("driver_version")),
            cuda_runtime_version=_text(own.get("cuda_runtime_version")), wall_s=_number(own.get("wall_s")),
            peak_maps=MappingProxyType({str(r): _object(m) for r, m in _object(own.get("peaks")).items()
                                        if isinstance(m, dict)}),
            burst=MappingProxyType({str(k): BurstEntry.read(str(k), _object(e)) for k, e in burst_entries.items()
                                    if isinstance(e, dict)}),
            unsupported=MappingProxyType({str(k): str(v) for k, v in _object(burst_section.get("unsupported")).items()}),
            sustained=MappingProxyType({str(k): SustainedEntry.read(str(k), _object(e))
                                        for k, e in sustained_entries.items() if isinstance(e, dict)}),
            mix=MixEnvelope.read(_object(mix)) if isinstance(mix, dict) else None,
            hostlink=HostLinkSection.read(_object(hostlink)) if isinstance(hostlink, dict) and hostlink else None,
            energy=EnergySection.read(_object(energy)) if isinstance(energy, dict) else None,
            warnings=tuple(w for w in warnings if isinstance(w, str)) if isinstance(warnings, list) else (),
            _doc=MappingProxyType(own),
        )

    def to_dict(self) -> dict[str, Any]:
        """The calibration's JSON document, exactly as it was read (every key, value and order)."""
        return copy.deepcopy(dict(self._doc))

    # --- what the readers used to open by key chains ---------------------------------------------

    def peaks(self, regime: str = "burst") -> Mapping[str, Any]:
        """The flat ``peaks.<regime>`` mapping as stored (``{}`` when the regime was not measured)."""
        return self.peak_maps.get(regime, _EMPTY)

    def peak(self, key: str, regime: str = "burst") -> float | None:
        """One roof's measured peak by its peak key (``bandwidth_tbps``, ``bf16``, ...), or None."""
        return _number(self.peaks(regime).get(key))

    def has_sustained(self) -> bool:
        """Whether the calibration measured sustained figures (a full one did; a quick one never)."""
        return bool(self.peaks("sustained"))

    def entries(self, regime: str = "burst") -> Mapping[str, BurstEntry] | Mapping[str, SustainedEntry]:
        """Every entry of one regime, by unit (``hbm``, ``l2``, ``fp32``, ..., ``hbm_mix``, ``smem``)."""
        return self.sustained if regime == "sustained" else self.burst if regime == "burst" else _EMPTY

    def entry(self, unit: str, regime: str = "burst") -> BurstEntry | SustainedEntry | None:
        """One unit's entry (``hbm``, ``fp32``; a peak key such as ``bandwidth_tbps`` names its unit too)."""
        return self.entries(regime).get(entry_key(unit))

    def burst_entry(self, unit: str) -> BurstEntry | None:
        """One unit's burst entry (:meth:`entry` of the burst regime, typed as such)."""
        return self.burst.get(entry_key(unit))

    def sustained_entry(self, unit: str) -> SustainedEntry | None:
        """One unit's sustained entry, None when the sustained phase did not run it."""
        return self.sustained.get(entry_key(unit))

    def sustained_figure(self, unit: str) -> float | None:
        """One unit's sustained figure, or None when the sustained phase did not run it."""
        entry = self.sustained_entry(unit)
        return entry.value if entry is not None else None

    def energy_entry(self, key: str) -> EnergyEntry | None:
        """One unit's energy entry (``bf16``, ``hbm_read``), None when the calibration has none."""
        return self.energy.entries.get(key) if self.energy is not None else None

    def hostlink_figure(self, direction: str) -> float | None:
        """The pinned copy rate of ``h2d`` or ``d2h`` (GB/s), or None when not measured."""
        entry = self.hostlink.direction(direction) if self.hostlink is not None else None
        return entry.value if entry is not None else None

    def clocks_seen(self, unit: str, regime: str = "burst") -> dict[str, float | None]:
        """The SM clock, memory clock, power and kernel clock one unit's figure was reached at."""
        entry = self.entry(unit, regime)
        if entry is None:
            return {"sm_clock_mhz": None, "mem_clock_mhz": None, "power_w": None, "kernel_clock_mhz": None}
        return {"sm_clock_mhz": entry.sm_clock_mhz, "mem_clock_mhz": entry.mem_clock_mhz,
                "power_w": entry.power_w, "kernel_clock_mhz": entry.kernel_clock_mhz}

    def ceiling(self, key: str, regime: str = "burst") -> float | None:
        """The clock-derived ceiling a peak is validated against (see :func:`problem_of`)."""
        return _ceiling(self._doc, regime, key)

    def l2_figure(self, regime: str = "burst") -> float | None:
        """The fastest L2 read rate measured (TB/s), small working sets included (the fastest is what
        an L2-resident op's floor may assume), or None when none was measured."""
        values: list[Any] = [self.peaks(regime).get("l2_bandwidth_tbps")]
        # The sustained phase runs no L2 (a sustained entry has no plateaus): its own fields only.
        entry = self.entry("l2", regime)
        doc = entry.doc if entry is not None else _EMPTY
        values += [doc.get("value"), doc.get("best")]
        for key in ("near_plateau", "far_plateau"):
            values.append(_object(doc.get(key)).get("tbps"))
        values += list(_object(doc.get("curve_mib_tbps")).values())
        nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
        return max(nums) if nums else None

    def mix_envelope(self, regime: str = "burst") -> tuple[dict[str, float] | None, str | None]:
        """The read:write envelope the measured HBM roof is read from, for one regime, and a note when
        it is not the burst sweep itself; (None, None) without a sweep.

        Points that are not finite positive figures, or that lie above the HBM ceiling (+10%, as for
        peaks), are left out. The sweep is a burst measurement, so the sustained envelope is the
        burst one scaled, point by point, by the sustained/burst ratio of the sustained patterns
        nearest its read share (write 0, copy 1/2, triad 2/3, read 1; linear between them), or,
        for a calibration that sustained one pattern only, by that pattern's ratio at every point
        (how HBM slows at a mix is interpolated, not measured, hence the note)."""
        if self.mix is None:
            return None, None
        envelope = self.mix.envelope(self.ceiling("bandwidth_tbps", "burst"))
        if not envelope:
            return None, None
        if regime == "burst":
            return envelope, None
        sustained = self.sustained.get("hbm")
        if sustained is None or not _is_peak(sustained.ratio_to_burst):
            return None, None
        ratio = float(sustained.ratio_to_burst)
        pattern = sustained.doc.get("path") or "HBM"
        by_share = _sustained_ratios_by_read_share(sustained.doc.get("patterns"))
        if len(by_share) >= 2:
            shown = ", ".join(f"{name} {r:.3f}" for _, r, name in by_share)
            return ({k: v * _interpolated_ratio(k, by_share, ratio) for k, v in envelope.items()},
                    f"the burst read:write envelope x the sustained/burst ratio of the nearest sustained "
                    f"patterns by read share ({shown}; linear between them)")
        return ({k: v * ratio for k, v in envelope.items()},
                f"the burst read:write envelope x {ratio:.3f}, the sustained/burst ratio of {pattern} "
                "(the sustained phase ran that one pattern)")

    def measured_peaks(self, regime: str = "burst") -> MeasuredPeaks | None:
        """The peaks ``roofline(measured=...)`` takes from this calibration and regime, or None.

        Only the keys the roofline model uses (``ROOFLINE_PEAK_KEYS``; today no L2): the model
        refuses keys it does not know, so that a typo never silently drops a roof.
        """
        values = {k: float(v) for k, v in self.peaks(regime).items()
                  if k in PEAK_KEYS and k in ROOFLINE_PEAK_KEYS and v is not None}
        if not values:
            return None
        mix, note = self.mix_envelope(regime)
        return MeasuredPeaks(peaks=values, regime=regime, uuid=_doc_get(self._doc, "gpu", "uuid"),
                             gpu_name=_doc_get(self._doc, "gpu", "name"), date=self._doc.get("date"),
                             mode=self._doc.get("mode"), mix=mix, mix_note=note)


def _doc_get(doc: Mapping[str, Any], section: str, key: str) -> Any:
    """A value of a section as stored, whatever its type (``MeasuredPeaks`` carried it as stored)."""
    return _object(doc.get(section)).get(key)
