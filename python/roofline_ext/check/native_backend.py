"""The real check backend: the device layer for identity and state, the measurement layer's
verified kernels (the same functions calibration uses) for every figure."""
from __future__ import annotations

from typing import Any, Mapping, cast

from .._version import __version__
from ..device import health as device_health, listing, status
from ..measure.bandwidth import measure_pattern
from ..measure.compute import measure_path
from ..measure.hostlink import measure_hostlink
from ..peaks.cache import cache_path, load
from .plan import (COMPUTE_REPS, COMPUTE_TARGET_MS, COMPUTE_WARMUP, HBM_REPS, HBM_WARMUP, HOSTLINK_REPS,
                  HOSTLINK_WARMUP, Measured)


class NativeCheckBackend:
    def __init__(self) -> None:
        self._hostlink: dict[int, Any] = {}  # one h2d+d2h run per device serves both metrics
        self._facts: dict[int, Any] = {}

    def availability(self) -> Any:
        return status.availability()

    def devices(self) -> list[Any]:
        return listing.devices()

    def health(self, dev: Any) -> Any:
        return device_health.read_health(dev.pci_bus_id)

    def calibration(self, dev: Any) -> Mapping[str, Any] | None:
        cal = load(dev.uuid) if dev.uuid else None
        return None if cal is None else {**cal, "_path": str(cache_path(dev.uuid))}

    def compute_paths(self, index: int) -> Mapping[str, Any]:
        return status.core().compute_paths(index)

    def free_bytes(self, index: int) -> int | None:
        try:
            return int(status.core().cuda_memory_info(index)["memory_free_bytes"])
        except Exception:  # the buffers are then sized from the device record's NVML figure
            return listing.device(index).memory_free_bytes

    def package_version(self) -> str:
        return __version__

    def measure(self, index: int, metric: str, setup: Mapping[str, Any]) -> Measured:
        if metric in ("hbm_read", "hbm_copy"):
            return self._hbm(index, setup)
        if metric in ("h2d", "d2h"):
            return self._link(index, metric, setup)
        return self._compute(index, setup)

    def _hbm(self, index: int, setup: Mapping[str, Any]) -> Measured:
        r = measure_pattern(index, setup["pattern"], int(setup["buffer_bytes"]), configs=[setup["config"]],
                            reps=HBM_REPS, warmup=HBM_WARMUP,
                            theoretical_tbps=listing.device(index).theoretical_bandwidth_tbps)
        return Measured(r.tbps_median, r.cv, {"pattern": r.pattern, "config": dict(r.config), "best": r.tbps_best,
                                              "buffer_bytes": r.buffer_bytes, "reps": r.reps,
                                              "verification": dict(r.verification)}, r.telemetry)

    def _compute(self, index: int, setup: Mapping[str, Any]) -> Measured:
        if index not in self._facts:
            self._facts[index] = status.core().compute_device(index)
        r = measure_path(index, setup["precision"], setup["path"], setup.get("config") or {}, reps=COMPUTE_REPS,
                         warmup=COMPUTE_WARMUP, target_ms=COMPUTE_TARGET_MS, cooldown_s=0.0, _core=status.core(),
                         _device=self._facts[index])
        # A measured path always has its median (an unsupported pair raises in measure_path).
        return Measured(cast(float, r.tflops_median), r.cv, {
            "path": r.path, "instruction": r.instruction, "config": dict(r.config), "best": r.tflops_best,
            "reps": r.reps, "sm_clock_mhz": r.sm_clock_mhz, "kernel_clock_mhz": r.kernel_clock_mhz,
            "fraction_of_clock_derived": r.fraction_of_clock_derived, "verification": r.verification}, r.telemetry)

    def _link(self, index: int, metric: str, setup: Mapping[str, Any]) -> Measured:
        if index not in self._hostlink:
            self._hostlink[index] = measure_hostlink(index, size_bytes=int(setup["bytes"]), reps=HOSTLINK_REPS,
                                                     warmup=HOSTLINK_WARMUP)
        res = self._hostlink.pop(index) if metric == "d2h" else self._hostlink[index]
        d = res.direction(metric)
        return Measured(d.gbps_median, d.cv, {"best": d.gbps_best, "bytes": d.bytes, "reps": d.reps,
                                               "verification": d.verification, "link": res.link.to_dict(),
                                               "fraction_of_theoretical": d.fraction_of_theoretical,
                                               "warnings": list(res.warnings)}, res.telemetry)
