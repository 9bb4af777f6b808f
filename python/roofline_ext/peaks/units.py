"""THE registry of peak units, memory levels, dtype spellings and their labels.

Every table that names a unit, a peak key, a dtype or a label reads it from here, so adding a unit
(say FP4) is one entry below instead of an edit in every layer. Pure data: no torch, no device.

Vocabulary:
- a *compute unit* (``fp32``, ``tf32``, ``bf16``, ...) is one execution rate of the GPU, in TFLOP/s
  (TOP/s for INT8); the keys are those of ``DatasheetPeaks``, ``DerivedPeaks`` and ``MeasuredPeaks``;
- a *memory level* (``hbm``, ``l2``) is one bandwidth in TB/s; its peak key is ``bandwidth_tbps`` /
  ``l2_bandwidth_tbps`` (the names JSON outputs have always used);
- a *peak key* is either: the keys of the flat mapping ``{key: value}`` that calibration caches and
  ``roofline(measured=...)`` takes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import UserError


@dataclass(frozen=True)
class ComputeUnit:
    key: str        # peak key and JSON key: "fp32"
    short: str      # "FP32": calibration tables, chart ceilings
    header: str     # column header of `roofline-ext peaks`: "FP64TC"
    long: str       # "FP32 CUDA cores": sentences of `describe`
    roof_words: str  # "FP32 CUDA-core": "... on the FP32 CUDA-core roof"
    tensor: bool    # a tensor-core rate (matrix products) rather than the SIMT pipes
    chart: str | None  # the chart ceiling it is drawn as (FP16 and BF16 share one), None: not drawn

    @property
    def rate_unit(self) -> str:
        """INT8 is not a FLOP rate: tera-operations per second."""
        return "TOP/s" if self.key == "int8" else "TFLOP/s"


@dataclass(frozen=True)
class MemoryLevel:
    key: str        # "hbm": calibration entry key
    peak_key: str   # "bandwidth_tbps": flat peak key and JSON key
    short: str      # "HBM"

    rate_unit = "TB/s"


COMPUTE_UNITS: tuple[ComputeUnit, ...] = (
    ComputeUnit("fp64", "FP64", "FP64", "FP64 CUDA cores", "FP64", False, "FP64"),
    ComputeUnit("fp64_tensor", "FP64 tensor", "FP64TC", "FP64 tensor cores", "FP64 tensor-core", True, "FP64"),
    ComputeUnit("fp32", "FP32", "FP32", "FP32 CUDA cores", "FP32 CUDA-core", False, "FP32"),
    ComputeUnit("tf32", "TF32", "TF32", "TF32 tensor cores", "TF32 tensor-core", True, "TF32"),
    ComputeUnit("fp16", "FP16", "FP16", "FP16 tensor cores", "FP16 tensor-core", True, "FP16/BF16"),
    ComputeUnit("bf16", "BF16", "BF16", "BF16 tensor cores", "BF16 tensor-core", True, "FP16/BF16"),
    ComputeUnit("fp8", "FP8", "FP8", "FP8 tensor cores", "FP8 tensor-core", True, "FP8"),
    ComputeUnit("int8", "INT8", "INT8", "INT8 tensor cores", "INT8 tensor-core", True, None),
)
#: Datasheet columns that no roof uses (no task dtype runs on them yet): Blackwell's FP6 and FP4
#: tensor rates. Kept out of ``UNITS`` so that derived and measured peaks need no field for them;
#: ``DatasheetPeaks.fp6``/``fp4`` hold them, ``as_dict()`` (``peaks --json``) shows them.
DATASHEET_ONLY_UNITS: tuple[ComputeUnit, ...] = (
    ComputeUnit("fp6", "FP6", "FP6", "FP6 tensor cores", "FP6 tensor-core", True, None),
    ComputeUnit("fp4", "FP4", "FP4", "FP4 tensor cores", "FP4 tensor-core", True, None),
)
MEMORY_LEVELS: tuple[MemoryLevel, ...] = (
    MemoryLevel("hbm", "bandwidth_tbps", "HBM"),
    MemoryLevel("l2", "l2_bandwidth_tbps", "L2"),
)

#: Compute-unit keys, in table order: the attributes of every peaks record.
UNITS: tuple[str, ...] = tuple(u.key for u in COMPUTE_UNITS)
UNIT: dict[str, ComputeUnit] = {u.key: u for u in COMPUTE_UNITS}
LEVEL: dict[str, MemoryLevel] = {m.key: m for m in MEMORY_LEVELS}

#: Keys of a flat peak mapping (calibration cache, ``roofline(measured=...)``), in table order.
PEAK_KEYS: tuple[str, ...] = tuple(m.peak_key for m in MEMORY_LEVELS) + UNITS
#: Entry keys of a calibration (``hbm``, ``l2``, then the units), in table and JSON order.
ENTRY_KEYS: tuple[str, ...] = tuple(m.key for m in MEMORY_LEVELS) + UNITS
#: The peak keys the roofline model uses today. The L2 figure is measured and cached but unused by
#: the floor: compulsory traffic is charged to DRAM, and L2 would lower the floor only where the
#: data cannot live in L2 anyway.
ROOFLINE_PEAK_KEYS: frozenset[str] = frozenset(UNITS) | {"bandwidth_tbps"}


def peak_key(entry_key: str) -> str:
    """``hbm`` → ``bandwidth_tbps``; a compute unit is its own peak key."""
    return LEVEL[entry_key].peak_key if entry_key in LEVEL else entry_key


def entry_key(key: str) -> str:
    """``bandwidth_tbps`` → ``hbm``; the inverse of :func:`peak_key`."""
    for m in MEMORY_LEVELS:
        if key == m.peak_key:
            return m.key
    return key


def rate_unit(key: str) -> str:
    """``TB/s`` for a memory level (either spelling), else the compute unit's rate unit."""
    key = entry_key(key)
    if key in LEVEL:
        return MemoryLevel.rate_unit
    return UNIT[key].rate_unit if key in UNIT else "TFLOP/s"


