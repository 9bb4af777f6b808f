"""The timing of a task's calls, over the one event-timing loop (:mod:`.timing`): the reference's,
a candidate's through its judge, the compiled model's first call.

Pure measurement: the calls come built (``tasks/building.py``) and the judge comes as an argument
(``runner/timing_jobs.py``, the timing worker's jobs, passes it), so nothing here loads a task or
imports the judge. Moved from ``runner/task_timing.py``, issue 25 step 4.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable

from ..device.telemetry import sampling
from .energy import measure_call_energy
from .timing import DEFAULT_WARMUP_S, Trials, fewest_trials, lazy_torch, time_callable

__all__ = ["time_call", "time_reference_call", "host_pace", "first_call", "timed_and_seen"]


def time_call(fn: Callable[[], Any], device: int, trials: Trials, warmup: int, flush,
              warmup_s: float | None = None) -> dict[str, Any]:
    """``fn``'s timing statistics (:func:`~.timing.time_callable`): a candidate's or a compiled
    model's, whose warm-up makes all ``warmup`` calls, as the judge places its checked trials by count."""
    return time_callable(fn, device=device, trials=trials, warmup=warmup, flush=flush, warmup_s=warmup_s)


# How often the card is read while a reference is timed: a 1 s series gets about ten readings, and
# the native sampler thread (outside the GIL, on another core) costs the timed calls nothing visible.
TELEMETRY_INTERVAL_MS = 100.0


# The host's pace: a fixed piece of pure Python, timed a few times just before a reference's series.
# A launch-bound reference's time is the host's (Python and the dispatcher issuing kernels, the GPU
# waiting), and between two runs minutes apart such references moved by up to 28% at the same SM
# clock (H100, 2026-12-06, docs/runner.md): this says whether the host was slower in one of them.
# About 0.24 ms a probe on the 2-core VM (2026-12-06): five of them add about 1 ms to a task.
HOST_PACE_PROBES = 5
_PACE_N = 5_000


def host_pace(clock: Callable[[], float] = time.perf_counter, probes: int = HOST_PACE_PROBES) -> dict[str, float]:
    """The host now (read just before a reference's series and again just after it): the median
    microseconds of a fixed pure-Python loop (``pace_us``, lower is faster; only comparable on one
    machine) and the 1-minute load average."""
    times = []
    for _ in range(probes):
        t0 = clock()
        total = 0
        for i in range(_PACE_N):
            total += i & 7
        times.append((clock() - t0) * 1e6)
    return {"pace_us": round(statistics.median(times), 2), "load_1m": round(os.getloadavg()[0], 2)}


def time_reference_call(fn: Callable[[], Any], device: int, trials: Trials, warmup: int, flush) -> dict[str, Any]:
    """The reference's timing: its warm-up may stop early once warm (``timing.DEFAULT_WARMUP_S``);
    a candidate's makes all ``warmup`` calls, as the judge places its checked trials by count.

    The card's clocks, power, temperature and clock-event reasons over the series go with it
    (``telemetry``: min/median/max and the reasons seen, or ``{"error": why}`` where NVML could not
    read the card), as every measurement records them (docs/measuring.md): a reference that moves
    between two runs is then told apart from a card that ran slower in one of them; the host's pace
    just before it (``host``, :func:`host_pace`) tells a slower host apart, and its pace just after
    (``host.pace_after_us``) a host that changed speed during the series: a launch-bound reference
    read 73% slower in one adaptive run than in a fixed one with a pace before only 15% apart (H100,
    2026-12-06, docs/runner.md), as a host that speeds up under its own sustained load would."""
    host = host_pace()
    with sampling(device, interval_ms=TELEMETRY_INTERVAL_MS) as tel:
        timing = time_call(fn, device, trials, warmup, flush, DEFAULT_WARMUP_S)
    summary = tel.summary()
    host["pace_after_us"] = host_pace()["pace_us"]
    return {**timing, "telemetry": summary if summary is not None else {"error": tel.error}, "host": host}


def first_call(call: Callable[[], Any], device: int) -> tuple[Any, float, bool]:
    """(``call()``'s output, its seconds to the GPU's end, whether inductor's FX-graph cache served
    it): the first call of a ``torch.compile``d model is its compile (tracing, compiling, running),
    and the cache hit says whether the run's own cache (docs/runner.md) saved the compiling."""
    torch = lazy_torch()
    from torch._dynamo.utils import counters

    hits = counters["inductor"]["fxgraph_cache_hit"]
    t0 = time.perf_counter()
    out = call()
    torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    return out, seconds, counters["inductor"]["fxgraph_cache_hit"] > hits


def timed_and_seen(judge, candidate, args, time_fn, trials: Trials, warmup: int, flush, device: int,
                   energy: bool = False):
    """The timed loop with its checked trials, then the all-stream measure of the same calls. The
    judge picks its checked trials among the fewest an adaptive run makes (``fewest_trials``), so a
    run that stops early never skips a check. ``energy``: a candidate still correct after all that
    has its energy per call measured as the reference's is (its calls in candidate code).

    ``judge`` is the candidate's :class:`~roofline_ext.judge.protocol.Judge` (passed in: the judge
    sits above this layer); ``time_fn(fn, before)`` times ``fn`` with ``before`` run before each trial."""
    timing = judge.timed(candidate, args, time_fn, trials=fewest_trials(trials), warmup=warmup, flush=flush,
                         device=device)
    if timing is not None and judge.new_values(candidate, args, timing["median_ms"], flush):
        judge.all_streams(candidate, args, timing["median_ms"], device)
    if energy and timing is not None and judge.judgement().scored:
        measured = judge.guarded_call("the energy window", lambda: measure_call_energy(
            lambda: candidate(*args), device=device, call_ms=timing["median_ms"], flush=flush))
        if measured is not None:
            timing = {**timing, "energy": measured}
    return timing
