"""Fakes for the calibration tests: a fake H200 behind the calibration's backend interface
(``FakeBackend``, the ``fake_gpu`` fixture) and the pieces it is made of: a fake telemetry sampler,
device, bandwidth and compute results.

The measurement modules are replaced by results of their own types carrying realistic H200
figures, so what the tests check is calibration's policy: the plan, the entries, the peaks mapping,
the sustained phase, the warnings and the JSON that comes out (and that save() accepts). The
figures are TEST FIXTURES, not measurements.

``fake_gpu`` is a pytest fixture: a test module that uses it imports it by name
(``from fakes.calibration import fake_gpu  # noqa: F401``).
"""
from __future__ import annotations

import threading
import time

import pytest

from roofline_ext.calibration import pipeline as cal_run
from roofline_ext.errors import UserError


class FakeTelemetry:
    """Stands in for telemetry.sampling(): samples every 10 ms of a clock that falls from 1980 MHz
    to a floor (as an H200 does at its power cap), from a thread, like the real sampler."""

    def __init__(self, clock_at):
        self.clock_at = clock_at
        self.samples = []
        self.error = None

    def __call__(self, device, interval_ms=25.0):
        import contextlib

        @contextlib.contextmanager
        def block():
            self.samples = []  # one sampler per block, as the real one
            stop = threading.Event()
            t0 = time.monotonic()

            def run():
                while not stop.is_set():
                    t = time.monotonic() - t0
                    self.samples.append({"t_s": t, "sm_clock_mhz": self.clock_at(t), "mem_clock_mhz": 3201,
                                         "power_w": 699.0, "temperature_c": 60, "reasons": 0})
                    stop.wait(0.01)

            th = threading.Thread(target=run)
            th.start()
            try:
                yield self
            finally:
                stop.set()
                th.join()
        return block()


def telemetry_summary(sm=1980.0, mem=3201.0, power=650.0, temp=45.0, reasons=()):
    return {"samples": 12, "duration_s": 0.3,
            "sm_clock_mhz": {"min": sm - 30, "median": sm, "max": sm},
            "mem_clock_mhz": {"min": mem, "median": mem, "max": mem},
            "power_w": {"min": power - 50, "median": power, "max": power + 5},
            "temperature_c": {"min": temp - 2, "median": temp, "max": temp + 1},
            "throttle_reasons": list(reasons),
            "slowdown": [r for r in reasons if r != "gpu_idle"]}


def fake_device(index=0, uuid="GPU-11111111-2222-3333-4444-555555555555", **changes):
    from roofline_ext.device.listing import Device

    fields = dict(
        index=index, nvml_index=index, name="NVIDIA H200", uuid=uuid, pci_bus_id=f"00000000:{index + 0x19:02x}:00.0",
        cc_major=9, cc_minor=0, architecture="hopper", sm_count=132, cuda_cores=16896, l2_bytes=52428800,
        memory_total_bytes=150754820096, memory_free_bytes=149000000000, memory_bus_width_bits=6016,
        max_sm_clock_mhz=1980, max_mem_clock_mhz=3201, sm_clock_mhz=345, mem_clock_mhz=3201,
        power_limit_w=700.0, power_draw_w=75.0, temperature_c=30, mig_mode="disabled", ecc_mode="enabled",
        clock_event_reasons=["gpu_idle"], compute_processes=1, pcie_gen=5, pcie_width=16,
        driver_version="570.124.06", cuda_driver_version="12.8", can_measure=True)
    fields.update(changes)
    return Device(**fields)


