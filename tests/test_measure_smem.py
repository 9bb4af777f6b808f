"""Shared-memory bandwidth: the ceiling and the policy (CPU), the calibration entry, and on a GPU
the verified kernel, bounded by SMs x 128 B/clock x the clock it counted, that clock checked
against NVML's."""
from __future__ import annotations

import contextlib
import importlib
import json

import pytest

from roofline_ext.device.status import Availability, Reason

from roofline_ext.measure import smem as sm
from roofline_ext.measure import bandwidth as bwm

from fakes.calibration import FakeBackend, fake_bandwidth, fake_compute, fake_device


def test_ceiling_is_sms_times_128_bytes_per_clock_times_clock():
    # H200: 132 SMs at 1980 MHz.
    assert sm.smem_ceiling_tbps(132, 1980.0) == pytest.approx(132 * 128 * 1980e6 / 1e12)
    assert sm.smem_ceiling_tbps(132, 1980.0) == pytest.approx(33.45, abs=0.01)
    assert sm.smem_ceiling_tbps(132, None) is None and sm.smem_ceiling_tbps(0, 1980.0) is None


def _row(tbps, clock=1980.0, reps=20, cfg=None, skipped=None):
    n = 132 * 2 * 65536 * 4000  # grid x bytes per block x passes
    ms = n / (tbps * 1e12) * 1e3
    return {"config": cfg or sm._cfg(256, 16, 8), "grid": 264, "blocks_per_sm": 2, "occupancy_blocks_per_sm": 2,
            "sm_count": 132, "smem_bytes_per_block": 65536, "passes": 4000, "bytes_per_launch": n, "reps": reps,
            "times_ms": [ms] * reps, "median_ms": ms, "best_ms": ms * 0.998, "cv": 0.002,
            "kernel_clock_mhz": [clock] * reps, "timed_end_s": 0.0, "skipped": skipped,
            "verification": {"method": "per-thread checksum", "checked_threads": 67584, "passed": True}}


def test_result_is_the_best_median_with_its_fraction_of_the_ceiling():
    rows = [_row(30.0), _row(31.5, cfg=sm._cfg(512, 16, 8)),
            _row(1.0, skipped="no block fits", cfg=sm._cfg(1024, 16, 16))]
    rows[-1].update(median_ms=0, best_ms=0)
    tel = {"sm_clock_mhz": {"min": 1900.0, "median": 1965.0, "max": 1980.0}}
    r = sm.smem_result(rows, tel)
    assert r.config == sm._cfg(512, 16, 8) and r.tbps_median == pytest.approx(31.5)
    assert r.kernel_clock_mhz == 1980.0 and r.sm_clock_mhz == 1965.0
    assert r.ceiling_tbps == pytest.approx(sm.smem_ceiling_tbps(132, 1980.0))
    assert r.fraction_of_ceiling == pytest.approx(31.5 / r.ceiling_tbps)
    assert r.ceiling_at_nvml_clock_tbps == pytest.approx(sm.smem_ceiling_tbps(132, 1965.0))
    assert [s.get("skipped") for s in r.sweep] == [None, None, "no block fits"]
    json.dumps(r.to_dict())


def test_a_figure_above_the_ceiling_raises():
    with pytest.raises(bwm.MeasurementError, match="exceeds 132 SMs x 128 B/clock"):
        sm.check_bound([_row(34.0, clock=1980.0)], 132, 1980.0)
    sm.check_bound([_row(33.0, clock=1980.0)], 132, 1980.0)
    # The highest clock seen counts, kernel-counted or NVML's.
    sm.check_bound([_row(33.9, clock=1900.0)], 132, 2010.0)


class _SmemCore:
    def __init__(self, tbps, clocks):
        self.tbps, self.clocks = tbps, clocks

    def smem_run(self, device, reps, warmup, target_ms, passes, configs, seed):
        out = []
        for i, c in enumerate(configs):
            r = _row(self.tbps * (1 - 0.01 * i), reps=reps, cfg=dict(c))
            r["kernel_clock_mhz"] = list(self.clocks[:reps])
            out.append(r)
        return out


