"""The state that explains a slow or failing card, read from NVML without a CUDA context.

``read_health(pci_bus_id)`` joins NVML's device record (clocks, clock-event reasons, MIG and ECC
mode, power, temperature) with the core's ``nvml_health`` (ECC error counters, retired pages and
remapped rows, the PCIe link now and at most, temperature thresholds, compute processes and
utilisation). Fields a board does not report stay None. It never raises: without NVML,
``DeviceHealth.error`` says why. Compute processes carry their command line where this machine's
``/proc`` shows it (NVML gives only the pid), so a check can name who shares the card.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .native import core_or_none

#: Keys copied from ``nvml_health`` as they are.
_HEALTH_KEYS = (
    "ecc_corrected_volatile", "ecc_uncorrected_volatile", "ecc_corrected_aggregate", "ecc_uncorrected_aggregate",
    "retired_pages_dbe", "retired_pages_sbe", "retired_pages_pending", "remapped_rows_correctable",
    "remapped_rows_uncorrectable", "remap_pending", "remap_failure", "pcie_gen", "pcie_width", "pcie_max_gen",
    "pcie_max_width", "pcie_gpu_max_gen", "pcie_replay_counter", "c2c_enabled", "temperature_c",
    "temperature_slowdown_c", "temperature_shutdown_c", "temperature_gpu_max_c", "utilization_gpu_pct",
    "utilization_memory_pct",
)
#: Longest command line kept for a process's name.
_NAME_CHARS = 80


@dataclass(frozen=True)
class ComputeProcess:
    pid: int
    used_bytes: int | None
    #: The command line from /proc (argv[0]'s base name, then its arguments), None where unreadable.
    name: str | None = None

    def describe(self) -> str:
        """``pid 4242 python3 load.py (8192 MiB)``: what a verdict names."""
        text = f"pid {self.pid}" + (f" {self.name}" if self.name else "")
        return text + (f" ({self.used_bytes / 2**20:.0f} MiB)" if self.used_bytes else "")


def process_name(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The command line of ``pid`` as this machine's ``/proc`` shows it, shortened; None if hidden."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        raw = b""
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not args:
        try:
            comm = (proc / str(pid) / "comm").read_text().strip()
        except OSError:
            return None
        return comm or None
    text = " ".join([os.path.basename(args[0])] + args[1:])
    return text if len(text) <= _NAME_CHARS else text[:_NAME_CHARS - 3] + "..."


@dataclass(frozen=True)
class DeviceHealth:
    """One NVML reading of a GPU's health. ``error`` is set (and the rest None) without NVML."""

    pci_bus_id: str
    error: str | None = None
    clock_event_reasons: tuple[str, ...] | None = None
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    power_draw_w: float | None = None
    mig_mode: str | None = None
    ecc_mode: str | None = None
    ecc_pending: str | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    pcie_gpu_max_gen: int | None = None
    pcie_replay_counter: int | None = None
    c2c_enabled: bool | None = None
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    temperature_shutdown_c: int | None = None
    temperature_gpu_max_c: int | None = None
    compute_processes: tuple[ComputeProcess, ...] | None = None
    #: NVML's utilisation over its last sample period (1/6 s to 1 s): kernels running, memory busy.
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    #: pid of the process that read this (so a check can leave itself out of "other processes").
    reader_pid: int = field(default_factory=os.getpid)

    @property
    def other_processes(self) -> tuple[ComputeProcess, ...] | None:
        if self.compute_processes is None:
            return None
        return tuple(p for p in self.compute_processes if p.pid != self.reader_pid)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["clock_event_reasons"] = None if self.clock_event_reasons is None else list(self.clock_event_reasons)
        for key in ("compute_processes",):
            d[key] = None if getattr(self, key) is None else [asdict(p) for p in getattr(self, key)]
        others = self.other_processes
        d["other_processes"] = None if others is None else [asdict(p) for p in others]
        return d


def _on_off(v: int | None) -> str | None:
    return None if v is None else ("enabled" if v else "disabled")


def from_nvml(pci_bus_id: str, info: Mapping[str, Any], health: Mapping[str, Any],
              names: Callable[[int], str | None] = process_name) -> DeviceHealth:
    """A ``DeviceHealth`` from the two dicts the core returns (tests build them by hand); ``names``
    gives a process's command line from its pid."""
    procs = health.get("compute_processes")
    power = info.get("power_draw_mw")
    reasons = info.get("clock_event_reason_names")
    # Any: each key goes to its own field (int | bool | None), which the core's dict does not type.
    counters: dict[str, Any] = {k: health.get(k) for k in _HEALTH_KEYS}
    return DeviceHealth(
        pci_bus_id=pci_bus_id,
        clock_event_reasons=None if reasons is None else tuple(reasons),
        sm_clock_mhz=info.get("sm_clock_mhz"),
        max_sm_clock_mhz=info.get("max_sm_clock_mhz"),
        power_draw_w=None if power is None else power / 1000.0,
        mig_mode=_on_off(info.get("mig_current")),
        ecc_mode=_on_off(info.get("ecc_current")),
        ecc_pending=_on_off(info.get("ecc_pending")),
        compute_processes=None if procs is None else tuple(
            ComputeProcess(int(p["pid"]), p.get("used_bytes"), names(int(p["pid"]))) for p in procs),
        **counters,
    )


def read_health(pci_bus_id: str) -> DeviceHealth:
    """NVML's view of the GPU at ``pci_bus_id`` now; never raises (``error`` says why not)."""
    core = core_or_none()
    if core is None:
        return DeviceHealth(pci_bus_id, error="the native core is not importable")
    if not hasattr(core, "nvml_health"):
        return DeviceHealth(pci_bus_id, error="this build of the native core has no nvml_health; rebuild it")
    try:
        info = core.nvml_device_by_pci_bus_id(pci_bus_id)
        health = core.nvml_health(pci_bus_id)
    except core.NvmlError as exc:
        return DeviceHealth(pci_bus_id, error=str(exc))
    return from_nvml(pci_bus_id, info, health)
