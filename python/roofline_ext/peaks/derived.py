"""Peaks derived from device attributes: what the silicon can do at a given clock.

For a GPU no datasheet table lists, the peaks follow from what the driver reports:

  compute   = operations per clock per SM (per architecture and unit) x SM count x SM clock
  bandwidth = 2 x memory clock x bus width / 8     (NVML's memory clock is half the data rate)

From an H200's NVML values (132 SMs, 1980 MHz, memory 3201 MHz, 6016-bit bus) that gives
66.9 TFLOP/s FP32, 1070 TFLOP/s FP16 tensor and 4.814 TB/s. The FP16 figure is above the datasheet's
989.4 because NVIDIA computes its tensor figures at 1830 MHz; both clocks stay explicit (the
datasheet's in ``DatasheetPeaks.boost_clock_mhz``, this one in ``DerivedPeaks.sm_clock_mhz``).

The same per-clock rates bound measurements: ``clock_derived_peak(unit, cc, sms, observed_clock)``
is the most a kernel of that kind can do at the clock observed while it ran; a measurement above
it is a bug in the measurement (see docs/measuring.md).

Rates are dense FLOP (INT8: operations) per clock per SM, an FMA counting 2, from NVIDIA's
architecture whitepapers, and cross-checked in the tests against the datasheet figures of each SKU.
An architecture not in the table gives None for every compute unit: a guess would be a floor
nobody can trust. Bandwidth needs no architecture and is still derived.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from .units import UNITS, PeakTable

__all__ = [
    "DerivedPeaks",
    "derived_peaks",
    "derived_peaks_for_device",
    "clock_derived_peak",
    "clock_derived_bandwidth",
    "ops_per_clock",
    "arch_name",
    "KNOWN_ARCHS",
]

_V = None  # the unit does not exist on this architecture

# (major, minor) -> (architecture, {unit: dense FLOP or OP per clock per SM}).
# Tensor rates here are the full rate: FP16 tensor with FP32 accumulation on data-center and
# workstation parts. GeForce parts of Turing, GA10x, Ada and GB20x run TF32/FP16/BF16/FP8 with FP32
# accumulation at half this rate (``consumer=True``); INT8 is not halved.
_RATES: dict[tuple[int, int], tuple[str, dict[str, int | None]]] = {
    # V100: 32 FP64 + 64 FP32 lanes, 8 tensor cores x 64 FP16 FMA per SM; tensor cores do FP16 only.
    (7, 0): ("volta", dict(fp64=64, fp64_tensor=_V, fp32=128, tf32=_V, fp16=1024, bf16=_V, fp8=_V, int8=_V)),
    # Turing: 2 FP64 units per SM (1/32 of FP32), 8 tensor cores x 64 FP16 FMA, INT8 at 2x FP16.
    (7, 5): ("turing", dict(fp64=4, fp64_tensor=_V, fp32=128, tf32=_V, fp16=1024, bf16=_V, fp8=_V, int8=2048)),
    # A100: 4 tensor cores x 256 FP16 FMA per SM; FP64 DMMA at 2x the FP64 FMA rate.
    (8, 0): ("ampere", dict(fp64=64, fp64_tensor=128, fp32=128, tf32=1024, fp16=2048, bf16=2048, fp8=_V, int8=4096)),
    # GA10x: 128 FP32 lanes, 2 FP64 units (1/64), tensor cores at half GA100's per-SM rate.
    (8, 6): ("ampere", dict(fp64=4, fp64_tensor=_V, fp32=256, tf32=512, fp16=1024, bf16=1024, fp8=_V, int8=2048)),
    # Orin (GA10B): GA100-class tensor cores (Jetson AGX Orin: 170 sparse INT8 TOPS from 16 SMs at
    # 1.3 GHz) and GA10x-class CUDA cores (5.3 FP32 TFLOP/s).
    (8, 7): ("ampere", dict(fp64=4, fp64_tensor=_V, fp32=256, tf32=1024, fp16=2048, bf16=2048, fp8=_V, int8=4096)),
    # Ada: GA10x rates plus FP8 at 2x FP16.
    (8, 9): ("ada", dict(fp64=4, fp64_tensor=_V, fp32=256, tf32=512, fp16=1024, bf16=1024, fp8=2048, int8=2048)),
    # H100/H200: 64 FP64 + 128 FP32 lanes, 4 tensor cores x 512 FP16 FMA per SM (docs/measuring.md).
    (9, 0): ("hopper", dict(fp64=128, fp64_tensor=256, fp32=256, tf32=2048, fp16=4096, bf16=4096, fp8=8192, int8=8192)),
    # B200/GB200: tensor rates 2x Hopper per SM; FP64 tensor no faster than FP64 FMA.
    (10, 0): ("blackwell", dict(fp64=128, fp64_tensor=128, fp32=256, tf32=4096, fp16=8192, bf16=8192, fp8=16384, int8=16384)),
    # GB20x (RTX 50, RTX PRO Blackwell): Ada-class rates per SM for these units.
    (12, 0): ("blackwell", dict(fp64=4, fp64_tensor=_V, fp32=256, tf32=512, fp16=1024, bf16=1024, fp8=2048, int8=2048)),
}

#: Compute capabilities whose per-clock rates are known.
KNOWN_ARCHS = tuple(sorted(_RATES))

# Architectures whose GeForce parts halve FP32-accumulate tensor throughput, and the units affected.
_CONSUMER_HALVED_ARCHS = {(7, 5), (8, 6), (8, 9), (12, 0)}
_CONSUMER_HALVED_UNITS = {"tf32", "fp16", "bf16", "fp8"}


def cc_tuple(cc: Any) -> tuple[int, int]:
    if isinstance(cc, str):
        major, _, minor = cc.strip().partition(".")
        return int(major), int(minor or 0)
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    raise ValueError(f"compute capability must be (major, minor) or 'major.minor', got {cc!r}")


def arch_name(cc_major: int, cc_minor: int) -> str | None:
    """The architecture's name ("hopper", "ada", ...) or None if the table does not know it."""
    entry = _RATES.get((cc_major, cc_minor))
    return entry[0] if entry else None


