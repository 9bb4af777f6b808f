"""The one CUDA-event timing loop: warm-up, then trials, the L2 flushed before each trial.

Used by task timing (``measure.task_timing``, driven by ``runner.timing_jobs``) and by the benchmarks that time peers.

Why the flush sits where it does: it is a kernel queued right before the start event, so while the
GPU writes the flush buffer the CPU has already queued the start event, the task's kernels and the
stop event. The GPU then never waits for the host between the two events, and an empty task
measures the events' own cost (well under the 5 us budget) rather than Python's launch latency.

How many trials (:class:`TrialRule`): a fixed count (``--trials N``: exactly N, as KernelBench
times), or adaptive, the default of ``analyze --time``: trials in chunks until the 95% confidence
interval of the median lies within ``median * (1 ± precision)`` (order statistics,
:mod:`.median_ci`), after at least ``min_trials`` trials and ``min_time_s`` of them, or until
``max_time_s`` (the cap). Unlike nvbench's relative standard deviation, which does not shrink with
more samples (so nvbench also stops when the noise itself stops changing), the interval of the
median narrows as 1/sqrt(n) for any kernel, down to one step of the GPU's timer: event times come
in steps (32 ns on an H100 with driver 580), and the interval cannot close to less than one step on
either side of the median before the middle 95% of the ranks all fall on one value, which for a
kernel of a few microseconds with launch jitter takes more trials than any cap. A series whose
target is finer than one step (under about 6.4 us at ±0.5%) stops once its interval is within one
step of the median (``resolution``: the timer can tell no more), the step read off the series
itself (:func:`timer_step_ms`) after :data:`RESOLUTION_MIN_TRIALS` trials. Measured on an H100
(2026-12-06): ``x + 1`` on 1024 floats, median 4.992 us, ran the whole 1 s cap (19,154 trials) to an
interval of ±32 ns, one step, against a target of ±25 ns. "Within one step" allows for the float32
rounding of event times (:data:`_STEP_SLACK`): without it the same task, later that day, still ran
the whole cap to an interval one step wide.

A host-bound series (the GPU waits for the host's launches, so the events time Python and the
dispatcher, not the card) stops at a shorter cap, ``host_bound_max_time_s`` (0.25 s), with
``stopped: "host-bound"``. What tells it: after the host has queued a chunk, the GPU should still
have work queued; the share of a chunk's wall the host spends waiting in the synchronize for that
backlog (``backlog_share``) is near 1 for a GPU-bound series and near 0 when the GPU kept pace with
the host and ran dry. Why a shorter cap: such a time is the host's, and the host's speed is what
moves it: on the H100 machine a fixed Python loop read 164-403 us within minutes and launch-bound
networks moved by up to 2x with it, at the same SM clock (2026-12-06, docs/runner.md), so a
narrower interval from a longer series buys no reproducibility; it only costs the wall (a one-line
``x + 1`` task ran the whole 1 s cap).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Union

from ..errors import UserError
from .median_ci import CONFIDENCE, median_interval
from .timing_record import TimingStats

DEFAULT_TRIALS = 100  # --trials' count of the first versions (and KernelBench's); a fixed count
DEFAULT_WARMUP = 10
# A warm-up with a time bound (``warmup_s``) stops after MIN_WARMUP calls once that long has passed:
# a 90 ms network is warm after 3 calls, not 10 (0.6 s saved per such task), while a 1 ms kernel
# still makes all 10. The caller has already made one call (its reference output) before any of
# them, and the card was busy with the task before.
MIN_WARMUP = 3
DEFAULT_WARMUP_S = 0.05
DEFAULT_SEED = 42
# Adaptive trials. MIN_TRIALS (nvbench's min-samples) is also what a caller may count on: an
# adaptive run makes at least this many timed calls after its warm-up (the judge picks the trials
# it checks among them). 10 trials give a 95% interval of the median at all ([x(2), x(9)]).
DEFAULT_PRECISION = 0.005  # ±0.5% of the median, the 95% interval's half-width (nvbench: 0.5% noise)
MIN_TRIALS = 10
# At least this long (wall, from the first timed trial): a few microsecond-kernel trials span
# less than a clock's settling, however tight they look. Far below nvbench's 0.5 s of GPU time,
# which over KernelBench's 250 tasks alone would cost two minutes.
DEFAULT_MIN_TIME_S = 0.05
# The cap per timed variant (nvbench: 15 s per benchmark); a noisy kernel stops here and says so.
DEFAULT_MAX_TIME_S = 1.0
# The cap of a host-bound series (module docstring): a quarter of the default, still thousands of
# trials for a microsecond task and 20-40 for a launch-bound network of 6-12 ms.
HOST_BOUND_MAX_TIME_S = 0.25
# A series is host-bound when the GPU still had work queued for less than this share of its chunks'
# wall once the host had queued them (``backlog_share``). A GPU-bound chunk reads well above half
# (the host queues its trials far faster than the GPU runs them), a host-bound one about 1/n of n trials.
HOST_BOUND_BACKLOG = 0.1
MAX_TRIALS = 100_000  # bounds the memory of a series whatever the cap (a 1 us kernel, a long cap)
# Chunks: a chunk's events are recorded back to back and read after one synchronize, so the
# adaptive loop adds one host sync per chunk, never one per trial. The next chunk is what the
# current interval predicts is still needed (its width shrinks as 1/sqrt(n)), plus this margin,
# between a quarter of the trials so far and as many again (at most a doubling).
_CHUNK_MARGIN = 1.1
# The step of the event timer is read off a series only once it has this many trials: fewer, spread
# over many steps, can leave gaps of several steps between neighbours, and a step read too large
# would stop a series early. Only kernels under precision x step matter here (6.4 us at ±0.5% and
# 32 ns), and 1000 of their trials with the L2 flush take about 50 ms.
RESOLUTION_MIN_TRIALS = 1000
# Differences below this (0.1 ns) between event times are float32 rounding of one value, not a step.
_SAME_TIME_MS = 1e-7
# An interval "within one step" may read a hair wider than the step: event times are float32, so a
# difference of two times one step apart is the step to about 1e-5 of itself (float32's 2^-23 on
# times of a few microseconds, against a 32 ns step). Seen on an H100 (2026-12-06): a half-width
# 1.6e-5 of a step over the step kept `x + 1` timing to the 1 s cap. 1e-3 of a step is far above that
# rounding and far below a real step more.
_STEP_SLACK = 1e-3


@dataclass(frozen=True)
class TrialRule:
    """How many trials: ``fixed`` N (exactly N timed calls), or with ``fixed`` None adaptive (module
    docstring). ``precision`` is also what a fixed run's ``precision_reached`` is held to."""

    fixed: int | None = None
    precision: float = DEFAULT_PRECISION
    min_trials: int = MIN_TRIALS
    min_time_s: float = DEFAULT_MIN_TIME_S
    max_time_s: float = DEFAULT_MAX_TIME_S
    max_trials: int = MAX_TRIALS
    host_bound_max_time_s: float = HOST_BOUND_MAX_TIME_S

    def __post_init__(self) -> None:
        if self.fixed is not None and self.fixed < 1:
            raise UserError("--trials must be at least 1")
        if not 0 < self.precision < 1:
            raise UserError("--precision must be more than 0% and less than 100%")
        if not self.max_time_s > 0 or not self.host_bound_max_time_s > 0:
            raise UserError("--max-time must be more than 0 seconds")
        if self.min_trials < 1 or self.max_trials < self.min_trials or self.min_time_s < 0:
            raise UserError(f"adaptive trials need 1 <= min_trials <= max_trials and min_time_s >= 0, "
                            f"not {self.min_trials}, {self.max_trials}, {self.min_time_s:g}")

    @property
    def adaptive(self) -> bool:
        return self.fixed is None

    def cap_s(self, host_bound: bool) -> float:
        """The time cap of a series: ``max_time_s``, or for a host-bound one the shorter of it and
        ``host_bound_max_time_s``."""
        return min(self.max_time_s, self.host_bound_max_time_s) if host_bound else self.max_time_s

    def fewest(self) -> int:
        """The timed calls every run of this rule makes after its warm-up: N, or ``min_trials``."""
        return self.fixed if self.fixed is not None else self.min_trials

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (how the rule travels in a job's arguments); :func:`trial_rule` reads it back."""
        return asdict(self)


# What a ``trials`` argument may be: N (fixed), a rule, a rule's dict (from a job), None (adaptive).
Trials = Union[int, TrialRule, Mapping[str, Any], None]


def trial_rule(trials: Trials) -> TrialRule:
    """The rule a ``trials`` argument stands for (:data:`Trials`); bad values are one-line UserErrors."""
    if isinstance(trials, TrialRule):
        return trials
    if trials is None:
        return TrialRule()
    if isinstance(trials, Mapping):
        known = set(TrialRule.__dataclass_fields__)
        if set(trials) - known:
            raise UserError(f"unknown trial settings: {', '.join(sorted(set(trials) - known))}")
        return TrialRule(**trials)
    if isinstance(trials, bool) or not isinstance(trials, int):
        raise UserError(f"trials must be a count, a TrialRule or None, not {trials!r}")
    return TrialRule(fixed=trials)


def fewest_trials(trials: Trials) -> int:
    """The timed calls a run with ``trials`` is sure to make after its warm-up (N, or the adaptive
    minimum): where a caller that acts on given trials (the judge's checks) must pick them."""
    return trial_rule(trials).fewest()


def lazy_torch():
    import torch

    return torch


class L2Flush:
    """Writes a buffer twice the L2 size so no trial starts with the previous trial's data cached."""

    def __init__(self, device: int) -> None:
        torch = lazy_torch()
        l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=f"cuda:{device}")

    def __call__(self) -> None:
        self.buf.fill_(0x5A5A5A5A)


