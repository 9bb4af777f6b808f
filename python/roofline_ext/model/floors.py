"""The roofline floor of a task on a GPU, against every roof available.

    t_min = max(FLOPs / compute peak, non-tensor FLOPs / SIMT peak, bytes / bandwidth)

FLOPs and bytes are lower bounds on the work a correct kernel of the reference's operations must do
(FLOPs counted on the reference, without work on padding or masked scores; bytes the compulsory
traffic: what the forward pass reads of its inputs and parameters, once, and its outputs written
once; see docs/counting.md), and the peaks are upper bounds on the hardware's rate, so ``t_min`` is
the floor of the reference's operations. A reference or candidate timed *below* it has taken an
algebraic or structural shortcut that those operations do not take (KernelBench has tasks whose
output reduces to a matrix-vector product, or is identically zero), or the counts or the peaks are
wrong; the result says exactly that (``impossible``, :data:`IMPOSSIBLE_MESSAGE`).

Roofs: the same floor is computed against up to three sets of peaks:
  ``datasheet``  NVIDIA's dense figures for the SKU (``roofline_ext.peaks.datasheet``);
  ``derived``    per-clock rates x SMs x max clock from device attributes (``roofline_ext.peaks.derived``);
  ``measured``   peaks calibrated on the card (a plain mapping, see ``roofline``).

Compute roof by dtype (``compute_unit_for_dtype``):
  float32   -> TF32 tensor cores (Triton's ``tl.dot`` uses TF32 by default and KernelBench's tolerance
               accepts it); ``strict_fp32=True`` -> FP32 on the CUDA cores
  float16   -> FP16 tensor, bfloat16 -> BF16 tensor (FP32 accumulation)
  float64   -> FP64 tensor cores where the part has them, else FP64 on the CUDA cores
  float8_*  -> FP8 tensor, int8 -> INT8 tensor
Where a part lacks the tensor unit (TF32 or BF16 on a V100, FP8 on an A100), the roof is the
fastest unit that can do the work instead (FP32 on the CUDA cores; FP16 tensor for FP8).

Memory roof by read:write mix (measured roof only): HBM reaches less on a mix of reads and writes
than on either alone (the bus turns around between them), so when the calibration holds the
read:write envelope (``hbm_mix``) and the caller gives the task's compulsory ``read_bytes`` (inputs
+ parameters) and ``write_bytes`` (outputs), the measured roof's bandwidth is the envelope at that
ratio (``peaks.mix.mix_roof``: a measured point, or linear in time per byte between the two nearest
measured ratios): an element-wise task gets the copy-like roof, a reduction the read roof. Without
an envelope or without the split, the calibration's single HBM figure is used and the roof's
``bandwidth_mix`` says so. The datasheet and derived roofs stay as printed: one figure.

Non-tensor FLOPs (elementwise, reductions; ``simt_flops``) are counted at the FP32 CUDA-core rate
(FP64 for float64): PyTorch and Triton compute half-precision elementwise math in FP32. A kernel doing
packed half2 arithmetic could go faster, which matters only when such work, not memory, is the limit.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..peaks.datasheet import DatasheetPeaks, lookup
from .results import Roof, RooflineResult
from ..peaks.units import PEAK_KEYS, ROOFLINE_PEAK_KEYS, SUPPORTED_DTYPES, UNITS, dtype_text, dtype_unit
from ..peaks.derived import DerivedPeaks, derived_peaks_for_device
from ..peaks.mix import envelope_points, mix_roof, ratio_label, read_fraction
from ..errors import UserError

__all__ = [
    "roofline",
    "roofline_result",
    "floor",
    "compute_unit_for_dtype",
    "SUPPORTED_DTYPES",
    "ROOF_NAMES",
    "IMPOSSIBLE_MESSAGE",
    "MixedRoof",
]

#: The roofs, in the order results and sentences list them.
ROOF_NAMES = ("datasheet", "derived", "measured")

#: What the sentence says when a timing beats the floor.
IMPOSSIBLE_MESSAGE = ("faster than the floor of the reference's operations, so an algebraic or "
                      "structural shortcut was taken, or the FLOP/byte counts or the peaks are wrong")

# Units to try, in order, for the compute roof of each dtype unit on hardware that may lack the
# first: falling back is sound only because the part truly has no faster unit for that dtype.
_COMPUTE_CHAIN = {
    "fp64": ("fp64_tensor", "fp64"),
    "fp32": ("fp32",),
    "tf32": ("tf32", "fp32"),
    "fp16": ("fp16", "fp32"),
    "bf16": ("bf16", "fp32"),
    "fp8": ("fp8", "fp16", "fp32"),
    "int8": ("int8",),
}

# A fraction this far above 1 is a real violation, not floating-point noise.
_EPS = 1e-9


@dataclass(frozen=True)
class MixedRoof(Roof):
    """A :class:`Roof` that also says which HBM figure its memory term used (``bandwidth_mix``):
    the read:write ratio, the envelope point(s) and the rule, or why the single figure was used.
    None on the datasheet and derived roofs, which have one bandwidth. Kept here, beside the code
    that fills it, so that ``model/results.py`` is unchanged; its ``to_dict`` adds the one key."""

    bandwidth_mix: Mapping[str, Any] | None = None
    #: The whole read:write envelope this roof read its figure from (None without one), so that a
    #: part of the task with a ratio of its own (one op, model/ops.py) reads it at that ratio.
    #: Not in to_dict: the calibration holds it, and bandwidth_mix records what this roof used.
    mix_envelope: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.pop("mix_envelope", None)
        return d

    def bandwidth_at(self, read_bytes: float, write_bytes: float) -> float | None:
        """The HBM figure for traffic of this read:write ratio: the envelope there, or the roof's
        one figure where there is no envelope (or no traffic)."""
        if self.mix_envelope is None or read_bytes + write_bytes <= 0:
            return self.bandwidth_tbps
        return mix_roof(self.mix_envelope, read_bytes, write_bytes).tbps


def compute_unit_for_dtype(dtype: Any, strict_fp32: bool = False) -> str:
    """The peak unit whose roof applies to a task's dtype.

    Accepts torch dtypes (or their ``str()``: "torch.float32"), plain names ("float32", "fp32",
    "bf16", "half", "float8_e4m3fn", "int8", ...). Returns one of "fp64", "fp32", "tf32", "fp16",
    "bf16", "fp8", "int8": float32 gives "tf32" unless ``strict_fp32`` (then "fp32"); an explicit
    "tf32" stays "tf32". Raises ``UserError`` naming the supported dtypes for anything else.
    """
    unit = dtype_unit(dtype)
    if unit is None:
        text = dtype if isinstance(dtype, str) else str(dtype)
        raise UserError(f"unsupported dtype {text.strip().lower()!r}; supported: {', '.join(SUPPORTED_DTYPES)}")
    if unit == "fp32" and not strict_fp32:
        return "tf32"
    return unit


def _check_count(name: str, value: Any) -> float:
    # numbers.Real admits numpy scalars, which FLOP counters and timers often return.
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise UserError(f"{name} must be a number, got {value!r}")
    if math.isinf(value):  # an infinite count has no floor a kernel could be held to
        raise UserError(f"{name} must be finite, got {value!r}")
    if value < 0:
        raise UserError(f"{name} must not be negative, got {value!r}")
    return float(value)


def _check_peak(name: str, value: Any) -> float:
    checked = _check_count(name, value)
    if checked <= 0:
        raise UserError(f"{name} must be positive, got {value!r}")
    return checked


def floor(
    flops: float,
    nbytes: float,
    simt_flops: float = 0.0,
    compute_tflops: float | None = None,
    simt_tflops: float | None = None,
    bandwidth_tbps: float | None = None,
) -> dict[str, Any]:
    """The roofline floor for explicit peaks (TFLOP/s, TB/s); the building block of ``roofline``.

    Returns ``t_compute_ms`` (``flops`` on the compute roof), ``t_simt_ms`` (``simt_flops`` on the
    CUDA cores), ``t_memory_ms``, ``t_min_ms`` (the largest of the three), ``bound`` ("compute" or
    "memory"), ``limiter`` ("compute", "simt" or "memory"), ``arithmetic_intensity`` (all FLOPs per
    byte) and ``ridge_flop_per_byte`` (compute peak / bandwidth). A peak may be None only when its
    work is zero; otherwise ``UserError``.
    """
    flops = _check_count("flops", flops)
    nbytes = _check_count("nbytes", nbytes)
    simt_flops = _check_count("simt_flops", simt_flops or 0.0)

    def time_ms(work: float, peak: float | None, what: str) -> float:
        if work == 0:
            return 0.0
        if peak is None:
            raise UserError(f"no {what} peak for {work:g} units of work")
        return work / (_check_peak(what, peak) * 1e12) * 1e3

    t_compute = time_ms(flops, compute_tflops, "compute")
    t_simt = time_ms(simt_flops, simt_tflops, "SIMT")
    t_memory = time_ms(nbytes, bandwidth_tbps, "bandwidth")
    t_min = max(t_compute, t_simt, t_memory)
    # Ties go to memory, as the seed did: compute-bound only when compute is strictly slower.
    if max(t_compute, t_simt) > t_memory:
        bound = "compute"
        limiter = "compute" if t_compute >= t_simt else "simt"
    else:
        bound, limiter = "memory", "memory"
    total = flops + simt_flops
    return {
        "t_compute_ms": t_compute,
        "t_simt_ms": t_simt,
        "t_memory_ms": t_memory,
        "t_min_ms": t_min,
        "bound": bound,
        "limiter": limiter,
        "arithmetic_intensity": total / nbytes if nbytes else math.inf,
        "ridge_flop_per_byte": (
            compute_tflops / bandwidth_tbps if compute_tflops and bandwidth_tbps else None
        ),
    }


class _Source:
    """One set of peaks, with whether a missing unit means "the hardware lacks it"."""

    def __init__(self, label: str, values: Mapping[str, float | None], bandwidth: float | None,
                 hardware: bool, clocks: Mapping[str, float | None] | None = None,
                 mix: Mapping[str, float] | None = None, mix_note: str | None = None):
        self.label = label
        # The read:write envelope {"R:W": TB/s} of a calibration (measured roofs only), and how it
        # was derived when it is not the burst sweep itself.
        self.mix = mix
        self.mix_note = mix_note
        self.values = values
        self.bandwidth = bandwidth
        # True: a None unit does not exist on the part, so falling back to a slower one is sound.
        # False (measured peaks, unknown architecture): a None unit is merely unknown.
        self.hardware = hardware
        self.clocks = clocks or {}


def _from_datasheet(sheet: DatasheetPeaks) -> _Source:
    # NVIDIA's FP64 tensor figures assume the SIMT clock (H100: 66.9 = 132 x 256 x 1980 MHz).
    simt_units = ("fp32", "fp64", "fp64_tensor")
    clocks = {u: (sheet.simt_clock_mhz if u in simt_units else sheet.boost_clock_mhz) for u in UNITS}
    return _Source("datasheet", {u: sheet.peak(u) for u in UNITS}, sheet.bandwidth_tbps, True, clocks)


def _from_derived(derived: DerivedPeaks) -> _Source:
    clocks = {u: derived.sm_clock_mhz for u in UNITS}
    return _Source("derived", {u: derived.peak(u) for u in UNITS}, derived.bandwidth_tbps,
                   derived.known_arch, clocks)


def _from_measured(measured: Any) -> _Source:
    if not isinstance(measured, Mapping):
        raise UserError(
            "measured peaks must be a mapping like {'bandwidth_tbps': 4.6, 'tf32': 450.0, ...}, "
            f"got {type(measured).__name__}"
        )
    values: dict[str, float | None] = {}
    bandwidth = None
    for key, value in measured.items():
        numeric = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not numeric:
            # Metadata (a date, a source string) may ride along; a peak key must hold a number.
            if key in ROOFLINE_PEAK_KEYS and value is not None:
                raise UserError(f"measured peak {key!r} must be a number, got {value!r}")
            continue
        if key in PEAK_KEYS and key not in ROOFLINE_PEAK_KEYS:
            continue  # measured and cached (L2), but not a roof the floor uses
        if key not in ROOFLINE_PEAK_KEYS:
            raise UserError(
                f"unknown measured peak {key!r}; expected some of: {', '.join(sorted(ROOFLINE_PEAK_KEYS))}"
            )
        value = _check_peak(f"measured {key}", value)
        if key == "bandwidth_tbps":
            bandwidth = value
        else:
            values[key] = value
    mix, note = _measured_mix(measured)
    return _Source("measured", values, bandwidth, False, mix=mix, mix_note=note)


def _measured_mix(measured: Mapping[str, Any]) -> tuple[Mapping[str, float] | None, str | None]:
    """The read:write envelope handed in with measured peaks: ``MeasuredPeaks.mix`` (from the
    cache), or an ``hbm_mix`` key of a plain mapping (the envelope, or a calibration entry with
    ``points``). An envelope without one usable point is an error, not silently no envelope."""
    mix = getattr(measured, "mix", None)
    note = getattr(measured, "mix_note", None)
    if mix is None and isinstance(measured.get("hbm_mix"), Mapping):
        mix = measured["hbm_mix"]
    if mix is None:
        return None, None
    try:
        points = envelope_points(mix)
    except ValueError as exc:
        raise UserError(f"measured hbm_mix: {exc}") from None
    if not points:
        raise UserError("measured hbm_mix has no finite positive point")
    return mix, note


def _resolve(src: _Source, chain: tuple[str, ...],
             ref: _Source | None) -> tuple[float | None, str | None, str | None]:
    """(peak, unit used, label of the source it came from) for the first usable unit of ``chain``."""
    if src.hardware:
        for unit in chain:
            value = src.values.get(unit)
            if value is not None:
                return value, unit, src.label
        return None, None, None
    if ref is None:
        # Without a source that knows the hardware, only the exact unit is safe: a fallback could
        # take FP32 for a part that has TF32 tensor cores and overstate the floor.
        value = src.values.get(chain[0])
        return (value, chain[0], src.label) if value is not None else (None, None, None)
    ref_value, ref_unit, ref_label = _resolve(ref, chain, None)
    if ref_unit is None:
        return None, None, None
    value = src.values.get(ref_unit)
    if value is not None:
        return value, ref_unit, src.label
    return ref_value, ref_unit, ref_label


def _fraction(t_min: float, t: float | None) -> float | None:
    return t_min / t if t else None


_NO_SWEEP_NOTE = ("the calibration has no read:write sweep (a quick calibration, or one made before the "
                  "sweep existed): its single HBM figure, the fastest pattern, is the roof at every ratio")
_NO_SPLIT_NOTE = ("no read:write split of the bytes was given: the calibration's single HBM figure "
                  "(its fastest pattern) is the roof, not the read:write envelope")


def _split(read_bytes: float | None, write_bytes: float | None) -> tuple[float, float] | None:
    """The task's compulsory (reads, writes), or None when unknown or empty."""
    if read_bytes is None or write_bytes is None:
        return None
    r, w = _check_count("read_bytes", read_bytes), _check_count("write_bytes", write_bytes)
    return (r, w) if r + w > 0 else None


