"""The measured-peaks type: what a calibration hands to the roofline model.

A read-only mapping ``{peak key: value}`` (the keys of :data:`roofline_ext.peaks.units.PEAK_KEYS`,
TB/s for memory, TFLOP/s or TOP/s for compute) that also says where it came from: the card's UUID,
the regime, the calibration's date and mode. Being a ``Mapping`` it goes anywhere a plain dict of
peaks went before (``roofline(measured=...)``, JSON), so callers that build their own dict of
peaks keep working. A calibration's record makes one per regime
(:meth:`roofline_ext.peaks.record.CalibrationRecord.measured_peaks`).

``mix`` rides beside the peaks, not among them: the read:write envelope ``{"R:W": TB/s}`` of the
calibration's HBM mix sweep (None when it had none, as a quick calibration), from which the model
takes the HBM roof at a task's own read:write ratio (``peaks.mix``); ``mix_note`` says how the
envelope was derived when it is not the burst sweep itself (the sustained regime scales it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping


# eq=False: compare as a mapping (equal to a dict of the same peaks), which Mapping provides.
@dataclass(frozen=True, eq=False)
class MeasuredPeaks(Mapping[str, float]):
    # Not named ``values``: a field of that name would hide ``Mapping.values()``.
    peaks: Mapping[str, float] = field(default_factory=dict)
    regime: str = "burst"
    uuid: str | None = None
    gpu_name: str | None = None
    date: str | None = None
    mode: str | None = None
    mix: Mapping[str, float] | None = None
    mix_note: str | None = None

    def __getitem__(self, key: str) -> float:
        return self.peaks[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.peaks)

    def __len__(self) -> int:
        return len(self.peaks)

    def source(self) -> dict[str, Any]:
        """Where the figures came from, for a result's JSON."""
        return {"regime": self.regime, "uuid": self.uuid, "gpu": self.gpu_name, "date": self.date,
                "mode": self.mode,
                "hbm_mix": dict(self.mix) if self.mix else None, "hbm_mix_note": self.mix_note}