class CudaEvents:
    """Where the loops get their events: torch's CUDA events and a device-wide synchronize. Tests
    pass a stand-in with the same two methods (an event has ``record()`` and ``elapsed_time(end)``
    in ms, as ``torch.cuda.Event``)."""

    def event(self) -> Any:
        return lazy_torch().cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        lazy_torch().cuda.synchronize()


def _warm_up(fn, warmup: int, before, events, clock: Callable[[], float] = time.perf_counter,
             warmup_s: float | None = None) -> int:
    """``warmup`` untimed calls, or with ``warmup_s`` as many until at least :data:`MIN_WARMUP` of
    them have run for ``warmup_s`` (each then waited for, so the clock sees the GPU's time); the
    number made."""
    t0 = clock()
    for k in range(1, warmup + 1):
        if before is not None:
            before()
        fn()
        if warmup_s is not None:
            events.synchronize()
            if k >= min(MIN_WARMUP, warmup) and clock() - t0 >= warmup_s:
                return k
    if warmup and warmup_s is None:  # calls made without a wait each: wait once for all of them
        events.synchronize()
    return warmup


def event_times_ms(fn, reps: int, warmup: int, before=None, *, events=None) -> list[float]:
    """``fn()`` timed ``reps`` times with CUDA events after ``warmup`` untimed calls, in ms.

    ``before()`` (e.g. an L2 flush) runs ahead of every call, warm-up calls included, outside the
    events. The one timing loop the package and its benchmarks share; exactly ``reps`` trials.
    """
    events = events or CudaEvents()
    _warm_up(fn, warmup, before, events)
    starts = [events.event() for _ in range(reps)]
    stops = [events.event() for _ in range(reps)]
    for i in range(reps):
        if before is not None:
            before()
        starts[i].record()
        fn()
        stops[i].record()
    events.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, stops)]


