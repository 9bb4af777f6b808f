"""Clocks, power, temperature and clock-event reasons seen during a measurement.

The sampling itself is a C++ thread (``_core.TelemetrySampler``) reading NVML every ~25 ms while
the GIL is released for the measured kernels; this module starts/stops it and decides how the
samples are summarised (min/median/max, the reasons by name).
"""
from __future__ import annotations

import contextlib
import functools
import statistics
from typing import Any, Iterator, Mapping, Sequence

from . import listing
from .native import core_or_none

# Reasons that say the clock was held back by something other than the workload finishing.
SLOWDOWN_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                    "hw_power_brake_slowdown")


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summary of sampler output: min/median/max per quantity and every reason seen, by name."""
    core = core_or_none()
    mask = 0
    for s in samples:
        if s.get("reasons") is not None:
            mask |= int(s["reasons"])
    names = list(core.reason_names(mask)) if core is not None else []
    return {
        "samples": len(samples),
        "duration_s": samples[-1]["t_s"] if samples else 0.0,
        "sm_clock_mhz": _stats([s["sm_clock_mhz"] for s in samples if s.get("sm_clock_mhz") is not None]),
        "mem_clock_mhz": _stats([s["mem_clock_mhz"] for s in samples if s.get("mem_clock_mhz") is not None]),
        "power_w": _stats([s["power_w"] for s in samples if s.get("power_w") is not None]),
        "temperature_c": _stats([s["temperature_c"] for s in samples if s.get("temperature_c") is not None]),
        "throttle_reasons": names,
        "slowdown": [n for n in names if n in SLOWDOWN_REASONS],
    }


class Telemetry:
    """Handle yielded by :func:`sampling`; ``summary()`` is valid after the ``with`` block."""

    def __init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self.error: str | None = None

    def summary(self) -> dict[str, Any] | None:
        """The summary, or None when NVML could not sample this device (``error`` says why)."""
        if self.error is not None and not self.samples:
            return None
        return summarize(self.samples)


@functools.lru_cache(maxsize=None)  # a CUDA index names one card for the life of a process; listing costs ms
def _pci_bus_id(device: int) -> str:
    return listing.device(device).pci_bus_id


@contextlib.contextmanager
def sampling(device: int = 0, interval_ms: float = 25.0) -> Iterator[Telemetry]:
    """Sample NVML for CUDA device ``device`` while the block runs.

    Never fails the measurement it wraps: without NVML the handle's ``summary()`` is None and
    ``error`` holds the reason.
    """
    tel = Telemetry()
    core = core_or_none()
    sampler = None
    if core is None:
        tel.error = "native core not importable"
    else:
        try:
            sampler = core.TelemetrySampler(_pci_bus_id(device), interval_ms)
            sampler.start()
        except Exception as exc:  # NVML missing or refusing this device: measure without telemetry
            tel.error = str(exc)
            sampler = None
    try:
        yield tel
    finally:
        if sampler is not None:
            tel.samples = sampler.stop()
