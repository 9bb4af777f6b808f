"""The sustained phase: one unit family run back to back for a window, the figure taken once clocks
settle. The loop (:func:`sustain`) takes the call to repeat, a telemetry sampler and a clock, so
tests drive it with fakes; the arithmetic (:func:`settle`) is a pure function of the samples.

Throttled calls are flagged as nvbench flags throttled samples (``measure/throttle.py``): a call of
the figure's window (the last third) is flagged when the NVML samples during it carry a slowdown
reason other than the power cap (a unit at full tilt on a 700 W part runs at its power cap: that
is the sustained state being measured, not a disturbance of it), or an SM clock below 90% of the
window's median. Flagged calls are left out of the figure while at least half of the window
remains; a window throttled throughout keeps them all, since then throttling *is* what the card
sustains. ``throttle`` says how many were flagged, why, and how many were left out.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, ContextManager, Mapping, Sequence

from ..device.telemetry import summarize
from ..measure.throttle import flag_reps, kept_times, report as throttle_report

# Settling: the sustained figure is the median over the last third of the window; the run counts
# as settled when that third's SM clock and figure are within this of the middle third's.
_SETTLE_TOLERANCE = 0.02
# Each sustained call is sized to last about this long, so gaps between calls (allocation, filling,
# verification) are a small part of the window and the card never gets time to cool.
_SUSTAINED_CALL_S = 2.0
# Rotating runners share that call length; a call never gets shorter than this, so its set-up
# (allocating and filling 4-12 GiB, a spot check) stays a few percent of it.
_MIN_ROTATING_CALL_S = 0.5
#: Slowdown reasons that do not flag a sustained call: the power cap is the sustained regime itself.
SUSTAINED_ALLOWED_REASONS = ("sw_power_cap",)


def median_of(stat: Any) -> float | None:
    """The median of a telemetry min/median/max dict (or a plain number)."""
    if isinstance(stat, Mapping):
        stat = stat.get("median")
    return float(stat) if isinstance(stat, (int, float)) and not isinstance(stat, bool) else None


def sustain(run_once: Callable[[int], Any], seconds: float, sampler: ContextManager[Any],
            report: Callable[[float], None], clock: Callable[[], float] = time.monotonic, *,
            names_of: Callable[[int], Sequence[str]] | None = None) -> dict[str, Any]:
    """Run ``run_once(reps)`` back to back for ``seconds`` under one telemetry sampler.

    ``run_once`` returns the figure, or ``(figure, kernel_clock_mhz)`` when the kernel counts its own
    clock (the compute kernels do: under tensor load it reads ~9% below NVML's SM clock).

    Returns the sustained figure (median over the last third of the window, once clocks had time
    to settle, throttled calls left out as the module says), the telemetry of that third, whether
    it had settled (last third within 2% of the middle third in both SM clock and figure) and the
    timelines for anyone who wants to look. ``names_of`` turns a sample's reason bitmask into
    names (the core's ``reason_names``); without it no call is flagged by reason.
    """
    return sustain_rotating({"": run_once}, seconds, sampler, report, clock, names_of=names_of)[""]


def sustain_rotating(runners: Mapping[str, Callable[[int], Any]], seconds: float, sampler: ContextManager[Any],
                     report: Callable[[float], None], clock: Callable[[], float] = time.monotonic, *,
                     names_of: Callable[[int], Sequence[str]] | None = None) -> dict[str, dict[str, Any]]:
    """Several figures of one unit in one window: the runners called in turn (one call each per
    round), each call sized to ``_SUSTAINED_CALL_S`` shared among them (never under
    ``_MIN_ROTATING_CALL_S``), and each figure settled from its own calls as :func:`sustain` says.
    The window ends on a whole round, so every runner has as many calls as the others.

    Why in turn rather than one window each: the HBM patterns (read, write, copy, triad) are one
    unit, the memory, and its sustained state is what any of them leaves the card in; one window
    shared measures all four on the same hot card for the time of one, where four windows would
    quadruple the phase or cut each window to a length that cannot tell settled from falling.
    """
    labels = list(runners)
    call_s = max(_SUSTAINED_CALL_S / len(labels), _MIN_ROTATING_CALL_S) if len(labels) > 1 else _SUSTAINED_CALL_S
    points: dict[str, list[tuple[float, float]]] = {k: [] for k in labels}  # (mid-time of a call, figure)
    windows: dict[str, list[tuple[float, float]]] = {k: [] for k in labels}  # (start, end), s since t_begin
    kernel_clocks: dict[str, list[tuple[float, float]]] = {k: [] for k in labels}  # (mid-time, clock)
    reps = dict.fromkeys(labels, 4)
    calls = 0
    with sampler as tel:
        t_begin = clock()
        while True:
            label = labels[calls % len(labels)]
            calls += 1
            t_call = clock()
            value = runners[label](reps[label])
            t_end = clock()
            t_mid = (t_call + t_end) / 2 - t_begin
            windows[label].append((t_call - t_begin, t_end - t_begin))
            if isinstance(value, tuple):
                value, kclock = value
                if kclock:
                    kernel_clocks[label].append((t_mid, float(kclock)))
            points[label].append((t_mid, float(value)))
            # Size this runner's next call to last call_s, from this one's wall time (kernels plus
            # set-up and verification), so calls stay long against their gaps at any unit's speed.
            elapsed = max(t_end - t_call, 1e-3)
            reps[label] = int(min(max(reps[label] * call_s / elapsed, 1), 1_000_000))
            report(min((t_end - t_begin) / seconds, 1.0))
            if t_end - t_begin >= seconds and calls % len(labels) == 0:
                break
    duration = clock() - t_begin
    return {k: settle(points[k], kernel_clocks[k], tel.samples, duration, tel.error, windows=windows[k],
                      names_of=names_of) for k in labels}


def settle(points: Sequence[tuple[float, float]], kernel_clocks: Sequence[tuple[float, float]],
           samples: Sequence[Mapping[str, Any]], duration: float, telemetry_error: str | None = None, *,
           windows: Sequence[tuple[float, float]] | None = None,
           names_of: Callable[[int], Sequence[str]] | None = None,
           allowed: Sequence[str] = SUSTAINED_ALLOWED_REASONS) -> dict[str, Any]:
    """The sustained figure of one window, from its calls and telemetry samples. Pure.

    ``points``: (mid-time of a call, figure); ``kernel_clocks``: (mid-time, clock the kernel
    counted); ``samples``: telemetry samples with ``t_s`` (seconds since the window began).
    The figure is the median over the last third of the window; the window counts as settled when
    that third's figure and SM clock are within 2% of the middle third's (None: too short to tell).
    ``windows``: (start, end) of each call on the samples' timeline, for flagging throttled calls
    (without them nothing is flagged); ``names_of`` and ``allowed`` as for ``measure.throttle``.
    """

    def window(lo: float, hi: float, at_least: int) -> Sequence[tuple[float, float]]:
        inside = [p for p in points if lo <= p[0] <= hi]
        return inside if len(inside) >= at_least else points[-at_least:]

    last = window(duration * 2 / 3, duration, 3)
    middle = [p for p in points if duration / 3 <= p[0] < duration * 2 / 3]
    w_lo = min(t for t, _ in last)
    samples = list(samples)
    last_samples = [s for s in samples if s.get("t_s", 0.0) >= w_lo]
    mid_samples = [s for s in samples if duration / 3 <= s.get("t_s", 0.0) < w_lo]
    summary = summarize(last_samples) if last_samples else None
    values, throttle = _unthrottled(points, last, windows, samples, names_of, allowed)
    value = statistics.median(values)
    last_kclocks = [c for t, c in kernel_clocks if t >= w_lo]

    def clock_of(ss: Sequence[Mapping[str, Any]]) -> float | None:
        vals = [s["sm_clock_mhz"] for s in ss if s.get("sm_clock_mhz") is not None]
        return statistics.median(vals) if vals else None

    settled = None
    if middle:
        mid_value = statistics.median(v for _, v in middle)
        settled = abs(value - mid_value) <= _SETTLE_TOLERANCE * max(value, mid_value)
        c_mid, c_last = clock_of(mid_samples), clock_of(last_samples)
        if settled and c_mid and c_last:
            settled = abs(c_last - c_mid) <= _SETTLE_TOLERANCE * max(c_last, c_mid)
    step = max(1, len(samples) // 150)  # keep the stored clock timeline to ~150 points
    return {
        "value": value,
        "duration_s": round(duration, 2),
        "window_s": [round(w_lo, 2), round(duration, 2)],
        "iterations": len(points),
        "settled": settled,
        "sm_clock_mhz": median_of((summary or {}).get("sm_clock_mhz")),
        "mem_clock_mhz": median_of((summary or {}).get("mem_clock_mhz")),
        "power_w": median_of((summary or {}).get("power_w")),
        "temperature_c": median_of((summary or {}).get("temperature_c")),
        "kernel_clock_mhz": statistics.median(last_kclocks) if last_kclocks else None,
        "throttle_reasons": (summary or {}).get("throttle_reasons", []),
        "throttle": throttle,
        "telemetry": summary,
        "telemetry_error": telemetry_error,
        "timeline": [[round(t, 2), round(v, 4)] for t, v in points],
        "clock_timeline": [[round(s.get("t_s", 0.0), 2), s.get("sm_clock_mhz"), s.get("power_w"),
                            s.get("temperature_c")] for s in samples[::step]],
    }


def _unthrottled(points: Sequence[tuple[float, float]], last: Sequence[tuple[float, float]],
                 windows: Sequence[tuple[float, float]] | None, samples: Sequence[Mapping[str, Any]],
                 names_of: Callable[[int], Sequence[str]] | None, allowed: Sequence[str]
                 ) -> tuple[list[float], dict[str, Any] | None]:
    """The figures of the window's calls that the median uses, and the throttle report of the
    window (None when the calls' windows are unknown)."""
    values = [v for _, v in last]
    if windows is None or len(windows) != len(points):
        return values, None
    index = {id(p): i for i, p in enumerate(points)}
    call_windows = [windows[index[id(p)]] for p in last]
    flags, median = flag_reps(call_windows, samples, names_of=names_of, allowed=allowed)
    kept = kept_times(values, flags, discard=True)
    return kept, throttle_report(flags, median, discarded=len(values) - len(kept)).to_dict()
