"""Roofline floors against hand-computed values, every roof, and the >100% flag."""
from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from roofline_ext.peaks.datasheet import lookup
from roofline_ext.peaks.derived import derived_peaks
from roofline_ext.errors import UserError
from roofline_ext.report.text import describe
from roofline_ext.model.floors import (
    IMPOSSIBLE_MESSAGE,
    compute_unit_for_dtype,
    floor,
    roofline,
)

SEED_KEYS = {"arithmetic_intensity", "bound", "t_min_ms", "ref_roofline_frac"}
ROOF_KEYS = {
    "compute_tflops", "simt_tflops", "bandwidth_tbps", "t_compute_ms", "t_simt_ms", "t_memory_ms",
    "t_min_ms", "bound", "ridge_flop_per_byte", "ref_fraction", "new_fraction", "ref_impossible",
    "new_impossible", "impossible",
}


# --- hand-computed floors -------------------------------------------------------------------------

def test_memory_bound_h100_fp32():
    # 8e9 bytes / 3.35e12 B/s = 2.388059 ms; 2e9 FLOP / 494.7e12 (TF32) = 0.004043 ms
    r = roofline(2e9, 8e9, "torch.float32", "NVIDIA H100 80GB HBM3", 3.0, 2.5)
    assert r["bound"] == "memory"
    assert r["t_min_ms"] == pytest.approx(2.388059701, rel=1e-9)
    assert r["arithmetic_intensity"] == pytest.approx(0.25)
    assert r["ref_roofline_frac"] == pytest.approx(2.388059701 / 3.0)  # 0.796
    assert r["roofline_frac"] == pytest.approx(2.388059701 / 2.5)  # 0.955
    ds = r["roofs"]["datasheet"]
    assert ds["t_compute_ms"] == pytest.approx(0.0040428542, rel=1e-6)
    assert ds["compute_unit"] == "tf32" and ds["compute_tflops"] == 494.7
    assert ds["ridge_flop_per_byte"] == pytest.approx(494.7 / 3.35)  # 147.7 FLOP/byte
    assert not r["impossible"]


def test_compute_bound_a100_bf16_gemm():
    # 8192^3 GEMM: 2 x 8192^3 = 1.0995e12 FLOP; 3 x 8192^2 x 2 B = 402,653,184 B.
    # compute 1.0995116e12 / 312e12 = 3.524076 ms > memory 4.0265e8 / 2.039e12 = 0.197476 ms
    flops, nbytes = 2 * 8192**3, 3 * 8192**2 * 2
    r = roofline(flops, nbytes, "torch.bfloat16", "NVIDIA A100-SXM4-80GB", 4.0)
    assert r["bound"] == "compute"
    assert r["t_min_ms"] == pytest.approx(3.524076, rel=1e-6)
    assert r["roofs"]["datasheet"]["t_memory_ms"] == pytest.approx(0.197476, rel=1e-5)
    assert r["ref_roofline_frac"] == pytest.approx(3.524076 / 4.0, rel=1e-6)
    assert "roofline_frac" not in r  # no candidate time: the seed left the key out


def test_compute_bound_h100_fp32_tf32_vs_strict():
    # 4096^3 GEMM in fp32: 1.37439e11 FLOP, 3 x 4096^2 x 4 B = 201,326,592 B (0.0601 ms at 3.35 TB/s)
    flops, nbytes = 2 * 4096**3, 3 * 4096**2 * 4
    tf32 = roofline(flops, nbytes, "float32", "H100", 1.0)
    strict = roofline(flops, nbytes, "float32", "H100", 1.0, strict_fp32=True)
    assert tf32["t_min_ms"] == pytest.approx(0.2778228, rel=1e-6)  # / 494.7e12
    assert strict["t_min_ms"] == pytest.approx(2.0543941, rel=1e-6)  # / 66.9e12
    assert tf32["bound"] == strict["bound"] == "compute"
    assert strict["roofs"]["datasheet"]["compute_unit"] == "fp32"


def test_memory_bound_l4_vs_l40():
    # 1.2e9 B fp16 copy-like task: L4 1.2e9/0.3e12 = 4.0 ms, L40 1.2e9/0.864e12 = 1.388889 ms
    l4 = roofline(1e6, 1.2e9, "float16", "NVIDIA L4", 5.0)
    l40 = roofline(1e6, 1.2e9, "float16", "NVIDIA L40", 5.0)
    assert l4["t_min_ms"] == pytest.approx(4.0)
    assert l40["t_min_ms"] == pytest.approx(1.3888889)
    assert l4["bound"] == l40["bound"] == "memory"
    assert l4["ref_roofline_frac"] == pytest.approx(0.8)


