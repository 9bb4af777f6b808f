"""check, host-link and NVML health on a real GPU (marked gpu: skipped with the reason elsewhere)."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.gpu


def _core():
    from roofline_ext.device.status import core

    return core()


def _dev():
    from roofline_ext.device.listing import device

    return device(0)


def test_nvml_health_reports_the_new_fields():
    h = _core().nvml_health(_dev().pci_bus_id)
    for key in ("ecc_uncorrected_volatile", "remap_pending", "pcie_gen", "pcie_max_gen", "pcie_max_width",
                "temperature_c", "temperature_slowdown_c", "compute_processes"):
        assert key in h
    if h["pcie_gen"] and h["pcie_max_gen"]:
        assert 1 <= h["pcie_gen"] <= h["pcie_max_gen"]
    assert isinstance(h["compute_processes"], list)


def test_hostlink_copies_are_verified_and_below_the_link():
    from roofline_ext.measure.hostlink import measure_hostlink

    r = measure_hostlink(0, reps=5)
    for d in (r.h2d, r.d2h):
        assert d.verification["passed"] and d.verification["checked_words"] == d.bytes // 4
        assert d.gbps_median > 1
        if r.link.kind == "pcie" and r.link.theoretical_gbps:
            assert d.gbps_median < 1.02 * r.link.theoretical_gbps
    assert r.h2d.verification["method"] == "checksum" and r.d2h.verification["method"] == "compare"


@pytest.mark.parametrize("fault,words", [("short", "host-to-device"), ("short_d2h", "device-to-host")])
def test_a_short_copy_fails_verification(fault, words):
    core = _core()
    with pytest.raises(core.VerificationError, match=words):
        core.hostlink_run(0, 64 << 20, 2, 1, 12345, fault)


def test_check_runs_within_budget_and_is_complete():
    from roofline_ext.check.run import run_check

    t0 = time.monotonic()
    r = run_check("0")
    assert time.monotonic() - t0 < 10
    (d,) = r.devices
    assert {m.key for m in d.metrics} | set(d.skipped) == {"hbm_read", "hbm_copy", "fp32", "bf16", "h2d", "d2h"}
    for m in d.metrics:
        assert m.value and m.value > 0, m.reason
    assert r.exit_code in (0, 4, 5, 6)


def test_check_command_wall_time_includes_start_up():
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "roofline_ext.cli", "check", "--json"], capture_output=True,
                          text=True, timeout=60)
    wall = time.monotonic() - t0
    doc = json.loads(proc.stdout)
    assert proc.returncode == doc["exit_code"] and doc["devices"]
    assert wall < 10, f"check took {wall:.1f} s"
