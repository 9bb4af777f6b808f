"""Why a calibration's figures may not be trusted: one sentence per reason.

Pure functions of the device record, the NVML state and the entries: other processes on the card,
MIG, ECC, clocks below boost, slowdown reasons, temperature, figures above the clock-derived peak.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..device.telemetry import SLOWDOWN_REASONS
from ..peaks.units import short_label

# Burst clock below this fraction of the maximum: the card did not reach boost.
_BOOST_FRACTION = 0.95
_WARM_START_C = 60


def start_warnings(dev: Any, state: Mapping[str, Any]) -> list[str]:
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
    slow = [r for r in reasons if r in SLOWDOWN_REASONS]
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


# Slowdown reasons that burst figures must not carry: the power cap is how tensor pipes normally run
# at full tilt on a 700 W part, so it is recorded in the telemetry but is not, by itself, a warning.
_BURST_BAD_REASONS = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def entry_warnings(key: str, entry: Mapping[str, Any], dev: Any, regime: str) -> list[str]:
    out = []
    tel = entry.get("telemetry") or {}
    bad = [r for r in tel.get("throttle_reasons") or [] if r in _BURST_BAD_REASONS]
    if bad:
        out.append(f"{short_label(key)} {regime} figure was reached under {', '.join(bad)}: thermal or "
                   "hardware slowdown; check cooling and power delivery")
    if regime == "burst" and key not in ("hbm", "l2"):
        top = dev.max_sm_clock_mhz
        peak_clock = (tel.get("sm_clock_mhz") or {}).get("max") if isinstance(tel.get("sm_clock_mhz"), Mapping) else None
        if top and peak_clock and peak_clock < _BOOST_FRACTION * top:
            out.append(f"{short_label(key)}: the SM clock never reached boost during the burst "
                       f"measurement (at most {peak_clock:.0f} of {top} MHz): locked or application clocks?")
    frac = entry.get("fraction_of_clock_derived")
    if isinstance(frac, (int, float)) and frac > 1.0 + 1e-6:
        out.append(f"{short_label(key)} {regime} figure is {frac:.1%} of the clock-derived peak at the "
                   "clock observed: a measurement above the silicon's ceiling is a bug; do not trust it")
    return out
