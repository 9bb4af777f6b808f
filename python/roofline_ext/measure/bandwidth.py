"""Achievable memory bandwidth, HBM and L2, measured with the native core's verified kernels.

The core (``csrc/bandwidth.cpp`` and the ``csrc/bandwidth_*.cu`` kernels) times and verifies; this module holds the policy:

- which buffer size: at least 8x the L2 (4 GiB per buffer by default, the size the reference peers
  were measured at), capped by free memory so that a triad's three buffers fit on small GPUs;
- which configurations to try per pattern, and that the reported figure is the best of the
  configurations' medians (docs/measuring.md: "the calibrated peak is the best of medians across
  configurations"), with that configuration's best and CV beside it;
- bytes counted per pattern (read N, write N, copy 2N, triad 3N; the core reports them);
- ``peak``: the highest pattern; the L2 plateau: the best median over working sets that fit in
  half the L2; the L2 curve's near- and far-partition plateaus (:func:`l2_plateaus`);
- the read:write mix (:func:`measure_mix`): read-only, 4:1, 2:1, 1:1, 1:2 and write-only, each
  point the best verified kernel of exactly that ratio (the mix kernel, and read / write / copy /
  triad where their ratio matches), the envelope that ``peaks.mix.mix_bandwidth`` interpolates;
- a figure above the NVML-derived theoretical bandwidth (2 x memory clock x bus width / 8) is a bug
  in the measurement, so it raises instead of being reported;
- every configuration's timed repetitions are checked for throttling (``throttle.py``): how many
  were flagged is in each result, and ``discard_throttled`` leaves them out of the figure.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..device import listing, status, telemetry as device_telemetry
from ..errors import RooflineError, UserError
from ..timestamps import utc_now
from .throttle import assess_row, median_ms

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

#: L2 sweep configurations. Every L2 variant of the core loads with ld.global.cg, which never caches
#: in L1 (the nc + L1::no_allocate load is only a hint, and L1 hits would overstate L2 at the small
#: working sets); "load" picks the access order (bandwidth.hpp): "cg" grid-stride, "cg_spread" one
#: contiguous stretch per block, "cg_pipe" grid-stride with the next chunk's loads in flight while
#: the current one is folded. blocks_per_sm 64 is capped at occupancy: a persistent grid of a whole
#: number of waves (a multiple of the SMs); 0 is one block per chunk.
# Chosen from scripts/native-check's sweep of 28 variants over 25 working sets on an H200
# (2026-12-01, benchmarks/results/l2-variants-h200-2026-12-01.json): the variants that won at least
# one working set, and no other. cg_spread/256x4 won the far plateau (9.58 TB/s at 22 MiB, where the
# previous set read 9.13); cg_spread/512x8 the near one (18.3 TB/s at 1 MiB, L1 bypassed).
DEFAULT_L2_CONFIGS: list[dict[str, Any]] = [
    _cfg(256, 4, 64, "cg_spread"), _cfg(256, 8, 64, "cg_spread"), _cfg(512, 8, 64, "cg_spread"),
    _cfg(1024, 4, 64, "cg_spread"), _cfg(256, 16, 64, "cg_spread"), _cfg(1024, 2, 64, "cg"),
    _cfg(256, 16, 0, "cg"), _cfg(1024, 2, 64, "cg_pipe"), _cfg(1024, 4, 64, "cg_pipe"),
]

#: The read:write byte ratios of the mix sweep, read-only first. Read-only and write-only are the
#: read and write patterns (their own kernels, tuned for one direction); the others run the mix
#: kernel, which reads R parts and writes W parts per chunk, both streams in flight together.
MIX_RATIOS: tuple[tuple[int, int], ...] = ((1, 0), (4, 1), (2, 1), (1, 1), (1, 2), (0, 1))
#: The patterns whose byte ratio is one of MIX_RATIOS: their figure also counts for that point.
PATTERN_RATIOS = {"read": (1, 0), "write": (0, 1), "copy": (1, 1), "triad": (2, 1)}
# Mix kernel configurations: the copy sweep's winners (256 threads, one vector per part and block,
# streaming stores) and their neighbours, one persistent grid; an unmeasured first guess.
DEFAULT_MIX_CONFIGS: list[dict[str, Any]] = [
    _cfg(256, 1, 0, "nc_na", "cs"), _cfg(256, 1, 0, "cs", "cs"), _cfg(256, 1, 0, "plain", "plain"),
    _cfg(128, 1, 0, "cs", "cs"), _cfg(1024, 1, 0, "plain", "plain"), _cfg(256, 2, 0, "cs", "cs"),
    _cfg(512, 2, 0, "nc_na", "cs"), _cfg(256, 4, 64, "cs", "cs"),
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
    #: Throttled repetitions of the reported configuration (throttle.ThrottleReport.to_dict()).
    throttle: dict[str, Any] | None = None
    read_bytes_per_launch: int = 0
    write_bytes_per_launch: int = 0

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
    throttle: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class L2Plateau:
    """One flat stretch of the L2 curve: the best median among the points in a working-set window."""

    name: str                 # "near" | "far"
    lo_bytes: int
    hi_bytes: int
    tbps: float               # best median in the window
    min_tbps: float           # the slowest point in it: how flat the stretch is
    working_set_bytes: int    # the point that set ``tbps``
    points: int
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class L2Result:
    """Read bandwidth over working sets from 1 MiB to 2x L2; ``plateau`` fits in half the L2, and
    ``near`` / ``far`` are the curve's near- and far-partition plateaus (:func:`l2_plateaus`)."""

    l2_bytes: int
    points: list[L2Point]
    plateau: L2Point
    telemetry: dict[str, Any] | None
    near: L2Plateau | None = None
    far: L2Plateau | None = None

    @property
    def small_set_peak(self) -> L2Point:
        """The fastest point of all, small working sets included (reported, not the plateau)."""
        return max(self.points, key=lambda p: p.tbps_median)

    @property
    def plateau_tbps(self) -> float:
        return self.plateau.tbps_median

    def curve(self) -> dict[str, float]:
        """{working set in MiB: TB/s median}, in working-set order."""
        return {f"{p.working_set_bytes / 2**20:g}": p.tbps_median for p in self.points}

    def to_dict(self) -> dict[str, Any]:
        return {"l2_bytes": self.l2_bytes, "plateau_tbps": self.plateau_tbps, "plateau": self.plateau.to_dict(),
                "plateau_rule": "best median over working sets from L2/8 to L2/2",
                "small_set_peak": self.small_set_peak.to_dict(),
                "near": self.near.to_dict() if self.near else None,
                "far": self.far.to_dict() if self.far else None,
                "curve_mib_tbps": self.curve(),
                "points": [p.to_dict() for p in self.points], "telemetry": self.telemetry}


