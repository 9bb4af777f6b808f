"""Typed records of the NVIDIA GPUs on this machine, from NVML and (when compiled in) CUDA.

CUDA and NVML number devices differently (``CUDA_VISIBLE_DEVICES`` renumbers CUDA's), so the two
views are joined by PCI bus id, never by index. Without a CUDA build the records still come from
NVML alone, with the CUDA-only fields (L2 size, CUDA index) left as None.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..errors import UserError
from .native import core_or_none
from .status import Reason, availability

# NVML's nvmlDeviceArchitecture_t values.
# Keyed by int | None: a device record without NVML's architecture looks up None (no entry).
_NVML_ARCH: dict[int | None, str] = {2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere",
                                     8: "ada", 9: "hopper", 10: "blackwell"}


def architecture_name(cc_major: int, cc_minor: int) -> str:
    """Architecture family from compute capability ('hopper' for 9.0)."""
    if cc_major >= 10:
        return "blackwell"
    return {
        (7, 0): "volta", (7, 2): "volta", (7, 5): "turing", (8, 0): "ampere", (8, 6): "ampere",
        (8, 7): "ampere", (8, 9): "ada", (9, 0): "hopper",
    }.get((cc_major, cc_minor), "unknown")


def cores_per_sm(cc_major: int, cc_minor: int) -> int | None:
    """FP32 lanes per SM: what 'CUDA cores' means (64 on Volta/Turing/GA100, 128 after)."""
    if (cc_major, cc_minor) in ((7, 0), (7, 2), (7, 5), (8, 0)):
        return 64
    if (cc_major, cc_minor) >= (8, 6):
        return 128
    return None


def normalize_bus_id(bus_id: str) -> tuple[int, int, int, int]:
    """'00000000:00:06.0' (NVML) and '0000:00:06.0' (CUDA) -> (domain, bus, device, function)."""
    try:
        dom, bus, rest = bus_id.strip().split(":")
        dev, fn = rest.split(".")
        return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError as exc:
        raise ValueError(f"malformed PCI bus id {bus_id!r}") from exc


@dataclass(frozen=True)
class Device:
    """One NVIDIA GPU. Fields the driver does not report on this board are None."""

    index: int | None  # CUDA index (what torch.cuda / measure_* take); None if not CUDA-visible
    nvml_index: int | None
    name: str
    uuid: str
    pci_bus_id: str
    cc_major: int
    cc_minor: int
    architecture: str
    sm_count: int | None
    cuda_cores: int | None
    l2_bytes: int | None
    memory_total_bytes: int | None
    memory_free_bytes: int | None
    memory_bus_width_bits: int | None
    max_sm_clock_mhz: int | None
    max_mem_clock_mhz: int | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_limit_w: float | None
    power_draw_w: float | None
    temperature_c: int | None
    mig_mode: str | None  # "enabled" | "disabled"
    ecc_mode: str | None
    clock_event_reasons: list[str] | None
    compute_processes: int | None
    pcie_gen: int | None
    pcie_width: int | None
    driver_version: str | None
    cuda_driver_version: str | None
    can_measure: bool

    @property
    def compute_capability(self) -> str:
        return f"{self.cc_major}.{self.cc_minor}"

    @property
    def theoretical_bandwidth_tbps(self) -> float | None:
        """2 x memory clock x bus width / 8 (DDR: two transfers per clock), in TB/s."""
        if not self.max_mem_clock_mhz or not self.memory_bus_width_bits:
            return None
        return 2 * self.max_mem_clock_mhz * 1e6 * self.memory_bus_width_bits / 8 / 1e12

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["compute_capability"] = self.compute_capability
        d["theoretical_bandwidth_tbps"] = self.theoretical_bandwidth_tbps
        return d


def _fmt_cuda(v: int | None) -> str | None:
    return f"{v // 1000}.{(v % 1000) // 10}" if v else None


def _on_off(v: int | None) -> str | None:
    return None if v is None else ("enabled" if v else "disabled")


def _record(nv: dict | None, cu: dict | None, system: dict | None, can_measure: bool) -> Device:
    nv = nv or {}
    cu = cu or {}
    cc_major = cu.get("cc_major", nv.get("cc_major", 0))
    cc_minor = cu.get("cc_minor", nv.get("cc_minor", 0))
    arch = _NVML_ARCH.get(nv.get("architecture")) or architecture_name(cc_major, cc_minor)
    cores = nv.get("cuda_cores")
    sm = cu.get("sm_count")
    per_sm = cores_per_sm(cc_major, cc_minor)
    if sm is None and cores and per_sm:
        sm = cores // per_sm  # NVML has no SM count; cores / lanes-per-SM gives it exactly
    if cores is None and sm and per_sm:
        cores = sm * per_sm

    def mw(key: str) -> float | None:
        v = nv.get(key)
        return None if v is None else v / 1000.0

    return Device(
        index=cu.get("cuda_index"),
        nvml_index=nv.get("nvml_index"),
        name=nv.get("name") or cu.get("name", "unknown"),
        uuid=nv.get("uuid") or cu.get("uuid", ""),
        pci_bus_id=nv.get("pci_bus_id") or cu.get("pci_bus_id", ""),
        cc_major=cc_major,
        cc_minor=cc_minor,
        architecture=arch,
        sm_count=sm,
        cuda_cores=cores,
        l2_bytes=cu.get("l2_bytes"),
        memory_total_bytes=nv.get("memory_total_bytes") or cu.get("memory_total_bytes"),
        memory_free_bytes=nv.get("memory_free_bytes") or cu.get("memory_free_bytes"),
        memory_bus_width_bits=nv.get("memory_bus_width_bits") or cu.get("memory_bus_width_bits"),
        max_sm_clock_mhz=nv.get("max_sm_clock_mhz"),
        max_mem_clock_mhz=nv.get("max_mem_clock_mhz"),
        sm_clock_mhz=nv.get("sm_clock_mhz"),
        mem_clock_mhz=nv.get("mem_clock_mhz"),
        power_limit_w=mw("enforced_power_limit_mw") or mw("power_limit_mw"),
        power_draw_w=mw("power_draw_mw"),
        temperature_c=nv.get("temperature_c"),
        mig_mode=_on_off(nv.get("mig_current")),
        ecc_mode=_on_off(nv.get("ecc_current")),
        clock_event_reasons=nv.get("clock_event_reason_names"),
        compute_processes=nv.get("compute_processes"),
        pcie_gen=nv.get("pcie_gen"),
        pcie_width=nv.get("pcie_width"),
        driver_version=(system or {}).get("driver_version"),
        cuda_driver_version=_fmt_cuda((system or {}).get("cuda_driver_version")),
        can_measure=can_measure and bool(cu),
    )


def devices() -> list[Device]:
    """Every NVIDIA GPU on this machine, CUDA-visible ones first in CUDA order.

    Returns an empty list when there is no GPU or driver; ``availability()`` says why.
    GPUs NVML sees but ``CUDA_VISIBLE_DEVICES`` hides are listed after, with ``index=None``.
    """
    core = core_or_none()
    if core is None:
        return []
    avail = availability()
    nvml_list: list[dict] = []
    system = None
    try:
        system = core.nvml_system()
        nvml_list = core.nvml_devices()
    except core.NvmlError:
        pass  # the CUDA view, if any, still stands; availability() carries the NVML error
    cuda_list: list[dict] = []
    if avail.reason is Reason.OK:
        cuda_list = core.cuda_devices()
    by_bus = {normalize_bus_id(d["pci_bus_id"]): d for d in nvml_list}
    out: list[Device] = []
    used = set()
    for cu in cuda_list:
        key = normalize_bus_id(cu["pci_bus_id"])
        nv = by_bus.get(key)
        used.add(key)
        out.append(_record(nv, cu, system, can_measure=True))
    for key, nv in by_bus.items():
        if key not in used:
            out.append(_record(nv, None, system, can_measure=False))
    return out


def device(index: int = 0) -> Device:
    """The CUDA-visible device with CUDA index ``index``; raises UserError if there is none."""
    for d in devices():
        if d.index == index:
            return d
    raise UserError(f"no CUDA device with index {index} ({availability().message})")
