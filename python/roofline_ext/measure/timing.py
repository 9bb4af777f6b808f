"""The one CUDA-event timing loop: warm-up, many trials, the L2 flushed before each trial.

Used by task timing (``runner.task_timing``) and by the benchmarks that time peers.

Why the flush sits where it does: it is a kernel queued right before the start event, so while the
GPU writes the flush buffer the CPU has already queued the start event, the task's kernels and the
stop event. The GPU then never waits for the host between the two events, and an empty task
measures the events' own cost (well under the 5 us budget) rather than Python's launch latency.
"""
from __future__ import annotations

import statistics
from typing import Any

from ..errors import UserError

DEFAULT_TRIALS = 100
DEFAULT_WARMUP = 10
DEFAULT_SEED = 42


def _torch():
    import torch

    return torch


class L2Flush:
    """Writes a buffer twice the L2 size so no trial starts with the previous trial's data cached."""

    def __init__(self, device: int) -> None:
        torch = _torch()
        l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=f"cuda:{device}")

    def __call__(self) -> None:
        self.buf.fill_(0x5A5A5A5A)


def event_times_ms(fn, reps: int, warmup: int, before=None) -> list[float]:
    """``fn()`` timed ``reps`` times with CUDA events after ``warmup`` untimed calls, in ms.

    ``before()`` (e.g. an L2 flush) runs ahead of every call, outside the events. The one timing
    loop the package and its benchmarks share.
    """
    torch = _torch()
    for _ in range(warmup):
        if before is not None:
            before()
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if before is not None:
            before()
        starts[i].record()
        fn()
        stops[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, stops)]


def time_callable(fn, *, device: int = 0, trials: int = DEFAULT_TRIALS, warmup: int = DEFAULT_WARMUP,
                  flush: L2Flush | None = None) -> dict[str, Any]:
    """Median/mean/spread in ms of ``fn()`` over ``trials`` CUDA-event-timed runs, L2 flushed before each."""
    torch = _torch()
    if trials < 1:
        raise UserError("--trials must be at least 1")
    flush = flush or L2Flush(device)
    with torch.cuda.device(device):
        ms = event_times_ms(fn, trials, warmup, before=flush)
    srt = sorted(ms)
    mean = statistics.fmean(ms)
    return {
        "median_ms": statistics.median(ms),
        "mean_ms": mean,
        "best_ms": srt[0],
        "p10_ms": srt[len(srt) // 10],
        "p90_ms": srt[(9 * len(srt)) // 10 if len(srt) > 1 else 0],
        "cv": statistics.stdev(ms) / mean if len(ms) > 1 and mean > 0 else 0.0,
        "trials": trials,
        "warmup": warmup,
    }


def timing_overhead_us(device: int = 0, trials: int = 200) -> float:
    """Median event-to-event time of a forward that launches no kernel: our per-trial overhead."""
    torch = _torch()
    x = torch.empty(1, device=f"cuda:{device}")
    t = time_callable(lambda: x, device=device, trials=trials, warmup=10)
    return t["median_ms"] * 1000.0
