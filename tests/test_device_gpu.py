"""On a GPU: identity from roofline_ext agrees with torch and nvidia-smi (independent paths)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

import roofline_ext
from roofline_ext.device.listing import normalize_bus_id

pytestmark = pytest.mark.gpu


def _devices() -> list:
    """The listed devices; none listed on a GPU machine is a failure, never a loop over nothing."""
    devs = roofline_ext.devices()
    assert devs, "roofline_ext.devices() lists no GPU on a machine where a GPU can be measured"
    return devs


def _smi(fields: str) -> list[list[str]]:
    if shutil.which("nvidia-smi") is None:
        pytest.fail("nvidia-smi not on PATH on a GPU machine")
    out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return [[c.strip() for c in line.split(",")] for line in out.strip().splitlines()]


def test_identity_matches_torch():
    torch = pytest.importorskip("torch")
    devs = [d for d in _devices() if d.index is not None]
    assert devs, "no listed GPU has a CUDA index"
    assert len(devs) == torch.cuda.device_count()
    for d in devs:
        p = torch.cuda.get_device_properties(d.index)
        assert d.name == p.name
        assert d.sm_count == p.multi_processor_count
        assert (d.cc_major, d.cc_minor) == (p.major, p.minor)
        assert d.memory_total_bytes == pytest.approx(p.total_memory, rel=0.02)
        assert d.l2_bytes == p.L2_cache_size
        assert d.uuid.lower().removeprefix("gpu-") == str(p.uuid).lower().removeprefix("gpu-")
        assert d.cuda_cores == d.sm_count * (64 if (p.major, p.minor) in ((7, 0), (7, 5), (8, 0)) else 128)


def test_identity_matches_nvidia_smi():
    rows = _smi("pci.bus_id,name,uuid,memory.total,clocks.max.sm,clocks.max.memory,power.limit,driver_version")
    by_bus = {normalize_bus_id(r[0]): r for r in rows}
    assert by_bus, "nvidia-smi lists no GPU"
    for d in _devices():
        bus, name, uuid, mem_mib, max_sm, max_mem, plimit, driver = by_bus[normalize_bus_id(d.pci_bus_id)]
        assert d.name == name
        assert d.uuid == uuid
        assert d.memory_total_bytes / 2**20 == pytest.approx(float(mem_mib), abs=1.0)
        assert d.max_sm_clock_mhz == int(max_sm)
        assert d.max_mem_clock_mhz == int(max_mem)
        assert d.power_limit_w == pytest.approx(float(plimit), abs=1.0)
        assert d.driver_version == driver


def test_physical_sanity():
    for d in _devices():
        assert 0 < d.sm_count <= 1000
        assert 500 <= d.max_sm_clock_mhz <= 4000
        assert d.theoretical_bandwidth_tbps is None or 0.1 < d.theoretical_bandwidth_tbps < 20
        assert d.memory_free_bytes <= d.memory_total_bytes


def test_info_cli_json_on_gpu():
    r = subprocess.run([sys.executable, "-m", "roofline_ext.cli", "info", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["available"] is True and out["build"]["cuda_compiled"] is True
    assert out["devices"] and out["devices"][0]["can_measure"] is True


def test_telemetry_sampler_sees_clocks_under_load():
    torch = pytest.importorskip("torch")
    from roofline_ext.device.telemetry import sampling

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    with sampling(0, interval_ms=20) as tel:
        t0 = time.time()
        while time.time() - t0 < 0.5:
            a @ a
        torch.cuda.synchronize()
    s = tel.summary()
    assert s is not None, tel.error
    assert s["samples"] >= 10
    d = roofline_ext.devices()[0]
    assert 100 <= s["sm_clock_mhz"]["max"] <= d.max_sm_clock_mhz
    assert s["power_w"]["max"] > 0
