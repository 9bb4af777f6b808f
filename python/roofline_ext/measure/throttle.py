"""Throttled repetitions: which timed repetitions ran while the GPU was held back.

nvbench's cold measurement reads the clock of every sample and throws away the samples taken
while the GPU throttled, reporting how many it threw away. The same idea here, on the data the
measurements already have:

- the native core stamps the end of each timed loop on the host's steady clock
  (``timed_end_s``); the repetitions ran back to back before it, so each one's window on the
  telemetry sampler's timeline follows from the repetition times;
- a repetition is *flagged* when the NVML samples in (or, for a repetition shorter than the
  sampling interval, nearest to) its window, within the timed loop's own span (never one taken
  while the GPU idled between configurations), carry a slowdown reason (``SLOWDOWN_REASONS`` less the
  ones the caller allows, e.g. ``sw_power_cap`` for tensor cores, whose normal state it is), or an SM
  clock below ``LOW_CLOCK_FRACTION`` of the median over the run's timed samples; ``gpu_idle`` and
  the clock *settings* (application clocks, sync boost, display) never flag, since they say where a
  clock was set, not that it was pulled down;
- a kernel that counts its own clock per launch (the shared-memory kernel) also flags a launch
  whose counted clock is below ``LOW_CLOCK_FRACTION`` of the median launch.

Flagging never changes a figure by itself: :func:`kept_times` drops flagged repetitions only when
asked, and only while at least half of them remain (otherwise the run was throttled throughout and
its figure is what throttled hardware does, which the sustained phase wants to see). Pure functions:
tested without a GPU.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..device.telemetry import SLOWDOWN_REASONS

#: A repetition whose SM clock is below this fraction of the run's median is flagged.
LOW_CLOCK_FRACTION = 0.90
#: A repetition shorter than the sampling interval takes the nearest sample within this distance.
_NEAREST_SAMPLE_S = 0.06

NamesOf = Callable[[int], Sequence[str]]


@dataclass(frozen=True)
class ThrottleReport:
    """How many of a configuration's timed repetitions were flagged, and why."""

    reps: int
    placed: int              # repetitions with a telemetry sample next to them (the rest: unknown)
    flagged: int
    discarded: int = 0       # flagged repetitions left out of the figure (only when asked)
    by_reason: dict[str, int] = field(default_factory=dict)  # flagged repetitions per reason
    median_sm_clock_mhz: float | None = None
    low_clock_mhz: float | None = None  # the threshold below which a clock flags

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rep_windows(times_ms: Sequence[float], end_s: float) -> list[tuple[float, float]]:
    """(start, end) of each repetition, in seconds on the clock of ``end_s``: they ran back to back
    and the last one ended at ``end_s`` (launch gaps of microseconds are ignored)."""
    windows: list[tuple[float, float]] = []
    t = end_s
    for ms in reversed(list(times_ms)):
        windows.append((t - ms * 1e-3, t))
        t -= ms * 1e-3
    return windows[::-1]


