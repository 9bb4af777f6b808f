"""Fakes for the check tests: an H200-like card behind the check's backend interface.

The figures are TEST FIXTURES modelled on tests/data/calibration-h200-example.json and the README's
H200 measurements; they are not measurements.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from roofline_ext.check.run import Measured
from roofline_ext.device.health import DeviceHealth
from roofline_ext.device.listing import Device
from roofline_ext.device.status import Availability, Reason

DATA = Path(__file__).resolve().parent.parent / "data"

#: A healthy H200's quick-check figures (fixture): HBM read/copy, FP32, BF16, h2d/d2h in GB/s.
HEALTHY = {"hbm_read": 4.58, "hbm_copy": 4.29, "fp32": 65.4, "bf16": 940.0, "h2d": 55.3, "d2h": 55.9}


def h200_device(index: int = 0, uuid: str = "GPU-00000000-fixture-0000-000000000000", name: str = "NVIDIA H200") -> Device:
    return Device(index=index, nvml_index=index, name=name, uuid=uuid, pci_bus_id=f"00000000:{0x19 + index:02x}:00.0",
                  cc_major=9, cc_minor=0, architecture="hopper", sm_count=132, cuda_cores=16896, l2_bytes=60 << 20,
                  memory_total_bytes=150754820096, memory_free_bytes=150000000000, memory_bus_width_bits=6016,
                  max_sm_clock_mhz=1980, max_mem_clock_mhz=3201, sm_clock_mhz=345, mem_clock_mhz=3201,
                  power_limit_w=700.0, power_draw_w=80.0, temperature_c=31, mig_mode="disabled", ecc_mode="enabled",
                  clock_event_reasons=["gpu_idle"], compute_processes=0, pcie_gen=5, pcie_width=16,
                  driver_version="580.159.04", cuda_driver_version="13.0", can_measure=True)


def healthy_state(pci_bus_id: str = "00000000:19:00.0", **over: Any) -> DeviceHealth:
    base = dict(pci_bus_id=pci_bus_id, clock_event_reasons=("gpu_idle",), sm_clock_mhz=345, max_sm_clock_mhz=1980,
                power_draw_w=80.0, mig_mode="disabled", ecc_mode="enabled", ecc_pending="enabled",
                ecc_corrected_volatile=0, ecc_uncorrected_volatile=0, ecc_corrected_aggregate=3,
                ecc_uncorrected_aggregate=0, remapped_rows_correctable=0, remapped_rows_uncorrectable=0,
                remap_pending=False, remap_failure=False, pcie_gen=5, pcie_width=16, pcie_max_gen=5,
                pcie_max_width=16, pcie_gpu_max_gen=5, pcie_replay_counter=0, c2c_enabled=False, temperature_c=31,
                temperature_slowdown_c=90, temperature_shutdown_c=95, temperature_gpu_max_c=87, compute_processes=())
    base.update(over)
    return DeviceHealth(**base)


def h200_calibration(uuid: str = "GPU-00000000-fixture-0000-000000000000") -> dict:
    """The example calibration (a fixture), with the patterns and host-link figures a quick calibration stores."""
    cal = json.loads((DATA / "calibration-h200-example.json").read_text())
    cal = copy.deepcopy(cal)
    cal["gpu"]["uuid"] = uuid
    hbm = cal["burst"]["entries"]["hbm"]
    hbm["patterns"] = {"read": {"tbps": 4.61, "cv": 0.002, "config": {"threads": 1024, "unroll": 16, "blocks_per_sm": 0,
                                                                       "load": "nc_na", "store": "plain", "bulk_bytes": 0,
                                                                       "grid": 17000}},
                       "copy": {"tbps": 4.312, "cv": 0.003, "config": {"threads": 256, "unroll": 1, "blocks_per_sm": 0,
                                                                        "load": "nc_na", "store": "cs", "bulk_bytes": 0}}}
    cal["hostlink"] = {"link": {"kind": "pcie", "gen": 5, "width": 16, "theoretical_gbps": 63.02},
                       "h2d": {"value": 55.4, "unit": "GB/s", "cv": 0.004, "theoretical": 63.02},
                       "d2h": {"value": 56.0, "unit": "GB/s", "cv": 0.004, "theoretical": 63.02}}
    return cal


def core_error(name: str, message: str) -> Exception:
    """The core's own exception of that class (``VerificationError``, ``CudaError``...): check
    classifies the core's errors by type, and every build of the core registers them."""
    from roofline_ext import _core

    return getattr(_core, name)(message)


class FakeCheckBackend:
    """``n`` H200s; per-device figures, state and calibration are settable; calls are recorded."""

    def __init__(self, n: int = 1, *, available: bool = True, calibrated: bool = True) -> None:
        self.devs = [h200_device(i, uuid=f"GPU-0000000{i}-fixture-0000-000000000000") for i in range(n)]
        self.available = available
        self.figures = {d.index: dict(HEALTHY) for d in self.devs}
        self.errors: dict[tuple[int, str], Exception] = {}
        self.start = {d.index: healthy_state(d.pci_bus_id) for d in self.devs}
        self.end: dict[int, DeviceHealth] = {}
        self.cals = {d.uuid: h200_calibration(d.uuid) for d in self.devs} if calibrated else {}
        self.telemetry: dict[tuple[int, str], dict] = {}
        self.caps = {"bf16": {"mma.sync": {"supported": True}, "wgmma": {"supported": True}},
                     "fp32": {"simt": {"supported": True}}}
        self.calls: list[tuple[int, str, dict]] = []
        self._health_reads: dict[int, int] = {}

    def availability(self):
        if self.available:
            return Availability(Reason.OK, "an NVIDIA GPU is available and this build can measure it")
        return Availability(Reason.NO_DRIVER, "no NVIDIA driver found on this machine (fake)")

    def devices(self):
        return list(self.devs)

    def health(self, dev):
        n = self._health_reads.get(dev.index, 0)
        self._health_reads[dev.index] = n + 1
        if n and dev.index in self.end:
            return self.end[dev.index]
        return self.start[dev.index]

    def calibration(self, dev):
        return self.cals.get(dev.uuid)

    def compute_paths(self, index):
        return self.caps

    def free_bytes(self, index):
        return 140 << 30

    def measure(self, index, metric, setup):
        self.calls.append((index, metric, dict(setup)))
        if (index, metric) in self.errors:
            raise self.errors[(index, metric)]
        return Measured(self.figures[index][metric], 0.004, {"setup": dict(setup)},
                        self.telemetry.get((index, metric), {"throttle_reasons": []}))

    def package_version(self):
        return "0.1.0"
