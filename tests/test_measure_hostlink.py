"""Host-link policy without a GPU: the link's theoretical rate, results from core-shaped rows, the
NVML health record, and the calibration's hostlink section (figures are fixtures)."""
from __future__ import annotations

import os

import pytest

from roofline_ext.device.health import from_nvml, read_health
from roofline_ext.measure.hostlink import direction_result, gbps, link_warnings
from roofline_ext.peaks.link_rate import C2C_GBPS_PER_DIRECTION, host_link, pcie_gbps


@pytest.mark.parametrize("gen,width,expected", [(3, 16, 15.754), (4, 16, 31.508), (5, 16, 63.015), (5, 8, 31.508),
                                                (1, 16, 4.0), (6, 16, 121.0)])
def test_pcie_rate_is_gen_times_width_times_encoding(gen, width, expected):
    assert pcie_gbps(gen, width) == pytest.approx(expected, rel=1e-3)


def test_unknown_link_and_c2c():
    assert pcie_gbps(None, 16) is None and pcie_gbps(9, 16) is None
    assert host_link(gen=None, width=None).kind == "unknown"
    c2c = host_link(gen=5, width=16, c2c_enabled=True)
    assert c2c.kind == "c2c" and c2c.theoretical_gbps == C2C_GBPS_PER_DIRECTION
    assert host_link(gen=5, width=16, gpu_name="NVIDIA GH200 480GB").kind == "c2c"  # NVML could not say
    assert host_link(gen=5, width=16, c2c_enabled=False, gpu_name="NVIDIA GH200 480GB").kind == "pcie"


def test_degraded_link():
    link = host_link(gen=4, width=16, max_gen=5, max_width=16)
    assert link.degraded and "GT/s" in link.formula
    assert not host_link(gen=5, width=16, max_gen=5, max_width=16).degraded
    assert host_link(gen=5, width=8, max_gen=5, max_width=16).degraded


def test_a_fault_the_host_link_does_not_inject_is_refused_by_name():
    """One fault type for every family (csrc/verification.hpp), parsed in the bindings before any
    device call: needs a CUDA build, not a GPU."""
    from roofline_ext.device.native import core_or_none

    core = core_or_none()
    if core is None or not core.CUDA_COMPILED:
        pytest.skip("no native core with its CUDA part")
    for fault in ("bogus", "corrupt"):
        with pytest.raises(ValueError, match=rf"unknown host-link fault '{fault}' \(accepted: none, short, short_d2h\)"):
            core.hostlink_run(0, 64 << 20, 2, 1, 12345, fault)