def _near(window: tuple[float, float], samples: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    lo, hi = window
    inside = [s for s in samples if lo <= s.get("t_s", -1.0) <= hi]
    if inside:
        return inside
    mid = (lo + hi) / 2
    best = min(samples, key=lambda s: abs(s.get("t_s", 1e30) - mid), default=None)
    if best is None or abs(best.get("t_s", 1e30) - mid) > _NEAREST_SAMPLE_S + (hi - lo) / 2:
        return []
    return [best]


def _bad_reasons(sample: Mapping[str, Any], names_of: NamesOf | None, allowed: Iterable[str]) -> list[str]:
    mask = sample.get("reasons")
    if not mask:
        return []
    names = list(names_of(int(mask))) if names_of else [f"reasons_0x{int(mask):x}"]
    allowed = set(allowed)
    return [n for n in names if n in SLOWDOWN_REASONS and n not in allowed]


def flag_reps(windows: Sequence[tuple[float, float]], samples: Sequence[Mapping[str, Any]], *,
              names_of: NamesOf | None = None, allowed: Iterable[str] = (),
              kernel_clocks_mhz: Sequence[float] | None = None) -> tuple[list[list[str] | None], float | None]:
    """Per repetition, the reasons it is flagged for ([] = clean, None = no sample near it), and the
    run's median SM clock. ``windows`` and the samples' ``t_s`` share one timeline; only samples
    inside the loop's span (first start to last end) count, so none taken between loops does."""
    if windows:
        lo, hi = windows[0][0], windows[-1][1]
        samples = [s for s in samples if lo <= s.get("t_s", lo - 1.0) <= hi]
    near = [_near(w, samples) for w in windows]
    timed = {id(s): s for group in near for s in group}
    clocks = [s["sm_clock_mhz"] for s in timed.values() if s.get("sm_clock_mhz")]
    median = statistics.median(clocks) if clocks else None
    kmed = statistics.median([c for c in kernel_clocks_mhz or [] if c > 0] or [0.0])
    flags: list[list[str] | None] = []
    for i, group in enumerate(near):
        reasons: list[str] = []
        for s in group:
            reasons += _bad_reasons(s, names_of, allowed)
            if median and s.get("sm_clock_mhz") and s["sm_clock_mhz"] < LOW_CLOCK_FRACTION * median:
                reasons.append("low_clock")
        if kernel_clocks_mhz and kmed and 0 < kernel_clocks_mhz[i] < LOW_CLOCK_FRACTION * kmed:
            reasons.append("low_kernel_clock")
        flags.append(sorted(set(reasons)) if (group or reasons) else None)
    return flags, median


def report(flags: Sequence[list[str] | None], median_mhz: float | None, discarded: int = 0) -> ThrottleReport:
    by_reason: dict[str, int] = {}
    for f in flags:
        for r in f or []:
            by_reason[r] = by_reason.get(r, 0) + 1
    return ThrottleReport(reps=len(flags), placed=sum(1 for f in flags if f is not None),
                          flagged=sum(1 for f in flags if f), discarded=discarded, by_reason=by_reason,
                          median_sm_clock_mhz=median_mhz,
                          low_clock_mhz=LOW_CLOCK_FRACTION * median_mhz if median_mhz else None)


def kept_times(times_ms: Sequence[float], flags: Sequence[list[str] | None], discard: bool) -> list[float]:
    """The repetition times a figure is taken from: all of them, or (``discard``) the unflagged ones
    while at least half remain."""
    if not discard:
        return list(times_ms)
    clean = [t for t, f in zip(times_ms, flags) if not f]
    return clean if 2 * len(clean) >= len(times_ms) else list(times_ms)


def assess_row(row: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], t0_s: float | None, *,
               names_of: NamesOf | None = None, allowed: Iterable[str] = (),
               discard: bool = False) -> tuple[ThrottleReport, list[float]]:
    """One configuration's row from the core: its throttle report and the times its figure uses.

    ``t0_s`` is the steady-clock time the telemetry sampler started at (None: unknown, every
    repetition unplaced, nothing flagged by telemetry)."""
    times = [float(t) for t in row.get("times_ms") or []]
    end = row.get("timed_end_s")
    if t0_s is None or not end or not times:
        windows: list[tuple[float, float]] = [(float("nan"), float("nan"))] * len(times)
        usable: Sequence[Mapping[str, Any]] = []
    else:
        windows, usable = rep_windows(times, float(end) - t0_s), samples
    flags, median = flag_reps(windows, usable, names_of=names_of, allowed=allowed,
                              kernel_clocks_mhz=row.get("kernel_clock_mhz"))
    kept = kept_times(times, flags, discard)
    return report(flags, median, discarded=len(times) - len(kept)), kept


def median_ms(times: Sequence[float]) -> float:
    return float(statistics.median(times)) if times else 0.0
