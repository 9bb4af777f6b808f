"""Measured arithmetic roofs: FP32/FP64 on the CUDA cores, TF32/FP16/BF16/FP8/INT8 on the tensor cores.

``measure_compute(device)`` runs, per precision, every path this GPU and build support:

  ``simt``      FP32 / FP64 fused multiply-add chains on the CUDA cores;
  ``mma.sync``  warp-level tensor-core MMAs (Turing and later; the roof where there is no wgmma);
  ``wgmma``     Hopper's warpgroup MMAs from shared memory and registers (sm_90a only), the only
                path that reaches the full tensor rate there (mma.sync stops near two thirds);

each one verified against an exact host reference before it is timed (a wrong fragment layout or a
dead loop raises instead of reporting a number). Per precision the best path's median is the roof;
the other paths' figures are kept beside it.

Each figure carries two fractions (docs/measuring.md):
  ``fraction_of_datasheet``      of NVIDIA's figure (``datasheet.lookup``), which for H100/H200 tensor
                                 units assumes 1830 MHz, so it may legitimately exceed 1;
  ``fraction_of_clock_derived``  of ops/clock/SM x SMs x the SM clock NVML reported during the run
                                 (median of the samples). A result above the clock-derived peak at the
                                 highest clock observed is a bug and raises ``ComputeBoundError``.
and the clock the kernel itself measured (``kernel_clock_mhz``: clock64 cycles over %globaltimer
nanoseconds, summed over CTAs and launches), with the fraction at that clock. They differ on purpose:
on an H200 under tensor-core load NVML reported ~1.9 GHz while the SMs counted ~9% fewer cycles per
second, and at the counted clock the wgmma kernels reach ~99% of the tensor rate.

Burst regime: each measurement starts after ``cooldown_s`` idle and lasts ``warmup + reps`` launches
of about ``target_ms`` each (about 50 ms with the defaults), the order of a library benchmark's
run at 8192^3, so clocks are those of a short burst on a cool card. On an H200, FP16/BF16/FP8 reach
the 700 W software power cap within ~100 ms: 10 ms launches run 6-7% slower than 2 ms ones.
Sustained figures are calibration's (``measure_path`` with fixed iterations, back to back).

Seen on an H200 (2026-11-30, 2 ms bursts; benchmarks/results/compute-nvidia-h200-*-harness.json):
FP32 65.6 and FP64 33.2 TFLOP/s (98%/99% of the 1980 MHz peak); wgmma TF32 484, FP16 911,
BF16 961, FP8 1873 TFLOP/s and INT8 1939 TOP/s (99-100% of the tensor rate at the counted clock,
1.16-1.23x cuBLAS / torch._scaled_mm, 2.0x torch._int_mm); mma.sync 2/3 of that.

Unsupported precisions (no FP8 before Ada, no TF32/BF16 before Ampere, ...) are reported with
``status="unsupported"`` and the reason, never as zero.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from ..device import status as device_status, telemetry as device_telemetry
from ..errors import UserError
from ..peaks.datasheet import lookup
from ..peaks.derived import clock_derived_peak
from ..peaks.units import UNIT

__all__ = [
    "PRECISIONS",
    "PATHS",
    "NATURAL_PATHS",
    "ComputeBoundError",
    "PathResult",
    "PrecisionResult",
    "ComputeResult",
    "plan_paths",
    "measure_compute",
    "measure_path",
]

PRECISIONS = ("fp32", "fp64", "tf32", "fp16", "bf16", "fp8", "int8")
PATHS = ("simt", "mma.sync", "wgmma")

#: The paths that measure each precision's unit. FP32/FP64 are the CUDA cores' FMA; the rest are
#: tensor-core formats (FP32 accumulation for TF32/FP16/BF16/FP8, INT32 for INT8).
NATURAL_PATHS: dict[str, tuple[str, ...]] = {
    "fp32": ("simt",), "fp64": ("simt",),
    "tf32": ("mma.sync", "wgmma"), "fp16": ("mma.sync", "wgmma"), "bf16": ("mma.sync", "wgmma"),
    "fp8": ("mma.sync", "wgmma"), "int8": ("mma.sync", "wgmma"),
}

#: Kernel knobs per path (0 / -1 = the kernel family's default). The wgmma default, A in registers,
#: B in 128-byte-swizzled shared memory, two warpgroups per SM, was the fastest (or tied) of the
#: verified layouts on an H200 (see benchmarks/results); pass ``configs`` to try others.
DEFAULT_CONFIGS: dict[str, tuple[dict[str, int], ...]] = {
    "simt": ({},),
    "mma.sync": ({},),
    "wgmma": ({"warpgroups": 2, "a_from_registers": 1, "swizzle": 128},),
}

# A measured median may sit this far above the peak at the highest clock seen before it counts as
# a bug: NVML samples every ~25 ms and a burst can begin a little above the last sample.
_BOUND_SLACK = 1.005


class ComputeBoundError(RuntimeError):
    """A measurement above the clock-derived peak at the clock observed: a bug in the measurement
    (FLOPs miscounted, work skipped by the compiler, a wrong clock), never a result."""


def _unit(precision: str) -> str:
    return UNIT[precision].rate_unit


@dataclass
class PathResult:
    """One (precision, path) measurement, or why there is none."""

    precision: str
    path: str
    status: str  # "ok" | "unsupported"
    reason: str | None = None
    unit: str = "TFLOP/s"
    tflops_median: float | None = None
    tflops_best: float | None = None
    cv: float | None = None
    median_ms: float | None = None
    best_ms: float | None = None
    reps: int | None = None
    instruction: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    launch: dict[str, Any] = field(default_factory=dict)  # grid, block, smem_bytes, regs_per_thread
    flop_per_launch: float | None = None
    verification: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    sm_clock_mhz: float | None = None  # NVML's median during the measurement
    kernel_clock_mhz: float | None = None  # counted inside the kernel
    clock_derived_peak: float | None = None  # at sm_clock_mhz
    fraction_of_clock_derived: float | None = None
    fraction_of_clock_derived_at_kernel_clock: float | None = None
    datasheet: float | None = None
    fraction_of_datasheet: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class PrecisionResult:
    """All paths of one precision; the best path's figures are the precision's roof."""

    precision: str
    unit: str
    status: str  # "ok" | "unsupported"
    reason: str | None
    best: PathResult | None
    paths: dict[str, PathResult]

    def __getattr__(self, name: str) -> Any:
        # The roof's figures read straight off the result: r.tflops_median, r.path, r.cv, ...
        if name in {f.name for f in dataclasses.fields(PathResult)} and name not in ("status", "reason", "unit"):
            best = self.__dict__.get("best")
            return getattr(best, name) if best is not None else None
        raise AttributeError(name)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"precision": self.precision, "unit": self.unit, "status": self.status,
                               "reason": self.reason}
        if self.best is not None:
            best = self.best.to_dict()
            for key in ("precision", "status", "reason", "unit"):
                best.pop(key)
            out.update(best)
        out["paths"] = {name: r.to_dict() for name, r in self.paths.items()}
        return out


@dataclass
class ComputeResult:
    """What ``measure_compute`` returns: per precision a :class:`PrecisionResult`."""

    device: dict[str, Any]
    date: str
    settings: dict[str, Any]
    precisions: dict[str, PrecisionResult]

    def __getitem__(self, precision: str) -> PrecisionResult:
        return self.precisions[precision]

    def peaks(self) -> dict[str, float]:
        """{precision: best median} for the precisions measured (the flat form rooflines take)."""
        return {p: r.best.tflops_median for p, r in self.precisions.items()
                if r.best is not None and r.best.tflops_median is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"device": dict(self.device), "date": self.date, "settings": dict(self.settings),
                "precisions": {p: r.to_dict() for p, r in self.precisions.items()}}


# --- planning (pure: testable without a GPU) -------------------------------------------------------

def _validate(values: Iterable[str] | str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        values = (values,)
    out = []
    for v in values:
        v = "mma.sync" if v in ("mma", "mma_sync") else v
        if v not in known:
            raise UserError(f"unknown {what} {v!r}; known: {', '.join(known)}")
        if v not in out:
            out.append(v)
    if not out:
        raise UserError(f"no {what} given")
    return tuple(out)


def plan_paths(capabilities: Mapping[str, Mapping[str, Mapping[str, Any]]], precisions: Iterable[str],
               paths: Iterable[str] | None = None) -> dict[str, dict[str, str | None]]:
    """Which paths to run per precision: ``{precision: {path: None (run it) | reason (why not)}}``.

    ``capabilities`` is ``_core.compute_paths(device)``: ``{precision: {path: {"supported": bool,
    "reason": str | None}}}``. Only a precision's natural paths (``NATURAL_PATHS``) are considered;
    ``paths`` restricts them further.
    """
    precisions = _validate(precisions, PRECISIONS, "precision")
    wanted = _validate(paths, PATHS, "path") if paths is not None else PATHS
    plan: dict[str, dict[str, str | None]] = {}
    for prec in precisions:
        entry: dict[str, str | None] = {}
        caps = capabilities.get(prec) or {}
        natural = NATURAL_PATHS[prec]
        for path in natural:
            if path not in wanted:
                continue
            cap = caps.get(path)
            if cap is None:
                entry[path] = f"this build does not report the {path} path"
            elif cap.get("supported"):
                entry[path] = None
            else:
                entry[path] = str(cap.get("reason") or "unsupported")
        if not entry:  # every natural path was filtered out by `paths`
            entry[natural[0]] = (f"{prec} is measured on the {' or '.join(natural)} path, "
                                 f"not among the paths asked for ({', '.join(wanted)})")
        plan[prec] = entry
    return plan


def _unsupported_reason(entry: Mapping[str, str | None]) -> str:
    return "; ".join(f"{path}: {reason}" for path, reason in entry.items())


def summarize_precision(precision: str, results: Mapping[str, PathResult]) -> PrecisionResult:
    """The precision's roof: the path with the highest median; unsupported with every reason if none."""
    ok = [r for r in results.values() if r.ok and r.tflops_median is not None]
    if not ok:
        reason = "; ".join(f"{r.path}: {r.reason}" for r in results.values())
        return PrecisionResult(precision, _unit(precision), "unsupported", reason or "no path measured it", None,
                               dict(results))
    best = max(ok, key=_median)
    return PrecisionResult(precision, _unit(precision), "ok", None, best, dict(results))