def _bandwidth(src: _Source, ref: _Source | None, split: tuple[float, float] | None
               ) -> tuple[float | None, str, dict[str, Any] | None]:
    """(bandwidth, where it came from, what ``bandwidth_mix`` records) for one roof.

    A measured roof with an envelope and a split reads the envelope at the task's ratio; otherwise
    the source's single figure (or the reference's, borrowed), and a measured roof says why."""
    info: dict[str, Any] | None = None
    if src.label == "measured":
        info = {"source": "bandwidth_tbps", "ratio": None, "read_fraction": None, "read_bytes": None,
                "write_bytes": None, "tbps": None, "rule": None, "points": None, "interpolation": None,
                "note": None}
        if split is not None:
            info.update(ratio=ratio_label(*split), read_fraction=read_fraction(*split),
                        read_bytes=split[0], write_bytes=split[1])
        if src.mix is not None and split is not None:
            m = mix_roof(src.mix, *split)
            info.update(m.to_dict(), source="hbm_mix", note=src.mix_note)
            return m.tbps, src.label, info
        info["note"] = _NO_SPLIT_NOTE if src.mix is not None else _NO_SWEEP_NOTE
    bandwidth, bandwidth_from = src.bandwidth, src.label
    if bandwidth is None and ref is not None:
        bandwidth, bandwidth_from = ref.bandwidth, ref.label
        if info is not None:
            info["source"] = f"{ref.label} bandwidth_tbps"
            info["note"] = "the calibration measured no HBM figure: the " + ref.label + " bandwidth is used"
    if info is not None:
        info["tbps"] = bandwidth
    return bandwidth, bandwidth_from, info