def short_label(key: str) -> str:
    """``HBM``, ``FP32``, ``FP64 tensor`` for an entry or peak key (the key itself if unknown)."""
    key = entry_key(key)
    if key in LEVEL:
        return LEVEL[key].short
    return UNIT[key].short if key in UNIT else key


def peak_label(key: str) -> str:
    """"HBM (TB/s)", "FP32 (TFLOP/s)", "INT8 (TOP/s)" for a peak key or an entry key."""
    return f"{short_label(key)} ({rate_unit(key)})"


class PeakTable:
    """What every record of peaks per unit shares (``DatasheetPeaks``, ``DerivedPeaks``): one
    attribute per compute unit, read by :meth:`peak`, and a JSON form with ``cc`` as "major.minor".
    Subclasses are dataclasses and define ``cc_text``."""

    @property
    def cc_text(self) -> str:
        """The compute capability as "major.minor"; each subclass knows where it keeps it."""
        raise NotImplementedError

    def peak(self, unit: str) -> float | None:
        """The dense peak of ``unit`` (one of ``UNITS``) in TFLOP/s or TOP/s, or None if absent; a
        ``KeyError`` naming the units for anything else."""
        if unit not in UNIT:
            raise KeyError(f"unknown unit {unit!r}; units: {', '.join(UNITS)}")
        value = getattr(self, unit)
        return None if value is None else float(value)

    def as_dict(self) -> dict[str, object]:
        """All fields as a JSON-ready dict (``cc`` as "major.minor")."""
        d: dict[str, object] = dataclasses.asdict(self)  # type: ignore[call-overload]
        d["cc"] = self.cc_text
        return d


# --- dtypes -----------------------------------------------------------------------------------------

#: ``--dtype`` choices of `analyze` (what a task is cast to), and the torch attribute each names.
TASK_DTYPES: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}

#: Every spelling a user or torch may give → its compute unit (before the float32 → TF32 rule).
_DTYPE_UNIT: dict[str, str] = {
    "float64": "fp64", "fp64": "fp64", "f64": "fp64", "double": "fp64",
    "float32": "fp32", "fp32": "fp32", "f32": "fp32", "float": "fp32", "single": "fp32",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "float16": "fp16", "fp16": "fp16", "f16": "fp16", "half": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float8": "fp8", "fp8": "fp8", "f8": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "int8": "int8", "i8": "int8", "uint8": "int8", "u8": "int8",
}

#: What `unsupported dtype` errors list.
SUPPORTED_DTYPES = (
    "float64",
    "float32 (TF32 tensor cores; strict_fp32=True for FP32 CUDA cores)",
    "tf32",
    "float16",
    "bfloat16",
    "float8_e4m3fn / float8_e5m2",
    "int8 / uint8",
)

#: torch dtypes whose roof counting picks, fastest compute roof first: with mixed dtypes the floor
#: uses the fastest one present (so it stays a floor).
ROOF_ORDER = (
    "torch.float8_e4m3fn", "torch.float8_e5m2", "torch.float16", "torch.bfloat16", "torch.float32",
    "torch.float64",
)

#: Correctness tolerance (atol = rtol) per dtype, KernelBench's: float32 at 1e-4 would fail TF32
#: matmuls, which KernelBench accepts only at the half-precision level.
TOLERANCES = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def dtype_text(dtype: object) -> str:
    """How results spell a dtype: a string as given, a torch dtype as ``torch.float32``."""
    if isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("<"):  # numpy scalar types print as "<class 'numpy.float32'>"
        text = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or text
    return text


def _dtype_words(dtype: object) -> str:
    text = dtype_text(dtype).strip().lower()
    for prefix in ("torch.", "numpy."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


def dtype_unit(dtype: object) -> str | None:
    """The compute unit a dtype's arithmetic runs on (``float32`` → ``fp32``), None if unknown.
    Accepts torch dtypes, their ``str()``, numpy types and plain spellings."""
    name = _dtype_words(dtype)
    unit = _DTYPE_UNIT.get(name)
    if unit is None and name.startswith("float8"):
        unit = "fp8"  # float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, ...
    return unit


def task_dtype_name(name: str) -> str:
    """A ``--dtype`` spelling (``fp16``, ``FP16``, ``half``, ``torch.float16``) → the torch attribute
    name (``float16``); a one-line ``UserError`` listing the choices otherwise."""
    unit = dtype_unit(name)
    for choice, attr in TASK_DTYPES.items():
        if unit == choice:
            return attr
    raise UserError(f"unknown dtype {name!r}; choose one of {', '.join(TASK_DTYPES)}")
