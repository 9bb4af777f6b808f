"""Achievable memory bandwidth, HBM and L2, measured with the native core's verified kernels.

The core (``csrc/bandwidth.cu``) times and verifies; this module holds the policy:

- which buffer size: at least 8x the L2 (4 GiB per buffer by default, the size the reference peers
  were measured at), capped by free memory so that a triad's three buffers fit on small GPUs;
- which configurations to try per pattern, and that the reported figure is the best of the
  configurations' medians (docs/measuring.md: "the calibrated peak is the best of medians across
  configurations"), with that configuration's best and CV beside it;
- bytes counted per pattern (read N, write N, copy 2N, triad 3N; the core reports them);
- ``peak``: the highest pattern; the L2 plateau: the best median over working sets that fit in
  half the L2;
- a figure above the NVML-derived theoretical bandwidth (2 x memory clock x bus width / 8) is a bug
  in the measurement, so it raises instead of being reported.
"""
from __future__ import annotations

import datetime as _dt
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import RooflineError, UserError

PATTERNS = ("read", "write", "copy", "triad")
#: Buffers each pattern allocates (and the factor its counted bytes carry).
BUFFERS = {"read": 1, "write": 1, "copy": 2, "triad": 3}
DEFAULT_REPS = 30
DEFAULT_WARMUP = 5
DEFAULT_SEED = 12345
#: The peer measurements we compare with (torch/CuPy on H200s) used 4 GiB float32 buffers; measuring at the same size
#: keeps the comparison like for like, and it is ~70x an H200's L2.
DEFAULT_BUFFER_BYTES = 4 << 30
#: Free memory left alone when sizing buffers: the CUDA context, other libraries in the process.
_MEMORY_MARGIN_BYTES = 512 << 20
_MEMORY_MARGIN_FRACTION = 0.05
#: L2 sweep: each launch reads the working set repeatedly until it has moved about this much, so a
#: launch lasts ~0.2 ms at 10 TB/s and launch overhead is noise.
L2_BYTES_PER_LAUNCH = 2 << 30


def _cfg(threads: int, unroll: int, blocks_per_sm: int, load: str, store: str = "plain",
         bulk_bytes: int = 0) -> dict[str, Any]:
    return {"threads": threads, "unroll": unroll, "blocks_per_sm": blocks_per_sm, "load": load,
            "store": store, "bulk_bytes": bulk_bytes}


#: The keys of a configuration the native core accepts.
CONFIG_KEYS = ("threads", "unroll", "blocks_per_sm", "load", "store", "bulk_bytes")

# Configurations tried per pattern. blocks_per_sm=0 is a one-shot grid (one chunk of threads x
# unroll 16-byte vectors per block, blocks dispatched in address order); a positive value asks for
# a persistent grid of that many blocks per SM, capped by occupancy (64 = "as many as fit").
# Chosen on an H200 (2026-11-30) from a sweep of 3 block sizes x 4 unrolls x 2 grids x 6 load and
# 2 store flavours (~750 configurations, dev/bandwidth/main.cu) and a second look at unroll 1-2:
# - one-shot grids beat persistent grid-stride ones everywhere (writes by 6%): blocks taken in
#   address order keep the window of addresses in flight compact, persistent blocks drift apart;
# - reads are fastest with the most bytes per block (unroll 16: 4.70 TB/s), everything that
#   writes with the fewest: 256 threads x unroll 1 (4 KiB per block) took copy from 4.20 to
#   4.30 TB/s, past the driver's cudaMemcpyAsync (4.28), and 1024 x 1 took triad from 4.39 to 4.43;
#   the trend is not monotonic (1024 x 1 copies at 3.94), so the lists keep neighbours too;
# - plain, read-only (nc_na), streaming (cs) and L2-only (cg) loads tie within 0.5% for the
#   winners, but read-once loads with plain stores lose 5% in copy/triad (streaming stores restore
#   it); the L2::256B prefetch hint loses 5% (not compiled into the package).
# Each list keeps one persistent configuration so that another GPU still finds its best, and
# 128 x 1 for copy and write extrapolates the small-chunk trend (not yet measured). Copy also tries
# the driver's own cudaMemcpyAsync (what torch copy_ and CuPy copyto run), so its figure is never
# below the libraries'.
DEFAULT_CONFIGS: dict[str, list[dict[str, Any]]] = {
    "read": [
        _cfg(1024, 16, 0, "nc_na"), _cfg(512, 16, 0, "cs"), _cfg(256, 16, 0, "nc_na"), _cfg(1024, 8, 0, "plain"),
        _cfg(512, 8, 0, "cg"), _cfg(256, 8, 64, "nc_na"),
    ],
    "write": [
        _cfg(256, 1, 0, "plain", "plain"), _cfg(256, 1, 0, "plain", "cs"), _cfg(128, 1, 0, "plain", "plain"),
        _cfg(1024, 2, 0, "plain", "plain"), _cfg(1024, 2, 0, "plain", "cs"), _cfg(1024, 1, 0, "plain", "plain"),
        _cfg(512, 2, 0, "plain", "cs"), _cfg(256, 4, 64, "plain", "plain"),
    ],
    "copy": [
        _cfg(256, 1, 0, "nc_na", "cs"), _cfg(256, 1, 0, "cs", "cs"), _cfg(256, 1, 0, "plain", "plain"),
        _cfg(128, 1, 0, "cs", "cs"), _cfg(1024, 2, 0, "plain", "plain"), _cfg(1024, 8, 0, "cs", "cs"),
        _cfg(1024, 2, 0, "nc_na", "cs"), _cfg(256, 4, 64, "cs", "cs"), _cfg(256, 1, 0, "memcpy"),
    ],
    "triad": [
        _cfg(1024, 1, 0, "plain", "plain"), _cfg(1024, 1, 0, "cs", "cs"), _cfg(1024, 1, 0, "plain", "cs"),
        _cfg(256, 1, 0, "cs", "cs"), _cfg(512, 1, 0, "cs", "cs"), _cfg(1024, 2, 0, "plain", "plain"),
        _cfg(512, 2, 0, "cs", "cs"), _cfg(256, 4, 64, "cs", "cs"),
    ],
}