def fake_bandwidth(quick):
    from roofline_ext.measure import bandwidth as bwm

    def pattern(name, tbps, buffers):
        cfg = {"threads": 256, "unroll": 8, "blocks_per_sm": 0, "load": "nc_na", "store": "plain", "bulk_bytes": 0}
        return bwm.PatternResult(pattern=name, tbps_median=tbps, tbps_best=tbps * 1.006, cv=0.003,
                                 bytes_per_launch=buffers * (4 << 30), reps=30, config=cfg,
                                 telemetry=telemetry_summary(power=470.0), buffer_bytes=4 << 30,
                                 median_ms=1.0, best_ms=0.99)
    patterns = {"read": pattern("read", 4.21, 1), "copy": pattern("copy", 4.312, 2)}
    l2 = None
    if not quick:
        patterns["write"] = pattern("write", 4.05, 1)
        patterns["triad"] = pattern("triad", 4.30, 3)
        point = bwm.L2Point(working_set_bytes=24 << 20, tbps_median=10.94, tbps_best=11.0, cv=0.006, passes=85,
                            bytes_per_launch=2 << 30, reps=30, config={"threads": 256, "unroll": 4,
                                                                       "blocks_per_sm": 64, "load": "cg"})
        l2 = bwm.L2Result(l2_bytes=52428800, points=[point], plateau=point, telemetry=telemetry_summary(power=430.0))
    peak = max(patterns.values(), key=lambda r: r.tbps_median)
    return bwm.BandwidthResult(device=0, gpu_name="NVIDIA H200", uuid="GPU-x", patterns=patterns, l2=l2, peak=peak,
                               theoretical_tbps=4.815, buffer_bytes=4 << 30, l2_bytes=52428800,
                               date="2026-05-10T09:30:00+00:00")


#: Per precision: (FLOP per clock per SM, the TFLOP/s figure, the path, the instruction): fixtures.
RATES = {"fp64": (128, 32.9, "simt", "fma.rn.f64"), "fp32": (256, 65.6, "simt", "fma.rn.f32"),
          "tf32": (2048, 478.1, "wgmma", "wgmma tf32"), "fp16": (4096, 951.7, "wgmma", "wgmma f16"),
          "bf16": (4096, 949.3, "wgmma", "wgmma bf16"), "fp8": (8192, 1873.0, "wgmma", "wgmma e4m3"),
          "int8": (8192, 1801.2, "wgmma", "wgmma s8")}


def fake_compute(precision, reasons=()):
    from roofline_ext.measure import compute as cm

    rate, value, path, instr = RATES[precision]
    sm = 1980.0 if path == "simt" else 1935.0
    cd = rate * 132 * sm * 1e6 / 1e12
    best = cm.PathResult(precision, path, "ok", unit="TOP/s" if precision == "int8" else "TFLOP/s",
                         tflops_median=value, tflops_best=value * 1.005, cv=0.004, median_ms=2.0, best_ms=1.99,
                         reps=20, instruction=instr, config={"warpgroups": 2} if path == "wgmma" else {},
                         launch={"grid": 264, "block": 256, "smem_bytes": 0, "regs_per_thread": 90,
                                 "iterations": 4096},
                         telemetry=telemetry_summary(sm=sm, power=680.0, reasons=reasons), sm_clock_mhz=sm,
                         clock_derived_peak=cd, fraction_of_clock_derived=value / cd, datasheet=None,
                         kernel_clock_mhz=None if path == "simt" else 1800.0,
                         fraction_of_clock_derived_at_kernel_clock=None if path == "simt" else value / (cd * 1800 / sm))
    paths = {path: best}
    if path == "wgmma":
        paths["mma.sync"] = cm.PathResult(precision, "mma.sync", "ok", tflops_median=value * 0.66)
    return cm.ComputeResult(device={}, date="2026-05-10T09:30:00+00:00", settings={},
                            precisions={precision: cm.PrecisionResult(precision, best.unit, "ok", None, best, paths)})


