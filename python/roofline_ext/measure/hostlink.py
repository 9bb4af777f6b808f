"""Host-link bandwidth: pinned host-to-device and device-to-host copies, measured by the core.

The core (``csrc/hostlink.cpp``) allocates page-locked host memory, times one ``cudaMemcpyAsync`` per
CUDA-event pair and verifies every word that arrived (a device-side checksum for h2d, a host-side
comparison for d2h). This module holds the policy:

- the size: 256 MiB per copy, long enough (about 4 ms on PCIe Gen 5 x16, 0.6 ms on NVLink-C2C) that
  event resolution and the copy's set-up are noise, small enough to pin in well under a second;
- the figure: the median of the repetitions in GB/s (10^9 bytes/s), with best and CV beside it;
- the link it ran over and its theoretical rate (``peaks/link_rate.py``): read *after* the copies,
  because an idle PCIe link may train down to save power and would look degraded before them;
- a figure above the link's theoretical rate is kept but warned about: NVML can misreport the link
  (a C2C part seen as PCIe), so it is not treated as a measurement bug the way HBM figures are.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ..device import health as device_health, listing, status, telemetry as device_telemetry
from ..errors import UserError
from ..peaks.link_rate import HostLink, host_link

DEFAULT_BYTES = 256 << 20
DEFAULT_REPS = 20
DEFAULT_WARMUP = 3
DEFAULT_SEED = 12345
DIRECTIONS = ("h2d", "d2h")


def gbps(nbytes: int, ms: float) -> float:
    """Bytes per copy over milliseconds per copy, in GB/s (10^9 bytes per second)."""
    return nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("inf")


@dataclass(frozen=True)
class DirectionResult:
    """One direction's figure: the median over the timed copies."""

    direction: str
    gbps_median: float
    gbps_best: float
    cv: float
    bytes: int
    reps: int
    median_ms: float
    verification: dict[str, Any]
    theoretical_gbps: float | None
    fraction_of_theoretical: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HostLinkResult:
    device: int
    h2d: DirectionResult
    d2h: DirectionResult
    link: HostLink
    telemetry: dict[str, Any] | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def direction(self, name: str) -> DirectionResult:
        return self.h2d if name == "h2d" else self.d2h

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "h2d": self.h2d.to_dict(), "d2h": self.d2h.to_dict(),
                "link": self.link.to_dict(), "telemetry": self.telemetry, "warnings": list(self.warnings),
                "units": "GB/s (10^9 bytes/s) per direction"}


def direction_result(row: Mapping[str, Any], link: HostLink) -> DirectionResult:
    """One row of ``_core.hostlink_run`` as a typed result against the link's theoretical rate."""
    median = gbps(int(row["bytes"]), float(row["median_ms"]))
    theo = link.theoretical_gbps
    return DirectionResult(
        direction=str(row["direction"]), gbps_median=median, gbps_best=gbps(int(row["bytes"]), float(row["best_ms"])),
        cv=float(row["cv"]), bytes=int(row["bytes"]), reps=int(row["reps"]), median_ms=float(row["median_ms"]),
        verification=dict(row["verification"]), theoretical_gbps=theo,
        fraction_of_theoretical=median / theo if theo else None)


def link_of(health: Any, gpu_name: str | None) -> HostLink:
    """The host link from a ``DeviceHealth`` reading (None-safe)."""
    g = (lambda k: getattr(health, k, None)) if health is not None else (lambda k: None)
    return host_link(gen=g("pcie_gen"), width=g("pcie_width"), max_gen=g("pcie_max_gen"),
                     max_width=g("pcie_max_width"), c2c_enabled=g("c2c_enabled"), gpu_name=gpu_name)


def link_warnings(result_rows: list[DirectionResult], link: HostLink) -> list[str]:
    out = []
    if link.degraded:
        out.append(f"the PCIe link runs at gen {link.gen} x{link.width}, below the gen {link.max_gen} "
                   f"x{link.max_width} both ends support: reseat the card or check the slot and BIOS")
    for r in result_rows:
        if r.fraction_of_theoretical and r.fraction_of_theoretical > 1.0:
            out.append(f"{r.direction}: {r.gbps_median:.1f} GB/s is above the {link.kind} link's theoretical "
                       f"{link.theoretical_gbps:.1f} GB/s: NVML probably misreports the link")
    return out


def measure_hostlink(device: int = 0, *, size_bytes: int = DEFAULT_BYTES, reps: int = DEFAULT_REPS,
                     warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED) -> HostLinkResult:
    """Pinned h2d and d2h copy bandwidth of CUDA device ``device`` against its link's theoretical rate.

    Raises GpuUnavailableError (with the reason) without a GPU, UserError for bad arguments,
    the core's VerificationError when a copy delivered wrong data and CudaError when pinned memory
    cannot be had.
    """
    status.require_measurement(device)
    if reps < 1 or warmup < 0:
        raise UserError("reps must be >= 1 and warmup >= 0")
    size = int(size_bytes) // 16 * 16
    if size < 256:
        raise UserError(f"host-link copies need at least 256 bytes, not {size_bytes}")
    dev = listing.device(device)
    with device_telemetry.sampling(device) as tel:
        rows = status.core().hostlink_run(device, size, int(reps), int(warmup), int(seed))
    link = link_of(device_health.read_health(dev.pci_bus_id), dev.name)
    results = {r["direction"]: direction_result(r, link) for r in rows}
    return HostLinkResult(device=device, h2d=results["h2d"], d2h=results["d2h"], link=link,
                          telemetry=tel.summary(),
                          warnings=tuple(link_warnings(list(results.values()), link)))