def test_compute_bound_rtx4090_fp16_uses_fp32_accumulate_rate():
    # 1e12 FLOP / 165.2e12 = 6.053269 ms (not 330.3: PyTorch accumulates in FP32)
    r = roofline(1e12, 1e8, "half", "NVIDIA GeForce RTX 4090", 10.0)
    assert r["t_min_ms"] == pytest.approx(6.0532688, rel=1e-6)


def test_tensorless_dtype_falls_back_to_cuda_cores():
    # V100 has no BF16 tensor cores: the roof is FP32 SIMT, 1e12 / 15.7e12 = 63.694 ms
    r = roofline(1e12, 1e8, "bf16", "Tesla V100-SXM2-16GB", 100.0)
    ds = r["roofs"]["datasheet"]
    assert ds["compute_unit"] == "fp32" and ds["compute_tflops"] == 15.7
    assert r["t_min_ms"] == pytest.approx(63.694268, rel=1e-6)
    # A100 has no FP8: FP16 tensor is the fastest unit that can do it.
    assert roofline(1e12, 1e8, "float8_e4m3fn", "A100", 10.0)["roofs"]["datasheet"]["compute_unit"] == "fp16"


def test_float64_uses_fp64_tensor_where_it_exists():
    # H100: 1e12 / 66.9e12 (FP64 tensor) = 14.947683 ms; L4: no FP64 tensor, 1e12 / 0.473e12
    h100 = roofline(1e12, 1e8, "torch.float64", "H100", 20.0)
    assert h100["roofs"]["datasheet"]["compute_unit"] == "fp64_tensor"
    assert h100["t_min_ms"] == pytest.approx(14.947683, rel=1e-6)
    l4 = roofline(1e12, 1e8, "float64", "L4", 2000.0)
    assert l4["roofs"]["datasheet"]["compute_unit"] == "fp64"
    assert l4["t_min_ms"] == pytest.approx(1e12 / (lookup("L4").fp64 * 1e12) * 1e3)


def test_fp8_and_int8_roofs():
    # H100: 1e12 / 1978.9e12 = 0.505331 ms for both
    assert roofline(1e12, 1e6, "fp8", "H100", 1.0)["t_min_ms"] == pytest.approx(0.5053312, rel=1e-6)
    assert roofline(1e12, 1e6, "int8", "H100", 1.0)["t_min_ms"] == pytest.approx(0.5053312, rel=1e-6)


def test_simt_flops_add_a_third_roof():
    # H100 bf16: tensor 1e12/989.4e12 = 1.010714 ms, SIMT 1e11/66.9e12 = 1.494768 ms,
    # memory 1e9/3.35e12 = 0.298507 ms -> floor 1.494768 ms, limited by the CUDA cores
    r = roofline(1e12, 1e9, "bfloat16", "H100", 2.0, simt_flops=1e11)
    ds = r["roofs"]["datasheet"]
    assert ds["t_compute_ms"] == pytest.approx(1.0107136, rel=1e-6)
    assert ds["t_simt_ms"] == pytest.approx(1.4947683, rel=1e-6)
    assert r["t_min_ms"] == pytest.approx(1.4947683, rel=1e-6)
    assert r["bound"] == "compute" and ds["limiter"] == "simt"
    assert r["arithmetic_intensity"] == pytest.approx(1.1e12 / 1e9)


def test_tie_goes_to_memory_like_the_seed():
    # 3.35e9 B at 3.35 TB/s = 1 ms; 494.7e9 FLOP at 494.7 TFLOP/s = 1 ms
    r = roofline(494.7e9, 3.35e9, "float32", "H100", 1.0)
    assert r["bound"] == "memory" and r["t_min_ms"] == pytest.approx(1.0)


# --- every roof ---------------------------------------------------------------------------------------

