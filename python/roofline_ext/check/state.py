"""The device state that explains a slow or failing card, as check items (pure functions).

Each function takes a ``DeviceHealth`` reading (device/health.py) and returns zero or more
``StateItem``. A field the board does not report gives no item (a GeForce card has no ECC; that is
not a finding), so only NVML itself being unusable is UNKNOWN.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..peaks.link_rate import HostLink
from ..peaks.record import CalibrationRecord
from .outcome import IDLE, Situation, StateItem, Verdict

#: Clock-event reasons that slow a card for reasons other than its workload: thermal, the board's
#: own slowdown signal, the chassis power brake. The software power cap is how a busy 700 W part
#: normally runs, and "idle" is what a card at rest reports: neither is a finding.
SLOWDOWN_REASONS = ("sw_thermal_slowdown", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
#: Degrees below the slowdown / shutdown thresholds at which a temperature is worth a word.
_TEMP_MARGIN_C = 5
#: Without thresholds from NVML: hot enough that most data-centre parts throttle soon.
_TEMP_FALLBACK_C = 85
#: NVML utilisation (percent of its last sample period with a kernel running) at or above which a
#: GPU counts as busy before the check touched it. An idle card reads 0; 10 leaves room for a
#: monitoring agent's occasional tiny kernel while any real job (a training step, a GEMM loop, a
#: copy loop) reads far above it.
BUSY_UTILIZATION_PCT = 10


def nvml_item(health: Any) -> list[StateItem]:
    if health.error:
        return [StateItem("nvml", Verdict.UNKNOWN, f"NVML cannot read the device state: {health.error}")]
    return []


def clock_reasons_item(health: Any) -> list[StateItem]:
    reasons = health.clock_event_reasons
    if reasons is None:
        return []
    slow = [r for r in reasons if r in SLOWDOWN_REASONS]
    if slow:
        return [StateItem("clock_event_reasons", Verdict.WARN,
                          f"the GPU is held back before any work: {', '.join(slow)}", list(reasons))]
    return [StateItem("clock_event_reasons", Verdict.PASS, "no slowdown reason active",
                      list(reasons))]


def slowdown_during_item(telemetry: Mapping[str, Mapping[str, Any] | None]) -> list[StateItem]:
    """Slowdown reasons any measurement ran under (its NVML samples)."""
    seen: dict[str, list[str]] = {}
    for metric, tel in telemetry.items():
        for r in (tel or {}).get("throttle_reasons") or []:
            if r in SLOWDOWN_REASONS:
                seen.setdefault(r, []).append(metric)
    if not seen:
        return []
    text = "; ".join(f"{r} during {', '.join(ms)}" for r, ms in seen.items())
    return [StateItem("slowdown_during_check", Verdict.WARN, f"clocks were held back: {text}", sorted(seen))]


def ecc_items(health: Any) -> list[StateItem]:
    vol, agg = health.ecc_uncorrected_volatile, health.ecc_uncorrected_aggregate
    if vol is None and agg is None:
        return []
    value = {"uncorrected_volatile": vol, "uncorrected_aggregate": agg,
             "corrected_volatile": health.ecc_corrected_volatile, "corrected_aggregate": health.ecc_corrected_aggregate}
    if vol:
        return [StateItem("ecc_errors", Verdict.FAIL, f"{vol} uncorrectable ECC error(s) since the driver "
                          "loaded: data on this card may be corrupt; drain it and reset or replace it", value)]
    if agg:
        return [StateItem("ecc_errors", Verdict.WARN, f"{agg} uncorrectable ECC error(s) over the board's "
                          "life (none since the driver loaded): watch it", value)]
    return [StateItem("ecc_errors", Verdict.PASS, "no uncorrectable ECC errors"
                      + (f" ({health.ecc_corrected_volatile} corrected since the driver loaded)"
                         if health.ecc_corrected_volatile else ""), value)]


def retirement_items(health: Any) -> list[StateItem]:
    out = []
    if health.remap_failure:
        out.append(StateItem("row_remapping", Verdict.FAIL, "a row remap failed (no spare row left in a bank): "
                             "the memory cannot repair itself any more; replace the card",
                             {"correctable": health.remapped_rows_correctable,
                              "uncorrectable": health.remapped_rows_uncorrectable}))
    elif health.remap_pending:
        out.append(StateItem("row_remapping", Verdict.WARN, "a row remap is pending: reset the GPU to apply it",
                             {"correctable": health.remapped_rows_correctable,
                              "uncorrectable": health.remapped_rows_uncorrectable}))
    elif health.remap_pending is not None:
        out.append(StateItem("row_remapping", Verdict.PASS, "no remap pending or failed",
                             {"correctable": health.remapped_rows_correctable,
                              "uncorrectable": health.remapped_rows_uncorrectable}))
    if health.retired_pages_pending:
        out.append(StateItem("retired_pages", Verdict.WARN, "a page retirement is pending: reset the GPU to apply it",
                             {"dbe": health.retired_pages_dbe, "sbe": health.retired_pages_sbe}))
    elif health.retired_pages_pending is not None:
        out.append(StateItem("retired_pages", Verdict.PASS, "no page retirement pending",
                             {"dbe": health.retired_pages_dbe, "sbe": health.retired_pages_sbe}))
    return out


def pcie_item(link: HostLink | None, replays: int | None) -> list[StateItem]:
    """The host link as read after the copies (an idle PCIe link may train down to save power)."""
    if link is None or link.kind == "unknown":
        return []
    value = {**link.to_dict(), "replay_counter": replays}
    if link.degraded:
        return [StateItem("pcie_link", Verdict.WARN, f"PCIe gen {link.gen} x{link.width}, below the gen "
                          f"{link.max_gen} x{link.max_width} both ends support: host copies run slower; reseat "
                          "the card or check the slot and BIOS settings", value)]
    if link.kind == "c2c":
        return [StateItem("pcie_link", Verdict.PASS, "host link is NVLink-C2C", value)]
    return [StateItem("pcie_link", Verdict.PASS, f"PCIe gen {link.gen} x{link.width}, the most both ends support",
                      value)]


def _describe(p: Any, named: bool) -> str:
    if named and hasattr(p, "describe"):
        return str(p.describe())
    return f"pid {p.pid}" + (f" ({p.used_bytes / 2**20:.0f} MiB)" if p.used_bytes else "")


def _others_at_end(end: Any | None) -> tuple[list[Any], bool | None]:
    """Processes other than this one computing on the GPU after the measurements, and whether
    NVML's pids are this process's (it holds a context then, so it must be listed): False in a
    container whose PID namespace is not the driver's, where pids name nobody here."""
    if end is None or end.error or end.compute_processes is None:
        return [], None
    procs = end.compute_processes
    if any(p.pid == end.reader_pid for p in procs):
        return [p for p in procs if p.pid != end.reader_pid], True
    # This process is not listed under its own pid: one of the entries is this process.
    return (list(procs) if len(procs) > 1 else []), (False if procs else None)


