"""Peaks from device attributes: per-clock rates x SMs x clock, and 2 x memory clock x bus / 8."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from roofline_ext.peaks import derived
from roofline_ext.peaks.derived import (
    DerivedPeaks,
    clock_derived_bandwidth,
    clock_derived_peak,
    derived_peaks,
    derived_peaks_for_device,
    ops_per_clock,
)

# An H200 as NVML describes it.
H200 = dict(cc_major=9, cc_minor=0, sm_count=132, max_sm_clock_mhz=1980, max_mem_clock_mhz=3201,
            memory_bus_width_bits=6016)


def h200() -> DerivedPeaks:
    return derived_peaks(9, 0, 132, 1980, 3201, 6016)


def test_h200_bandwidth():
    # 2 x 3201e6 Hz x 6016 bit / 8 = 4.814304e12 B/s: the "4.815 TB/s" of the issue, to 1 GB/s.
    p = h200()
    assert p.bandwidth_tbps == pytest.approx(4.814304, rel=1e-9)
    assert p.bandwidth_tbps == pytest.approx(4.815, abs=1e-3)


def test_h200_fp32_at_1980():
    # 132 SMs x 256 FLOP/clk x 1980e6 = 66.908e12
    p = h200()
    assert p.fp32 == pytest.approx(66.90816, rel=1e-9)
    assert round(p.fp32, 1) == 66.9
    assert p.sm_clock_mhz == 1980 and p.clock_mhz == 1980


def test_h200_fp16_tensor_at_1980():
    # 132 x 4096 x 1980e6 = 1070.53e12: above the datasheet's 989.4, which assumes 1830 MHz.
    p = h200()
    assert p.fp16 == pytest.approx(1070.53056, rel=1e-9)
    assert p.fp16 == pytest.approx(1070, abs=1)
    assert p.bf16 == p.fp16
    at_datasheet_clock = derived_peaks(9, 0, 132, 1830)
    assert at_datasheet_clock.fp16 == pytest.approx(989.4, abs=0.1)  # 132 x 4096 x 1830e6


def test_h200_other_units():
    p = h200()
    assert p.fp64 == pytest.approx(132 * 128 * 1980e6 / 1e12)  # 33.45
    assert p.fp64_tensor == pytest.approx(132 * 256 * 1980e6 / 1e12)  # 66.9
    assert p.tf32 == pytest.approx(132 * 2048 * 1980e6 / 1e12)  # 535.3
    assert p.fp8 == pytest.approx(132 * 8192 * 1980e6 / 1e12)  # 2141.1
    assert p.int8 == p.fp8
    assert p.arch == "hopper" and p.known_arch


def test_unknown_arch_gives_none_for_compute_but_keeps_bandwidth():
    p = derived_peaks(11, 0, 20, 1500, 4000, 256)
    assert not p.known_arch and p.arch is None
    for unit in derived.UNITS:
        assert p.peak(unit) is None
    assert p.bandwidth_tbps == pytest.approx(2 * 4000e6 * 256 / 8 / 1e12)  # 0.256
    assert ops_per_clock(3, 5) is None


def test_missing_memory_attributes_leave_bandwidth_none():
    p = derived_peaks(8, 0, 108, 1410)
    assert p.bandwidth_tbps is None
    # 108 x 2048 x 1410e6 = 311.9e12: the A100's 312 TFLOP/s
    assert p.fp16 == pytest.approx(311.87, abs=0.01)


def test_units_an_architecture_lacks_are_none():
    v100 = derived_peaks(7, 0, 80, 1530)
    assert (v100.tf32, v100.bf16, v100.fp8, v100.int8, v100.fp64_tensor) == (None,) * 5
    assert v100.fp16 == pytest.approx(80 * 1024 * 1530e6 / 1e12)  # 125.3
    a100 = derived_peaks(8, 0, 108, 1410)
    assert a100.fp8 is None and a100.tf32 == pytest.approx(108 * 1024 * 1410e6 / 1e12)  # 156


def test_consumer_halves_fp32_accumulate_tensor_rates():
    full = derived_peaks(8, 9, 128, 2520)
    geforce = derived_peaks(8, 9, 128, 2520, consumer=True)
    # RTX 4090: 128 x 512 x 2520e6 = 165.2 FP16 (FP32 accumulate); INT8 128 x 2048 x 2520e6 = 660.6
    assert geforce.fp16 == pytest.approx(165.15, abs=0.01)
    assert geforce.fp16 == full.fp16 / 2
    assert geforce.tf32 == full.tf32 / 2 and geforce.fp8 == full.fp8 / 2
    assert geforce.int8 == full.int8 == pytest.approx(660.6, abs=0.1)
    assert geforce.fp32 == full.fp32
    # Hopper has no GeForce parts: nothing to halve.
    assert derived_peaks(9, 0, 132, 1980, consumer=True).fp16 == h200().fp16


def test_clock_derived_peak_bounds_measurements_at_observed_clock():
    # An H200 BF16 GEMM throttled to 1470 MHz: 132 x 4096 x 1470e6 = 540672 x 1.47e9 = 794.788e12
    assert clock_derived_peak("bf16", (9, 0), 132, 1470) == pytest.approx(794.788, abs=0.001)
    assert clock_derived_peak("fp32", "9.0", 132, 1980) == pytest.approx(66.90816)
    assert clock_derived_peak("fp8", (8, 0), 108, 1410) is None  # A100 has no FP8
    assert clock_derived_peak("fp32", (99, 0), 10, 1000) is None
    assert clock_derived_peak("fp32", (9, 0), 132, None) is None
    with pytest.raises(ValueError):
        clock_derived_peak("fp4", (9, 0), 132, 1980)
    with pytest.raises(ValueError):
        clock_derived_peak("fp32", 9, 132, 1980)


def test_clock_derived_bandwidth():
    # RTX 4090: NVML 10501 MHz on a 384-bit bus: 2 x 10501e6 x 48 B = 1.008 TB/s
    assert clock_derived_bandwidth(10501, 384) == pytest.approx(1.008096)
    assert clock_derived_bandwidth(None, 384) is None
    assert clock_derived_bandwidth(3201, 0) is None


def test_derived_peaks_for_device_object_and_mapping():
    from_mapping = derived_peaks_for_device(H200)
    from_object = derived_peaks_for_device(SimpleNamespace(name="NVIDIA H200", **H200))
    assert from_mapping == from_object == h200()
    assert not from_object.consumer


def test_derived_peaks_for_device_geforce_and_missing_fields():
    rtx = SimpleNamespace(name="NVIDIA GeForce RTX 4090", cc_major=8, cc_minor=9, sm_count=128,
                          max_sm_clock_mhz=2520, max_mem_clock_mhz=10501, memory_bus_width_bits=384)
    p = derived_peaks_for_device(rtx)
    assert p.consumer and p.fp16 == pytest.approx(165.15, abs=0.01)
    assert p.bandwidth_tbps == pytest.approx(1.008096)
    assert derived_peaks_for_device(rtx, consumer=False).fp16 == pytest.approx(330.3, abs=0.1)
    partial = derived_peaks_for_device({"cc_major": 9, "cc_minor": 0, "sm_count": 132})
    assert partial.fp32 is None and partial.bandwidth_tbps is None
    assert derived_peaks_for_device({"sm_count": 132}) is None


def test_every_known_arch_has_every_unit_key():
    for cc in derived.KNOWN_ARCHS:
        rates = ops_per_clock(*cc)
        assert set(rates) == set(derived.UNITS), cc
        assert rates["fp32"] and rates["fp16"], cc


def test_as_dict():
    d = h200().as_dict()
    assert d["cc"] == "9.0" and d["sm_clock_mhz"] == 1980 and d["bandwidth_tbps"] == pytest.approx(4.814304)


def test_public_functions_have_docstrings():
    for obj in (derived, derived_peaks, derived_peaks_for_device, clock_derived_peak,
                clock_derived_bandwidth, ops_per_clock, DerivedPeaks):
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20