def test_all_three_roofs():
    # H200, intensity 0.25: datasheet 4.8e9 B / 4.8e12 = 1.0 ms; derived 4.8e9 / 4.814304e12 =
    # 0.9970289 ms; measured 4.8e9 / 4.0e12 = 1.2 ms
    d = derived_peaks(9, 0, 132, 1980, 3201, 6016)
    measured = {"bandwidth_tbps": 4.0, "tf32": 450.0, "fp32": 64.1, "source": "calibration"}
    r = roofline(1.2e9, 4.8e9, "float32", "NVIDIA H200", 2.0, 1.25, derived=d, measured=measured)
    roofs = r["roofs"]
    assert set(roofs) == {"datasheet", "derived", "measured"}
    for roof in roofs.values():
        assert ROOF_KEYS <= set(roof)
        assert roof["bound"] == "memory"
    assert roofs["datasheet"]["t_min_ms"] == pytest.approx(1.0)
    assert roofs["derived"]["t_min_ms"] == pytest.approx(0.9970289, rel=1e-7)
    assert roofs["measured"]["t_min_ms"] == pytest.approx(1.2)
    assert roofs["measured"]["ref_fraction"] == pytest.approx(0.6)
    assert roofs["measured"]["new_fraction"] == pytest.approx(0.96)
    assert roofs["derived"]["clock_mhz"] == 1980
    assert roofs["datasheet"]["clock_mhz"] == 1830
    # Seed keys follow the datasheet roof.
    assert r["primary_roof"] == "datasheet" and r["t_min_ms"] == pytest.approx(1.0)
    assert describe(r) == (
        "Roofline on NVIDIA H200: memory-bound (intensity 0.25 FLOP/byte); floor 1.00 ms by the "
        "datasheet, 0.997 ms derived from clocks, 1.20 ms measured; PyTorch reaches 50% / 50% / 60%, "
        "yours 80% / 80% / 96%."
    )


def test_measured_peaks_missing_a_unit_borrow_from_datasheet():
    r = roofline(1e12, 1e8, "bf16", "H100", 2.0, measured={"bandwidth_tbps": 3.0, "fp16": 800.0})
    m = r["roofs"]["measured"]
    assert m["compute_tflops"] == 989.4
    assert m["peak_sources"] == {"compute": "datasheet", "simt": "datasheet", "bandwidth": "measured"}
    # 1e12 / 800e12 = 1.25 ms when the unit was measured
    r = roofline(1e12, 1e8, "float16", "H100", 2.0, measured={"bandwidth_tbps": 3.0, "fp16": 800.0})
    assert r["roofs"]["measured"]["t_min_ms"] == pytest.approx(1.25)


def test_measured_alone_uses_only_the_exact_unit():
    # Unknown GPU: nothing says whether it has TF32 tensor cores, so an FP32 figure must not
    # stand in for TF32 (the floor could be too high).
    measured = {"bandwidth_tbps": 1.0, "fp32": 10.0}
    assert roofline(1e12, 1e9, "float32", "Some Future GPU", 1.0, measured=measured) is None
    r = roofline(1e12, 1e9, "float32", "Some Future GPU", 200.0, measured=measured, strict_fp32=True)
    # 1e12 / 10e12 = 100 ms vs 1e9 / 1e12 = 1 ms
    assert r["primary_roof"] == "measured" and r["t_min_ms"] == pytest.approx(100.0)
    assert r["sku"] is None and r["roofs"]["datasheet"] is None


def test_measured_mapping_as_calibration_caches_it():
    # calibration.PEAK_KEYS also carries the L2 bandwidth: accepted, not used for the DRAM floor.
    measured = {"bandwidth_tbps": 4.0, "l2_bandwidth_tbps": 11.0, "bf16": 900.0}
    r = roofline(1e9, 4.8e9, "bf16", "H200", 2.0, measured=measured)
    assert r["roofs"]["measured"]["bandwidth_tbps"] == 4.0
    assert r["roofs"]["measured"]["t_min_ms"] == pytest.approx(1.2)  # 4.8e9 / 4.0e12


def test_measured_mapping_errors():
    with pytest.raises(UserError, match="unknown measured peak"):
        roofline(1e9, 1e9, "fp16", "H100", 1.0, measured={"fp16_tensor": 900.0})
    with pytest.raises(UserError, match="must be a number"):
        roofline(1e9, 1e9, "fp16", "H100", 1.0, measured={"fp16": "fast"})
    with pytest.raises(UserError, match="positive"):
        roofline(1e9, 1e9, "fp16", "H100", 1.0, measured={"bandwidth_tbps": 0})
    with pytest.raises(UserError, match="mapping"):
        roofline(1e9, 1e9, "fp16", "H100", 1.0, measured=[4.6])


