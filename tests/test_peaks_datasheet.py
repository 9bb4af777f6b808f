"""The datasheet table: dense figures only, and a name lookup that never matches by accident."""
from __future__ import annotations

import pytest

from roofline_ext.peaks import datasheet
from roofline_ext.peaks.datasheet import DEFAULT_SKU, UNITS, DatasheetPeaks, all_skus, known_names, lookup
from roofline_ext.peaks.derived import derived_peaks

# Device names exactly as NVML / torch.cuda.get_device_name() report them -> the SKU they are.
REAL_DEVICE_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA H800": "H800",
    "NVIDIA H20": "H20",
    "NVIDIA A100-SXM4-40GB": "A100 SXM 40GB",
    "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB",
    "NVIDIA A100-SXM-80GB": "A100 SXM 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA A10": "A10",
    "NVIDIA A10G": "A10G",
    "NVIDIA A30": "A30",
    "NVIDIA A40": "A40",
    "NVIDIA L4": "L4",
    "NVIDIA L40": "L40",
    "NVIDIA L40S": "L40S",
    "Tesla T4": "T4",
    "Tesla V100-SXM2-16GB": "V100 SXM2 16GB",
    "Tesla V100-SXM2-32GB": "V100 SXM2 32GB",
    "Tesla V100-PCIE-16GB": "V100 PCIe 16GB",
    "Tesla V100-PCIE-32GB": "V100 PCIe 32GB",
    "NVIDIA GeForce RTX 3090": "RTX 3090",
    "NVIDIA GeForce RTX 4090": "RTX 4090",
    "NVIDIA GeForce RTX 5090": "RTX 5090",
    "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",
    "NVIDIA RTX A6000": "RTX A6000",
    "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200",
    "NVIDIA B300 SXM6 AC": "B300",
    "NVIDIA GB300": "GB300",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX PRO 6000 Blackwell",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX PRO 6000 Blackwell Server",
    "NVIDIA GB10": "GB10",
}

# What people type.
FRIENDLY_NAMES = {
    "H100": "H100 SXM",
    "h100 sxm": "H100 SXM",
    "H100 SXM5": "H100 SXM",
    "h100-pcie": "H100 PCIe",
    "A100": "A100 SXM 80GB",
    "a100 40gb": "A100 SXM 40GB",
    "A100 PCIe": "A100 PCIe 80GB",
    "L40S": "L40S",
    "l4": "L4",
    "4090": "RTX 4090",
    "RTX 4090": "RTX 4090",
    "rtx 6000 ada": "RTX 6000 Ada",
    "V100": "V100 SXM2 32GB",
    "v100 16gb": "V100 SXM2 16GB",
    "t4": "T4",
    "  NVIDIA   H200  ": "H200",
}

# Real parts (or slices) the table does not list: each must be unknown, never a neighbour's figures.
NOT_IN_TABLE = [
    "NVIDIA GH200 480GB",  # contains "H200"
    "NVIDIA A800-SXM4-80GB",
    "NVIDIA A100X",
    "Tesla V100S-PCIE-32GB",
    "Tesla V100-SXM3-32GB",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA GeForce RTX 5090 D",
    "Quadro RTX 6000",  # Turing, not the RTX 6000 Ada
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",  # 300 W, lower clocks: not the 600 W card
    "NVIDIA GB100",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
    "NVIDIA H800 PCIe",
    "NVIDIA L20",
    "NVIDIA L40G",
    "NVIDIA A10M",
    "NVIDIA GeForce RTX 2080 Ti",
    "AMD Instinct MI300X",
    "",
    "NVIDIA",
    "cpu",
]


@pytest.mark.parametrize("device_name, sku", sorted(REAL_DEVICE_NAMES.items()))
def test_real_device_names(device_name, sku):
    found = lookup(device_name)
    assert found is not None, device_name
    assert found.name == sku


def test_every_listed_sku_has_a_real_device_name():
    assert set(REAL_DEVICE_NAMES.values()) == set(known_names())


@pytest.mark.parametrize("name, sku", sorted(FRIENDLY_NAMES.items()))
def test_friendly_names(name, sku):
    assert lookup(name).name == sku


@pytest.mark.parametrize("name", NOT_IN_TABLE)
def test_unknown_names_give_none(name):
    assert lookup(name) is None


def test_l40_is_not_an_l4():
    assert lookup("NVIDIA L40").name == "L40"
    assert lookup("NVIDIA L40").bandwidth_tbps == 0.864
    assert lookup("NVIDIA L4").bandwidth_tbps == 0.3
    assert lookup("NVIDIA L40S").name == "L40S"


def test_a100_pcie_40gb_is_the_1555_part():
    assert lookup("NVIDIA A100-PCIE-40GB").bandwidth_tbps == 1.555
    assert lookup("NVIDIA A100-SXM4-40GB").bandwidth_tbps == 1.555
    assert lookup("NVIDIA A100-SXM4-80GB").bandwidth_tbps == 2.039
    assert lookup("NVIDIA A100 80GB PCIe").bandwidth_tbps == 1.935