#: L2 sweep configurations: loads that skip L1 ("cg" caches in L2 only), otherwise repeated reads
#: of a small working set would be served by L1 and overstate L2. Persistent grids: each block
#: reads many chunks, so a launch is not a queue of tiny blocks.
DEFAULT_L2_CONFIGS: list[dict[str, Any]] = [
    _cfg(1024, 2, 64, "cg"), _cfg(256, 4, 64, "cg"), _cfg(512, 4, 64, "cg"), _cfg(256, 8, 64, "cg"),
    _cfg(256, 4, 0, "cg"), _cfg(1024, 2, 64, "nc_na"),
]


class MeasurementError(RooflineError):
    """A measurement produced a figure that cannot be true (above the theoretical bound): a bug."""

    exit_code = 1


@dataclass(frozen=True)
class PatternResult:
    """The reported figure of one pattern: the best median over the configurations tried."""

    pattern: str
    tbps_median: float
    tbps_best: float
    cv: float
    bytes_per_launch: int
    reps: int
    config: dict[str, Any]
    telemetry: dict[str, Any] | None
    buffer_bytes: int = 0
    median_ms: float = 0.0
    best_ms: float = 0.0
    verification: dict[str, Any] = field(default_factory=dict)
    #: Every configuration tried: its config and TB/s median/best/CV (or why it was skipped).
    sweep: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class L2Point:
    working_set_bytes: int
    tbps_median: float
    tbps_best: float
    cv: float
    passes: int
    bytes_per_launch: int
    reps: int
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class L2Result:
    """Read bandwidth over working sets from 1 MiB to 2x L2; ``plateau`` fits in half the L2."""

    l2_bytes: int
    points: list[L2Point]
    plateau: L2Point
    telemetry: dict[str, Any] | None

    @property
    def small_set_peak(self) -> L2Point:
        """The fastest point of all, small working sets included (reported, not the plateau)."""
        return max(self.points, key=lambda p: p.tbps_median)

    @property
    def plateau_tbps(self) -> float:
        return self.plateau.tbps_median

    def to_dict(self) -> dict[str, Any]:
        return {"l2_bytes": self.l2_bytes, "plateau_tbps": self.plateau_tbps, "plateau": self.plateau.to_dict(),
                "plateau_rule": "best median over working sets from L2/8 to L2/2",
                "small_set_peak": self.small_set_peak.to_dict(),
                "points": [p.to_dict() for p in self.points], "telemetry": self.telemetry}