def test_derived_roof_for_a_gpu_no_table_lists():
    # A GH200 (not in the table) described by its attributes: 1e9 B / (2 x 2619e6 x 6144/8) B/s
    device = SimpleNamespace(name="NVIDIA GH200 480GB", cc_major=9, cc_minor=0, sm_count=132,
                             max_sm_clock_mhz=1980, max_mem_clock_mhz=2619, memory_bus_width_bits=6144)
    r = roofline(1e9, 1e9, "bf16", "NVIDIA GH200 480GB", 1.0, derived=device)
    assert r["primary_roof"] == "derived" and r["sku"] is None
    assert r["t_min_ms"] == pytest.approx(1e9 / (2 * 2619e6 * 768) * 1e3)  # 0.2486 ms
    assert r["gpu"] == "NVIDIA GH200 480GB"
    assert "derived from clocks" in describe(r)


def test_derived_roof_of_unknown_arch_borrows_compute_from_datasheet():
    d = derived_peaks(11, 0, 132, 1980, 3201, 6016)
    r = roofline(1e12, 1e8, "bf16", "H200", 2.0, derived=d)
    assert r["roofs"]["derived"]["compute_tflops"] == 989.4
    assert r["roofs"]["derived"]["peak_sources"]["compute"] == "datasheet"
    assert r["roofs"]["derived"]["peak_sources"]["bandwidth"] == "derived"


def test_gpu_may_be_a_datasheet_entry_or_a_device_record():
    r = roofline(1e9, 1e9, "fp16", lookup("L40S"), 2.0)
    assert r["sku"] == "L40S" and r["gpu"] == "NVIDIA L40S 48GB"
    assert r["t_min_ms"] == pytest.approx(1e9 / 0.864e12 * 1e3)  # 1.157 ms
    r = roofline(1e9, 1e9, "fp16", SimpleNamespace(name="NVIDIA L40S"), 2.0)
    assert r["sku"] == "L40S" and r["gpu"] == "NVIDIA L40S"


def test_package_level_names():
    import roofline_ext

    assert roofline_ext.roofline is roofline and roofline_ext.describe is describe
    # Importing a subpackage never shadows a public function (no module shares a public name).
    import roofline_ext.model.floors  # noqa: F401

    assert roofline_ext.roofline is roofline
    assert roofline_ext.lookup("NVIDIA H200").name == "H200"
    assert roofline_ext.derived_peaks(9, 0, 132, 1980).fp32 == pytest.approx(66.90816)


# --- faster than the floor --------------------------------------------------------------------------

def test_faster_than_the_floor_is_flagged_in_result_and_sentence():
    # H200 floor 1.0 ms (4.8e9 B at 4.8 TB/s); a candidate at 0.8 ms reaches 125%
    r = roofline(1e9, 4.8e9, "bf16", "NVIDIA H200", 2.0, 0.8)
    ds = r["roofs"]["datasheet"]
    assert r["roofline_frac"] == pytest.approx(1.25)
    assert ds["new_impossible"] and ds["impossible"] and not ds["ref_impossible"]
    assert r["impossible"] and r["impossible_roofs"] == ["datasheet"]
    sentence = describe(r, "NVIDIA H200")
    assert IMPOSSIBLE_MESSAGE in sentence
    assert ("faster than the floor of the reference's operations, so an algebraic or structural shortcut "
            "was taken, or the FLOP/byte counts or the peaks are wrong") in sentence
    assert "yours 125%" in sentence and "yours is faster" in sentence


def test_reference_faster_than_measured_floor_only():
    # Datasheet floor 1.0 ms; measured bandwidth 3.0 -> 1.6 ms; PyTorch at 1.5 ms beats only the latter
    r = roofline(1e9, 4.8e9, "bf16", "H200", 1.5, measured={"bandwidth_tbps": 3.0})
    assert r["impossible_roofs"] == ["measured"]
    assert not r["roofs"]["datasheet"]["impossible"]
    sentence = describe(r)
    assert "PyTorch is faster than the floor" in sentence and "measured roof" in sentence


def test_at_the_floor_is_not_flagged():
    r = roofline(1e9, 4.8e9, "bf16", "H200", 1.0, 1.0)
    assert not r["impossible"]
    assert IMPOSSIBLE_MESSAGE not in describe(r)


# --- seed compatibility --------------------------------------------------------------------------------

