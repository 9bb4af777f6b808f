"""Shared-memory (L1) read bandwidth, measured with the native core's verified kernel.

The core (``csrc/smem.cu``) times one wave of blocks reading their own seeded shared buffers with
conflict-free 16- or 4-byte loads, verifies every thread's sum, and counts the SM clock of every
launch inside the kernel. This module holds the policy:

- which configurations to try, and that the figure is the best of their medians;
- the ceiling, ``SMs x bytes per clock per SM x SM clock``, at the clock the kernel counted
  (NVML's sampled clock beside it), and the fraction of it the figure reaches;
- a figure above the ceiling at the highest clock seen is a bug, so it raises;
- throttled launches (a slowdown reason or a low clock, kernel-counted or NVML's) are counted, and
  with ``discard_throttled`` left out of the figure.

Bytes per clock per SM: 32 banks x 4 bytes = 128 on every architecture since compute capability
5.0 (the CUDA C++ Programming Guide's shared-memory sections: "shared memory has 32 banks ...
each bank has a bandwidth of 32 bits per clock cycle"). That is the LDS pipe's rate; L1 hits of
global loads share the same SRAM and no faster path.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from ..device import status
from ..errors import UserError
from .bandwidth import MeasurementError, assess_rows, best_of_medians, tbps, telemetry_block, timeline_start

#: Shared-memory bytes per clock per SM (see the module's docstring for the source).
SMEM_BYTES_PER_CLOCK_PER_SM = 128
DEFAULT_REPS = 20
DEFAULT_WARMUP = 3
DEFAULT_TARGET_MS = 2.0
DEFAULT_SEED = 12345
#: A figure above the ceiling at the highest clock seen by more than this is refused (the kernel's
#: clock is an average over its CTAs, the events include the launch: both err low, not high).
_BOUND_SLACK = 1.005

CONFIG_KEYS = ("threads", "width", "vectors", "blocks_per_sm")


def _cfg(threads: int, width: int, vectors: int, blocks_per_sm: int = 0) -> dict[str, int]:
    return {"threads": threads, "width": width, "vectors": vectors, "blocks_per_sm": blocks_per_sm}


# 16-byte loads with 256-1024 threads per block and 32-64 KiB per block (several blocks per SM, so
# warps from different blocks hide each other's load latency), and the 4-byte variant, whose
# per-warp access is one 128-byte wavefront too. An unmeasured first choice.
DEFAULT_CONFIGS: list[dict[str, int]] = [
    _cfg(256, 16, 8), _cfg(512, 16, 8), _cfg(1024, 16, 8), _cfg(256, 16, 16), _cfg(512, 16, 16),
    _cfg(256, 4, 16), _cfg(1024, 4, 16),
]


def smem_ceiling_tbps(sm_count: int, clock_mhz: float | None,
                      bytes_per_clock: int = SMEM_BYTES_PER_CLOCK_PER_SM) -> float | None:
    """SMs x bytes per clock per SM x clock, in TB/s; None without a clock."""
    if not clock_mhz or not sm_count:
        return None
    return sm_count * bytes_per_clock * clock_mhz * 1e6 / 1e12


@dataclass(frozen=True)
class SmemResult:
    """The shared-memory figure: the best median over the configurations, against its ceiling."""

    tbps_median: float
    tbps_best: float
    cv: float
    config: dict[str, Any]
    launch: dict[str, Any]              # grid, blocks per SM, bytes per block, passes
    bytes_per_launch: int
    reps: int
    sm_count: int
    kernel_clock_mhz: float | None      # median over the timed launches of the clock the kernel counted
    sm_clock_mhz: float | None          # NVML's median SM clock over the measurement
    bytes_per_clock_per_sm: int
    ceiling_tbps: float | None          # at the kernel's clock
    fraction_of_ceiling: float | None
    ceiling_at_nvml_clock_tbps: float | None
    verification: dict[str, Any]
    telemetry: dict[str, Any] | None
    throttle: dict[str, Any] | None = None
    sweep: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median_clock(row: Mapping[str, Any]) -> float | None:
    clocks = [c for c in row.get("kernel_clock_mhz") or [] if c > 0]
    return float(statistics.median(clocks)) if clocks else None


def check_bound(rows: Sequence[Mapping[str, Any]], sm_count: int, top_nvml_mhz: float | None) -> None:
    """Raise MeasurementError when any repetition beats the ceiling at the highest clock seen."""
    for r in rows:
        if r.get("skipped"):
            continue
        clocks = [c for c in r.get("kernel_clock_mhz") or [] if c > 0] + ([top_nvml_mhz] if top_nvml_mhz else [])
        ceiling = smem_ceiling_tbps(sm_count, max(clocks) if clocks else None)
        fastest = tbps(r["bytes_per_launch"], r["best_ms"])
        if ceiling is not None and fastest > _BOUND_SLACK * ceiling:
            raise MeasurementError(
                f"shared memory: {fastest:.2f} TB/s with {r['config']} exceeds {sm_count} SMs x "
                f"{SMEM_BYTES_PER_CLOCK_PER_SM} B/clock x {max(clocks):.0f} MHz = {ceiling:.2f} TB/s: the byte "
                "count or the timing is wrong, so no figure is reported")


def _sweep_row(r: Mapping[str, Any]) -> dict[str, Any]:
    if r.get("skipped"):
        return {"config": dict(r["config"]), "skipped": r["skipped"]}
    return {"config": dict(r["config"]), "tbps_median": tbps(r["bytes_per_launch"], r["median_ms"]),
            "tbps_best": tbps(r["bytes_per_launch"], r["best_ms"]), "cv": r["cv"],
            "kernel_clock_mhz": _median_clock(r), "flagged": (r.get("throttle") or {}).get("flagged")}


def smem_result(rows: Sequence[Mapping[str, Any]], telemetry: dict[str, Any] | None) -> SmemResult:
    best = best_of_medians(rows)
    sms = int(best["sm_count"])
    kclock = _median_clock(best)
    nvml = ((telemetry or {}).get("sm_clock_mhz") or {}).get("median")
    median = tbps(best["bytes_per_launch"], best["median_ms"])
    ceiling = smem_ceiling_tbps(sms, kclock)
    return SmemResult(
        tbps_median=median, tbps_best=tbps(best["bytes_per_launch"], best["best_ms"]), cv=float(best["cv"]),
        config=dict(best["config"]),
        launch={k: best[k] for k in ("grid", "blocks_per_sm", "occupancy_blocks_per_sm", "smem_bytes_per_block",
                                     "passes")},
        bytes_per_launch=int(best["bytes_per_launch"]), reps=int(best["reps"]), sm_count=sms,
        kernel_clock_mhz=kclock, sm_clock_mhz=nvml, bytes_per_clock_per_sm=SMEM_BYTES_PER_CLOCK_PER_SM,
        ceiling_tbps=ceiling, fraction_of_ceiling=median / ceiling if ceiling else None,
        ceiling_at_nvml_clock_tbps=smem_ceiling_tbps(sms, nvml), verification=dict(best["verification"]),
        telemetry=telemetry, throttle=best.get("throttle"), sweep=[_sweep_row(r) for r in rows])


def measure_smem(device: int = 0, *, configs: Sequence[Mapping[str, Any]] | None = None, reps: int = DEFAULT_REPS,
                 warmup: int = DEFAULT_WARMUP, target_ms: float = DEFAULT_TARGET_MS, passes: int = 0,
                 seed: int = DEFAULT_SEED, discard_throttled: bool = False) -> SmemResult:
    """Shared-memory read bandwidth on CUDA device `device`, the best median over `configs`.

    Raises GpuUnavailableError when no GPU can be measured, VerificationError when a thread's sum is
    wrong, MeasurementError when a figure beats SMs x 128 B/clock x the highest clock seen."""
    status.require_measurement(device)
    if reps < 1 or warmup < 0 or passes < 0 or (passes == 0 and target_ms <= 0):
        raise UserError("reps must be >= 1, warmup >= 0, passes >= 0, and target_ms > 0 when passes is 0")
    _core = status.core()
    cfgs = [{k: v for k, v in dict(c).items() if k in CONFIG_KEYS} for c in (configs or DEFAULT_CONFIGS)]
    with telemetry_block(device) as tel:
        t0 = timeline_start(_core)
        rows = _core.smem_run(device, int(reps), int(warmup), float(target_ms), int(passes), cfgs, int(seed))
    summary = tel.summary()
    top = ((summary or {}).get("sm_clock_mhz") or {}).get("max")
    ran = [r for r in rows if not r.get("skipped")]
    check_bound(ran, int(ran[0]["sm_count"]) if ran else 0, top)
    return smem_result(assess_rows(rows, tel, t0, _core, discard=discard_throttled), summary)