@pytest.fixture
def fake_smem(monkeypatch):
    fake_av = Availability(Reason.OK, "simulated GPU", {"cuda": {"count": 1}})
    status = importlib.import_module("roofline_ext.device.status")
    monkeypatch.setattr(status, "_cached", lambda: fake_av)
    core = _SmemCore(31.0, [1980.0] * 17 + [1400.0] * 3)
    monkeypatch.setattr(status, "core", lambda: core)

    class _Tel:
        samples: list = []

        def summary(self):
            return {"sm_clock_mhz": {"min": 1950.0, "median": 1975.0, "max": 1980.0}}

    monkeypatch.setattr(sm, "telemetry_block", lambda device: contextlib.nullcontext(_Tel()))
    return core


def test_measure_smem_flags_launches_whose_own_clock_fell(fake_smem):
    r = sm.measure_smem(0)
    assert r.config == sm.DEFAULT_CONFIGS[0] and r.tbps_median == pytest.approx(31.0)
    assert r.throttle["flagged"] == 3 and r.throttle["by_reason"] == {"low_kernel_clock": 3}
    assert r.throttle["discarded"] == 0
    d = sm.measure_smem(0, discard_throttled=True)
    assert d.throttle["discarded"] == 3


def test_calibration_entry(fake_smem):
    run = importlib.import_module("roofline_ext.calibration.pipeline")
    e = run._smem_entry(sm.measure_smem(0))
    assert e["label"] == "Shared memory" and e["unit"] == "TB/s"
    assert e["clock_derived"] == pytest.approx(sm.smem_ceiling_tbps(132, 1980.0))
    assert e["fraction_of_clock_derived"] == pytest.approx(e["value"] / e["clock_derived"])
    assert e["bytes_per_clock_per_sm"] == 128 and e["throttle"]["flagged"] == 3
    assert e["sm_clock_mhz"] == 1975.0


def test_full_calibration_carries_smem_and_mix_entries_but_no_new_peaks(monkeypatch, tmp_path):
    """A backend that measures shared memory and the mix: the entries are cached, the peaks stay the roofs."""
    run = importlib.import_module("roofline_ext.calibration.pipeline")

    knobs = {"devices": [fake_device()], "nvml": {"compute_processes": 1}, "calls": [], "reasons": (),
             "unsupported": set(), "fake_compute": fake_compute, "fake_bandwidth": fake_bandwidth}

    class Backend(FakeBackend):
        def measure_smem(self, device, *, quick):
            self.knobs["calls"].append(("smem", device, quick))
            return sm.smem_result([_row(31.0)], {"sm_clock_mhz": {"median": 1975.0, "max": 1980.0}})

        def measure_bandwidth(self, device, *, quick, progress=None):
            import dataclasses

            r = super().measure_bandwidth(device, quick=quick, progress=progress)
            mix = bwm.MixResult(points=[bwm.mix_point(1, 0, [{"source": "read", "result": r.patterns["read"]}]),
                                        bwm.mix_point(1, 1, [{"source": "copy", "result": r.patterns["copy"]}])],
                                buffer_bytes=4 << 30, telemetry=None)
            return dataclasses.replace(r, mix=mix)

    cal = run.calibrate(0, sustained_s=0, backend=Backend(knobs))
    entries = cal["burst"]["entries"]
    assert entries["smem"]["value"] == pytest.approx(31.0) and ("smem", 0, False) in knobs["calls"]
    assert entries["hbm_mix"]["points"] == {"1:0": 4.21, "1:1": 4.312}
    assert "smem" not in cal["peaks"]["burst"] and "hbm_mix" not in cal["peaks"]["burst"]
    quick = run.calibrate(0, quick=True, backend=Backend(dict(knobs, calls=[])))
    assert "smem" not in quick["burst"]["entries"]
    from roofline_ext.peaks import cache as cb

    cb.save(cal)  # strict JSON, validated peaks: the cache takes it
    assert cb.load(cal["gpu"]["uuid"])["burst"]["entries"]["hbm_mix"]["points"]["1:1"] == 4.312
    # The new entries neither break the table nor the chart, which read the roofs only.
    from roofline_ext.report.calibration_table import summary_rows

    assert {r["key"] for r in summary_rows(cal)} >= {"hbm", "l2"}
    pytest.importorskip("matplotlib")
    from roofline_ext.report.charts import plot_calibration

    assert plot_calibration(cal, tmp_path / "full.png").stat().st_size > 10_000