@dataclass(frozen=True)
class AdaptiveRun:
    """An adaptive series: the times (ms), why it stopped (``precision``, ``resolution``,
    ``host-bound``, ``max-time`` or ``max-trials``), the wall seconds of its timed trials, its warm-up
    calls, and the share of its chunks' wall the GPU still had work queued after the host had queued
    them all (``backlog_share``; module docstring)."""

    ms: list[float]
    stopped: str
    timed_s: float
    warmup: int = 0  # the warm-up calls made before them
    backlog_share: float | None = None


def backlog_share(issue_s: float, drain_s: float) -> float | None:
    """The share of the chunks' wall (the host queueing them, then waiting for the GPU) that the GPU
    still had queued work when the host was done: None when no wall was seen."""
    total = issue_s + drain_s
    return drain_s / total if total > 0 else None


def adaptive_times_ms(fn, rule: TrialRule, warmup: int, before=None, *, events=None,
                      clock: Callable[[], float] = time.perf_counter, warmup_s: float | None = None) -> AdaptiveRun:
    """``fn()`` timed until ``rule`` is met (module docstring), after ``warmup`` untimed calls.

    The first chunk is ``rule.min_trials`` trials, so at least that many timed calls follow the
    warm-up whatever the clock says; ``before()`` runs once ahead of every call, as in
    :func:`event_times_ms`. ``clock`` (seconds) measures the minimum time and the cap (and
    ``warmup_s``, :func:`_warm_up`).
    """
    events = events or CudaEvents()
    warmed = _warm_up(fn, warmup, before, events, clock, warmup_s)
    pool: list[tuple[Any, Any]] = []  # event pairs, reused from chunk to chunk
    ms: list[float] = []
    chunk = rule.min_trials
    issue_s = drain_s = 0.0  # the host queueing the chunks, then waiting for the GPU to finish them
    t0 = clock()
    while True:
        while len(pool) < chunk:
            pool.append((events.event(), events.event()))
        t_chunk = clock()
        for start, stop in pool[:chunk]:
            if before is not None:
                before()
            start.record()
            fn()
            stop.record()
        t_issued = clock()
        events.synchronize()  # the chunk's one host sync
        t_synced = clock()
        issue_s += t_issued - t_chunk
        drain_s += t_synced - t_issued
        ms += [start.elapsed_time(stop) for start, stop in pool[:chunk]]
        elapsed = clock() - t0
        iv = median_interval(ms)
        step_rel = _step_rel(ms, iv.median)
        share = backlog_share(issue_s, drain_s)
        host_bound = share is not None and share < HOST_BOUND_BACKLOG
        stopped = _stop(rule, len(ms), elapsed, iv.rel, step_rel, host_bound)
        if stopped:
            return AdaptiveRun(ms, stopped, elapsed, warmed, share)
        chunk = next_chunk(rule, len(ms), elapsed, iv.rel, step_rel, host_bound)