# --- peaks ----------------------------------------------------------------------------------------

def _clock_peak(precision: str, device: Mapping[str, Any], clock_mhz: float | None) -> float | None:
    if not clock_mhz:
        return None
    consumer = "geforce" in str(device.get("name", "")).lower()
    return clock_derived_peak(precision, (device["cc_major"], device["cc_minor"]), device["sm_count"],
                              float(clock_mhz), consumer=consumer)


def _datasheet_peak(precision: str, name: str) -> float | None:
    sheet = lookup(name)
    return sheet.peak(precision) if sheet is not None else None


def _stat(tel: Mapping[str, Any] | None, key: str, which: str) -> float | None:
    v = (tel or {}).get(key)
    if isinstance(v, Mapping):
        x = v.get(which)
        return float(x) if x is not None else None
    return None


def _median(r: PathResult) -> float:
    # Only for a measured path: _path_result sets the median from the core's run, which always has
    # one; an unsupported path (None) is never compared or divided.
    return cast(float, r.tflops_median)


def _fill_fractions(r: PathResult, device: Mapping[str, Any]) -> None:
    """Datasheet and clock-derived fractions, and the bound check (raises ComputeBoundError)."""
    tflops = _median(r)
    r.datasheet = _datasheet_peak(r.precision, str(device.get("name", "")))
    if r.datasheet:
        r.fraction_of_datasheet = tflops / r.datasheet
    r.sm_clock_mhz = _stat(r.telemetry, "sm_clock_mhz", "median")
    r.clock_derived_peak = _clock_peak(r.precision, device, r.sm_clock_mhz)
    if r.clock_derived_peak:
        r.fraction_of_clock_derived = tflops / r.clock_derived_peak
    at_kernel = _clock_peak(r.precision, device, r.kernel_clock_mhz)
    if at_kernel:
        r.fraction_of_clock_derived_at_kernel_clock = tflops / at_kernel

    # The bound: the highest clock anyone saw during the run (NVML's max sample, the kernel's own
    # count); without either, the GPU's maximum clock.
    seen = [c for c in (_stat(r.telemetry, "sm_clock_mhz", "max"), r.kernel_clock_mhz) if c]
    top = max(seen) if seen else device.get("max_sm_clock_mhz")
    bound = _clock_peak(r.precision, device, top)
    if bound and tflops > bound * _BOUND_SLACK:
        raise ComputeBoundError(
            f"{r.precision} on {r.path}: {r.tflops_median:.1f} {r.unit} is above the clock-derived peak "
            f"{bound:.1f} at {top:.0f} MHz, the highest clock seen; the measurement is wrong "
            f"(config {r.config}, {r.flop_per_launch:.4g} FLOP per launch)")