class FakeBackend:
    """A fake H200 behind the calibration's backend interface (see calibration/backend.py): the
    measurement calls return results of the real types with realistic figures, and are recorded."""

    # Per family: (figure and clock after settling, as fractions of burst and of 1980 MHz). The
    # figure and the SM clock fall together over the first 0.1 s, then hold.
    SETTLE = {"hbm": (0.994, 1755 / 1980), "fp32": (0.977, 1935 / 1980), "bf16": (0.778, 1470 / 1980)}

    def __init__(self, knobs):
        self.knobs = knobs
        self.telemetry = FakeTelemetry(lambda t: 1980.0)

    def require(self, device=0):
        from roofline_ext.device.status import Availability, Reason

        if not any(d.index == device for d in self.knobs["devices"]):
            raise UserError(f"no CUDA device {device}")
        return Availability(Reason.OK, "ok", {"cuda": {"count": 2}})

    def device(self, index=0):
        return next(d for d in self.knobs["devices"] if d.index == index)

    def nvml_state(self, dev):
        return dict(self.knobs["nvml"])

    def build_info(self):
        return {"cuda_runtime_version": 13000}

    def sampling(self, device):
        return self.telemetry(device)

    def measure_compute(self, device, precision, *, quick, progress=None):
        self.knobs["calls"].append(("compute", device, precision, quick))
        if progress:
            progress(f"{precision} fake: measured")
        if precision in self.knobs["unsupported"]:
            from roofline_ext.measure import compute as cm

            r = cm.PathResult(precision, "wgmma", "unsupported", reason="not on this GPU")
            return cm.ComputeResult({}, "", {}, {precision: cm.summarize_precision(precision, {"wgmma": r})})
        return self.knobs["fake_compute"](precision, self.knobs["reasons"])

    def measure_bandwidth(self, device, *, quick, progress=None):
        self.knobs["calls"].append(("bandwidth", device, quick))
        if progress:
            progress(1, 2, "bandwidth: copy")
        return self.knobs["fake_bandwidth"](quick)

    def sustained_runner(self, device, family, burst, dev):
        self.knobs["calls"].append(("sustain", device, family))
        start = time.monotonic()
        floor, clock = self.SETTLE.get(family, (0.9, 0.9))
        self.telemetry.clock_at = lambda t: 1980.0 * (1 - (1 - clock) * min(1.0, t / 0.1))

        def run_once(reps):
            time.sleep(0.01)
            frac = min(1.0, (time.monotonic() - start) / 0.1)
            return burst["value"] * (1 - (1 - floor) * frac)
        return run_once


@pytest.fixture
def fake_gpu(monkeypatch):
    """A fake H200 (index 0): returns a dict of knobs the test may change first, with
    ``knobs["calibrate"]``, ``calibrate`` bound to the fake backend.

    The CLI cannot be handed a backend, so for the CLI tests the one seam ``calibration.pipeline.
    NativeBackend`` yields the fake, and the device layer's listing answers with the fake devices.
    """
    import importlib

    knobs = {"devices": [fake_device()], "nvml": {"compute_processes": 1, "ecc_pending": 1,
                                                   "clock_event_reason_names": ["gpu_idle"],
                                                   "sm_clock_mhz": 345, "temperature_c": 30},
             "calls": [], "reasons": (), "unsupported": set(),
             "fake_compute": fake_compute, "fake_bandwidth": fake_bandwidth}
    backend = FakeBackend(knobs)
    knobs["backend"] = backend
    knobs["calibrate"] = lambda *a, **kw: cal_run.calibrate(*a, backend=backend, **kw)
    monkeypatch.setattr(cal_run, "NativeBackend", lambda: backend)
    # The CLI lists devices and checks availability itself (for --device all).
    av_mod = importlib.import_module("roofline_ext.device.status")
    dev_mod = importlib.import_module("roofline_ext.device.listing")
    monkeypatch.setattr(av_mod, "require_measurement", backend.require)
    monkeypatch.setattr(dev_mod, "devices", lambda: list(knobs["devices"]))
    monkeypatch.setattr(dev_mod, "device", backend.device)
    return knobs