@dataclass(frozen=True)
class MixPoint:
    """One read:write ratio of the mix sweep: the best verified kernel of exactly that ratio."""

    read_parts: int
    write_parts: int
    tbps_median: float
    tbps_best: float
    cv: float
    source: str               # "mix" (the mix kernel) or the pattern that set it ("read", "copy", ...)
    config: dict[str, Any]
    bytes_per_launch: int
    read_bytes_per_launch: int
    write_bytes_per_launch: int
    reps: int
    verification: dict[str, Any] = field(default_factory=dict)
    throttle: dict[str, Any] | None = None
    #: Every candidate for this ratio: the mix kernel's configurations and the matching patterns.
    candidates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.read_parts}:{self.write_parts}"

    @property
    def read_fraction(self) -> float:
        return self.read_parts / (self.read_parts + self.write_parts)

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), ratio=self.label, read_fraction=self.read_fraction)


@dataclass(frozen=True)
class MixResult:
    """The read:write envelope, read-only first: ``envelope()`` is what the calibration caches."""

    points: list[MixPoint]
    buffer_bytes: int
    telemetry: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)

    def envelope(self) -> dict[str, float]:
        """{"R:W": TB/s}, the mapping ``peaks.mix.mix_bandwidth`` reads."""
        return {p.label: p.tbps_median for p in self.points}

    def to_dict(self) -> dict[str, Any]:
        return {"buffer_bytes": self.buffer_bytes, "envelope": self.envelope(),
                "points": [p.to_dict() for p in self.points], "telemetry": self.telemetry,
                "warnings": list(self.warnings)}


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
    mix: MixResult | None = None

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
            "mix": self.mix.to_dict() if self.mix else None,
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
    # Dense below a quarter of the L2 (the near-partition plateau and its edge), sixteenths of the
    # L2 up to all of it (the far plateau and the spill), then quarters up to twice the L2.
    fractions = [k / 16 for k in range(1, 17)] + [1.25, 1.5, 1.75, 2.0]
    sizes = {mib, 2 * mib, 3 * mib, 4 * mib, 6 * mib, 8 * mib}
    sizes.update(max(mib, int(l2_bytes * f) // mib * mib) for f in fractions)
    return sorted(s for s in sizes if s <= 2 * l2_bytes)


def _summarize_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"config": dict(row["config"])}
    if row.get("skipped"):
        out["skipped"] = row["skipped"]
        return out
    out.update(tbps_median=tbps(row["bytes_per_launch"], row["median_ms"]),
               tbps_best=tbps(row["bytes_per_launch"], row["best_ms"]), cv=row["cv"])
    if row.get("throttle"):
        out["flagged"] = row["throttle"]["flagged"]
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
        throttle=best.get("throttle"),
        read_bytes_per_launch=int(best.get("read_bytes_per_launch", 0)),
        write_bytes_per_launch=int(best.get("write_bytes_per_launch", 0)),
    )


