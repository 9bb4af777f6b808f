"""The calibration as table rows (strings): what ``calibrate`` and ``calibrate --show`` print."""
from __future__ import annotations

from typing import Any, Mapping

from ..peaks.record import BurstEntry, CalibrationRecord, EnergyEntry, SustainedEntry
from ..peaks.units import ENTRY_KEYS, peak_label


def _pct(x: Any) -> str | None:
    return f"{x:.1%}" if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _at(entry: BurstEntry | SustainedEntry, key: str) -> str | None:
    bits = []
    # HBM bandwidth follows the memory clock; L2 and the compute units follow the SM clock.
    if key == "hbm":
        if entry.mem_clock_mhz:
            bits.append(f"mem {entry.mem_clock_mhz:.0f} MHz")
    elif entry.sm_clock_mhz:
        bits.append(f"{entry.sm_clock_mhz:.0f} MHz")
        if entry.kernel_clock_mhz:
            bits[-1] += f" (kernel {entry.kernel_clock_mhz:.0f})"
    if entry.power_w:
        bits.append(f"{entry.power_w:.0f} W")
    return ", ".join(bits) or None


def _throttled(report: Any) -> str | None:
    """'2 of 4 calls throttled (2 left out)' from a sustained entry's throttle report; None if clean."""
    if not isinstance(report, Mapping) or not report.get("flagged"):
        return None
    text = f"{report['flagged']} of {report.get('reps', '?')} calls throttled"
    if report.get("discarded"):
        text += f" ({report['discarded']} left out)"
    return text


def _figure(value: object) -> str:
    # An entry without its figure (a hand-edited or truncated file) shows "-", not a KeyError.
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def summary_rows(cal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per measured unit, as strings: what the CLI's table shows (burst and sustained side
    by side, each with the clock and power it was reached at; fractions of datasheet and of the
    clock-derived peak; the path/kernel that reached it). Unsupported units say why."""
    record = CalibrationRecord.read(cal)
    rows = []
    for key in ENTRY_KEYS:
        b, s = record.burst_entry(key), record.sustained_entry(key)
        if b is None and s is None:
            if key in record.unsupported:
                rows.append({"key": key, "label": peak_label(key), "burst": "unsupported",
                             "fraction_of_datasheet": None, "fraction_of_clock_derived": None,
                             "burst_at": None, "sustained": None, "sustained_at": None,
                             "path": record.unsupported[key]})
            continue
        row = {"key": key, "label": peak_label(key), "burst": None, "fraction_of_datasheet": None,
               "fraction_of_clock_derived": None, "burst_at": None, "sustained": None,
               "sustained_at": None, "path": None}
        # An entry stored as {} (a truncated file) leaves its columns empty, as it always did.
        if b is not None and b.doc:
            cv = b.cv
            row["burst"] = _figure(b.value) + (f" ±{cv:.1%}" if cv is not None else "")
            row["fraction_of_datasheet"] = _pct(b.fraction_of_datasheet)
            row["fraction_of_clock_derived"] = _pct(b.fraction_of_clock_derived)
            at_kernel = _pct(b.fraction_of_clock_derived_at_kernel_clock)
            if at_kernel:
                row["fraction_of_clock_derived"] = f"{row['fraction_of_clock_derived'] or '-'} (k {at_kernel})"
            row["burst_at"] = _at(b, key)
            row["path"] = b.path
        if s is not None and s.doc:
            ratio = s.ratio_to_burst
            row["sustained"] = _figure(s.value) + (f" ({ratio:.0%})" if ratio is not None else "")
            at = _at(s, key)
            if s.settled is False:
                at = (at + ", " if at else "") + "not settled"
            throttled = _throttled(s.throttle)
            if throttled:
                at = (at + ", " if at else "") + throttled
            row["sustained_at"] = at
            if row["path"] and s.path and s.path != row["path"]:
                row["path"] = f"{row['path']} (sustained: {s.path})"
            row["path"] = row["path"] or s.path
        rows.append(row)
    return rows + hostlink_rows(cal)


def sustained_hbm_patterns(cal: Mapping[str, Any]) -> str | None:
    """One line: every HBM pattern the sustained phase ran in turn (calibrations from 2026-12-02
    on), each sustained figure and its ratio to that pattern's own burst figure; None without them."""
    entry = CalibrationRecord.read(cal).sustained_entry("hbm")
    if entry is None:
        return None
    patterns = entry.doc.get("patterns")
    if not isinstance(patterns, Mapping) or not patterns:
        return None
    parts = []
    for name, p in patterns.items():
        value, ratio = (p.get("value"), p.get("ratio_to_burst")) if isinstance(p, Mapping) else (None, None)
        if isinstance(value, (int, float)):
            parts.append(f"{name} {_figure(value)}" + (f" ({ratio:.1%})" if isinstance(ratio, (int, float)) else ""))
    if not parts:
        return None
    return ("sustained HBM, every pattern in turn in one window (TB/s, % of its own burst figure): "
            + ", ".join(parts) + f"; the HBM roof is {entry.path or 'the burst winner'}'s")


