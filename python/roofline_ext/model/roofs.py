"""Every roof of one GPU, resolved once per run: :class:`RoofSet` (issue 25, the typed spine's step 2).

A run puts its tasks on up to three roofs (``model.floors.ROOF_NAMES``): the SKU's datasheet, the
peaks derived from the device's clocks, and the peaks measured on the card (one calibration, one
regime). The runner resolves them here once, hands the same object to every task's floor and puts
it on each result, so that a chart draws the roofs the numbers were computed against instead of
looking peaks up a second time (and possibly finding others: another card's calibration, a unit
list that lost one).

Every unit comes from the registry (``peaks.units.UNITS``), so a roof holds ``fp64_tensor`` where
its source has it. A roof that does not apply is None, and :attr:`RoofSet.missing` says why.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..peaks.datasheet import DatasheetPeaks, lookup
from ..peaks.derived import DerivedPeaks, derived_peaks_for_device
from ..peaks.record import CalibrationRecord
from ..peaks.units import UNITS
from .floors import ROOF_NAMES
from .gpu import GpuChoice

__all__ = ["Roof", "RoofSet", "datasheet_roof", "REGIMES"]

#: The regimes a measured roof may come from (a calibration's ``peaks`` sections).
REGIMES = ("burst", "sustained")

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _peak(value: Any) -> float | None:
    """A usable peak (finite, above 0) as a float; anything else is "not known"."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    out = float(value)
    return out if math.isfinite(out) and out > 0 else None


def _units_of(values: Mapping[str, Any]) -> Mapping[str, float]:
    """The registry's units that ``values`` has a peak for, in registry order."""
    return MappingProxyType({u: v for u in UNITS if (v := _peak(values.get(u))) is not None})


@dataclass(frozen=True)
class Roof:
    """One set of peaks of a GPU: which roof (``datasheet``, ``derived``, ``measured``), how it is
    called and where it came from, the peak of every registry unit it has (TFLOP/s; INT8 TOP/s),
    the HBM bandwidth and, where known (measured only: no datasheet prints one), L2's (TB/s)."""

    name: str
    label: str
    source: str
    peaks: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    bandwidth_tbps: float | None = None
    l2_bandwidth_tbps: float | None = None
    #: The calibration regime of a measured roof; None on the others.
    regime: str | None = None

    def peak(self, unit: str) -> float | None:
        """The peak of one unit (a ``UNITS`` key), None where this roof has none."""
        return self.peaks.get(unit)

    def flat(self) -> dict[str, float]:
        """The flat mapping ``{peak key: value}`` the charts take (``bandwidth_tbps``,
        ``l2_bandwidth_tbps``, then the units), without the figures this roof lacks."""
        out: dict[str, float] = {}
        if self.bandwidth_tbps is not None:
            out["bandwidth_tbps"] = self.bandwidth_tbps
        if self.l2_bandwidth_tbps is not None:
            out["l2_bandwidth_tbps"] = self.l2_bandwidth_tbps
        out.update(self.peaks)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "source": self.source, "regime": self.regime,
                "bandwidth_tbps": self.bandwidth_tbps, "l2_bandwidth_tbps": self.l2_bandwidth_tbps,
                "peaks": dict(self.peaks)}


def datasheet_roof(sheet: DatasheetPeaks | str | None) -> Roof | None:
    """The datasheet roof of a SKU (or of a name the table knows), None for an unknown part."""
    sku = lookup(sheet) if sheet is not None else None
    if sku is None:
        return None
    return Roof("datasheet", f"{sku.full_name} datasheet", sku.source,
                _units_of({u: sku.peak(u) for u in UNITS}), _peak(sku.bandwidth_tbps))


def _derived_roof(derived: DerivedPeaks) -> Roof:
    arch = derived.arch or f"unknown architecture (compute capability {derived.cc_text})"
    source = (f"{derived.sm_count} SMs x per-clock rate x {derived.sm_clock_mhz} MHz, {arch}; "
              "memory: 2 x memory clock x bus width / 8")
    return Roof("derived", "clock-derived", source, _units_of({u: derived.peak(u) for u in UNITS}),
                _peak(derived.bandwidth_tbps))


def _measured_source(measured: Mapping[str, Any], calibration: CalibrationRecord | None) -> str:
    """Where measured peaks came from: the calibration (card, date, mode), or the caller."""
    uuid = calibration.gpu.uuid if calibration is not None else getattr(measured, "uuid", None)
    date = calibration.date if calibration is not None else getattr(measured, "date", None)
    mode = calibration.mode if calibration is not None else getattr(measured, "mode", None)
    if uuid is None and date is None:
        return "measured peaks as given to analyze"
    return f"calibration of {uuid or '?'}, {date or '?'} ({mode or '?'})"