def _row(direction, ms=4.9, best=4.85):
    return {"direction": direction, "bytes": 256 << 20, "median_ms": ms, "best_ms": best, "cv": 0.003, "reps": 10,
            "verification": {"method": "checksum", "checked_words": (256 << 20) // 4, "passed": True}}


def test_direction_result_against_the_link():
    link = host_link(gen=5, width=16, max_gen=5, max_width=16)
    r = direction_result(_row("h2d"), link)
    assert r.gbps_median == pytest.approx(gbps(256 << 20, 4.9)) == pytest.approx(54.78, rel=1e-3)
    assert r.fraction_of_theoretical == pytest.approx(54.78 / 63.015, rel=1e-3)
    assert link_warnings([r], link) == []
    fast = direction_result(_row("d2h", ms=1.0, best=1.0), link)
    assert "misreports" in link_warnings([fast], link)[0]
    assert "reseat" in link_warnings([r], host_link(gen=3, width=16, max_gen=5, max_width=16))[0]


def test_health_record_from_nvml_dicts():
    info = {"clock_event_reason_names": ["gpu_idle"], "power_draw_mw": 80500, "mig_current": 0, "ecc_current": 1,
            "ecc_pending": 1, "sm_clock_mhz": 345, "max_sm_clock_mhz": 1980}
    health = {"ecc_uncorrected_volatile": 0, "pcie_gen": 5, "pcie_max_gen": 5, "remap_pending": False,
              "compute_processes": [{"pid": os.getpid(), "used_bytes": 1 << 29}, {"pid": 1, "used_bytes": None}],
              "utilization_gpu_pct": 97, "utilization_memory_pct": 40}
    names = {1: "python3 load.py"}
    h = from_nvml("0000:19:00.0", info, health, names=names.get)
    assert h.power_draw_w == 80.5 and h.ecc_mode == "enabled" and h.mig_mode == "disabled"
    assert [p.pid for p in h.other_processes] == [1]  # this process is not "another process"
    assert h.utilization_gpu_pct == 97 and h.utilization_memory_pct == 40
    d = h.to_dict()
    assert d["other_processes"] == [{"pid": 1, "used_bytes": None, "name": "python3 load.py"}]
    assert d["clock_event_reasons"] == ["gpu_idle"]
    assert h.other_processes[0].describe() == "pid 1 python3 load.py"
    assert h.retired_pages_pending is None  # not reported: no finding


def test_process_names_come_from_proc(tmp_path):
    from roofline_ext.device.health import process_name

    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "cmdline").write_bytes(b"/usr/bin/python3\x00train.py\x00--steps\x00100\x00")
    (tmp_path / "43").mkdir()
    (tmp_path / "43" / "cmdline").write_bytes(b"")  # a kernel thread, or hidden: the short name
    (tmp_path / "43" / "comm").write_text("worker\n")
    (tmp_path / "44").mkdir()
    (tmp_path / "44" / "cmdline").write_bytes(b"x" * 300)
    assert process_name(42, tmp_path) == "python3 train.py --steps 100"
    assert process_name(43, tmp_path) == "worker"
    assert len(process_name(44, tmp_path) or "") == 80
    assert process_name(45, tmp_path) is None  # gone, or another PID namespace's


def test_read_health_without_nvml_says_why():
    from roofline_ext.device.status import availability

    if availability().ok:
        pytest.skip("this machine has NVML")
    h = read_health("0000:19:00.0")
    assert h.error and h.pcie_gen is None


def test_calibration_hostlink_section_and_table_rows():
    from roofline_ext.calibration.pipeline import hostlink_entries
    from roofline_ext.measure.hostlink import HostLinkResult
    from roofline_ext.report.calibration_table import hostlink_rows

    link = host_link(gen=5, width=16, max_gen=5, max_width=16)
    res = HostLinkResult(0, direction_result(_row("h2d"), link), direction_result(_row("d2h", 4.8, 4.7), link), link)
    section = hostlink_entries(res)
    assert section["h2d"]["unit"] == "GB/s" and section["h2d"]["value"] == pytest.approx(54.78, rel=1e-3)
    assert section["d2h"]["theoretical"] == pytest.approx(63.015, rel=1e-3) and section["link"]["kind"] == "pcie"
    rows = hostlink_rows({"hostlink": section})
    assert [r["key"] for r in rows] == ["h2d", "d2h"]
    assert rows[0]["fraction_of_clock_derived"] == "86.9%" and "PCIe gen 5 x16" in rows[0]["path"]


def test_calibrate_measures_the_host_link_when_the_backend_can(monkeypatch):
    """The calibration calls the backend's measure_hostlink (the native one has it) and keeps the
    section out of the roofline peaks."""
    from roofline_ext.calibration import pipeline as cal_run
    from roofline_ext.measure.hostlink import HostLinkResult

    link = host_link(gen=5, width=16, max_gen=5, max_width=16)
    res = HostLinkResult(0, direction_result(_row("h2d"), link), direction_result(_row("d2h"), link), link)

    class Backend:
        def __init__(self):
            self.called = False

        def measure_hostlink(self, device, *, quick):
            self.called = quick
            return res

    class Steps:
        def step(self, *a):
            import contextlib

            return contextlib.nullcontext(lambda *a, **k: None)

    run = cal_run._Run(Backend(), 0, None, None, True, Steps(), {"link": 1.0})
    cal_run._hostlink(run)
    assert run.backend.called is True and run.hostlink["h2d"]["value"] > 50