# --- measuring ------------------------------------------------------------------------------------

#: Kernel knobs ``compute_run`` takes. A result's ``config`` repeats them under the same names, next
#: to what the kernel derived from them (``_DESCRIPTIVE``), so a result's config can be passed back in
#: (calibration's sustained phase does) to run the same kernel again.
_KNOBS = ("threads_per_block", "blocks_per_sm", "warpgroups", "swizzle", "a_from_registers")
_DESCRIPTIVE = frozenset({"iterations", "chains", "unroll", "accumulators_per_warp", "ctas_per_sm", "mma_m",
                          "mma_n", "mma_k", "mmas_per_commit", "groups_in_flight", "k_slices"})


def _knobs(config: Mapping[str, Any] | None) -> dict[str, int]:
    config = dict(config or {})
    unknown = set(config) - set(_KNOBS) - _DESCRIPTIVE
    if unknown:
        raise UserError(f"unknown compute kernel knob(s): {', '.join(sorted(unknown))}; "
                        f"knobs: {', '.join(_KNOBS)}")
    return {k: int(v) for k, v in config.items() if k in _KNOBS}


def _path_result(raw: Mapping[str, Any], telemetry: Mapping[str, Any] | None) -> PathResult:
    return PathResult(
        precision=raw["precision"], path=raw["path"], status="ok", unit=raw["unit"],
        tflops_median=raw["tflops_median"], tflops_best=raw["tflops_best"], cv=raw["cv"],
        median_ms=raw["median_ms"], best_ms=raw["best_ms"], reps=raw["reps"], instruction=raw["instruction"],
        config=dict(raw["config"]),
        launch={k: raw[k] for k in ("grid", "block", "smem_bytes", "regs_per_thread", "iterations")},
        flop_per_launch=raw["flop_per_launch"], verification=dict(raw["verification"]),
        telemetry=dict(telemetry) if telemetry else None, kernel_clock_mhz=raw.get("kernel_clock_mhz"))