def test_seed_keys_and_signature():
    r = roofline(2e9, 8e9, "torch.float32", "NVIDIA H100 80GB HBM3", 3.0, 2.5)
    assert SEED_KEYS | {"roofline_frac"} <= set(r)
    assert r["roofs"]["derived"] is None and r["roofs"]["measured"] is None
    sentence = describe(r, "NVIDIA H100 80GB HBM3")
    assert sentence.startswith("Roofline on NVIDIA H100 80GB HBM3: memory-bound")
    assert sentence.endswith(".") and "PyTorch reaches 80%, yours 96%" in sentence


def test_seed_returns_none_when_it_cannot_say():
    assert roofline(1e9, 1e9, "float32", "NVIDIA GeForce GTX 1080", 1.0) is None
    assert roofline(1e9, 1e9, "float32", None, 1.0) is None
    assert roofline(None, 1e9, "float32", "H100", 1.0) is None
    assert roofline(1e9, 0, "float32", "H100", 1.0) is None
    # V100 has no INT8 tensor peak and nothing else was given
    assert roofline(1e9, 1e9, "int8", "Tesla V100-SXM2-16GB", 1.0) is None
    assert describe(None, "NVIDIA GeForce GTX 1080").startswith("No roofline for NVIDIA GeForce GTX 1080")


def test_without_reference_time():
    r = roofline(1e9, 1e9, "fp16", "H100", None)
    assert r["ref_roofline_frac"] is None and "roofline_frac" not in r
    assert "PyTorch" not in describe(r)


def test_describe_accepts_a_seed_shaped_dict():
    seed = {"arithmetic_intensity": 0.25, "bound": "memory", "t_min_ms": 0.412,
            "ref_roofline_frac": 0.71, "roofline_frac": 1.2}
    sentence = describe(seed, "NVIDIA H200")
    assert sentence.startswith("Roofline on NVIDIA H200: memory-bound (intensity 0.25 FLOP/byte)")
    assert "PyTorch reaches 71%, yours 120%" in sentence and IMPOSSIBLE_MESSAGE in sentence


# --- dtypes and inputs -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, unit", [
    ("torch.float32", "tf32"), ("float32", "tf32"), ("fp32", "tf32"), ("float", "tf32"),
    ("tf32", "tf32"), ("torch.float16", "fp16"), ("half", "fp16"), ("fp16", "fp16"),
    ("torch.bfloat16", "bf16"), ("bf16", "bf16"), ("torch.float64", "fp64"), ("double", "fp64"),
    ("torch.float8_e4m3fn", "fp8"), ("float8_e5m2", "fp8"), ("fp8", "fp8"),
    ("torch.int8", "int8"), ("int8", "int8"), ("uint8", "int8"), ("FLOAT16", "fp16"),
])
def test_dtype_spellings(dtype, unit):
    assert compute_unit_for_dtype(dtype) == unit


def test_strict_fp32():
    assert compute_unit_for_dtype("torch.float32", strict_fp32=True) == "fp32"
    assert compute_unit_for_dtype("tf32", strict_fp32=True) == "tf32"  # asked for explicitly
    assert compute_unit_for_dtype("bf16", strict_fp32=True) == "bf16"


def test_torch_dtypes_if_torch_is_installed():
    torch = pytest.importorskip("torch")
    assert compute_unit_for_dtype(torch.float32) == "tf32"
    assert compute_unit_for_dtype(torch.bfloat16) == "bf16"
    assert compute_unit_for_dtype(torch.float8_e4m3fn) == "fp8"
    assert roofline(1e9, 1e9, torch.float16, "H100", 1.0)["unit"] == "fp16"


@pytest.mark.parametrize("dtype", ["complex64", "torch.int32", "float4", "", "torch.bool"])
def test_unknown_dtype_is_an_error_listing_supported(dtype):
    with pytest.raises(UserError) as info:
        roofline(1e9, 1e9, dtype, "H100", 1.0)
    message = str(info.value)
    assert "unsupported dtype" in message and "supported:" in message
    assert "bfloat16" in message and "float32" in message and "int8" in message


def test_unknown_dtype_errors_even_for_unknown_gpu():
    with pytest.raises(UserError):
        roofline(1e9, 1e9, "complex128", "Unknown GPU", 1.0)