@dataclass(frozen=True)
class BandwidthResult:
    device: int
    gpu_name: str
    uuid: str
    patterns: dict[str, PatternResult]
    l2: L2Result | None
    peak: PatternResult
    theoretical_tbps: float | None
    buffer_bytes: int
    l2_bytes: int | None
    date: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_runtime_version: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def peak_tbps(self) -> float:
        return self.peak.tbps_median

    def fraction_of_theoretical(self, pattern: str | None = None) -> float | None:
        """A pattern's median (the peak's by default) over the NVML-derived theoretical figure."""
        if not self.theoretical_tbps:
            return None
        r = self.peak if pattern is None else self.patterns[pattern]
        return r.tbps_median / self.theoretical_tbps

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "gpu_name": self.gpu_name,
            "uuid": self.uuid,
            "date": self.date,
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "cuda_runtime_version": self.cuda_runtime_version,
            "theoretical_tbps": self.theoretical_tbps,
            "buffer_bytes": self.buffer_bytes,
            "l2_bytes": self.l2_bytes,
            "peak": {"pattern": self.peak.pattern, "tbps_median": self.peak.tbps_median,
                     "tbps_best": self.peak.tbps_best, "cv": self.peak.cv,
                     "fraction_of_theoretical": self.fraction_of_theoretical()},
            "patterns": {k: v.to_dict() for k, v in self.patterns.items()},
            "l2": self.l2.to_dict() if self.l2 else None,
            "warnings": list(self.warnings),
        }


# --------------------------------------------------------------------------------------------------
# Policy helpers (pure functions: tested without a GPU)
# --------------------------------------------------------------------------------------------------

def tbps(bytes_per_launch: int, ms: float) -> float:
    """Bytes per launch over a launch time in milliseconds, in TB/s (10^12 bytes per second)."""
    return bytes_per_launch / (ms * 1e-3) / 1e12 if ms > 0 else math.inf


