"""Dense datasheet peaks of NVIDIA GPUs, and the lookup of a device name in them.

Every figure here is a *dense* peak. NVIDIA prints its 2:4-sparse tensor figures first (marked with
an asterisk) and tables copied from them regularly mix the two up; a sparse figure would halve every
compute-bound floor built on it, so none is stored. Units: TFLOP/s for floating point, TOPS for
INT8, TB/s for memory bandwidth, GB for memory size.

Units (``UNITS``):
  ``fp64``         FP64 on the CUDA cores (vector FMA)
  ``fp64_tensor``  FP64 on the tensor cores (DMMA), where the part has it
  ``fp32``         FP32 on the CUDA cores (SIMT)
  ``tf32``         TF32 tensor
  ``fp16``/``bf16`` FP16/BF16 tensor, *with FP32 accumulation*
  ``fp8``          FP8 tensor with FP32 accumulation (Ada, Hopper, Blackwell only)
  ``int8``         INT8 tensor
  ``fp6``/``fp4``  FP6/FP4 tensor (Blackwell only): datasheet columns no roof uses yet
                   (``units.DATASHEET_ONLY_UNITS``); None where the part has no such unit

GeForce parts run tensor instructions that accumulate in FP32 at half the rate of those that
accumulate in FP16. PyTorch, cuBLAS and Triton accumulate in FP32, so the table stores the
FP32-accumulate rate (half the figure NVIDIA advertises for GeForce) and says so in the SKU's
notes. Data-center and workstation parts of Ampere and Ada run both at the full rate.

Clocks: NVIDIA computes some SKUs' tensor figures at a lower clock than their SIMT figures (H100 SXM:
989.4 TFLOP/s FP16 = 132 SMs x 4096 FLOP/clk x 1830 MHz, while 66.9 TFLOP/s FP32 = 132 x 256 x
1980 MHz). ``boost_clock_mhz`` is the clock the tensor figures assume, ``simt_clock_mhz`` the one the
FP32/FP64 figures assume; both are kept so that nobody mistakes one for the other. Where NVIDIA
publishes no clock, the clock stored is the one its figures imply (noted per SKU).

Name matching (``lookup``): the name is normalized (case, the "NVIDIA"/"GeForce"/"Tesla" prefixes,
dashes and underscores) and must then match one SKU's explicit patterns *entirely*. There is no
substring matching, so "NVIDIA L40" is never an L4, "NVIDIA GH200 480GB" is not an H200, a MIG slice
("... MIG 1g.10gb") or an unlisted variant ("RTX 4090 D", "V100S", "A800") is unknown (None), and
unknown means the caller falls back to derived or measured peaks instead of someone else's numbers.

Bare family names resolve to the most common part: "H100" is the H100 SXM (80 GB HBM3, what NVML
calls "NVIDIA H100 80GB HBM3"), "A100" the A100 SXM 80GB, "V100" the V100 SXM2 32GB, "H200" the
H200 SXM. Add a form factor or size to choose another ("A100 PCIe 40GB", "H100 PCIe").
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError
from .units import UNITS, PeakTable

__all__ = [
    "UNITS",
    "DEFAULT_SKU",
    "DatasheetPeaks",
    "lookup",
    "all_skus",
    "known_names",
    "normalize_name",
]


#: The SKU analysis assumes when no GPU is present.
DEFAULT_SKU = "H100 SXM"


@dataclass(frozen=True)
class DatasheetPeaks(PeakTable):
    """One SKU's dense peaks as NVIDIA publishes them.

    Compute fields are TFLOP/s (``int8``: TOPS) and ``None`` where the part has no such unit (V100
    has no TF32/BF16/FP8/INT8 tensor cores; only Ada, Hopper and Blackwell have FP8).
    ``boost_clock_mhz`` is the clock the tensor figures assume and ``simt_clock_mhz`` the one the
    FP32/FP64 figures assume (they differ on H100/H200). ``source`` names the document the figures
    come from; ``notes`` says what is derived, estimated or unusual about the entry.
    """

    name: str
    full_name: str
    arch: str
    cc: tuple[int, int]
    fp64: float | None
    fp64_tensor: float | None
    fp32: float | None
    tf32: float | None
    fp16: float | None
    bf16: float | None
    fp8: float | None
    int8: float | None
    bandwidth_tbps: float
    memory_gb: float
    sm_count: int | None
    boost_clock_mhz: int | None
    simt_clock_mhz: int | None
    source: str
    notes: str = ""
    # FP6/FP4 tensor (dense TFLOP/s), Blackwell only; not roofs (units.DATASHEET_ONLY_UNITS).
    fp6: float | None = None
    fp4: float | None = None

    @property
    def cc_text(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"


def _fp64_at(fp32: float, ratio: int) -> float:
    # GA10x/Ada/GB20x have 2 FP64 units per SM (1/64 of FP32), Turing 1/32; their datasheets do not
    # print FP64, the architecture whitepapers give the ratio.
    return round(fp32 / ratio, 3)


_GEFORCE_NOTE = (
    "GeForce: TF32/FP16/BF16/FP8 tensor rates stored with FP32 accumulation, half of NVIDIA's "
    "advertised FP16-accumulate rate; INT8 is not halved."
)
_GA10X_FP64 = "FP64 not on the datasheet: 1/64 of FP32 per the GA102 whitepaper."
_ADA_FP64 = "FP64 not on the datasheet: 1/64 of FP32 per the Ada whitepaper."

_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet; clocks from the NVIDIA H100 (Hopper) whitepaper"
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet"
_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet and A100 (Ampere GA100) whitepaper"
_V100_DS = "NVIDIA Tesla V100 GPU datasheet"
_HOPPER_CLOCKS = (
    "Tensor figures assume 1830 MHz, FP32/FP64 (incl. FP64 tensor) 1980 MHz: a tensor kernel at "
    "1980 MHz can exceed the datasheet by 8%."
)

_SKUS: tuple[DatasheetPeaks, ...] = (
    # --- Hopper -------------------------------------------------------------------------------
    DatasheetPeaks(
        "H100 SXM", "NVIDIA H100 SXM5 80GB", "hopper", (9, 0),
        fp64=33.5, fp64_tensor=66.9, fp32=66.9, tf32=494.7, fp16=989.4, bf16=989.4,
        fp8=1978.9, int8=1978.9, bandwidth_tbps=3.35, memory_gb=80, sm_count=132,
        boost_clock_mhz=1830, simt_clock_mhz=1980, source=_H100_DS, notes=_HOPPER_CLOCKS,
    ),
    DatasheetPeaks(
        "H100 PCIe", "NVIDIA H100 PCIe 80GB", "hopper", (9, 0),
        fp64=25.6, fp64_tensor=51.2, fp32=51.2, tf32=378.0, fp16=756.0, bf16=756.0,
        fp8=1513.0, int8=1513.0, bandwidth_tbps=2.0, memory_gb=80, sm_count=114,
        boost_clock_mhz=1620, simt_clock_mhz=1755, source=_H100_DS,
        notes="HBM2e. Clocks implied by the figures (114 SMs).",
    ),
    DatasheetPeaks(
        "H100 NVL", "NVIDIA H100 NVL 94GB", "hopper", (9, 0),
        fp64=30.0, fp64_tensor=60.0, fp32=60.0, tf32=417.5, fp16=835.5, bf16=835.5,
        fp8=1670.5, int8=1670.5, bandwidth_tbps=3.9, memory_gb=94, sm_count=132,
        boost_clock_mhz=1545, simt_clock_mhz=1775, source=_H100_DS + " (H100 NVL column, per GPU)",
        notes="Per GPU of the NVL pair (early datasheets printed the pair's sum). "
        "Clocks implied by the figures.",
    ),
    DatasheetPeaks(
        "H200", "NVIDIA H200 SXM 141GB", "hopper", (9, 0),
        fp64=33.5, fp64_tensor=66.9, fp32=66.9, tf32=494.7, fp16=989.4, bf16=989.4,
        fp8=1978.9, int8=1978.9, bandwidth_tbps=4.8, memory_gb=141, sm_count=132,
        boost_clock_mhz=1830, simt_clock_mhz=1980, source=_H200_DS,
        notes=_HOPPER_CLOCKS + " NVML's memory clock x bus width gives 4.814 TB/s.",
    ),
    DatasheetPeaks(
        "H200 NVL", "NVIDIA H200 NVL 141GB", "hopper", (9, 0),
        fp64=30.0, fp64_tensor=60.0, fp32=60.0, tf32=417.5, fp16=835.5, bf16=835.5,
        fp8=1670.5, int8=1670.5, bandwidth_tbps=4.8, memory_gb=141, sm_count=132,
        boost_clock_mhz=1545, simt_clock_mhz=1775, source=_H200_DS + " (H200 NVL column)",
        notes="PCIe card, up to 600 W. Clocks implied by the figures.",
    ),
    DatasheetPeaks(
        "H800", "NVIDIA H800 SXM5 80GB", "hopper", (9, 0),
        fp64=1.0, fp64_tensor=1.0, fp32=66.9, tf32=494.7, fp16=989.4, bf16=989.4,
        fp8=1978.9, int8=1978.9, bandwidth_tbps=3.35, memory_gb=80, sm_count=132,
        boost_clock_mhz=1830, simt_clock_mhz=1980, source="NVIDIA H800 Tensor Core GPU datasheet (SXM)",
        notes="Export variant of the H100 SXM: FP64 cut to 1 TFLOP/s, NVLink to 400 GB/s. "
        "The H800 PCIe is a different part and is not listed.",
    ),
    DatasheetPeaks(
        "H20", "NVIDIA H20 96GB", "hopper", (9, 0),
        fp64=1.0, fp64_tensor=None, fp32=44.0, tf32=74.0, fp16=148.0, bf16=148.0,
        fp8=296.0, int8=296.0, bandwidth_tbps=4.0, memory_gb=96, sm_count=78,
        boost_clock_mhz=None, simt_clock_mhz=None,
        source="NVIDIA H20 product brief figures as reported by the trade press (no public NVIDIA datasheet)",
        notes="Export variant with tensor throughput capped by firmware: the figures do not follow "
        "SMs x rate x clock, so no clock is given; SM count (78) is as reported by benchmarks.",
    ),
    # --- Ampere GA100 ---------------------------------------------------------------------------
    DatasheetPeaks(
        "A100 SXM 40GB", "NVIDIA A100-SXM4-40GB", "ampere", (8, 0),
        fp64=9.7, fp64_tensor=19.5, fp32=19.5, tf32=156.0, fp16=312.0, bf16=312.0,
        fp8=None, int8=624.0, bandwidth_tbps=1.555, memory_gb=40, sm_count=108,
        boost_clock_mhz=1410, simt_clock_mhz=1410, source=_A100_DS,
    ),
    DatasheetPeaks(
        "A100 SXM 80GB", "NVIDIA A100-SXM4-80GB", "ampere", (8, 0),
        fp64=9.7, fp64_tensor=19.5, fp32=19.5, tf32=156.0, fp16=312.0, bf16=312.0,
        fp8=None, int8=624.0, bandwidth_tbps=2.039, memory_gb=80, sm_count=108,
        boost_clock_mhz=1410, simt_clock_mhz=1410, source=_A100_DS,
        notes="HBM2e. A bare \"A100\" means this SKU.",
    ),
    DatasheetPeaks(
        "A100 PCIe 40GB", "NVIDIA A100-PCIE-40GB", "ampere", (8, 0),
        fp64=9.7, fp64_tensor=19.5, fp32=19.5, tf32=156.0, fp16=312.0, bf16=312.0,
        fp8=None, int8=624.0, bandwidth_tbps=1.555, memory_gb=40, sm_count=108,
        boost_clock_mhz=1410, simt_clock_mhz=1410, source=_A100_DS,
        notes="250 W: the same peaks as the SXM part, sustained less often.",
    ),
    DatasheetPeaks(
        "A100 PCIe 80GB", "NVIDIA A100 80GB PCIe", "ampere", (8, 0),
        fp64=9.7, fp64_tensor=19.5, fp32=19.5, tf32=156.0, fp16=312.0, bf16=312.0,
        fp8=None, int8=624.0, bandwidth_tbps=1.935, memory_gb=80, sm_count=108,
        boost_clock_mhz=1410, simt_clock_mhz=1410, source=_A100_DS,
        notes="HBM2e, 300 W.",
    ),
    DatasheetPeaks(
        "A30", "NVIDIA A30 24GB", "ampere", (8, 0),
        fp64=5.2, fp64_tensor=10.3, fp32=10.3, tf32=82.0, fp16=165.0, bf16=165.0,
        fp8=None, int8=330.0, bandwidth_tbps=0.933, memory_gb=24, sm_count=56,
        boost_clock_mhz=1440, simt_clock_mhz=1440, source="NVIDIA A30 Tensor Core GPU datasheet",
    ),
    # --- Ampere GA10x -----------------------------------------------------------------------------
    DatasheetPeaks(
        "A10", "NVIDIA A10 24GB", "ampere", (8, 6),
        fp64=_fp64_at(31.2, 64), fp64_tensor=None, fp32=31.2, tf32=62.5, fp16=125.0, bf16=125.0,
        fp8=None, int8=250.0, bandwidth_tbps=0.6, memory_gb=24, sm_count=72,
        boost_clock_mhz=1695, simt_clock_mhz=1695, source="NVIDIA A10 Tensor Core GPU datasheet",
        notes=_GA10X_FP64,
    ),
    DatasheetPeaks(
        "A10G", "NVIDIA A10G 24GB", "ampere", (8, 6),
        fp64=_fp64_at(31.52, 64), fp64_tensor=None, fp32=31.52, tf32=35.0, fp16=70.0, bf16=70.0,
        fp8=None, int8=140.0, bandwidth_tbps=0.6, memory_gb=24, sm_count=80,
        boost_clock_mhz=1710, simt_clock_mhz=None,
        source="AWS EC2 G5 documentation and published A10-vs-A10G comparisons (Baseten); "
        "NVIDIA publishes no A10G datasheet",
        notes="AWS-only GA102 variant: 80 SMs but half the A10's tensor rate per SM (tensor "
        "figures = 80 SMs x half-rate x 1710 MHz). Not confirmed against an NVIDIA document. "
        + _GA10X_FP64,
    ),
    DatasheetPeaks(
        "A40", "NVIDIA A40 48GB", "ampere", (8, 6),
        fp64=_fp64_at(37.4, 64), fp64_tensor=None, fp32=37.4, tf32=74.8, fp16=149.7, bf16=149.7,
        fp8=None, int8=299.3, bandwidth_tbps=0.696, memory_gb=48, sm_count=84,
        boost_clock_mhz=1740, simt_clock_mhz=1740, source="NVIDIA A40 datasheet",
        notes=_GA10X_FP64,
    ),
    DatasheetPeaks(
        "RTX A6000", "NVIDIA RTX A6000 48GB", "ampere", (8, 6),
        fp64=_fp64_at(38.7, 64), fp64_tensor=None, fp32=38.7, tf32=77.4, fp16=154.8, bf16=154.8,
        fp8=None, int8=309.7, bandwidth_tbps=0.768, memory_gb=48, sm_count=84,
        boost_clock_mhz=1800, simt_clock_mhz=1800,
        source="NVIDIA RTX A6000 datasheet (309.7 sparse FP16 tensor) and GA102 whitepaper appendix",
        notes="Workstation part: FP16/BF16 with FP32 accumulation at the full rate. " + _GA10X_FP64,
    ),
    DatasheetPeaks(
        "RTX 3090", "NVIDIA GeForce RTX 3090 24GB", "ampere", (8, 6),
        fp64=_fp64_at(35.6, 64), fp64_tensor=None, fp32=35.6, tf32=35.6, fp16=71.0, bf16=71.0,
        fp8=None, int8=284.0, bandwidth_tbps=0.936, memory_gb=24, sm_count=82,
        boost_clock_mhz=1695, simt_clock_mhz=1695,
        source="NVIDIA Ampere GA102 GPU architecture whitepaper, appendix (GeForce RTX 3090)",
        notes=_GEFORCE_NOTE + " " + _GA10X_FP64,
    ),
    # --- Ada ----------------------------------------------------------------------------------------
    DatasheetPeaks(
        "L4", "NVIDIA L4 24GB", "ada", (8, 9),
        fp64=_fp64_at(30.3, 64), fp64_tensor=None, fp32=30.3, tf32=60.0, fp16=121.0, bf16=121.0,
        fp8=242.5, int8=242.5, bandwidth_tbps=0.3, memory_gb=24, sm_count=58,
        boost_clock_mhz=2040, simt_clock_mhz=2040, source="NVIDIA L4 Tensor Core GPU datasheet",
        notes=_ADA_FP64,
    ),
    DatasheetPeaks(
        "L40", "NVIDIA L40 48GB", "ada", (8, 9),
        fp64=_fp64_at(90.5, 64), fp64_tensor=None, fp32=90.5, tf32=90.5, fp16=181.05, bf16=181.05,
        fp8=362.0, int8=362.0, bandwidth_tbps=0.864, memory_gb=48, sm_count=142,
        boost_clock_mhz=2490, simt_clock_mhz=2490, source="NVIDIA L40 GPU datasheet",
        notes="Tensor figures are half the L40S's at a similar clock (product-limited rate). "
        + _ADA_FP64,
    ),
    DatasheetPeaks(
        "L40S", "NVIDIA L40S 48GB", "ada", (8, 9),
        fp64=_fp64_at(91.6, 64), fp64_tensor=None, fp32=91.6, tf32=183.0, fp16=362.05, bf16=362.05,
        fp8=733.0, int8=733.0, bandwidth_tbps=0.864, memory_gb=48, sm_count=142,
        boost_clock_mhz=2520, simt_clock_mhz=2520, source="NVIDIA L40S GPU datasheet",
        notes="The datasheet's FP16/BF16 (362.05) implies 2490 MHz, its TF32/FP8 2520 MHz. "
        + _ADA_FP64,
    ),
    DatasheetPeaks(
        "RTX 6000 Ada", "NVIDIA RTX 6000 Ada Generation 48GB", "ada", (8, 9),
        fp64=_fp64_at(91.1, 64), fp64_tensor=None, fp32=91.1, tf32=182.1, fp16=364.2, bf16=364.2,
        fp8=728.5, int8=728.5, bandwidth_tbps=0.96, memory_gb=48, sm_count=142,
        boost_clock_mhz=2505, simt_clock_mhz=2505,
        source="NVIDIA RTX 6000 Ada Generation datasheet (1457 sparse FP8) and Ada whitepaper appendix",
        notes="Workstation part: FP16/BF16/FP8 with FP32 accumulation at the full rate. " + _ADA_FP64,
    ),
    DatasheetPeaks(
        "RTX 4090", "NVIDIA GeForce RTX 4090 24GB", "ada", (8, 9),
        fp64=_fp64_at(82.6, 64), fp64_tensor=None, fp32=82.6, tf32=82.6, fp16=165.2, bf16=165.2,
        fp8=330.3, int8=660.6, bandwidth_tbps=1.008, memory_gb=24, sm_count=128,
        boost_clock_mhz=2520, simt_clock_mhz=2520,
        source="NVIDIA Ada GPU architecture whitepaper, appendix (GeForce RTX 4090)",
        notes=_GEFORCE_NOTE + " " + _ADA_FP64,
    ),
    # --- Turing / Volta -------------------------------------------------------------------------------
    DatasheetPeaks(
        "T4", "NVIDIA T4 16GB", "turing", (7, 5),
        fp64=_fp64_at(8.1, 32), fp64_tensor=None, fp32=8.1, tf32=None, fp16=65.0, bf16=None,
        fp8=None, int8=130.0, bandwidth_tbps=0.32, memory_gb=16, sm_count=40,
        boost_clock_mhz=1590, simt_clock_mhz=1590, source="NVIDIA T4 Tensor Core GPU datasheet",
        notes="Turing has no TF32 or BF16 tensor cores. FP64 not on the datasheet: 1/32 of FP32 "
        "per the Turing whitepaper.",
    ),
    DatasheetPeaks(
        "V100 SXM2 16GB", "NVIDIA Tesla V100-SXM2-16GB", "volta", (7, 0),
        fp64=7.8, fp64_tensor=None, fp32=15.7, tf32=None, fp16=125.0, bf16=None,
        fp8=None, int8=None, bandwidth_tbps=0.9, memory_gb=16, sm_count=80,
        boost_clock_mhz=1530, simt_clock_mhz=1530, source=_V100_DS,
        notes="Volta tensor cores do FP16 only: no TF32, BF16, FP8 or INT8 tensor peaks.",
    ),
    DatasheetPeaks(
        "V100 SXM2 32GB", "NVIDIA Tesla V100-SXM2-32GB", "volta", (7, 0),
        fp64=7.8, fp64_tensor=None, fp32=15.7, tf32=None, fp16=125.0, bf16=None,
        fp8=None, int8=None, bandwidth_tbps=0.9, memory_gb=32, sm_count=80,
        boost_clock_mhz=1530, simt_clock_mhz=1530, source=_V100_DS,
        notes="Volta tensor cores do FP16 only. A bare \"V100\" means this SKU "
        "(the 16GB part has the same peaks).",
    ),
    DatasheetPeaks(
        "V100 PCIe 16GB", "NVIDIA Tesla V100-PCIE-16GB", "volta", (7, 0),
        fp64=7.0, fp64_tensor=None, fp32=14.0, tf32=None, fp16=112.0, bf16=None,
        fp8=None, int8=None, bandwidth_tbps=0.9, memory_gb=16, sm_count=80,
        boost_clock_mhz=1380, simt_clock_mhz=1380, source=_V100_DS,
        notes="Volta tensor cores do FP16 only.",
    ),
    DatasheetPeaks(
        "V100 PCIe 32GB", "NVIDIA Tesla V100-PCIE-32GB", "volta", (7, 0),
        fp64=7.0, fp64_tensor=None, fp32=14.0, tf32=None, fp16=112.0, bf16=None,
        fp8=None, int8=None, bandwidth_tbps=0.9, memory_gb=32, sm_count=80,
        boost_clock_mhz=1380, simt_clock_mhz=1380, source=_V100_DS,
        notes="Volta tensor cores do FP16 only. The V100S PCIe (1134 GB/s) is a different part.",
    ),
    # --- Blackwell -------------------------------------------------------------------------------------
    DatasheetPeaks(
        "RTX 5090", "NVIDIA GeForce RTX 5090 32GB", "blackwell", (12, 0),
        fp64=_fp64_at(104.8, 64), fp64_tensor=None, fp32=104.8, tf32=104.8, fp16=209.5, bf16=209.5,
        fp8=419.0, int8=838.0, bandwidth_tbps=1.792, memory_gb=32, sm_count=170,
        boost_clock_mhz=2407, simt_clock_mhz=2407,
        source="NVIDIA RTX Blackwell GPU architecture whitepaper, appendix (GeForce RTX 5090)",
        notes=_GEFORCE_NOTE + " FP64 not published: 1/64 of FP32 as on GB20x's predecessors. FP4 is NVIDIA's "
        "3352 AI TOPS (FP4, sparse) halved, FP6 the advertised dense FP8 rate: whether GeForce halves them "
        "with FP32 accumulation is not published, so the higher figure is kept (a floor stays a floor).",
        fp6=838.0, fp4=1676.0,
    ),
    DatasheetPeaks(
        "B200", "NVIDIA B200 180GB", "blackwell", (10, 0),
        fp64=37.0, fp64_tensor=37.0, fp32=75.0, tf32=1100.0, fp16=2250.0, bf16=2250.0,
        fp8=4500.0, int8=4500.0, bandwidth_tbps=7.7, memory_gb=180, sm_count=148,
        boost_clock_mhz=1856, simt_clock_mhz=1980,
        source="NVIDIA HGX B200 datasheet, per-GPU column (sparse figures halved)",
        notes="Clocks implied by the figures at 148 SMs (NVIDIA publishes none). Early "
        "announcements said 192 GB / 8 TB/s; the shipping HGX B200 datasheet says 180 GB / 7.7 TB/s.",
        fp6=4500.0, fp4=9000.0,
    ),
    DatasheetPeaks(
        "GB200", "NVIDIA GB200", "blackwell", (10, 0),
        fp64=40.0, fp64_tensor=40.0, fp32=80.0, tf32=1250.0, fp16=2500.0, bf16=2500.0,
        fp8=5000.0, int8=5000.0, bandwidth_tbps=8.0, memory_gb=186, sm_count=148,
        boost_clock_mhz=2062, simt_clock_mhz=2111,
        source="NVIDIA GB200 NVL72 datasheet, per-GPU figures (sparse figures halved)",
        notes="The Blackwell GPU of a Grace Blackwell superchip (which holds two). SM count assumed equal to the "
        "B200's; clocks implied by the figures (NVIDIA publishes neither).",
        fp6=5000.0, fp4=10000.0,
    ),
    # --- Blackwell Ultra (sm_103) and GB20x/GB10 parts added 2026-12-01 ------------------------------
    # Figures are NVIDIA's system tables divided per GPU, sparse figures halved. Where sources
    # disagree the higher figure is stored, so that a floor built on it is never too high.
    DatasheetPeaks(
        # https://www.nvidia.com/en-us/data-center/hgx/ (HGX B300 column, 8 GPUs); per-GPU tables
        # quoting it: https://glennklockwood.com/garden/processors/B300 ("B300"),
        # https://verda.com/blog/gb300-nvl72-architecture ("NVIDIA GB300 NVL72: GPU Architecture").
        "B300", "NVIDIA B300 288GB", "blackwell", (10, 3),
        fp64=1.25, fp64_tensor=1.25, fp32=75.0, tf32=1125.0, fp16=2250.0, bf16=2250.0,
        fp8=4500.0, int8=150.0, bandwidth_tbps=8.0, memory_gb=288, sm_count=160,
        boost_clock_mhz=1716, simt_clock_mhz=1831,
        source="NVIDIA HGX B300 specifications (nvidia.com/en-us/data-center/hgx), per GPU of 8, sparse halved",
        notes="Blackwell Ultra: FP64 and INT8 cut by design (HGX B300: 10 TFLOP/s FP64 and 2 POPS sparse INT8 "
        "for 8 GPUs; a per-GPU table gives 0.15 POPS dense INT8, the higher figure is kept). FP4: 108 PFLOPS "
        "dense for 8 GPUs (some copies print 105). HGX lists 2.1-2.3 TB for 8 GPUs; the part has 288 GB; "
        "8 TB/s per GPU (one per-GPU table says 7.7: the higher is kept). 160 SMs as reported; clocks "
        "implied by the figures. sm_103: no per-clock rates in peaks/derived.py, so no derived roof.",
        fp6=4500.0, fp4=13500.0,
    ),
    DatasheetPeaks(
        # https://www.nvidia.com/en-us/data-center/gb300-nvl72/ (GB300 NVL72 specifications, 72 GPUs).
        "GB300", "NVIDIA GB300 288GB", "blackwell", (10, 3),
        fp64=1.39, fp64_tensor=1.39, fp32=80.0, tf32=1250.0, fp16=2500.0, bf16=2500.0,
        fp8=5000.0, int8=165.0, bandwidth_tbps=8.0, memory_gb=288, sm_count=160,
        boost_clock_mhz=1907, simt_clock_mhz=1953,
        source="NVIDIA GB300 NVL72 specifications (nvidia.com/en-us/data-center/gb300-nvl72), per GPU of 72, "
        "sparse halved",
        notes="The Blackwell Ultra GPU of a Grace Blackwell Ultra superchip: rack figures / 72 (1080 PFLOPS dense "
        "FP4, 720 sparse FP8/FP6, 360 sparse FP16/BF16, 180 sparse TF32, 5760 TFLOP/s FP32, 100 FP64, "
        "576 TB/s HBM3e). INT8: 23 POPS sparse for 72 GPUs is 0.16 dense per GPU, a per-GPU table says 0.165: "
        "the higher is kept. 160 SMs as reported; clocks implied by the figures. sm_103: no derived roof.",
        fp6=5000.0, fp4=15000.0,
    ),
    DatasheetPeaks(
        # https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/
        # (NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet: 125 TFLOPS FP32, 4000 AI TOPS,
        # 96 GB GDDR7, 1792 GB/s, 188 SMs / 24064 CUDA cores).
        "RTX PRO 6000 Blackwell", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition 96GB", "blackwell", (12, 0),
        fp64=_fp64_at(125.0, 64), fp64_tensor=None, fp32=125.0, tf32=250.0, fp16=500.0, bf16=500.0,
        fp8=1000.0, int8=1000.0, bandwidth_tbps=1.792, memory_gb=96, sm_count=188,
        boost_clock_mhz=2597, simt_clock_mhz=2597,
        source="NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet (125 TFLOPS FP32, 4000 AI TOPS)",
        notes="Workstation part: FP32 accumulation at the full rate. NVIDIA prints only FP32 and AI TOPS (FP4, "
        "sparse): FP4 is that figure halved, and FP6/FP8, FP16/BF16, TF32 and INT8 follow GB20x's per-SM "
        "ratios (FP6 at the FP8 rate) at the clock the FP32 figure implies. FP64 1/64 of FP32. The Max-Q "
        "Workstation Edition (300 W, lower clocks) is a different entry and is not listed.",
        fp6=1000.0, fp4=2000.0,
    ),
    DatasheetPeaks(
        # https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/
        "RTX PRO 6000 Blackwell Server", "NVIDIA RTX PRO 6000 Blackwell Server Edition 96GB", "blackwell", (12, 0),
        fp64=_fp64_at(125.0, 64), fp64_tensor=None, fp32=125.0, tf32=250.0, fp16=500.0, bf16=500.0,
        fp8=1000.0, int8=1000.0, bandwidth_tbps=1.597, memory_gb=96, sm_count=188,
        boost_clock_mhz=2597, simt_clock_mhz=2597,
        source="NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet (96 GB GDDR7 ECC, 1597 GB/s, 600 W)",
        notes="Passively cooled server card of the same GB202 (188 SMs). Its GDDR7 runs slower (1597 GB/s). "
        "Compute: the Workstation Edition's figures, which NVIDIA's server figures do not exceed (the same "
        "die at no higher clock): an upper bound, so a floor on it stays a floor.",
        fp6=1000.0, fp4=2000.0,
    ),
    DatasheetPeaks(
        # https://www.nvidia.com/en-us/products/workstations/dgx-spark/ (1 PFLOP FP4 with sparsity,
        # 128 GB LPDDR5x, 273 GB/s); Hot Chips 2025 GB10 talk as reported (31 TFLOPS FP32, 48 SMs):
        # https://meterpreter.org/a-supercomputer-on-your-desk-nvidia-unveils-the-dgx-spark-ai-superchip
        "GB10", "NVIDIA GB10 (DGX Spark)", "blackwell", (12, 1),
        fp64=_fp64_at(31.0, 64), fp64_tensor=None, fp32=31.0, tf32=62.5, fp16=125.0, bf16=125.0,
        fp8=250.0, int8=250.0, bandwidth_tbps=0.273, memory_gb=128, sm_count=48,
        boost_clock_mhz=2543, simt_clock_mhz=2523,
        source="NVIDIA DGX Spark product page (1 PFLOP FP4 sparse, 128 GB, 273 GB/s); FP32 from NVIDIA's Hot "
        "Chips 2025 GB10 presentation",
        notes="Estimated: NVIDIA publishes only FP4 (sparse) and FP32. FP4 is that figure halved; FP6/FP8, "
        "FP16/BF16, TF32 and INT8 follow GB20x's per-SM ratios from it, at the full FP32-accumulate rate (if "
        "GB10 halves it, as GeForce does, these are 2x high: a floor on them stays a floor). Memory is "
        "LPDDR5x shared with the CPU. sm_121: no derived roof.",
        fp6=250.0, fp4=500.0,
    ),
)

_BY_NAME = {sku.name: sku for sku in _SKUS}
assert len(_BY_NAME) == len(_SKUS), "duplicate SKU name"

# Each SKU's accepted spellings, matched against the *whole* normalized name. Listing them per SKU
# (instead of searching for a key inside the name) is what keeps "l40" from matching "l4".
_PATTERNS: dict[str, tuple[str, ...]] = {
    "H100 SXM": (r"h100( sxm5?)?( 80gb)?( hbm3)?",),
    "H100 PCIe": (r"h100( 80gb)? pcie( 80gb)?( hbm2e)?",),
    "H100 NVL": (r"h100 nvl( 94gb)?",),
    "H200": (r"h200( sxm5?)?( 141gb)?( hbm3e)?",),
    "H200 NVL": (r"h200 nvl( 141gb)?",),
    "H800": (r"h800( sxm5?)?( 80gb)?( hbm3)?",),
    "H20": (r"h20( 96gb)?( hbm3)?",),
    "A100 SXM 40GB": (r"a100( sxm4?)? 40gb", r"a100 40gb sxm4?"),
    "A100 SXM 80GB": (r"a100( sxm4?)?( 80gb)?", r"a100 80gb sxm4?"),
    "A100 PCIe 40GB": (r"a100 pcie 40gb", r"a100 40gb pcie"),
    "A100 PCIe 80GB": (r"a100 pcie( 80gb)?", r"a100 80gb pcie"),
    "A30": (r"a30( 24gb)?",),
    "A10": (r"a10( 24gb)?",),
    "A10G": (r"a10g( 24gb)?",),
    "A40": (r"a40( 48gb)?",),
    "RTX A6000": (r"(rtx )?a6000( 48gb)?",),
    "RTX 3090": (r"(rtx )?3090( 24gb)?",),
    "L4": (r"l4( 24gb)?",),
    "L40": (r"l40( 48gb)?",),
    "L40S": (r"l40s( 48gb)?",),
    "RTX 6000 Ada": (r"(rtx )?6000 ada( generation)?( 48gb)?",),
    "RTX 4090": (r"(rtx )?4090( 24gb)?",),
    "T4": (r"t4( 16gb)?",),
    "V100 SXM2 16GB": (r"v100( sxm2)? 16gb",),
    "V100 SXM2 32GB": (r"v100( sxm2)?( 32gb)?",),
    "V100 PCIe 16GB": (r"v100 pcie 16gb",),
    "V100 PCIe 32GB": (r"v100 pcie( 32gb)?",),
    "RTX 5090": (r"(rtx )?5090( 32gb)?",),
    "B200": (r"b200( sxm6?)?( 180gb| 192gb)?",),
    "GB200": (r"gb200( 186gb)?",),
    "B300": (r"b300( sxm6?)?( ac)?( 288gb| 270gb)?",),
    "GB300": (r"gb300( 288gb| 279gb)?",),
    # The Max-Q Workstation Edition ("... max q workstation edition") matches neither.
    "RTX PRO 6000 Blackwell": (r"(rtx )?pro 6000( blackwell)?( workstation( edition)?)?( 96gb)?",),
    "RTX PRO 6000 Blackwell Server": (r"(rtx )?pro 6000( blackwell)? server( edition)?( 96gb)?",),
    "GB10": (r"gb10( dgx spark)?", r"dgx spark( gb10)?"),
}
assert set(_PATTERNS) == set(_BY_NAME), "every SKU needs patterns"
_COMPILED = {key: tuple(re.compile(p) for p in pats) for key, pats in _PATTERNS.items()}

# Words that name the vendor or brand, not the part; dropped wherever they appear.
_BRAND_WORDS = {"nvidia", "geforce", "tesla"}
# Trailing words of marketing names ("NVIDIA H100 Tensor Core GPU").
_TRAILING_WORDS = ("gpu", "core", "tensor")
# Glued spellings: "rtx4090", "rtxa6000" (a word "rtx" run into the part), "h100sxm", "a100pcie",
# "6000ada" (a form factor run into the number), "pcie40gb" (a size run into the form factor).
# Only these: a general letter/digit split would break "a10g", "sxm5" and "40gb".
_GLUED = (
    re.compile(r"(?<=\brtx)(?=a?\d)"),
    re.compile(r"(?<=\d)(?=sxm|pcie|nvl|ada)"),
    re.compile(r"(?<=pcie)(?=\d+gb)"),
)


def normalize_name(name: str) -> str:
    """The form names are matched in: lower case, brand words and separators removed.

    "NVIDIA A100-PCIE-40GB" -> "a100 pcie 40gb"; "NVIDIA GeForce RTX 4090" -> "rtx 4090". Words
    people type without a space are split where the table's names have one: "rtx4090" ->
    "rtx 4090", "h100sxm" -> "h100 sxm", "6000ada" -> "6000 ada".
    """
    s = re.sub(r"[-_/,()]+", " ", name.strip().lower())
    for glued in _GLUED:
        s = glued.sub(" ", s)
    words = [w for w in s.split() if w not in _BRAND_WORDS]
    while words and words[-1] in _TRAILING_WORDS:
        words.pop()
    return " ".join(words)


def _matches(normalized: str) -> list[str]:
    return [key for key, pats in _COMPILED.items() if any(p.fullmatch(normalized) for p in pats)]


def lookup(name: str | DatasheetPeaks | None) -> DatasheetPeaks | None:
    """The datasheet entry for a GPU name as NVML/torch report it, or None if the part is unknown.

    Accepts device names ("NVIDIA H100 80GB HBM3", "NVIDIA A100-PCIE-40GB", "Tesla T4",
    "NVIDIA GeForce RTX 4090"), the table's own names ("A100 PCIe 40GB") and the short names people
    type ("H100", "h100 sxm", "4090"). A bare family name means its most common part (see the module
    docstring). Names are matched whole, never by substring: "NVIDIA L40" is the L40, not an L4, and
    an unlisted variant ("NVIDIA GH200 480GB", "Tesla V100S-PCIE-32GB", a MIG slice) gives None.
    A ``DatasheetPeaks`` is returned as is.
    """
    if name is None:
        return None
    if isinstance(name, DatasheetPeaks):
        return name
    if not isinstance(name, str):
        raise UserError(f"a GPU name must be a string, got {type(name).__name__} {name!r:.40}")
    found = _matches(normalize_name(name))
    # More than one match would be a pattern bug; refusing is safer than picking one.
    if len(found) != 1:
        return None
    return _BY_NAME[found[0]]


def all_skus() -> tuple[DatasheetPeaks, ...]:
    """Every SKU in the table, in table order (grouped by architecture)."""
    return _SKUS


def known_names() -> list[str]:
    """The table's SKU names, for "unknown GPU 'X'; known: ..." messages."""
    return [sku.name for sku in _SKUS]