def test_numpy_scalars_are_numbers():
    np = pytest.importorskip("numpy")
    # 4.8e9 B / 4.8e12 B/s = 1.0 ms on an H200
    r = roofline(np.int64(10**9), np.int64(48 * 10**8), "bf16", "H200", np.float64(2.0))
    assert r["t_min_ms"] == pytest.approx(1.0) and r["ref_roofline_frac"] == pytest.approx(0.5)


def test_bad_counts_and_times():
    with pytest.raises(UserError):
        roofline(-1.0, 1e9, "fp16", "H100", 1.0)
    with pytest.raises(UserError):
        roofline(1e9, 1e9, "fp16", "H100", -1.0)
    with pytest.raises(UserError):
        roofline(1e9, 1e9, "fp16", "H100", 1.0, simt_flops=-5)
    with pytest.raises(UserError):
        roofline("1e9", 1e9, "fp16", "H100", 1.0)
    with pytest.raises(UserError):
        roofline(float("nan"), 1e9, "fp16", "H100", 1.0)


# --- floor() with explicit peaks --------------------------------------------------------------------

def test_floor_explicit_peaks():
    # 1e12 / 100e12 = 10 ms, 1e11 / 20e12 = 5 ms, 2e9 / 1e12 = 2 ms
    f = floor(1e12, 2e9, 1e11, compute_tflops=100.0, simt_tflops=20.0, bandwidth_tbps=1.0)
    assert f["t_compute_ms"] == pytest.approx(10.0)
    assert f["t_simt_ms"] == pytest.approx(5.0)
    assert f["t_memory_ms"] == pytest.approx(2.0)
    assert f["t_min_ms"] == pytest.approx(10.0)
    assert (f["bound"], f["limiter"]) == ("compute", "compute")
    assert f["ridge_flop_per_byte"] == pytest.approx(100.0)
    assert f["arithmetic_intensity"] == pytest.approx(550.0)
    # positional, as the CLI calls it
    assert floor(0, 2e9, 0, None, None, 1.0)["t_min_ms"] == pytest.approx(2.0)


def test_floor_needs_a_peak_for_nonzero_work():
    with pytest.raises(UserError):
        floor(1e9, 1e9, 0, None, None, 1.0)
    with pytest.raises(UserError):
        floor(1e9, 1e9, 1e9, 10.0, None, 1.0)
    with pytest.raises(UserError):
        floor(1e9, 1e9, 0, 10.0, None, 0.0)


def test_public_functions_have_docstrings():
    # importlib: the package exposes the name ``roofline`` as the function, not the module.
    roofline_module = importlib.import_module("roofline_ext.model.floors")
    for obj in (roofline_module, roofline, describe, floor, compute_unit_for_dtype):
        assert obj.__doc__ and len(obj.__doc__.strip()) > 40


# --- the measured memory roof at the task's read:write ratio ---------------------------------------

# The shape an H200 showed on 2026-12-01 (benchmarks/results/bandwidth-mix-h200-2026-12-01.json,
# rounded): read and write alone near 4.6-4.7 TB/s, a copy at 4.32.
H200_MIX = {"1:0": 4.61, "4:1": 4.44, "2:1": 4.42, "1:1": 4.32, "1:2": 4.19, "0:1": 4.70}


def _measured_with_mix(mix=H200_MIX, note=None):
    from roofline_ext.peaks.measured import MeasuredPeaks

    return MeasuredPeaks(peaks={"bandwidth_tbps": 4.70, "tf32": 480.0, "fp32": 65.0}, mix=mix, mix_note=note)


def test_element_wise_task_gets_the_copy_like_roof():
    # ReLU of 2^28 float32: reads 1 GiB, writes 1 GiB, 2^28 SIMT FLOPs (memory-bound by far).
    n = 1 << 28
    r = roofline(0, 8 * n, "float32", "H200", None, simt_flops=n, measured=_measured_with_mix(),
                 read_bytes=4 * n, write_bytes=4 * n)
    m = r["roofs"]["measured"]
    assert m["bandwidth_tbps"] == 4.32
    assert m["t_memory_ms"] == pytest.approx(8 * n / 4.32e12 * 1e3)  # 0.4971 ms by hand
    assert m["bandwidth_mix"] == {"source": "hbm_mix", "ratio": "1:1", "read_fraction": 0.5,
                                  "read_bytes": 4.0 * n, "write_bytes": 4.0 * n, "tbps": 4.32, "rule": "point",
                                  "points": {"1:1": 4.32}, "interpolation": None, "note": None}
    # The datasheet roof stays as printed: 4.8 TB/s at every ratio, and says nothing of a mix.
    assert r["roofs"]["datasheet"]["bandwidth_tbps"] == 4.8
    assert r["roofs"]["datasheet"]["bandwidth_mix"] is None