def _roof(src: _Source, ref: _Source | None, unit: str, flops: float, nbytes: float,
          simt_flops: float, t_ref: float | None, t_new: float | None,
          split: tuple[float, float] | None = None) -> Roof | None:
    compute, compute_unit, compute_from = _resolve(src, _COMPUTE_CHAIN[unit], ref)
    simt_unit = "fp64" if unit == "fp64" else "fp32"
    simt, _, simt_from = _resolve(src, (simt_unit,), ref)
    bandwidth, bandwidth_from, mix_info = _bandwidth(src, ref, split)
    if (flops and compute is None) or (simt_flops and simt is None) or (nbytes and bandwidth is None):
        return None
    f = floor(flops, nbytes, simt_flops, compute, simt, bandwidth)
    ref_fraction = _fraction(f["t_min_ms"], t_ref)
    new_fraction = _fraction(f["t_min_ms"], t_new)
    clocks = src.clocks if compute_from == src.label else (ref.clocks if ref else {})
    return MixedRoof(
        source=src.label, compute_unit=compute_unit, simt_unit=simt_unit, compute_tflops=compute,
        simt_tflops=simt, bandwidth_tbps=bandwidth,
        peak_sources={"compute": compute_from, "simt": simt_from, "bandwidth": bandwidth_from},
        clock_mhz=clocks.get(compute_unit) if compute_unit else None,
        t_compute_ms=f["t_compute_ms"], t_simt_ms=f["t_simt_ms"], t_memory_ms=f["t_memory_ms"],
        t_min_ms=f["t_min_ms"], bound=f["bound"], limiter=f["limiter"],
        ridge_flop_per_byte=f["ridge_flop_per_byte"], ref_fraction=ref_fraction, new_fraction=new_fraction,
        ref_impossible=ref_fraction is not None and ref_fraction > 1 + _EPS,
        new_impossible=new_fraction is not None and new_fraction > 1 + _EPS,
        bandwidth_mix=mix_info,
        mix_envelope=src.mix if mix_info is not None and mix_info.get("source") == "hbm_mix" else None,
    )