def hostlink_rows(cal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of the calibration's pinned host<->device copies: the fraction is of the link's
    theoretical rate (PCIe gen x width, or NVLink-C2C), in the clock-derived column."""
    section = CalibrationRecord.read(cal).hostlink
    if section is None:
        return []
    link = section.link
    where = (f"pinned copies, PCIe gen {link.get('gen')} x{link.get('width')}" if link.get("kind") == "pcie"
             else "pinned copies, NVLink-C2C" if link.get("kind") == "c2c" else "pinned copies")
    rows = []
    for key, label in (("h2d", "host->device (GB/s)"), ("d2h", "device->host (GB/s)")):
        e = section.direction(key)
        if e is None:
            continue
        cv = e.cv
        rows.append({"key": key, "label": label,
                     "burst": _figure(e.value) + (f" ±{cv:.1%}" if cv is not None else ""),
                     "fraction_of_datasheet": None, "fraction_of_clock_derived": _pct(e.fraction_of_theoretical),
                     "burst_at": None, "sustained": None, "sustained_at": None,
                     "path": where + (f" ({e.theoretical:.1f} GB/s theoretical)" if e.theoretical else "")})
    return rows


# --- the energy part (the sustained phase's J per FLOP and per byte) ---------------------------------

def _pj(value: float | None, per: str | None) -> str | None:
    return f"{value * 1e12:.4g} pJ/{per or 'unit'}" if value is not None else None


def _energy_at(e: EnergyEntry) -> str | None:
    """Where the figure was reached: SM (and memory) clock, temperature, the clock-event reasons."""
    bits = []
    if e.sm_clock_mhz:
        bits.append(f"{e.sm_clock_mhz:.0f} MHz")
    if e.mem_clock_mhz and e.key.startswith("hbm"):
        bits.append(f"mem {e.mem_clock_mhz:.0f} MHz")
    if e.temperature_c is not None:
        bits.append(f"{e.temperature_c:.0f} C")
    bits.extend(e.throttle_reasons)
    return ", ".join(bits) or None


def energy_rows(cal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per unit of the calibration's energy part, as strings: energy per unit above idle with
    its uncertainty, the whole board's, the power during the window against idle, the clocks and
    reasons seen, the window, and the kernel; a unit that did not count says why. Each unit's
    library peers follow its row (label "<unit> (library)"). Empty when the calibration has no
    energy part or skipped it (:func:`energy_notes` says so)."""
    section = CalibrationRecord.read(cal).energy
    if section is None:
        return []
    rows = []
    for key, e in section.entries.items():
        rows.append(_energy_row(key, e, e.label or key))
        rows += [_energy_row(key, p, f"{e.label or key} (library)") for p in section.peers.get(key, ())]
    return rows


def _energy_row(key: str, e: EnergyEntry, label: str) -> dict[str, Any]:
    row: dict[str, Any] = {"key": key, "label": label, "above_idle": None, "total": None,
                           "power": None, "at": None, "window": None, "kernel": e.source}
    if not e.counted:
        row["above_idle"] = e.status or "not measured"
        row["kernel"] = f"{e.source + ': ' if e.source else ''}{e.reason or 'no reason recorded'}"
        return row
    rel = e.relative_uncertainty
    row["above_idle"] = (_pj(e.j_per_unit, e.per) or "-") + (f" ±{rel:.1%}" if rel is not None else "")
    row["total"] = _pj(e.j_total_per_unit, e.per)
    if e.power_w is not None:
        row["power"] = f"{e.power_w:.0f} W" + (f" (idle {e.idle_w:.0f})" if e.idle_w is not None else "")
    row["at"] = _energy_at(e)
    if e.window_s is not None:
        row["window"] = f"{e.window_s:.2f} s" + (f", kernels {e.kernel_duty:.0%}" if e.kernel_duty is not None else "")
    return row


def energy_notes(cal: Mapping[str, Any]) -> list[str]:
    """The lines under the energy table: idle power and the counter as measured, what ± means; or
    why no energy was measured. None for a calibration made before calibration measured energy."""
    section = CalibrationRecord.read(cal).energy
    if section is None:
        return []
    if section.status == "skipped":
        return [f"energy: not measured: {section.reason or 'no reason recorded'}"]
    lines = []
    if section.idle_w is not None:
        unc = f" ±{section.idle_uncertainty_w:.2g} W" if section.idle_uncertainty_w is not None else ""
        lines.append(f"energy: idle {section.idle_w:.0f} W{unc} at the start of the phase (each unit's own "
                     "idle probe, just before its window, is subtracted from it)")
    if section.update_interval_s is not None and section.resolution_j is not None:
        lines.append(f"energy counter (NVML, whole board): steps every {section.update_interval_s * 1e3:.0f} ms, "
                     f"resolution {section.resolution_j * 1e3:.0f} mJ, both measured on the idle card; ± is the "
                     "counter-reading bound over the window, not the sensor's accuracy")
    if section.peers:
        lines.append("energy floors (analyze --energy --energy-costs) take per unit the lowest figure that counted, "
                     "the own kernel's or a library peer's")
    else:
        lines.append("energy: no library peers were measured (a calibration without torch, or made before them): "
                     "the floors rest on the own kernels, and a library kernel may be more frugal")
    if section.status == "failed":
        lines.append(f"energy: {section.reason}")
    return lines