def test_reduction_gets_the_read_roof():
    # sum over 2^30 float32 to one float: 4 GiB read, 4 bytes written; the read fraction is
    # 1 - 1e-9, between 4:1 (0.8) and 1:0: by hand w = (f - 0.8) / 0.2, 1 / ((1-w)/4.44 + w/4.61).
    reads, writes = 4.0 * (1 << 30), 4.0
    f = reads / (reads + writes)
    w = (f - 0.8) / 0.2
    expected = 1 / ((1 - w) / 4.44 + w / 4.61)
    r = roofline(0, reads + writes, "float32", "H200", None, simt_flops=reads / 4,
                 measured=_measured_with_mix(), read_bytes=reads, write_bytes=writes)
    m = r["roofs"]["measured"]
    assert m["bandwidth_tbps"] == pytest.approx(expected, rel=1e-12)
    assert m["bandwidth_tbps"] == pytest.approx(4.61, rel=1e-8)  # the read roof, for all purposes
    assert m["bandwidth_mix"]["rule"] == "interpolated"
    assert m["bandwidth_mix"]["points"] == {"4:1": 4.44, "1:0": 4.61}
    assert m["bandwidth_mix"]["ratio"] == "1.07e+09:1"


def test_write_only_task_gets_the_write_roof_and_a_fill_like_mix_interpolates():
    r = roofline(0, 1e9, "float32", "H200", None, measured=_measured_with_mix(), read_bytes=0, write_bytes=1e9)
    assert r["roofs"]["measured"]["bandwidth_tbps"] == 4.70
    # 1:5 lies between 1:2 (4.19) and write-only (4.70), never outside them.
    r = roofline(0, 6e9, "float32", "H200", None, measured=_measured_with_mix(), read_bytes=1e9, write_bytes=5e9)
    bw = r["roofs"]["measured"]["bandwidth_tbps"]
    w = (1 / 6 - 0) / (1 / 3)  # from write-only (f = 0) towards 1:2 (f = 1/3)
    assert bw == pytest.approx(1 / ((1 - w) / 4.70 + w / 4.19)) and 4.19 < bw < 4.70


def test_without_a_sweep_the_single_measured_figure_is_used_and_said():
    r = roofline(0, 2e9, "float32", "H200", None, measured={"bandwidth_tbps": 4.61, "tf32": 480.0},
                 read_bytes=1e9, write_bytes=1e9)
    m = r["roofs"]["measured"]
    assert m["bandwidth_tbps"] == 4.61
    info = m["bandwidth_mix"]
    assert info["source"] == "bandwidth_tbps" and info["ratio"] == "1:1" and info["tbps"] == 4.61
    assert "no read:write sweep" in info["note"] and info["points"] is None


def test_without_a_split_the_single_measured_figure_is_used_and_said():
    r = roofline(0, 2e9, "float32", "H200", None, measured=_measured_with_mix())
    info = r["roofs"]["measured"]["bandwidth_mix"]
    assert r["roofs"]["measured"]["bandwidth_tbps"] == 4.70
    assert info["source"] == "bandwidth_tbps" and "no read:write split" in info["note"]


def test_a_plain_mapping_may_carry_the_envelope_and_a_bad_one_is_refused():
    measured = {"bandwidth_tbps": 4.7, "tf32": 480.0, "hbm_mix": {"points": {"1:1": 4.3, "1:0": 4.6}}}
    r = roofline(0, 3e9, "float32", "H200", None, measured=measured, read_bytes=2e9, write_bytes=1e9)
    # 2:1 (f = 2/3) between 1:1 and 1:0: w = (2/3 - 1/2) / (1/2) = 1/3.
    assert r["roofs"]["measured"]["bandwidth_tbps"] == pytest.approx(1 / ((2 / 3) / 4.3 + (1 / 3) / 4.6))
    with pytest.raises(UserError, match="hbm_mix"):
        roofline(0, 3e9, "float32", "H200", None, measured={"bandwidth_tbps": 4.7, "hbm_mix": {"x": 1.0}},
                 read_bytes=1, write_bytes=1)
    with pytest.raises(UserError, match="hbm_mix has no"):
        roofline(0, 3e9, "float32", "H200", None, measured={"bandwidth_tbps": 4.7, "hbm_mix": {"1:1": -1}})
    with pytest.raises(UserError, match="read_bytes"):
        roofline(0, 3e9, "float32", "H200", None, measured=measured, read_bytes=-1, write_bytes=1)