def ops_per_clock(cc_major: int, cc_minor: int, *, consumer: bool = False) -> dict[str, int | None] | None:
    """Dense FLOP (INT8: ops) per clock per SM for every unit, or None for an unknown architecture.

    A unit the architecture lacks maps to None. ``consumer=True`` gives a GeForce part's rates:
    TF32/FP16/BF16/FP8 tensor with FP32 accumulation at half rate on Turing, GA10x, Ada and GB20x.
    """
    entry = _RATES.get((cc_major, cc_minor))
    if entry is None:
        return None
    rates = dict(entry[1])
    if consumer and (cc_major, cc_minor) in _CONSUMER_HALVED_ARCHS:
        for unit in _CONSUMER_HALVED_UNITS:
            rate = rates[unit]
            if rate is not None:
                rates[unit] = rate // 2
    return rates


def clock_derived_peak(
    unit: str, cc: Any, sm_count: int, clock_mhz: float, *, consumer: bool = False
) -> float | None:
    """Peak of one unit in TFLOP/s (INT8: TOPS) = ops per clock per SM x SMs x clock.

    ``cc`` is ``(major, minor)`` or ``"major.minor"``. Pass the clock observed during a measurement
    to get the ceiling that measurement must stay under. None if the architecture is unknown or
    lacks the unit.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; units: {', '.join(UNITS)}")
    major, minor = cc_tuple(cc)
    rates = ops_per_clock(major, minor, consumer=consumer)
    rate = None if rates is None else rates[unit]
    if rate is None or not sm_count or not clock_mhz:
        return None
    return rate * sm_count * clock_mhz * 1e6 / 1e12


def clock_derived_bandwidth(mem_clock_mhz: float | None, bus_width_bits: int | None) -> float | None:
    """Memory bandwidth in TB/s = 2 x memory clock x bus width / 8, or None if either is missing.

    NVML reports the memory clock at half the transfer rate for HBM and GDDR alike (H200: 3201 MHz
    on a 6016-bit bus = 4.814 TB/s; RTX 4090: 10501 MHz on 384 bits = 1.008 TB/s).
    """
    if not mem_clock_mhz or not bus_width_bits:
        return None
    return 2 * mem_clock_mhz * 1e6 * bus_width_bits / 8 / 1e12


@dataclass(frozen=True)
class DerivedPeaks(PeakTable):
    """Peaks computed from device attributes at ``sm_clock_mhz`` (kept explicit).

    Compute fields are TFLOP/s (``int8``: TOPS); None where the architecture lacks the unit or is
    unknown (``known_arch`` tells which). ``bandwidth_tbps`` is None without memory clock and bus
    width. ``consumer`` records whether GeForce FP32-accumulate halving was applied.
    """

    cc_major: int
    cc_minor: int
    arch: str | None
    sm_count: int | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    bus_width_bits: int | None
    consumer: bool
    fp64: float | None
    fp64_tensor: float | None
    fp32: float | None
    tf32: float | None
    fp16: float | None
    bf16: float | None
    fp8: float | None
    int8: float | None
    bandwidth_tbps: float | None

    @property
    def known_arch(self) -> bool:
        """True when the per-clock rates of this architecture are in the table."""
        return self.arch is not None

    @property
    def clock_mhz(self) -> float | None:
        """The SM clock every compute peak here assumes."""
        return self.sm_clock_mhz

    @property
    def cc_text(self) -> str:
        return f"{self.cc_major}.{self.cc_minor}"


def derived_peaks(
    cc_major: int,
    cc_minor: int,
    sm_count: int | None,
    sm_clock_mhz: float | None,
    mem_clock_mhz: float | None = None,
    bus_width_bits: int | None = None,
    *,
    consumer: bool = False,
) -> DerivedPeaks:
    """Peaks from compute capability, SM count, max SM clock and (optionally) the memory bus.

    >>> p = derived_peaks(9, 0, 132, 1980, 3201, 6016)   # an H200 as NVML describes it
    >>> round(p.fp32, 1), round(p.fp16, 1), round(p.bandwidth_tbps, 3)
    (66.9, 1070.5, 4.814)

    Units the architecture lacks, and every compute unit of an architecture the table does not
    know, are None. ``consumer=True`` halves TF32/FP16/BF16/FP8 tensor rates as GeForce parts do
    with FP32 accumulation.
    """
    cc_major, cc_minor = _whole("cc_major", cc_major), _whole("cc_minor", cc_minor)
    for name, v in (("sm_count", sm_count), ("sm_clock_mhz", sm_clock_mhz), ("mem_clock_mhz", mem_clock_mhz),
                    ("bus_width_bits", bus_width_bits)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0):
            raise UserError(f"{name} must be a finite number of at least 0, got {v!r}")
    rates = ops_per_clock(cc_major, cc_minor, consumer=consumer)
    values: dict[str, float | None] = {}
    for unit in UNITS:
        rate = rates.get(unit) if rates else None
        if rate is None or not sm_count or not sm_clock_mhz:
            values[unit] = None
        else:
            values[unit] = rate * sm_count * sm_clock_mhz * 1e6 / 1e12
    return DerivedPeaks(
        cc_major=int(cc_major),
        cc_minor=int(cc_minor),
        arch=arch_name(int(cc_major), int(cc_minor)),
        sm_count=sm_count,
        sm_clock_mhz=sm_clock_mhz,
        mem_clock_mhz=mem_clock_mhz,
        bus_width_bits=bus_width_bits,
        consumer=consumer,
        bandwidth_tbps=clock_derived_bandwidth(mem_clock_mhz, bus_width_bits),
        **values,
    )


def _whole(name: str, value: Any) -> int:
    """A compute-capability part as an int (NVML gives ints; ``"9"`` is taken), else a one-line error."""
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a whole number, got {value!r}") from None
    if isinstance(value, bool) or out < 0 or (isinstance(value, float) and value != out):
        raise UserError(f"{name} must be a whole number, got {value!r}")
    return out


def _field(device: Any, key: str) -> Any:
    if isinstance(device, Mapping):
        return device.get(key)
    return getattr(device, key, None)


def derived_peaks_for_device(device: Any, *, consumer: bool | None = None) -> DerivedPeaks | None:
    """``derived_peaks`` for a device record (``roofline_ext.device.listing.Device`` or any mapping/object).

    Reads ``cc_major``, ``cc_minor``, ``sm_count``, ``max_sm_clock_mhz``, ``max_mem_clock_mhz`` and
    ``memory_bus_width_bits``; a missing one leaves the peaks that need it None. Returns None only
    when the compute capability itself is missing. ``consumer`` defaults to whether the record's
    ``name`` says "GeForce".
    """
    major, minor = _field(device, "cc_major"), _field(device, "cc_minor")
    if major is None or minor is None:
        return None
    if consumer is None:
        name = _field(device, "name") or ""
        consumer = "geforce" in str(name).lower()
    return derived_peaks(
        int(major),
        int(minor),
        _field(device, "sm_count"),
        _field(device, "max_sm_clock_mhz"),
        _field(device, "max_mem_clock_mhz"),
        _field(device, "memory_bus_width_bits"),
        consumer=consumer,
    )