# --------------------------------------------------------------------------------------------------
# GPU
# --------------------------------------------------------------------------------------------------

def _core():
    from roofline_ext.device.status import core

    return core()


def test_a_fault_the_smem_family_does_not_inject_is_refused_by_name():
    """Parsed in the bindings before any device call: needs a CUDA build, not a GPU."""
    from roofline_ext.device.native import core_or_none

    core = core_or_none()
    if core is None or not core.CUDA_COMPILED:
        pytest.skip("no native core with its CUDA part")
    for fault in ("bogus", "short_d2h"):
        with pytest.raises(ValueError, match=rf"unknown shared-memory fault '{fault}' \(accepted: none, short\)"):
            core.smem_run(0, configs=[sm._cfg(256, 16, 8)], fault=fault)


@pytest.mark.gpu
def test_a_kernel_that_skips_a_pass_fails_verification():
    core = _core()
    with pytest.raises(core.VerificationError, match="thread sums differ"):
        core.smem_run(0, reps=2, warmup=1, passes=50, configs=[sm._cfg(256, 16, 8)], fault="short")


@pytest.mark.gpu
def test_every_compiled_configuration_verifies():
    core = _core()
    caps = core.smem_capabilities()
    cfgs = [sm._cfg(t, w, v) for t in caps["threads"] for w in caps["widths"] for v in caps["vectors"]]
    rows = core.smem_run(0, reps=2, warmup=1, passes=20, configs=cfgs)
    for r in rows:
        if r["skipped"]:
            assert "shared memory" in r["skipped"]
            continue
        assert r["verification"]["passed"]
        assert r["verification"]["checked_threads"] == r["grid"] * r["config"]["threads"]
        assert r["grid"] == r["sm_count"] * r["blocks_per_sm"]
        assert r["bytes_per_launch"] == r["grid"] * r["smem_bytes_per_block"] * 20
        assert len(r["kernel_clock_mhz"]) == 2


@pytest.mark.gpu
def test_smem_is_bounded_by_its_clock_derived_ceiling():
    from roofline_ext.device.listing import device

    dev = device(0)
    r = sm.measure_smem(0, reps=10, warmup=2)
    assert r.kernel_clock_mhz and r.ceiling_tbps
    # The clock the kernel counted is the SM clock NVML reports (an independent path), within the
    # spread of 25 ms samples; and neither is above the card's maximum.
    top = dev.max_sm_clock_mhz or 1e9
    assert r.kernel_clock_mhz <= 1.01 * top
    if r.telemetry and r.telemetry.get("sm_clock_mhz"):
        nv = r.telemetry["sm_clock_mhz"]
        assert 0.85 * nv["min"] <= r.kernel_clock_mhz <= 1.05 * nv["max"]
    # Never above SMs x 128 B/clock x the clock; a sane floor far above a broken kernel (half).
    assert 0.5 <= r.fraction_of_ceiling <= 1.005, r.fraction_of_ceiling
    assert r.tbps_best <= 1.005 * sm.smem_ceiling_tbps(dev.sm_count, max(r.kernel_clock_mhz, top))
    json.dumps(r.to_dict())