def timer_step_ms(ms: list[float]) -> float | None:
    """The event timer's step as a series shows it: the smallest gap between two of its distinct
    times (float rounding aside), None when all times are one value."""
    xs = sorted(ms)
    gaps = [b - a for a, b in zip(xs, xs[1:]) if b - a > _SAME_TIME_MS]
    return min(gaps) if gaps else None


def _step_rel(ms: list[float], median: float) -> float | None:
    """One timer step relative to the median, once the series is long enough to show the step
    (:data:`RESOLUTION_MIN_TRIALS`); None before, or without a step or a positive median."""
    if len(ms) < RESOLUTION_MIN_TRIALS or median <= 0:
        return None
    step = timer_step_ms(ms)
    return None if step is None else step / median


def _stop(rule: TrialRule, n: int, elapsed_s: float, rel: float | None,
          step_rel: float | None = None, host_bound: bool = False) -> str | None:
    """Why a series of ``n`` trials over ``elapsed_s`` stops now, or None to go on. ``step_rel``:
    one step of the timer relative to the median (:func:`_step_rel`); an interval within it is as
    narrow as the timer can make it. ``host_bound``: the series has the shorter cap (module docstring)."""
    cap = rule.cap_s(host_bound)
    settled = n >= rule.min_trials and elapsed_s >= min(rule.min_time_s, cap)
    if rel is not None and rel <= rule.precision and settled:
        return "precision"
    if rel is not None and step_rel is not None and rel <= step_rel * (1 + _STEP_SLACK) and settled:
        return "resolution"
    if elapsed_s >= cap:
        return "host-bound" if cap < rule.max_time_s else "max-time"
    if n >= rule.max_trials:
        return "max-trials"
    return None