def test_compute_bound_tasks_and_seed_keys_are_unchanged_by_the_mix():
    # A 4096^3 TF32 GEMM: the mix changes only the memory term, never the compute floor.
    flops, nbytes = 2 * 4096 ** 3, 3 * 4 * 4096 ** 2
    plain = roofline(flops, nbytes, "float32", "H200", 1.0, measured={"bandwidth_tbps": 4.7, "tf32": 480.0})
    mixed = roofline(flops, nbytes, "float32", "H200", 1.0, measured=_measured_with_mix(),
                     read_bytes=2 * 4 * 4096 ** 2, write_bytes=4 * 4096 ** 2)
    assert mixed["roofs"]["measured"]["t_min_ms"] == plain["roofs"]["measured"]["t_min_ms"]
    assert set(plain) == set(mixed) and SEED_KEYS <= set(mixed)
    assert set(plain["roofs"]["measured"]) == set(mixed["roofs"]["measured"]) >= ROOF_KEYS | {"bandwidth_mix"}


def test_cached_calibration_hands_its_envelope_to_the_measured_roof():
    import json
    from pathlib import Path

    from roofline_ext.peaks.cache import measured_peaks_of

    cal = json.loads((Path(__file__).parent / "data" / "calibration-h200-example.json").read_text())
    cal["burst"]["entries"]["hbm_mix"] = {"points": dict(H200_MIX, **{"9:0": 99.0})}  # 99: above the ceiling
    burst = measured_peaks_of(cal, "burst")
    assert dict(burst.mix) == H200_MIX and burst.mix_note is None
    r = roofline(0, 2e9, "float32", "H200", None, measured=burst, read_bytes=1e9, write_bytes=1e9)
    assert r["roofs"]["measured"]["bandwidth_tbps"] == 4.32
    # Sustained: the burst envelope scaled by the sustained/burst ratio of the pattern it ran.
    cal["sustained"]["entries"]["hbm"]["ratio_to_burst"] = 0.99
    cal["sustained"]["entries"]["hbm"]["path"] = "copy"
    sus = measured_peaks_of(cal, "sustained")
    assert sus.mix["1:1"] == pytest.approx(4.32 * 0.99) and "0.990" in sus.mix_note and "copy" in sus.mix_note
    r = roofline(0, 2e9, "float32", "H200", None, measured=sus, read_bytes=1e9, write_bytes=1e9)
    assert r["roofs"]["measured"]["bandwidth_tbps"] == pytest.approx(4.32 * 0.99)
    assert r["roofs"]["measured"]["bandwidth_mix"]["note"] == sus.mix_note
    # A calibration that sustained every pattern: each point scaled by the ratio of the patterns
    # nearest its read share (write 0, copy 1/2, triad 2/3, read 1), linear between them.
    cal["sustained"]["entries"]["hbm"]["patterns"] = {
        "read": {"ratio_to_burst": 0.98}, "write": {"ratio_to_burst": 0.96},
        "copy": {"ratio_to_burst": 1.0}, "triad": {"ratio_to_burst": 0.99}}
    sus = measured_peaks_of(cal, "sustained")
    assert sus.mix["1:1"] == pytest.approx(4.32 * 1.0)
    assert sus.mix["1:0"] == pytest.approx(H200_MIX["1:0"] * 0.98)
    assert sus.mix["0:1"] == pytest.approx(H200_MIX["0:1"] * 0.96)
    assert sus.mix["2:1"] == pytest.approx(H200_MIX["2:1"] * 0.99)
    assert sus.mix["4:1"] == pytest.approx(H200_MIX["4:1"] * (0.99 + (0.98 - 0.99) * (0.8 - 2 / 3) / (1 / 3)))
    assert "read 0.980" in sus.mix_note and "write 0.960" in sus.mix_note
    del cal["sustained"]["entries"]["hbm"]["patterns"]
    # A quick calibration has no sweep.
    del cal["burst"]["entries"]["hbm_mix"]
    assert measured_peaks_of(cal, "burst").mix is None