def _check_time(name: str, value: Any) -> float | None:
    # None or 0 means "not timed" (the seed treated a falsy time the same way).
    if value is None or value == 0:
        return None
    return _check_peak(name, value)


def _gpu_display(gpu: Any, sheet: DatasheetPeaks | None) -> str | None:
    if isinstance(gpu, DatasheetPeaks):
        return gpu.full_name
    if isinstance(gpu, str):
        return gpu
    return sheet.full_name if sheet else None


def roofline_result(
    flops: float | None,
    nbytes: float | None,
    dtype: Any,
    gpu: str | DatasheetPeaks | None,
    t_ref_ms: float | None,
    t_new_ms: float | None = None,
    *,
    simt_flops: float = 0.0,
    strict_fp32: bool = False,
    derived: DerivedPeaks | Any | None = None,
    measured: Mapping[str, Any] | None = None,
    read_bytes: float | None = None,
    write_bytes: float | None = None,
) -> RooflineResult | None:
    """The roofline floor of a task and how close a reference and a candidate come to it, typed.

    ``flops``: FLOPs that can run on the dtype's tensor cores (matmul, conv, attention);
    ``simt_flops``: FLOPs that cannot (elementwise, reductions), counted on the CUDA cores;
    ``nbytes``: compulsory memory traffic; ``dtype``: e.g. ``torch.float32``, "bf16", "fp8", "int8";
    ``gpu``: a device name as NVML/torch report it, a table name, a ``DatasheetPeaks``, or a
    device record (its ``name`` is used);
    ``t_ref_ms``/``t_new_ms``: the reference's (PyTorch's) and a candidate's measured times.
    ``strict_fp32``: float32 against FP32 CUDA cores instead of TF32 tensor cores.
    ``derived``: a ``DerivedPeaks`` (or a device record, converted with ``derived_peaks_for_device``).
    ``measured``: calibrated peaks as a mapping, e.g. ``{"bandwidth_tbps": 4.6, "fp32": 64.1,
    "tf32": 450.0, "fp16": 900.0, "bf16": 910.0, "fp8": 1800.0, "int8": 1800.0}``; a peak it lacks is
    taken from the datasheet (or derived) roof and ``peak_sources`` says so. A ``MeasuredPeaks``
    with ``mix`` (or a mapping with an ``hbm_mix`` envelope) gives the measured memory roof at the
    task's read:write ratio.
    ``read_bytes``/``write_bytes``: the compulsory reads (inputs + parameters) and writes (outputs)
    that make up ``nbytes``; only their ratio is used, to read the measured roof's HBM figure off
    the calibration's read:write envelope. Each roof's ``bandwidth_mix`` says what was used (None
    on the datasheet and derived roofs).

    Returns a :class:`RooflineResult`; :func:`roofline` gives its ``to_dict()``: a dict with the seed's keys for the primary roof (the datasheet's when the GPU is in
    the table): ``arithmetic_intensity``, ``bound``, ``t_min_ms``, ``ref_roofline_frac`` and, when
    ``t_new_ms`` is given, ``roofline_frac``; plus ``roofs`` = {"datasheet", "derived", "measured"},
    each None or a dict with its peaks, ``t_compute_ms``/``t_simt_ms``/``t_memory_ms``, ``t_min_ms``,
    ``bound``, ``ridge_flop_per_byte``, ``ref_fraction``, ``new_fraction`` and the ``impossible``
    flags (a time below the floor). ``impossible`` at the top is True if any roof was beaten.

    Returns None, as the seed did, when it cannot say anything: ``flops`` is None, ``nbytes`` is
    0/None, or no roof applies (an unknown GPU without derived or measured peaks). Raises
    ``UserError`` for an unsupported dtype or negative counts.
    """
    unit = compute_unit_for_dtype(dtype, strict_fp32)
    if flops is None or not nbytes:
        return None
    flops = _check_count("flops", flops)
    nbytes = _check_count("nbytes", nbytes)
    simt_flops = _check_count("simt_flops", simt_flops or 0.0)
    t_ref = _check_time("t_ref_ms", t_ref_ms)
    t_new = _check_time("t_new_ms", t_new_ms)

    if gpu is not None and not isinstance(gpu, (str, DatasheetPeaks)):
        # A device record (roofline_ext.device.listing.Device) stands for its name.
        gpu = getattr(gpu, "name", None) or str(gpu)
    sheet = lookup(gpu) if gpu is not None else None
    sources = _sources(sheet, derived, measured)
    split = _split(read_bytes, write_bytes)
    roofs: dict[str, Roof | None] = {name: None for name in ROOF_NAMES}
    for name, src in sources.items():
        roofs[name] = _roof(src, _reference_for(src, sources), unit, flops, nbytes, simt_flops, t_ref, t_new,
                            split)
    primary = next((name for name in ROOF_NAMES if roofs[name] is not None), None)
    if primary is None:
        return None
    return RooflineResult(
        arithmetic_intensity=(flops + simt_flops) / nbytes, gpu=_gpu_display(gpu, sheet),
        sku=sheet.name if sheet else None, dtype=dtype_text(dtype), unit=unit, flops=flops,
        simt_flops=simt_flops, nbytes=nbytes, t_ref_ms=t_ref, t_new_ms=t_new, primary_roof=primary,
        roofs=roofs,
    )