def situation_of(start: Any, end: Any | None = None, *, strict: bool = False) -> Situation:
    """Whether another process used the GPU while it was checked, from two NVML readings: ``start``,
    before this process touched the GPU, and ``end``, after the measurements (``DeviceHealth``).

    Evidence: other compute processes at the start or at the end (a load that began mid-check), and
    the start's utilisation at or above ``BUSY_UTILIZATION_PCT`` (it also sees a process a container
    hides from the list). Utilisation is not evidence when this process itself was already on the
    GPU at the start: then it may be this process's own earlier work.
    """
    if start.error:
        return Situation(strict=strict)
    evidence: list[str] = []
    seen: dict[int, Any] = {}
    at_start = list(start.other_processes or ())
    at_end, same_pids = _others_at_end(end)
    named = same_pids is not False
    if at_start:
        evidence.append(f"{len(at_start)} other process(es) computing when the check began: "
                        + ", ".join(_describe(p, named) for p in at_start))
        seen.update((p.pid, p) for p in at_start)
    new = [p for p in at_end if p.pid not in seen]
    if new:
        where = "" if same_pids else " (NVML's pids are not this container's: one of them is this process)"
        evidence.append(f"{len(new)} other process(es) computing when it ended{where}: "
                        + ", ".join(_describe(p, named) for p in new))
        seen.update((p.pid, p) for p in new)
    util, mem = start.utilization_gpu_pct, start.utilization_memory_pct
    ours = any(p.pid == start.reader_pid for p in start.compute_processes or ())
    if util is not None and util >= BUSY_UTILIZATION_PCT and not ours:
        evidence.append(f"the GPU was {util}% busy (memory {mem}%) before the check touched it"
                        if mem is not None else f"the GPU was {util}% busy before the check touched it")
    procs = tuple({"pid": p.pid, "used_bytes": p.used_bytes, "name": getattr(p, "name", None) if named else None}
                  for p in seen.values())
    return Situation(bool(evidence), tuple(evidence), procs, util, mem, strict)