def default_buffer_bytes(l2_bytes: int | None, free_bytes: int | None, buffers: int = 3) -> int:
    """Bytes per buffer: max(8 x L2, 4 GiB), capped so `buffers` of them fit in free memory with a
    margin; a multiple of 1 MiB (so also of the 16-byte vectors the kernels move)."""
    want = max(8 * (l2_bytes or 0), DEFAULT_BUFFER_BYTES)
    if free_bytes:
        margin = max(_MEMORY_MARGIN_BYTES, int(free_bytes * _MEMORY_MARGIN_FRACTION))
        want = min(want, max(0, free_bytes - margin) // buffers)
    size = (want >> 20) << 20
    if size <= 0:
        raise UserError(f"too little free device memory ({free_bytes} bytes) for {buffers} bandwidth buffers")
    return size


def l2_working_sets(l2_bytes: int) -> list[int]:
    """Working sets for the L2 sweep: 1 MiB .. 2x L2 in steps, whole MiB each (so that every
    default configuration's chunk, at most 1 MiB, divides them)."""
    mib = 1 << 20
    fractions = (1 / 16, 1 / 8, 3 / 16, 1 / 4, 5 / 16, 3 / 8, 7 / 16, 1 / 2, 5 / 8, 3 / 4, 7 / 8, 1.0, 1.25, 1.5, 2.0)
    sizes = {mib, 2 * mib, 4 * mib}
    sizes.update(max(mib, int(l2_bytes * f) // mib * mib) for f in fractions)
    return sorted(s for s in sizes if s <= 2 * l2_bytes)


def _summarize_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out = {"config": dict(row["config"])}
    if row.get("skipped"):
        out["skipped"] = row["skipped"]
        return out
    out.update(tbps_median=tbps(row["bytes_per_launch"], row["median_ms"]),
               tbps_best=tbps(row["bytes_per_launch"], row["best_ms"]), cv=row["cv"])
    return out


def best_of_medians(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The row with the shortest median time among rows that ran."""
    ran = [r for r in rows if not r.get("skipped")]
    if not ran:
        reasons = "; ".join(f"{r['config']}: {r['skipped']}" for r in rows)
        raise MeasurementError(f"no bandwidth configuration could run on this device ({reasons})")
    return min(ran, key=lambda r: r["median_ms"])


def check_plausible(label: str, rows: Iterable[Mapping[str, Any]], theoretical_tbps: float | None) -> None:
    """Raise MeasurementError when any repetition of any configuration beats the theoretical bound."""
    if not theoretical_tbps:
        return
    for r in rows:
        if r.get("skipped"):
            continue
        fastest = tbps(r["bytes_per_launch"], r["best_ms"])
        if fastest > theoretical_tbps:
            raise MeasurementError(
                f"{label}: {fastest:.3f} TB/s with {r['config']} exceeds the theoretical "
                f"{theoretical_tbps:.3f} TB/s (2 x memory clock x bus width / 8): the timing or the byte "
                f"count is wrong, so no figure is reported")


def pattern_result(pattern: str, rows: Sequence[Mapping[str, Any]], telemetry: dict[str, Any] | None) -> PatternResult:
    best = best_of_medians(rows)
    return PatternResult(
        pattern=pattern,
        tbps_median=tbps(best["bytes_per_launch"], best["median_ms"]),
        tbps_best=tbps(best["bytes_per_launch"], best["best_ms"]),
        cv=float(best["cv"]),
        bytes_per_launch=int(best["bytes_per_launch"]),
        reps=int(best["reps"]),
        config=dict(best["config"]),
        telemetry=telemetry,
        buffer_bytes=int(best["buffer_bytes"]),
        median_ms=float(best["median_ms"]),
        best_ms=float(best["best_ms"]),
        verification=dict(best["verification"]),
        sweep=[_summarize_row(r) for r in rows],
    )


def l2_plateau(points: Sequence[L2Point], l2_bytes: int) -> L2Point:
    """The best median among working sets from 1/8 to 1/2 of the L2.

    Above half the L2 part of the set spills to HBM. Below an eighth the figure rises well above
    the plateau (an H200 read 13-18 TB/s at 1-2 MiB against ~9 TB/s from 8 to 32 MiB): such small
    sets are served partly from copies held near the SMs (Hopper's L2 is two partitions), a rate no
    kernel with a real working set sees, so they are reported as points but do not set the plateau.
    """
    inside = [p for p in points if l2_bytes // 8 <= p.working_set_bytes <= l2_bytes // 2]
    return max(inside or list(points), key=lambda p: p.tbps_median)


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------

def _chunk_bytes(cfg: Mapping[str, Any]) -> int:
    return int(cfg["threads"]) * int(cfg["unroll"]) * 16


def _telemetry_block(device: int):
    from ..device.telemetry import sampling

    return sampling(device)


def measure_pattern(device: int, pattern: str, buffer_bytes: int, *, configs: Sequence[Mapping[str, Any]] | None = None,
                    reps: int = DEFAULT_REPS, warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED,
                    theoretical_tbps: float | None = None) -> PatternResult:
    """One pattern over buffers of `buffer_bytes`, every configuration on one allocation, NVML sampled
    meanwhile. Raises VerificationError (from the core) on wrong output and MeasurementError on a
    figure above `theoretical_tbps`."""
    from ..device.status import core

    if pattern not in PATTERNS:
        raise UserError(f"unknown bandwidth pattern {pattern!r}; choose from {', '.join(PATTERNS)}")
    _core = core()
    # A result's reported config carries derived facts (grid, occupancy); keep what can be set, so
    # a winning configuration can be handed straight back (the calibration's sustained phase does).
    cfgs = [{k: v for k, v in dict(c).items() if k in CONFIG_KEYS} for c in (configs or DEFAULT_CONFIGS[pattern])]
    with _telemetry_block(device) as tel:
        rows = _core.bandwidth_run(device, pattern, int(buffer_bytes), int(reps), int(warmup), cfgs, int(seed))
    check_plausible(pattern, rows, theoretical_tbps)
    return pattern_result(pattern, rows, tel.summary())


def measure_l2(device: int, l2_bytes: int, *, sizes: Sequence[int] | None = None,
               configs: Sequence[Mapping[str, Any]] | None = None, reps: int = DEFAULT_REPS,
               warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED,
               progress: Callable[[int, int], None] | None = None) -> L2Result:
    """Read bandwidth per working-set size (best median over `configs` at each size)."""
    from ..device.status import core

    _core = core()
    cfgs = [{k: v for k, v in dict(c).items() if k in CONFIG_KEYS} for c in (configs or DEFAULT_L2_CONFIGS)]
    sizes = list(sizes or l2_working_sets(l2_bytes))
    points: list[L2Point] = []
    with _telemetry_block(device) as tel:
        for i, ws in enumerate(sizes):
            usable = [c for c in cfgs if ws % _chunk_bytes(c) == 0]
            if not usable:
                continue
            rows = _core.bandwidth_l2_read(device, int(ws), L2_BYTES_PER_LAUNCH, int(reps), int(warmup), usable, int(seed))
            best = best_of_medians(rows)
            points.append(L2Point(
                working_set_bytes=int(ws),
                tbps_median=tbps(best["bytes_per_launch"], best["median_ms"]),
                tbps_best=tbps(best["bytes_per_launch"], best["best_ms"]),
                cv=float(best["cv"]), passes=int(best["passes"]), bytes_per_launch=int(best["bytes_per_launch"]),
                reps=int(best["reps"]), config=dict(best["config"])))
            if progress:
                progress(i + 1, len(sizes))
    if not points:
        raise MeasurementError("no L2 working set could be measured with the given configurations")
    return L2Result(l2_bytes=int(l2_bytes), points=points, plateau=l2_plateau(points, l2_bytes),
                    telemetry=tel.summary())


def measure_bandwidth(device: int = 0, *, patterns: Sequence[str] = PATTERNS, size_bytes: int | None = None,
                      reps: int = DEFAULT_REPS, warmup: int = DEFAULT_WARMUP, l2: bool = True,
                      configs: Mapping[str, Sequence[Mapping[str, Any]]] | None = None, seed: int = DEFAULT_SEED,
                      progress: Callable[[float, float, str], None] | None = None) -> BandwidthResult:
    """Measure achievable HBM bandwidth per pattern (and the L2 plateau) on CUDA device `device`.

    Each pattern's figure is the best median over its configurations, counted as read N, write N,
    copy 2N, triad 3N bytes per launch, every configuration's output verified. `size_bytes` is the
    size of each buffer (default: max(8 x L2, 4 GiB), capped by free memory). `progress`, if given,
    is called as progress(done, total, description).

    Raises GpuUnavailableError (with the availability reason) when no GPU can be measured,
    VerificationError when a kernel's output is wrong, MeasurementError when a figure exceeds the
    NVML-derived theoretical bandwidth.
    """
    from ..device.status import require_measurement

    require_measurement(device)
    patterns = tuple(patterns)
    unknown = [p for p in patterns if p not in PATTERNS]
    if unknown or not patterns:
        raise UserError(f"unknown bandwidth pattern(s) {unknown}; choose from {', '.join(PATTERNS)}")
    if reps < 1 or warmup < 0:
        raise UserError("reps must be >= 1 and warmup >= 0")

    from ..device.listing import device as get_device

    dev = get_device(device)
    theoretical = dev.theoretical_bandwidth_tbps
    free = _free_bytes(device) or dev.memory_free_bytes
    nbuf = max(BUFFERS[p] for p in patterns)
    if size_bytes is None:
        size_bytes = default_buffer_bytes(dev.l2_bytes, free, nbuf)
    size_bytes = int(size_bytes) // 16 * 16
    if size_bytes <= 0:
        raise UserError("size_bytes must be at least 16")
    warnings: list[str] = []
    if dev.l2_bytes and size_bytes < 8 * dev.l2_bytes:
        warnings.append(f"buffers of {size_bytes} bytes are under 8x the L2 ({dev.l2_bytes} bytes): "
                        "part of the traffic may be served by L2")
    if theoretical is None:
        warnings.append("NVML gave no memory clock or bus width: no theoretical figure to check against")

    steps = len(patterns) + (1 if l2 else 0)
    done = 0

    def report(what: str) -> None:
        if progress is not None:
            progress(done, steps, what)

    results: dict[str, PatternResult] = {}
    for p in patterns:
        report(f"bandwidth: {p}")
        results[p] = measure_pattern(device, p, size_bytes, configs=(configs or {}).get(p), reps=reps,
                                     warmup=warmup, seed=seed, theoretical_tbps=theoretical)
        done += 1
    l2_result = None
    if l2:
        report("bandwidth: L2 sweep")
        if not dev.l2_bytes:
            warnings.append("the device reports no L2 size: L2 sweep skipped")
        else:
            l2_result = measure_l2(device, dev.l2_bytes, reps=reps, warmup=warmup, seed=seed)
        done += 1
    report("bandwidth: done")

    peak = max(results.values(), key=lambda r: r.tbps_median)
    for r in results.values():
        tel = r.telemetry or {}
        if tel.get("slowdown"):
            warnings.append(f"{r.pattern}: clock slowdown reasons during the run: {', '.join(tel['slowdown'])}")
    from ..device.status import core

    return BandwidthResult(
        device=device,
        gpu_name=dev.name,
        uuid=dev.uuid,
        patterns=results,
        l2=l2_result,
        peak=peak,
        theoretical_tbps=theoretical,
        buffer_bytes=size_bytes,
        l2_bytes=dev.l2_bytes,
        date=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        driver_version=dev.driver_version,
        cuda_driver_version=dev.cuda_driver_version,
        cuda_runtime_version=core().build_info().get("cuda_runtime_version"),
        warnings=warnings,
    )


def _free_bytes(device: int) -> int | None:
    """Free device memory now, as CUDA sees it, with this process's context in place: buffers are
    sized against what can really be allocated (listing devices reads NVML's figure instead, which
    creates no context but does not yet count the one measuring creates)."""
    from ..device.status import core

    try:
        return int(core().cuda_memory_info(device)["memory_free_bytes"])
    except Exception:  # sizing falls back to the device record's figure
        return None