def _measured_roof(measured: Mapping[str, Any], regime: str, calibration: CalibrationRecord | None) -> Roof:
    # The floor never uses L2 (compulsory traffic is charged to HBM), so the model's peaks leave it
    # out; the chart draws it from the calibration the peaks came from.
    l2 = _peak(measured.get("l2_bandwidth_tbps"))
    if l2 is None and calibration is not None:
        l2 = calibration.peak("l2_bandwidth_tbps", regime)
    return Roof("measured", f"measured ({regime})", _measured_source(measured, calibration),
                _units_of(measured), _peak(measured.get("bandwidth_tbps")), l2, regime)


def _derived_of(device: Any) -> tuple[DerivedPeaks | None, str | None]:
    """The device's derived peaks, or None and why."""
    if device is None:
        return None, "no GPU of this machine is analyzed (a datasheet name or the default SKU)"
    try:
        derived = derived_peaks_for_device(device)
    except Exception as exc:  # a device record without usable attributes: no derived roof, not an error
        return None, f"the device record gives no derived peaks ({type(exc).__name__}: {exc})"
    if derived is None:
        return None, "the device record has no compute capability"
    return derived, None


@dataclass(frozen=True)
class RoofSet:
    """Every roof of one GPU for one run: the datasheet, the clock-derived and the measured roof
    (of ``regime``), each None where it does not apply, with the reason in ``missing``.

    ``sheet``, ``derived_peaks`` and ``measured_peaks`` are what ``model.floors.roofline_result``
    takes (``measured_peaks`` as handed in: a ``MeasuredPeaks`` keeps its read:write envelope), so
    the floors and the charts share one origin; ``calibration`` is the record the measured peaks
    came from, when known (a chart's subtitle and its L2 slope)."""

    gpu: str
    regime: str
    sku: str | None
    datasheet: Roof | None
    derived: Roof | None
    measured: Roof | None
    missing: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    sheet: DatasheetPeaks | None = field(default=None, repr=False, compare=False)
    derived_peaks: DerivedPeaks | None = field(default=None, repr=False, compare=False)
    measured_peaks: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    calibration: CalibrationRecord | None = field(default=None, repr=False, compare=False)

    @classmethod
    def resolve(cls, gpu: GpuChoice, regime: str = "burst", *, measured: Mapping[str, Any] | None = None,
                calibration: CalibrationRecord | Mapping[str, Any] | None = None,
                no_measured: str | None = None) -> RoofSet:
        """The roofs of ``gpu`` as the runner resolved them: its datasheet SKU, the derived peaks of
        its device, and ``measured`` (the peaks of ``regime``, already looked up: the model reads
        no cache) from ``calibration`` when it is known. ``no_measured``: why there are no measured
        peaks, when there are none."""
        if regime not in REGIMES:
            raise ValueError(f"unknown regime {regime!r}; choose one of: {', '.join(REGIMES)}")
        record = calibration if isinstance(calibration, CalibrationRecord) or calibration is None \
            else CalibrationRecord.read(calibration)
        sheet = gpu.sheet if isinstance(gpu.sheet, DatasheetPeaks) else lookup(gpu.name)
        derived, no_derived = _derived_of(gpu.device)
        missing: dict[str, str] = {}
        if sheet is None:
            missing["datasheet"] = f"{gpu.name} is not in the datasheet table (roofline-ext peaks lists it)"
        if no_derived is not None:
            missing["derived"] = no_derived
        if measured is None:
            missing["measured"] = no_measured or (f"no {regime} peaks are cached for {gpu.name} "
                                                  "(run 'roofline-ext calibrate' on it)")
        return cls(gpu=gpu.name, regime=regime, sku=sheet.name if sheet is not None else None,
                   datasheet=datasheet_roof(sheet), derived=_derived_roof(derived) if derived else None,
                   measured=_measured_roof(measured, regime, record) if measured is not None else None,
                   missing=MappingProxyType(missing), sheet=sheet, derived_peaks=derived,
                   measured_peaks=measured, calibration=record if measured is not None else None)

    @classmethod
    def for_name(cls, name: str | None, regime: str = "burst") -> RoofSet:
        """The datasheet roof of a part named in a result read back from disk: neither the device
        nor the measured peaks the run used travel in its JSON, so only the datasheet is known."""
        sheet = lookup(name) if name else None
        return cls.resolve(GpuChoice(name or "GPU", sheet, None, "flag"), regime,
                           no_measured="a result read back from JSON does not carry its measured peaks")

    def roof(self, name: str) -> Roof | None:
        """One roof by its name (``datasheet``, ``derived``, ``measured``); None when it does not apply."""
        if name not in ROOF_NAMES:
            raise KeyError(f"unknown roof {name!r}; roofs: {', '.join(ROOF_NAMES)}")
        roof: Roof | None = getattr(self, name)
        return roof

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "sku": self.sku, "regime": self.regime,
                "roofs": {name: (r.to_dict() if (r := self.roof(name)) is not None else None)
                          for name in ROOF_NAMES},
                "missing": dict(self.missing)}