def test_h20_is_not_an_h200():
    assert lookup("NVIDIA H20").name == "H20"
    assert lookup("NVIDIA H200").name == "H200"


@pytest.mark.parametrize("sku", all_skus(), ids=lambda s: s.name)
def test_table_names_resolve_to_themselves(sku):
    assert lookup(sku.name) is sku
    assert lookup(sku.full_name) is sku
    assert lookup(sku) is sku


def test_no_name_matches_two_skus():
    names = list(REAL_DEVICE_NAMES) + list(FRIENDLY_NAMES) + NOT_IN_TABLE + known_names()
    for name in names:
        assert len(datasheet._matches(datasheet.normalize_name(name))) <= 1, name


def test_default_sku_exists():
    assert lookup(DEFAULT_SKU).name == "H100 SXM"


def test_lookup_of_none_and_wrong_type():
    assert lookup(None) is None
    from roofline_ext.errors import UserError

    with pytest.raises(UserError, match="must be a string"):  # the package's own error, one line
        lookup(123)


def test_dense_not_sparse_hopper():
    h100 = lookup("H100 SXM")
    # 132 SMs x 4096 FLOP/clk x 1830 MHz = 989.43 TFLOP/s dense; NVIDIA's 1979 is 2:4 sparse.
    assert h100.fp16 == pytest.approx(989.4)
    assert h100.bf16 == pytest.approx(989.4)
    assert h100.tf32 == pytest.approx(494.7)
    assert h100.fp8 == pytest.approx(1978.9)
    assert h100.int8 == pytest.approx(1978.9)
    assert h100.fp32 == pytest.approx(66.9)
    assert h100.boost_clock_mhz == 1830 and h100.simt_clock_mhz == 1980


def test_missing_units_are_none():
    for name in ("V100 SXM2 16GB", "V100 PCIe 32GB"):
        v100 = lookup(name)
        assert (v100.tf32, v100.bf16, v100.fp8, v100.int8, v100.fp64_tensor) == (None,) * 5
        assert v100.fp16 == pytest.approx(125.0 if "SXM" in name else 112.0)
    t4 = lookup("T4")
    assert t4.tf32 is None and t4.bf16 is None and t4.fp8 is None
    for sku in all_skus():
        if sku.arch in ("volta", "turing", "ampere"):
            assert sku.fp8 is None, sku.name  # FP8 exists on Ada, Hopper, Blackwell only
        else:
            assert sku.fp8 is not None, sku.name


def test_geforce_stores_fp32_accumulate_rate_and_says_so():
    rtx4090 = lookup("NVIDIA GeForce RTX 4090")
    # NVIDIA advertises 330.3 dense FP16 (FP16 accumulate); FP32 accumulate is half: 165.2.
    assert rtx4090.fp16 == pytest.approx(165.2)
    assert rtx4090.int8 == pytest.approx(660.6)  # integer accumulate is not halved
    for name in ("RTX 3090", "RTX 4090", "RTX 5090"):
        assert "FP32 accumulation" in lookup(name).notes


def test_every_entry_is_complete():
    for sku in all_skus():
        assert sku.source, sku.name
        assert sku.bandwidth_tbps > 0 and sku.memory_gb > 0 and sku.sm_count
        assert sku.fp32 and sku.fp16, sku.name
        for unit in UNITS:
            value = sku.peak(unit)
            assert value is None or value > 0


# Parts whose tensor figures are below the architecture's per-SM rate by product choice; GeForce
# parts are checked with the consumer (FP32-accumulate) rates instead.
_HALF_RATE_TENSOR = {"L40", "A10G"}
_GEFORCE = {"RTX 3090", "RTX 4090", "RTX 5090"}
_FP64_CUT = {"H800"}  # export part: FP64 fused down to 1 TFLOP/s


# Parts whose architecture has no per-clock rates in peaks/derived.py (sm_103, sm_121): checked by
# test_blackwell_ultra_and_gb10_figures instead.
_NO_RATES = {s.name for s in all_skus() if not derived_peaks(*s.cc, s.sm_count, s.boost_clock_mhz).known_arch}


@pytest.mark.parametrize("sku", [s for s in all_skus() if s.name != "H20" and s.name not in _NO_RATES],
                         ids=lambda s: s.name)