def measure_path(device: int, precision: str, path: str, config: Mapping[str, int] | None = None, *,
                 reps: int = 20, warmup: int = 3, target_ms: float = 2.0, iterations: int = 0,
                 cooldown_s: float = 0.0, _core: Any = None, _device: Mapping[str, Any] | None = None) -> PathResult:
    """Verify and time one (precision, path, config) under telemetry; fractions filled in.

    Raises ``_core.VerificationError`` if the kernel computes wrong results, ``ComputeBoundError``
    if its figure is above the clock-derived peak, ``_core.CoreError`` for an unsupported pair.
    Calibration's sustained phase calls this with fixed ``iterations`` back to back.
    """
    if _core is None:
        device_status.require_measurement(device)
        _core = device_status.core()
    device_facts = _device if _device is not None else _core.compute_device(device)
    knobs = _knobs(config)
    if cooldown_s > 0:
        time.sleep(cooldown_s)
    with device_telemetry.sampling(device) as tel:
        raw = _core.compute_run(device, precision, path, reps=reps, warmup=warmup, target_ms=target_ms,
                                iterations=iterations, **knobs)
    r = _path_result(raw, tel.summary())
    _fill_fractions(r, device_facts)
    return r


def measure_compute(device: int = 0, *, precisions: Iterable[str] = PRECISIONS, paths: Iterable[str] | None = None,
                    reps: int = 20, warmup: int = 3, target_ms: float = 2.0, cooldown_s: float = 1.0,
                    configs: Mapping[str, Iterable[Mapping[str, int]]] | None = None,
                    progress: Callable[[str], None] | None = None) -> ComputeResult:
    """Measure the arithmetic roofs of CUDA device ``device`` (see the module docstring).

    ``precisions``: any of fp32, fp64, tf32, fp16, bf16, fp8, int8. ``paths``: restrict to some of
    simt, mma.sync, wgmma (default: every path that measures the precision). ``configs``: per path, the
    kernel configurations to try (best median kept; default ``DEFAULT_CONFIGS``). ``progress`` is
    called with one line per measurement. Raises ``GpuUnavailableError`` (with the availability
    reason) when there is no GPU to measure.
    """
    device_status.require_measurement(device)
    _core = device_status.core()
    if reps < 1 or warmup < 0 or target_ms <= 0:
        raise UserError("reps must be >= 1, warmup >= 0 and target_ms > 0")
    plan = plan_paths(_core.compute_paths(device), precisions, paths)
    facts = _core.compute_device(device)
    tried = {path: tuple(dict(c) for c in (configs or {}).get(path, DEFAULT_CONFIGS[path])) for path in PATHS}
    started = dt.datetime.now(dt.timezone.utc)
    out: dict[str, PrecisionResult] = {}
    for prec, entry in plan.items():
        results: dict[str, PathResult] = {}
        for path, reason in entry.items():
            if reason is not None:
                results[path] = PathResult(prec, path, "unsupported", reason=reason, unit=_unit(prec))
                if progress:
                    progress(f"{prec} {path}: unsupported ({reason})")
                continue
            best: PathResult | None = None
            for cfg in tried[path] or ({},):
                r = measure_path(device, prec, path, cfg, reps=reps, warmup=warmup, target_ms=target_ms,
                                 cooldown_s=cooldown_s, _core=_core, _device=facts)
                if progress:
                    frac = r.fraction_of_clock_derived
                    progress(f"{prec} {path} {cfg or 'default'}: {r.tflops_median:.1f} {r.unit} median "
                             f"(cv {100 * (r.cv or 0):.2f}%"
                             + (f", {100 * frac:.1f}% of clock-derived" if frac else "") + ")")
                if best is None or _median(r) > _median(best):
                    best = r
            assert best is not None
            results[path] = best
        out[prec] = summarize_precision(prec, results)
    settings = {"reps": reps, "warmup": warmup, "target_ms": target_ms, "cooldown_s": cooldown_s,
                "configs": {p: [dict(c) for c in cs] for p, cs in tried.items()}}
    return ComputeResult(device=dict(facts), date=started.isoformat(timespec="seconds"), settings=settings,
                         precisions=out)