def processes_item(health: Any, situation: Situation = IDLE) -> list[StateItem]:
    """Who else computes on the GPU: UNKNOWN when busy (the figures are shared, nothing is judged
    against the card for it), WARN under ``--strict`` (judged as measured), PASS when nobody."""
    others = health.other_processes
    if not situation.busy:
        if others is None and health.utilization_gpu_pct is None:
            return []
        return [StateItem("compute_processes", Verdict.PASS, "no other process computes on this GPU", [])]
    value = [dict(p) for p in situation.processes]
    if situation.strict:
        return [StateItem("compute_processes", Verdict.WARN, f"busy: {situation.who()}: they compete with jobs "
                          "and lower the figures, which are judged as measured (--strict)", value)]
    return [StateItem("compute_processes", Verdict.UNKNOWN, f"busy: {situation.who()}: the figures are shared "
                      "with them, so a low one says nothing about this card (--strict judges them anyway)", value)]


def temperature_item(health: Any) -> list[StateItem]:
    t = health.temperature_c
    if t is None:
        return []
    shut, slow = health.temperature_shutdown_c, health.temperature_slowdown_c
    value = {"temperature_c": t, "slowdown_c": slow, "shutdown_c": shut}
    if shut and t >= shut - _TEMP_MARGIN_C:
        return [StateItem("temperature", Verdict.FAIL, f"{t} C, within {_TEMP_MARGIN_C} C of the {shut} C "
                          "shutdown threshold: check the cooling now", value)]
    limit = (slow - _TEMP_MARGIN_C) if slow else _TEMP_FALLBACK_C
    if t >= limit:
        return [StateItem("temperature", Verdict.WARN, f"{t} C at rest, at or above {limit} C"
                          + (f" ({_TEMP_MARGIN_C} C below the {slow} C slowdown threshold)" if slow else "")
                          + ": the card will throttle under load; check airflow", value)]
    return [StateItem("temperature", Verdict.PASS, f"{t} C", value)]


def mode_items(health: Any, calibration: Mapping[str, Any] | None) -> list[StateItem]:
    out = []
    if health.mig_mode == "enabled":
        out.append(StateItem("mig", Verdict.WARN, "MIG is enabled: the figures are one instance's, not the card's",
                             "enabled"))
    cal_ecc = CalibrationRecord.read(calibration).gpu.ecc_mode if calibration else None
    if health.ecc_mode and cal_ecc and health.ecc_mode != cal_ecc:
        out.append(StateItem("ecc_mode", Verdict.WARN, f"ECC is {health.ecc_mode} but was {cal_ecc} when the card "
                             "was calibrated: the comparison does not hold; recalibrate", health.ecc_mode))
    if health.ecc_pending and health.ecc_mode and health.ecc_pending != health.ecc_mode:
        out.append(StateItem("ecc_mode", Verdict.WARN, f"an ECC mode change ({health.ecc_mode} -> "
                             f"{health.ecc_pending}) is pending a reset", health.ecc_mode))
    return out


def state_items(start: Any, end: Any | None, link: HostLink | None,
                telemetry: Mapping[str, Mapping[str, Any] | None],
                calibration: Mapping[str, Any] | None, situation: Situation = IDLE) -> list[StateItem]:
    """Every state item of one GPU: what it was at the start (before our CUDA context existed), the
    link and the error counters as they were at the end, what the measurements ran under, and who
    else used the GPU (``situation``, from ``situation_of``)."""
    if start.error:
        return nvml_item(start)
    last = end if end is not None and not end.error else start
    items: list[StateItem] = []
    for part in (clock_reasons_item(start), slowdown_during_item(telemetry), ecc_items(last),
                 retirement_items(last), pcie_item(link, last.pcie_replay_counter), processes_item(start, situation),
                 temperature_item(start), mode_items(start, calibration)):
        items.extend(part)
    return items


def worst_items(items: Iterable[StateItem]) -> list[StateItem]:
    return [i for i in items if i.verdict is not Verdict.PASS]