def test_figures_follow_per_clock_rates(sku):
    """Every figure = SMs x per-clock rate x the stated clock, within rounding: catches a sparse
    figure (2x), a typo, or a clock that does not belong to the figure."""
    consumer = sku.name in _GEFORCE
    at_boost = derived_peaks(*sku.cc, sku.sm_count, sku.boost_clock_mhz, consumer=consumer)
    at_simt = derived_peaks(*sku.cc, sku.sm_count, sku.simt_clock_mhz, consumer=consumer)
    for unit in UNITS:
        value = sku.peak(unit)
        simt_unit = unit in ("fp64", "fp32", "fp64_tensor")
        if simt_unit and sku.simt_clock_mhz is None:
            continue
        expected = (at_simt if simt_unit else at_boost).peak(unit)
        if value is None:
            assert expected is None, (sku.name, unit)
            continue
        if unit in ("fp64", "fp64_tensor") and sku.name in _FP64_CUT:
            assert value < expected
            continue
        if not simt_unit and sku.name in _HALF_RATE_TENSOR:
            expected /= 2
        assert value == pytest.approx(expected, rel=0.025), (sku.name, unit, value, expected)


def test_as_dict_round_trips_fields():
    d = lookup("H200").as_dict()
    assert d["name"] == "H200" and d["cc"] == "9.0" and d["bandwidth_tbps"] == 4.8
    assert set(UNITS) <= set(d)


def test_peak_rejects_unknown_unit():
    with pytest.raises(KeyError):
        lookup("H100").peak("fp2")
    with pytest.raises(KeyError):  # FP4/FP6 are datasheet columns, not roofs
        lookup("B200").peak("fp4")


def test_fp4_fp6_columns_where_the_part_has_them():
    from roofline_ext.peaks.units import DATASHEET_ONLY_UNITS, UNITS as ROOF_UNITS

    assert [u.key for u in DATASHEET_ONLY_UNITS] == ["fp6", "fp4"] and not set(ROOF_UNITS) & {"fp6", "fp4"}
    for sku in all_skus():
        if sku.arch == "blackwell":
            # FP4 twice FP6 (Blackwell Ultra: three times), FP6 at the FP8 rate (GeForce: both the
            # advertised, un-halved rate)
            ratio = 3 if sku.cc == (10, 3) else 2
            assert sku.fp4 and sku.fp6 and sku.fp4 == pytest.approx(ratio * sku.fp6), sku.name
            assert sku.fp6 == pytest.approx(sku.fp8 * (2 if sku.name == "RTX 5090" else 1)), sku.name
        else:
            assert sku.fp4 is None and sku.fp6 is None, sku.name
    d = lookup("B300").as_dict()
    assert d["fp4"] == 13500.0 and d["fp6"] == 4500.0


def test_blackwell_ultra_and_gb10_figures():
    b300, gb300, spark = lookup("B300"), lookup("GB300"), lookup("DGX Spark")
    assert _NO_RATES == {"B300", "GB300", "GB10"}
    # per GPU of NVIDIA's system tables, sparse halved: HGX B300 (8 GPUs), GB300 NVL72 (72)
    assert b300.fp16 == 36000 / 8 / 2 and b300.fp32 == 600 / 8 and b300.fp64 == 10 / 8
    assert gb300.fp16 == 360000 / 72 / 2 and gb300.fp32 == 5760 / 72 and gb300.bandwidth_tbps == 576 / 72
    assert gb300.fp4 == 1080000 / 72
    for sku in (b300, gb300):
        # FP64 and INT8 cut by design: far below the B200's
        assert sku.fp64 < 2 and sku.int8 < 200 and sku.cc == (10, 3)
        # the tensor clock the figures imply is the same for every tensor unit
        assert sku.fp16 * 1e6 / (sku.sm_count * 8192) == pytest.approx(sku.boost_clock_mhz, rel=0.005)
        assert sku.fp32 * 1e6 / (sku.sm_count * 256) == pytest.approx(sku.simt_clock_mhz, rel=0.005)
    # DGX Spark: 1 PFLOP FP4 sparse, 273 GB/s; the rest estimated, and said so
    assert spark.name == "GB10" and spark.fp4 == 500 and spark.bandwidth_tbps == 0.273
    assert "Estimated" in spark.notes and spark.cc == (12, 1)
    assert spark.fp16 * 1e6 / (spark.sm_count * 1024) == pytest.approx(spark.boost_clock_mhz, rel=0.005)


def test_rtx_pro_6000_workstation_and_server():
    ws, server = lookup("RTX PRO 6000 Blackwell"), lookup("RTX PRO 6000 Blackwell Server Edition")
    assert ws.fp32 == 125 and ws.fp4 == 4000 / 2 and ws.bandwidth_tbps == 1.792 and ws.memory_gb == 96
    assert server.bandwidth_tbps == 1.597 and server.fp32 == ws.fp32
    assert "FP32 accumulation at the full rate" in ws.notes  # not a GeForce: no halving


def test_new_skus_name_an_nvidia_source():
    for name in ("B300", "GB300", "RTX PRO 6000 Blackwell", "RTX PRO 6000 Blackwell Server", "GB10"):
        assert "NVIDIA" in lookup(name).source, name


def test_public_functions_have_docstrings():
    for obj in (datasheet, lookup, all_skus, known_names, DatasheetPeaks, DatasheetPeaks.peak):
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20
