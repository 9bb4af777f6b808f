"""Bandwidth measurement: the no-GPU error and the policy (CPU), the verified kernels (GPU)."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import roofline_ext
from roofline_ext.device.status import Availability, Reason, availability
from roofline_ext.errors import GpuUnavailableError, UserError

from roofline_ext.measure import bandwidth as bw
from roofline_ext.device import status as av
ROOT = Path(__file__).resolve().parents[1]
MiB, GiB = 1 << 20, 1 << 30


# --------------------------------------------------------------------------------------------------
# No GPU: an error that carries the reason, and no native call on the way
# --------------------------------------------------------------------------------------------------

def test_no_gpu_raises_with_reason_simulated(monkeypatch):
    """Meaningful on any machine: availability says 'no driver', so nothing may touch the core."""
    fake = Availability(Reason.NO_DRIVER, "no NVIDIA driver found on this machine (simulated)")
    monkeypatch.setattr(av, "_cached", lambda: fake)

    def no_core():
        raise AssertionError("measure_bandwidth reached the native core without a GPU")

    monkeypatch.setattr(importlib.import_module("roofline_ext.device.status"), "core", no_core)
    with pytest.raises(GpuUnavailableError) as info:
        roofline_ext.measure_bandwidth()
    assert info.value.availability is fake
    assert info.value.availability.reason is Reason.NO_DRIVER
    assert str(info.value) == fake.message


def test_no_gpu_here_raises_the_real_reason():
    a = availability()
    if a.ok:
        pytest.skip("a GPU can be measured here; the simulated test covers the no-GPU path")
    with pytest.raises(GpuUnavailableError) as info:
        roofline_ext.measure_bandwidth(0)
    assert info.value.availability.reason is a.reason is not Reason.OK
    assert str(info.value) == a.message and a.message


def test_benchmark_script_exits_3_with_one_line_without_gpu():
    if availability().ok:
        pytest.skip("a GPU can be measured here")
    # The same roofline_ext the tests import (installed, or PYTHONPATH as the caller set it): a
    # forced source-tree path would lack the compiled core in a fresh clone.
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bandwidth_vs_peers.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "no GPU" in lines[0] and availability().reason.value in lines[0]


# --------------------------------------------------------------------------------------------------
# Policy (pure functions)
# --------------------------------------------------------------------------------------------------

def test_buffer_size_is_8x_l2_at_least_4gib_and_fits_free_memory():
    assert bw.default_buffer_bytes(60 * MiB, 140 * GiB) == 4 * GiB
    assert bw.default_buffer_bytes(1024 * MiB, 140 * GiB) == 8 * GiB  # 8 x a large L2 wins
    small = bw.default_buffer_bytes(4 * MiB, 6 * GiB, buffers=3)  # a small card: three buffers must fit
    assert small * 3 <= 6 * GiB - 512 * MiB and small % MiB == 0 and small > 0
    with pytest.raises(UserError):
        bw.default_buffer_bytes(4 * MiB, 100 * MiB)


def test_l2_working_sets_span_1mib_to_2x_l2_in_whole_mib():
    sizes = bw.l2_working_sets(60 * MiB)
    assert sizes[0] == MiB and sizes[-1] == 120 * MiB
    assert all(s % MiB == 0 for s in sizes) and sizes == sorted(set(sizes))
    assert sum(1 for s in sizes if s <= 30 * MiB) >= 5  # enough points under half the L2 for a plateau


def _row(ms, best, cfg, nbytes=8 * GiB, skipped=None, cv=0.004):
    return {"config": cfg, "bytes_per_launch": nbytes, "median_ms": ms, "best_ms": best, "cv": cv, "reps": 30,
            "buffer_bytes": nbytes // 2, "verification": {"method": "spot-check", "passed": True},
            "skipped": skipped}


def test_pattern_result_is_best_of_medians_and_counts_tbps():
    rows = [_row(2.0, 1.9, {"unroll": 4}), _row(1.95, 1.94, {"unroll": 8}),
            _row(0, 0, {"unroll": 16}, skipped="no block fits")]
    r = bw.pattern_result("copy", rows, telemetry=None)
    assert r.config == {"unroll": 8}
    assert r.tbps_median == pytest.approx(8 * GiB / 1.95e-3 / 1e12)
    assert r.tbps_best == pytest.approx(8 * GiB / 1.94e-3 / 1e12)
    assert len(r.sweep) == 3 and r.sweep[2]["skipped"] == "no block fits"
    json.dumps(r.to_dict())


def test_all_configurations_skipped_is_an_error():
    with pytest.raises(bw.MeasurementError, match="no block fits"):
        bw.best_of_medians([_row(0, 0, {"unroll": 16}, skipped="no block fits")])


def test_a_figure_above_theoretical_raises():
    rows = [_row(2.0, 1.70, {"unroll": 4})]  # 8 GiB in 1.70 ms = 5.05 TB/s
    with pytest.raises(bw.MeasurementError, match="exceeds the theoretical"):
        bw.check_plausible("copy", rows, theoretical_tbps=4.815)
    bw.check_plausible("copy", [_row(2.0, 1.9, {"unroll": 4})], theoretical_tbps=4.815)
    bw.check_plausible("copy", rows, theoretical_tbps=None)  # nothing to check against


def test_l2_plateau_counts_sets_from_an_eighth_to_half_the_l2():
    def pt(ws, t):
        return bw.L2Point(ws, t, t, 0.01, 1, ws, 30, {})

    points = [pt(MiB, 18.0), pt(4 * MiB, 9.0), pt(24 * MiB, 10.0), pt(40 * MiB, 11.0), pt(120 * MiB, 4.0)]
    # 1 MiB is fastest but too small (below L2/8), 40 MiB spills past half the L2: neither counts.
    assert bw.l2_plateau(points, 60 * MiB).working_set_bytes == 24 * MiB
    l2 = bw.L2Result(60 * MiB, points, bw.l2_plateau(points, 60 * MiB), None)
    assert l2.small_set_peak.working_set_bytes == MiB and l2.to_dict()["plateau_tbps"] == 10.0


def test_benchmark_targets_follow_the_issue():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        peers_mod = importlib.import_module("bandwidth_vs_peers")
    finally:
        sys.path.pop(0)
    pat = {p: {"tbps_median": v, "tbps_best": v + 0.01, "cv": 0.005} for p, v in
           {"read": 4.40, "write": 4.66, "copy": 4.45, "triad": 4.50}.items()}
    ours = {"theoretical_tbps": 4.815, "patterns": pat, "peak": {"tbps_median": 4.66}}
    peers = {"torch_fill": {"tbps_median": 4.58}, "torch_sum": {"tbps_median": 4.16},
             "torch_triad": {"tbps_median": 4.30}, "torch_copy": {"tbps_median": 4.23}}
    got = {t["target"]: t["ok"] for t in peers_mod.targets(ours, peers)}
    assert all(got.values()), got
    pat["read"]["tbps_median"] = 4.20  # 1.01x torch sum: below the 1.03x the issue asks
    got = {t["target"]: t["ok"] for t in peers_mod.targets(ours, peers)}
    assert got["read >= 1.03x torch_sum"] is False


# --------------------------------------------------------------------------------------------------
# GPU: verification fails loudly, figures are bounded and agree with torch
# --------------------------------------------------------------------------------------------------

def _core():
    from roofline_ext.device.status import core

    return core()


def _cuda_core():
    """The native module with its CUDA part, else skip: fault names are parsed there, before any
    device call, so this needs a CUDA build but no GPU."""
    from roofline_ext.device.native import core_or_none

    mod = core_or_none()
    if mod is None or not mod.CUDA_COMPILED:
        pytest.skip("no native core with its CUDA part")
    return mod


@pytest.mark.parametrize("call", [
    lambda c, f: c.bandwidth_run(0, "read", 64 * MiB, fault=f),
    lambda c, f: c.bandwidth_l2_read(0, 8 * MiB, fault=f),
    lambda c, f: c.bandwidth_mix(0, 1, 1, 64 * MiB, fault=f),
], ids=["run", "l2_read", "mix"])
@pytest.mark.parametrize("fault", ["bogus", "short_d2h", "corrupt"])
def test_a_fault_the_bandwidth_family_does_not_inject_is_refused_by_name(call, fault):
    """One fault type for every family (csrc/verification.hpp); each accepts only its own names,
    and the error names the family and them, before anything touches a GPU."""
    with pytest.raises(ValueError, match=rf"unknown bandwidth fault '{fault}' \(accepted: none, short\)"):
        call(_cuda_core(), fault)


@pytest.mark.gpu
@pytest.mark.parametrize("pattern", ["read", "write", "copy", "triad"])
def test_a_kernel_that_skips_data_fails_verification(pattern):
    core = _core()
    with pytest.raises(core.VerificationError, match="verification failed"):
        core.bandwidth_run(0, pattern, 64 * MiB, reps=2, warmup=1, fault="short")


@pytest.mark.gpu
def test_an_l2_kernel_that_skips_data_fails_verification():
    core = _core()
    with pytest.raises(core.VerificationError, match="checksum"):
        core.bandwidth_l2_read(0, 8 * MiB, 256 * MiB, reps=2, warmup=1, fault="short")


@pytest.mark.gpu
@pytest.mark.parametrize("pattern", ["read", "write", "copy", "triad"])
def test_odd_sizes_and_both_grids_verify(pattern):
    core = _core()
    cfgs = [bw._cfg(256, 8, 0, "nc_na"), bw._cfg(512, 4, 64, "plain", "cs"), bw._cfg(1024, 1, 0, "cs", "cs")]
    if pattern == "copy":  # the copy engine and the driver's memcpy are verified like the kernels
        cfgs += [bw._cfg(32, 4, 2, "bulk", bulk_bytes=16384), bw._cfg(256, 1, 0, "memcpy")]
    rows = core.bandwidth_run(0, pattern, 64 * MiB + 16 * 37, reps=3, warmup=1, configs=cfgs)
    assert len(rows) == len(cfgs)
    for r in rows:
        if r["config"]["load"] == "bulk" and r["skipped"]:
            assert "compute capability 9.0" in r["skipped"]
            continue
        assert r["skipped"] is None and r["verification"]["passed"] and r["verification"]["checked_words"] > 0
        assert r["bytes_per_launch"] == bw.BUFFERS[pattern] * (64 * MiB + 16 * 37)
        assert len(r["times_ms"]) == 3


@pytest.mark.gpu
def test_bandwidth_within_theoretical_bounds_and_agrees_with_torch_copy():
    result = roofline_ext.measure_bandwidth(0, l2=False, reps=20, warmup=3)
    theo = result.theoretical_tbps
    assert theo, "NVML gave no memory clock / bus width on this GPU"
    assert "copy" in result.patterns, f"no copy figure to compare: {sorted(result.patterns)}"
    for name, p in result.patterns.items():
        assert 0.5 * theo <= p.tbps_median <= theo, (name, p.tbps_median, theo)
        assert p.tbps_best <= theo
    assert result.peak.tbps_median == max(p.tbps_median for p in result.patterns.values())
    json.dumps(result.to_dict())

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here: cannot compare with torch copy_")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        peers_mod = importlib.import_module("bandwidth_vs_peers")
    finally:
        sys.path.pop(0)
    peers = peers_mod.measure_peers(0, result.buffer_bytes, reps=20, warmup=3, telemetry=False)
    theirs = (peers.get("torch_copy") or {}).get("tbps_median")
    assert theirs and theirs > 0, f"torch copy_ gave no figure to compare with: {peers.get('torch_copy')}"
    ratio = result.patterns["copy"].tbps_median / theirs
    assert 0.9 <= ratio <= 1.1, f"ours/torch copy_ = {ratio:.3f}"


@pytest.mark.gpu
def test_l2_plateau_is_reported_and_above_hbm():
    from roofline_ext.device.listing import device

    dev = device(0)
    l2 = bw.measure_l2(0, dev.l2_bytes, sizes=[4 * MiB, 8 * MiB, 16 * MiB, 4 * dev.l2_bytes // MiB * MiB // 2],
                       reps=10, warmup=2)
    assert l2.plateau.working_set_bytes <= dev.l2_bytes // 2
    assert l2.plateau_tbps > 1.2 * dev.theoretical_bandwidth_tbps


class _FakeCore:
    """Stands in for _core: answers like the native functions (timings from a fixed bandwidth)."""

    class VerificationError(RuntimeError):
        pass

    def __init__(self, tbps_by_pattern):
        self.tbps = tbps_by_pattern
        self.calls = []

    def _rows(self, pattern, nbytes, reps, configs, passes=1):
        rows = []
        for i, c in enumerate(configs):
            t = self.tbps[pattern] * (1 - 0.01 * i)  # the first configuration is the fastest
            ms = nbytes / (t * 1e12) * 1e3
            rows.append({"pattern": pattern, "config": dict(c, grid=1), "bytes_per_launch": nbytes,
                         "buffer_bytes": nbytes, "passes": passes, "median_ms": ms, "best_ms": ms * 0.995,
                         "cv": 0.003, "reps": reps, "skipped": None,
                         "verification": {"method": "checksum", "passed": True}})
        return rows

    def bandwidth_run(self, device, pattern, buffer_bytes, reps, warmup, configs, seed):
        self.calls.append((pattern, buffer_bytes))
        return self._rows(pattern, bw.BUFFERS[pattern] * buffer_bytes, reps, configs)

    def bandwidth_l2_read(self, device, ws, bytes_per_launch, reps, warmup, configs, seed):
        passes = max(1, bytes_per_launch // ws)
        return self._rows("l2", ws * passes, reps, configs, passes)

    def build_info(self):
        return {"cuda_runtime_version": 13000}

    def cuda_devices(self):
        return [{"cuda_index": 0, "memory_free_bytes": 140 * GiB}]


def _fake_gpu(monkeypatch, tbps_by_pattern, theoretical=4.815):
    from types import SimpleNamespace

    fake_av = Availability(Reason.OK, "simulated GPU", {"cuda": {"count": 1}})
    monkeypatch.setattr(av, "_cached", lambda: fake_av)
    core = _FakeCore(tbps_by_pattern)
    monkeypatch.setattr(importlib.import_module("roofline_ext.device.status"), "core", lambda: core)
    dev = SimpleNamespace(name="Simulated H200", uuid="GPU-0000", l2_bytes=60 * MiB, memory_free_bytes=140 * GiB,
                          theoretical_bandwidth_tbps=theoretical, driver_version="580", cuda_driver_version="13.0")
    monkeypatch.setattr(importlib.import_module("roofline_ext.device.listing"), "device", lambda index=0: dev)

    class _Tel:
        def summary(self):
            return None

    import contextlib

    monkeypatch.setattr(bw, "telemetry_block", lambda device: contextlib.nullcontext(_Tel()))
    return core


def test_measure_bandwidth_orchestration_with_a_simulated_core(monkeypatch):
    core = _fake_gpu(monkeypatch, {"read": 4.3, "write": 4.6, "copy": 4.4, "triad": 4.45, "l2": 9.5})
    r = roofline_ext.measure_bandwidth(0, reps=7)
    assert [c[0] for c in core.calls] == list(bw.PATTERNS)
    assert {c[1] for c in core.calls} == {4 * GiB}  # one buffer size for every pattern
    assert r.peak.pattern == "write" and r.peak.tbps_median == pytest.approx(4.6)
    assert r.patterns["copy"].config == {**bw.DEFAULT_CONFIGS["copy"][0], "grid": 1}
    assert r.patterns["read"].reps == 7
    assert r.l2 is not None and r.l2.plateau.working_set_bytes <= 30 * MiB
    assert r.l2.plateau_tbps == pytest.approx(9.5)
    assert r.fraction_of_theoretical() == pytest.approx(4.6 / 4.815)
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["peak"]["pattern"] == "write" and doc["theoretical_tbps"] == 4.815


def test_measure_bandwidth_refuses_a_figure_above_theoretical(monkeypatch):
    _fake_gpu(monkeypatch, {"read": 4.3, "write": 4.9, "copy": 4.4, "triad": 4.45, "l2": 9.5})
    with pytest.raises(bw.MeasurementError, match="exceeds the theoretical"):
        roofline_ext.measure_bandwidth(0, l2=False)


def test_measure_bandwidth_rejects_unknown_patterns(monkeypatch):
    _fake_gpu(monkeypatch, {})
    with pytest.raises(UserError, match="unknown bandwidth pattern"):
        roofline_ext.measure_bandwidth(0, patterns=("scale",))
