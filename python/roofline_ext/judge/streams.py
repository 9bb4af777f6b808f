"""Time all the work: the event-timed median held against measures that see every stream.

CUDA events time one stream. A candidate that launches its work on another stream (and pads the
timed one so it is not empty), or leaves work running past the stop event, looks fast to them.
Two measures see everything:

1. a synchronised wall-clock pass: ``synchronize(); t0; fn(); synchronize(); t1`` waits for every
   stream of the device, so a call cannot finish before its work does. Its excess over what the
   events and the CPU launch explain (``wall - idle sync - max(event, launch)``) is cheap to get
   and only a trigger: host jitter can inflate it;
2. when the wall-clock pass flags a call, the profiler's kernel activity across all streams: the
   GPU time spent per call (the union of every kernel's interval) against the event time. More
   GPU time than the events saw is work they did not see: the result is *invalid*.

Without a usable profiler the wall-clock evidence alone decides, at a higher bar.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

# The wall-clock excess that triggers the profiler: a quarter of the event time plus 20 us.
_TRIGGER_FRACTION, _TRIGGER_MS = 0.25, 0.020
# GPU time per call above the event time by this much is work the events did not see.
_UNSEEN_FRACTION, _UNSEEN_MS = 0.20, 0.005
# Without the profiler: the wall-clock excess must be the event time again and 50 us more.
_WALL_ONLY_FRACTION, _WALL_ONLY_MS = 1.0, 0.050
# Synchronised calls per pass: nine for calls under a millisecond, where host jitter is a large
# part of the wall time; five above it, where a median of five is as steady and the extra calls
# were most of the pass's cost (KernelBench level 1: 3.2 s over its 34 calls of 5 ms or more,
# H200, 2026-12-02). Unseen work is the same excess on every call, so fewer calls miss none of it.
_REPS, _REPS_LONG, _LONG_MS = 9, 5, 1.0
_PROFILED_CALLS = 3


@dataclass(frozen=True)
class StreamCheck:
    ok: bool
    event_ms: float
    wall_ms: float
    launch_ms: float
    idle_sync_ms: float
    gpu_ms: float | None = None
    streams: int | None = None
    reason: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "event_ms": self.event_ms, "wall_ms": self.wall_ms, "launch_ms": self.launch_ms,
                "idle_sync_ms": self.idle_sync_ms, "gpu_ms": self.gpu_ms, "streams": self.streams,
                "reason": self.reason}


def check_all_streams(fn: Callable[[], Any], event_ms: float, device: int) -> StreamCheck:
    """Is ``fn``'s event-timed median ``event_ms`` all the GPU work it does?"""
    sync = torch.cuda.synchronize
    idle, wall, launch = [], [], []
    reps = _REPS if event_ms < _LONG_MS else _REPS_LONG
    for _ in range(_REPS):
        sync(device)
        t0 = time.perf_counter()
        sync(device)
        idle.append(time.perf_counter() - t0)
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        sync(device)
        t2 = time.perf_counter()
        launch.append(t1 - t0)
        wall.append(t2 - t0)
    med = lambda xs: 1e3 * statistics.median(xs)  # noqa: E731
    w, lch, s0 = med(wall), med(launch), med(idle)
    excess = w - s0 - max(event_ms, lch)
    base = dict(event_ms=event_ms, wall_ms=w, launch_ms=lch, idle_sync_ms=s0)
    if excess <= _TRIGGER_FRACTION * event_ms + _TRIGGER_MS:
        return StreamCheck(True, **base)
    gpu = _gpu_time_per_call(fn, device)
    if gpu is None:
        if excess > _WALL_ONLY_FRACTION * event_ms + _WALL_ONLY_MS:
            return StreamCheck(False, **base, reason=(
                f"a synchronised call takes {w:.4g} ms of wall time, {excess:.4g} ms more than the "
                f"{event_ms:.4g} ms the timing events saw and the launch explains (no profiler to say where)"))
        return StreamCheck(True, **base)
    gpu_ms, streams = gpu
    if gpu_ms > event_ms * (1 + _UNSEEN_FRACTION) + _UNSEEN_MS:
        return StreamCheck(False, **base, gpu_ms=gpu_ms, streams=streams, reason=(
            f"the GPU works {gpu_ms:.4g} ms per call on {streams} stream(s), the timing events saw "
            f"{event_ms:.4g} ms: work on other streams or outside the events"))
    return StreamCheck(True, **base, gpu_ms=gpu_ms, streams=streams)


def _gpu_time_per_call(fn: Callable[[], Any], device: int) -> tuple[float, int] | None:
    """The union of kernel (and copy) intervals over every stream, per call, from the profiler."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except Exception:  # noqa: BLE001 - a torch without the profiler: the caller uses the wall clock
        return None
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.synchronize(device)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(_PROFILED_CALLS):
                    fn()
                torch.cuda.synchronize(device)
            events = prof.events()
    except Exception:  # noqa: BLE001 - CUPTI busy or missing: the wall clock decides
        return None
    spans: list[tuple[float, float]] = []
    streams: set[Any] = set()
    for e in events:
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        start = e.time_range.start
        end = e.time_range.end
        if end > start:
            spans.append((start, end))
            streams.add(getattr(e, "device_resource_id", None))
    if not spans:
        return None
    spans.sort()
    busy, cur_s, cur_e = 0.0, spans[0][0], spans[0][1]
    for s, e in spans[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    return busy / 1e3 / _PROFILED_CALLS, len(streams)  # time ranges are in microseconds