def roofline(
    flops: float | None,
    nbytes: float | None,
    dtype: Any,
    gpu: str | DatasheetPeaks | None,
    t_ref_ms: float | None,
    t_new_ms: float | None = None,
    **options: Any,
) -> dict[str, Any] | None:
    """:func:`roofline_result` as a JSON-ready dict (its ``to_dict()``), or None; same arguments."""
    r = roofline_result(flops, nbytes, dtype, gpu, t_ref_ms, t_new_ms, **options)
    return r.to_dict() if r is not None else None


def _sources(sheet: DatasheetPeaks | None, derived: Any, measured: Mapping[str, Any] | None) -> dict[str, _Source]:
    """The roofs that apply, in the order of ``ROOF_NAMES``."""
    if derived is not None and not isinstance(derived, DerivedPeaks):
        derived = derived_peaks_for_device(derived)
    sources: dict[str, _Source] = {}
    if sheet is not None:
        sources["datasheet"] = _from_datasheet(sheet)
    if derived is not None:
        sources["derived"] = _from_derived(derived)
    if measured is not None:
        sources["measured"] = _from_measured(measured)
    return sources


def _reference_for(src: _Source, sources: Mapping[str, _Source]) -> _Source | None:
    """What fills the peaks a source cannot know: the datasheet first, then derived peaks of a
    known architecture."""
    for candidate in ("datasheet", "derived"):
        other = sources.get(candidate)
        if other is not None and other is not src and other.hardware:
            return other
    return None