def l2_plateau(points: Sequence[L2Point], l2_bytes: int) -> L2Point:
    """The best median among working sets from 1/8 to 1/2 of the L2.

    Above half the L2 part of the set spills to HBM. Below an eighth the figure rises well above
    the plateau (an H200 read 13-18 TB/s at 1-2 MiB against ~9.4 TB/s from 15 to 30 MiB): a set
    with fewer chunks than the grid has blocks makes blocks read the same chunks at once, and
    such requests are merged before L2 (docs/measuring.md, section 3). That is a rate no kernel
    with a real working set sees, so these sets are reported as points but do not set the plateau.
    """
    inside = [p for p in points if l2_bytes // 8 <= p.working_set_bytes <= l2_bytes // 2]
    return max(inside or list(points), key=lambda p: p.tbps_median)


#: The two plateaus of the L2 curve, as fractions of the L2 size. Hopper's L2 is two partitions,
#: each serving half of the addresses; a small working set is also kept in the partition near each
#: SM, a large one is read half from the far partition across the crossbar. The windows follow the
#: published H200 read curve (te42kyfo/gpu-benches; the H200 reports 60 MiB of L2): about 13 TB/s at up
#: to 2-4 MB, 9.8 TB/s from 17 to 28 MB.
L2_PLATEAU_WINDOWS = {"near": (0.0, 1 / 12), "far": (1 / 3, 0.56)}


def l2_plateaus(points: Sequence[L2Point], l2_bytes: int) -> dict[str, L2Plateau | None]:
    """The near- and far-partition plateaus: the best median in each window (None: no point in it)."""
    out: dict[str, L2Plateau | None] = {}
    for name, (lo_f, hi_f) in L2_PLATEAU_WINDOWS.items():
        lo, hi = int(lo_f * l2_bytes), int(hi_f * l2_bytes)
        inside = [p for p in points if lo <= p.working_set_bytes <= hi]
        if not inside:
            out[name] = None
            continue
        best = max(inside, key=lambda p: p.tbps_median)
        out[name] = L2Plateau(name=name, lo_bytes=lo, hi_bytes=hi, tbps=best.tbps_median,
                              min_tbps=min(p.tbps_median for p in inside), working_set_bytes=best.working_set_bytes,
                              points=len(inside), rule=f"best median over working sets from {lo_f:.3g} to "
                                                       f"{hi_f:.3g} of the L2")
    return out


def mix_point(read_parts: int, write_parts: int, candidates: Sequence[Mapping[str, Any]]) -> MixPoint:
    """The point of one ratio from its candidates: rows of the core (mix kernel configurations) and
    pattern figures (``{"source": pattern, "result": PatternResult}``); the best median wins."""
    options: list[dict[str, Any]] = []
    for c in candidates:
        if "result" in c:
            r = c["result"]
            options.append({"source": c["source"], "tbps_median": r.tbps_median, "tbps_best": r.tbps_best,
                            "cv": r.cv, "config": dict(r.config), "bytes_per_launch": r.bytes_per_launch,
                            "read_bytes_per_launch": r.read_bytes_per_launch,
                            "write_bytes_per_launch": r.write_bytes_per_launch, "reps": r.reps,
                            "verification": dict(r.verification), "throttle": r.throttle})
        elif not c.get("skipped"):
            options.append({"source": "mix", "tbps_median": tbps(c["bytes_per_launch"], c["median_ms"]),
                            "tbps_best": tbps(c["bytes_per_launch"], c["best_ms"]), "cv": float(c["cv"]),
                            "config": dict(c["config"]), "bytes_per_launch": int(c["bytes_per_launch"]),
                            "read_bytes_per_launch": int(c["read_bytes_per_launch"]),
                            "write_bytes_per_launch": int(c["write_bytes_per_launch"]), "reps": int(c["reps"]),
                            "verification": dict(c["verification"]), "throttle": c.get("throttle")})
    if not options:
        raise MeasurementError(f"no configuration could run the {read_parts}:{write_parts} read:write mix")
    best = max(options, key=lambda o: o["tbps_median"])
    summary = [{k: o[k] for k in ("source", "config", "tbps_median", "tbps_best", "cv")} for o in options]
    return MixPoint(read_parts=read_parts, write_parts=write_parts, candidates=summary, **best)


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------

def _chunk_bytes(cfg: Mapping[str, Any]) -> int:
    return int(cfg["threads"]) * int(cfg["unroll"]) * 16


def telemetry_block(device: int):
    return device_telemetry.sampling(device)


def timeline_start(core: Any) -> float | None:
    """The steady-clock time now, read right after the sampler started: the origin of its samples'
    ``t_s`` on the clock the core stamps timed loops with (None for a core without the clock)."""
    clock = getattr(core, "steady_clock_s", None)
    return float(clock()) if callable(clock) else None


def assess_rows(rows: Sequence[Mapping[str, Any]], tel: Any, t0: float | None, core: Any, *,
                discard: bool = False) -> list[dict[str, Any]]:
    """Each row with its throttle report (``row["throttle"]``); with ``discard``, a row whose flagged
    repetitions were left out carries the median and best of the rest."""
    samples = list(getattr(tel, "samples", None) or [])
    names_of = getattr(core, "reason_names", None)
    out = []
    for row in rows:
        row = dict(row)
        if not row.get("skipped"):
            rep, kept = assess_row(row, samples, t0, names_of=names_of, discard=discard)
            row["throttle"] = rep.to_dict()
            if rep.discarded:
                row.update(median_ms=median_ms(kept), best_ms=min(kept))
        out.append(row)
    return out


def _settable(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # A result's reported config carries derived facts (grid, occupancy); keep what can be set, so
    # a winning configuration can be handed straight back (the calibration's sustained phase does).
    return [{k: v for k, v in dict(c).items() if k in CONFIG_KEYS} for c in configs]


def measure_pattern(device: int, pattern: str, buffer_bytes: int, *, configs: Sequence[Mapping[str, Any]] | None = None,
                    reps: int = DEFAULT_REPS, warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED,
                    theoretical_tbps: float | None = None, discard_throttled: bool = False) -> PatternResult:
    """One pattern over buffers of `buffer_bytes`, every configuration on one allocation, NVML sampled
    meanwhile. Raises VerificationError (from the core) on wrong output and MeasurementError on a
    figure above `theoretical_tbps`. Throttled repetitions are counted (``throttle``) and, with
    `discard_throttled`, left out of the figure."""
    if pattern not in PATTERNS:
        raise UserError(f"unknown bandwidth pattern {pattern!r}; choose from {', '.join(PATTERNS)}")
    _core = status.core()
    cfgs = _settable(configs or DEFAULT_CONFIGS[pattern])
    with telemetry_block(device) as tel:
        t0 = timeline_start(_core)
        rows = _core.bandwidth_run(device, pattern, int(buffer_bytes), int(reps), int(warmup), cfgs, int(seed))
    check_plausible(pattern, rows, theoretical_tbps)
    return pattern_result(pattern, assess_rows(rows, tel, t0, _core, discard=discard_throttled), tel.summary())


def _l2_point(ws: int, rows: Sequence[Mapping[str, Any]]) -> L2Point:
    best = best_of_medians(rows)
    return L2Point(working_set_bytes=int(ws), tbps_median=tbps(best["bytes_per_launch"], best["median_ms"]),
                   tbps_best=tbps(best["bytes_per_launch"], best["best_ms"]), cv=float(best["cv"]),
                   passes=int(best["passes"]), bytes_per_launch=int(best["bytes_per_launch"]),
                   reps=int(best["reps"]), config=dict(best["config"]), throttle=best.get("throttle"))


def measure_l2(device: int, l2_bytes: int, *, sizes: Sequence[int] | None = None,
               configs: Sequence[Mapping[str, Any]] | None = None, reps: int = DEFAULT_REPS,
               warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED,
               progress: Callable[[int, int], None] | None = None, discard_throttled: bool = False) -> L2Result:
    """Read bandwidth per working-set size (best median over `configs` at each size): the L2 curve
    from 1 MiB to 2x L2, its near- and far-partition plateaus, and the L2/8..L2/2 plateau."""
    _core = status.core()
    cfgs = _settable(configs or DEFAULT_L2_CONFIGS)
    sizes = list(sizes or l2_working_sets(l2_bytes))
    points: list[L2Point] = []
    with telemetry_block(device) as tel:
        t0 = timeline_start(_core)
        raw = []
        for i, ws in enumerate(sizes):
            usable = [c for c in cfgs if ws % _chunk_bytes(c) == 0]
            if usable:
                raw.append((ws, _core.bandwidth_l2_read(device, int(ws), L2_BYTES_PER_LAUNCH, int(reps), int(warmup),
                                                        usable, int(seed))))
            if progress:
                progress(i + 1, len(sizes))
    # Assessed after the sampler stopped: only then are all its samples there.
    points = [_l2_point(ws, assess_rows(rows, tel, t0, _core, discard=discard_throttled)) for ws, rows in raw]
    if not points:
        raise MeasurementError("no L2 working set could be measured with the given configurations")
    plateaus = l2_plateaus(points, l2_bytes)
    return L2Result(l2_bytes=int(l2_bytes), points=points, plateau=l2_plateau(points, l2_bytes),
                    telemetry=tel.summary(), near=plateaus["near"], far=plateaus["far"])


def _mix_candidates(device: int, ratio: tuple[int, int], buffer_bytes: int, known: Mapping[str, PatternResult],
                    cfgs: list[dict[str, Any]], reps: int, warmup: int, seed: int,
                    theoretical_tbps: float | None, discard: bool) -> list[Mapping[str, Any]]:
    """What can stand for one ratio: the patterns of that ratio already measured, a fresh read or write
    pattern at the endpoints, and the mix kernel's configurations in between."""
    found: list[Mapping[str, Any]] = [{"source": name, "result": r} for name, r in known.items()
                                      if PATTERN_RATIOS.get(name) == ratio]
    r_parts, w_parts = ratio
    if w_parts == 0 or r_parts == 0:
        name = "read" if w_parts == 0 else "write"
        if not any(c["source"] == name for c in found):
            found.append({"source": name, "result": measure_pattern(
                device, name, buffer_bytes, reps=reps, warmup=warmup, seed=seed,
                theoretical_tbps=theoretical_tbps, discard_throttled=discard)})
        return found
    _core = status.core()
    with telemetry_block(device) as tel:
        t0 = timeline_start(_core)
        rows = _core.bandwidth_mix(device, r_parts, w_parts, int(buffer_bytes), int(reps), int(warmup), cfgs, int(seed))
    check_plausible(f"mix {r_parts}:{w_parts}", rows, theoretical_tbps)
    return found + assess_rows(rows, tel, t0, _core, discard=discard)


def measure_mix(device: int, buffer_bytes: int, *, ratios: Sequence[tuple[int, int]] = MIX_RATIOS,
                configs: Sequence[Mapping[str, Any]] | None = None, reps: int = DEFAULT_REPS,
                warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED, theoretical_tbps: float | None = None,
                known: Mapping[str, PatternResult] | None = None, discard_throttled: bool = False,
                progress: Callable[[int, int], None] | None = None) -> MixResult:
    """The read:write envelope over buffers of about `buffer_bytes` (the larger of source and
    destination): per ratio, the best median of every verified kernel of exactly that ratio.

    `known` holds pattern results already measured in the same run (``measure_bandwidth`` passes its
    own): read / write stand for the endpoints instead of being measured again, and copy (1:1) and
    triad (2:1) compete with the mix kernel at their ratios. Raises VerificationError on wrong
    output and MeasurementError on a figure above `theoretical_tbps`."""
    bad = [r for r in ratios if len(r) != 2 or min(r) < 0 or max(r) == 0]
    if bad or not ratios:
        raise UserError(f"read:write ratios must be pairs of non-negative parts, not both zero; got {bad or ratios}")
    cfgs = _settable(configs or DEFAULT_MIX_CONFIGS)
    points: list[MixPoint] = []
    for i, ratio in enumerate(ratios):
        cands = _mix_candidates(device, (int(ratio[0]), int(ratio[1])), int(buffer_bytes), known or {}, cfgs, reps, warmup, seed,
                                theoretical_tbps, discard_throttled)
        points.append(mix_point(ratio[0], ratio[1], cands))
        if progress:
            progress(i + 1, len(ratios))
    points.sort(key=lambda p: -p.read_fraction)
    warnings = [f"mix {p.label}: {p.throttle['flagged']} of {p.throttle['reps']} repetitions ran throttled"
                for p in points if p.throttle and p.throttle.get("flagged")]
    return MixResult(points=points, buffer_bytes=int(buffer_bytes), telemetry=None, warnings=warnings)


def measure_bandwidth(device: int = 0, *, patterns: Sequence[str] = PATTERNS, size_bytes: int | None = None,
                      reps: int = DEFAULT_REPS, warmup: int = DEFAULT_WARMUP, l2: bool = True,
                      configs: Mapping[str, Sequence[Mapping[str, Any]]] | None = None, seed: int = DEFAULT_SEED,
                      progress: Callable[[float, float, str], None] | None = None, mix: bool = False,
                      discard_throttled: bool = False) -> BandwidthResult:
    """Measure achievable HBM bandwidth per pattern (and the L2 curve) on CUDA device `device`.

    Each pattern's figure is the best median over its configurations, counted as read N, write N,
    copy 2N, triad 3N bytes per launch, every configuration's output verified. `size_bytes` is the
    size of each buffer (default: max(8 x L2, 4 GiB), capped by free memory). `mix` adds the
    read:write envelope (:func:`measure_mix`, reusing the patterns just measured; ``configs["mix"]``
    overrides its configurations). `progress`, if given, is called as progress(done, total,
    description).

    Raises GpuUnavailableError (with the availability reason) when no GPU can be measured,
    VerificationError when a kernel's output is wrong, MeasurementError when a figure exceeds the
    NVML-derived theoretical bandwidth.
    """
    status.require_measurement(device)
    patterns = _checked_patterns(patterns, reps, warmup)
    dev = listing.device(device)
    theoretical = dev.theoretical_bandwidth_tbps
    size_bytes, warnings = _buffer_size(dev, device, patterns, size_bytes)

    steps = len(patterns) + (1 if l2 else 0) + (1 if mix else 0)
    done = 0

    def report(what: str) -> None:
        if progress is not None:
            progress(done, steps, what)

    results: dict[str, PatternResult] = {}
    for p in patterns:
        report(f"bandwidth: {p}")
        results[p] = measure_pattern(device, p, size_bytes, configs=(configs or {}).get(p), reps=reps,
                                     warmup=warmup, seed=seed, theoretical_tbps=theoretical,
                                     discard_throttled=discard_throttled)
        done += 1
    l2_result = None
    if l2:
        report("bandwidth: L2 curve")
        if not dev.l2_bytes:
            warnings.append("the device reports no L2 size: L2 sweep skipped")
        else:
            l2_result = measure_l2(device, dev.l2_bytes, reps=reps, warmup=warmup, seed=seed,
                                   discard_throttled=discard_throttled)
        done += 1
    mix_result = None
    if mix:
        report("bandwidth: read:write mix")
        mix_result = measure_mix(device, size_bytes, configs=(configs or {}).get("mix"), reps=reps, warmup=warmup,
                                 seed=seed, theoretical_tbps=theoretical, known=results,
                                 discard_throttled=discard_throttled)
        warnings += mix_result.warnings
        done += 1
    report("bandwidth: done")

    peak = max(results.values(), key=lambda r: r.tbps_median)
    warnings += _throttle_warnings(results.values())

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
        date=utc_now(),
        driver_version=dev.driver_version,
        cuda_driver_version=dev.cuda_driver_version,
        cuda_runtime_version=status.core().build_info().get("cuda_runtime_version"),
        warnings=warnings,
        mix=mix_result,
    )


def _checked_patterns(patterns: Sequence[str], reps: int, warmup: int) -> tuple[str, ...]:
    """The patterns asked for, each one known; bad arguments are one-line UserErrors."""
    patterns = tuple(patterns)
    unknown = [p for p in patterns if p not in PATTERNS]
    if unknown or not patterns:
        raise UserError(f"unknown bandwidth pattern(s) {unknown}; choose from {', '.join(PATTERNS)}")
    if reps < 1 or warmup < 0:
        raise UserError("reps must be >= 1 and warmup >= 0")
    return patterns


def _buffer_size(dev: Any, device: int, patterns: Sequence[str], size_bytes: int | None) -> tuple[int, list[str]]:
    """Each buffer's size (the default far larger than L2, within free memory; a multiple of 16)
    and the warnings it and the device's record call for."""
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
    if dev.theoretical_bandwidth_tbps is None:
        warnings.append("NVML gave no memory clock or bus width: no theoretical figure to check against")
    return size_bytes, warnings


def _throttle_warnings(results: Iterable[PatternResult]) -> list[str]:
    """What the clocks did during each pattern: slowdown reasons seen, repetitions that ran throttled."""
    warnings = []
    for r in results:
        tel = r.telemetry or {}
        if tel.get("slowdown"):
            warnings.append(f"{r.pattern}: clock slowdown reasons during the run: {', '.join(tel['slowdown'])}")
        if r.throttle and r.throttle.get("flagged"):
            warnings.append(f"{r.pattern}: {r.throttle['flagged']} of {r.throttle['reps']} timed repetitions "
                            f"ran throttled ({', '.join(sorted(r.throttle['by_reason']))})")
    return warnings


def _free_bytes(device: int) -> int | None:
    """Free device memory now, as CUDA sees it, with this process's context in place: buffers are
    sized against what can really be allocated (listing devices reads NVML's figure instead, which
    creates no context but does not yet count the one measuring creates)."""
    try:
        return int(status.core().cuda_memory_info(device)["memory_free_bytes"])
    except Exception:  # sizing falls back to the device record's figure
        return None