def next_chunk(rule: TrialRule, n: int, elapsed_s: float, rel: float | None,
               step_rel: float | None = None, host_bound: bool = False) -> int:
    """The size of the next chunk after ``n`` trials in ``elapsed_s`` whose interval is ``rel``;
    the target is the precision, or one timer step (``step_rel``) where that is wider; the cap is
    ``rule.cap_s(host_bound)``."""
    target = max(rule.precision, step_rel or 0.0)
    if rel is None:  # no interval yet (fewer than 6 trials): double
        want = n
    else:  # the interval's width goes as 1/sqrt(n): n (rel / target)^2 trials reach the target
        want = math.ceil(n * (rel / target) ** 2 * _CHUNK_MARGIN) - n
    chunk = min(max(want, n // 4, 1), n)
    per_trial = elapsed_s / n if n else 0.0
    if per_trial > 0:
        if elapsed_s < rule.min_time_s:  # what the minimum time still needs, in one chunk
            chunk = max(chunk, math.ceil((rule.min_time_s - elapsed_s) / per_trial))
        # Before the host-bound cap (never longer than the other), a chunk ends there, whatever the
        # series reads now: a series near the line (the host about as slow as the GPU, as x + 1 with
        # its L2 flush) is decided there, not a doubled chunk later (session 18, H100: x + 1 read
        # backlog 0.083 only at 0.557 s).
        cap = rule.cap_s(True) if elapsed_s < rule.cap_s(True) else rule.cap_s(host_bound)
        chunk = min(chunk, max(1, math.floor((cap - elapsed_s) / per_trial)))  # the cap
    return max(1, min(chunk, rule.max_trials - n))


def series_stats(ms: list[float], warmup: int, rule: TrialRule, stopped: str,
                 timed_s: float | None = None, backlog: float | None = None) -> TimingStats:
    """The statistics of a series, typed (:class:`~.timing_record.TimingStats`): its keys are the
    JSON's ``reference``, ``candidate_timing`` and ``compiled``, in this order.

    ``ci_low_ms``/``ci_high_ms``: the 95% confidence interval of the median; ``ci_rel`` its
    half-width relative to the median (wider side; None with fewer than 6 trials);
    ``precision_reached``: ``ci_rel <= precision``, for a fixed count too (what N trials bought).
    ``timed_s`` (the timed trials' wall seconds), ``backlog_share`` and ``host_bound`` (module
    docstring) only for an adaptive series.
    """
    srt = sorted(ms)
    mean = statistics.fmean(ms)
    iv = median_interval(ms)
    extra: dict[str, Any] = {} if timed_s is None else {"timed_s": timed_s}
    if timed_s is not None and backlog is not None:
        extra.update(backlog_share=round(backlog, 4), host_bound=backlog < HOST_BOUND_BACKLOG)
    return TimingStats.of(
        median_ms=statistics.median(ms),
        mean_ms=mean,
        best_ms=srt[0],
        p10_ms=srt[len(srt) // 10],
        p90_ms=srt[(9 * len(srt)) // 10 if len(srt) > 1 else 0],
        cv=statistics.stdev(ms) / mean if len(ms) > 1 and mean > 0 else 0.0,
        trials=len(ms),
        warmup=warmup,
        mode="adaptive" if rule.adaptive else "fixed",
        confidence=CONFIDENCE,
        ci_low_ms=iv.low,
        ci_high_ms=iv.high,
        ci_rel=iv.rel,
        precision=rule.precision,
        precision_reached=iv.rel is not None and iv.rel <= rule.precision,
        stopped=stopped,
        # The smallest gap between two distinct times: the timer's step where the series is long
        # (what a ``resolution`` stop was held to), an upper bound on it where it is short.
        timer_step_ms=timer_step_ms(ms),
        **extra,
    )


def timing_stats(ms: list[float], warmup: int, rule: TrialRule, stopped: str) -> dict[str, Any]:
    """:func:`series_stats` as the dict the timing worker sends (the JSON's keys, in order)."""
    return series_stats(ms, warmup, rule, stopped).to_dict()


def time_callable(fn, *, device: int = 0, trials: Trials = DEFAULT_TRIALS, warmup: int = DEFAULT_WARMUP,
                  flush: Callable[[], None] | None = None, events=None,
                  clock: Callable[[], float] = time.perf_counter, warmup_s: float | None = None) -> dict[str, Any]:
    """:func:`timing_stats` of ``fn()``, CUDA-event-timed with the L2 flushed (or ``flush()``
    called) before every call. ``trials``: N (exactly N trials), a :class:`TrialRule` or its dict,
    or None (adaptive with the defaults). ``warmup_s``: the warm-up may stop early (:func:`_warm_up`;
    ``warmup`` in the result is the count made). ``events``/``clock``: stand-ins for tests (no GPU
    then; ``flush`` must be given)."""
    rule = trial_rule(trials)
    if events is None:
        torch = lazy_torch()
        flush = flush or L2Flush(device)
        with torch.cuda.device(device):
            return _timed(fn, rule, warmup, flush, CudaEvents(), clock, warmup_s)
    return _timed(fn, rule, warmup, flush, events, clock, warmup_s)


def _timed(fn, rule: TrialRule, warmup: int, before, events, clock, warmup_s: float | None = None) -> dict[str, Any]:
    if rule.fixed is not None:
        warmed = _warm_up(fn, warmup, before, events, clock, warmup_s)
        return timing_stats(event_times_ms(fn, rule.fixed, 0, before, events=events), warmed, rule, "fixed")
    run = adaptive_times_ms(fn, rule, warmup, before, events=events, clock=clock, warmup_s=warmup_s)
    return series_stats(run.ms, run.warmup, rule, run.stopped, timed_s=run.timed_s,
                        backlog=run.backlog_share).to_dict()


def timing_overhead_us(device: int = 0, trials: int = 200) -> float:
    """Median event-to-event time of a forward that launches no kernel: our per-trial overhead."""
    torch = lazy_torch()
    x = torch.empty(1, device=f"cuda:{device}")
    t = time_callable(lambda: x, device=device, trials=trials, warmup=10)
    return t["median_ms"] * 1000.0
