"""Is this host's CPU speed steady, and is what changes it ours or the machine's? (issue 28)

A launch-bound (host-bound) reference's time is the host's: Python and the dispatcher issuing
kernels while the GPU waits. Its time follows the speed of the CPU the timing worker runs on, which
`analyze` reads as the *pace* (`measure.task_timing.host_pace`: microseconds of a fixed pure-Python
loop, lower is faster) before and after every reference's series. On the cloud VMs of sessions 17-18
that pace was bimodal (about 155-185 µs or 290-370 µs on the H100 host), and host-bound references
moved with it by 15-60% between runs. This script asks, with nothing of roofline_ext running, where
the slow mode comes from:

* ``sustained``: one CPU busy with back-to-back probes for ``--sustained-s``; the probe times in
  windows, the share of slow windows and how long each mode lasts (a mode that lasts seconds
  cannot be averaged out by a series of 0.25-1 s);
* ``idle``: probes with a short sleep between them (a worker waiting on its next job), in windows;
* ``per_cpu``: the median pace pinned to each CPU;
* ``sibling``: CPU A pinned, one busy spinner on each other CPU in turn: a CPU whose load makes
  A slower is a hidden SMT sibling of A (the guest may show one thread per core);
* ``all_busy``: A with every other CPU busy;
* ``after_sleep``: the pace right after a 50 ms sleep against right after 50 ms busy (a clock that
  drops while idle reads slow right after the sleep).

A window is slow when its median probe takes more than ``SLOW_FACTOR`` times the fastest decile's
edge of all the sustained probes (the host at full speed). Writes JSON to OUT and prints a summary.

    python3 benchmarks/host_pace.py benchmarks/results/host-pace-DATE.json [--sustained-s 20]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from roofline_ext.measure.task_timing import host_pace

SLOW_FACTOR = 1.4  # the two modes seen were about 1.8-2x apart; noise within a mode is under 10%
WINDOW_S = 0.25  # a host-bound series' cap (HOST_BOUND_MAX_TIME_S): the scale that matters


def probe() -> float:
    return host_pace(probes=1)["pace_us"]


def windows(seconds: float, sleep_s: float, probes: list[float] | None = None) -> list[float]:
    """Median probe of each WINDOW_S window for ``seconds`` (a sleep of ``sleep_s`` between probes);
    every probe is appended to ``probes`` too."""
    out = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        w0, xs = time.perf_counter(), []
        while time.perf_counter() - w0 < WINDOW_S:
            xs.append(probe())
            if probes is not None:
                probes.append(xs[-1])
            if sleep_s:
                time.sleep(sleep_s)
        out.append(round(statistics.median(xs), 1))
    return out


def mode_runs(xs: list[float], fast: float) -> dict[str, Any]:
    """The share of slow windows and the lengths (in windows) of the runs of each mode."""
    slow = [x > SLOW_FACTOR * fast for x in xs]
    runs: dict[str, list[int]] = {"fast": [], "slow": []}
    i = 0
    while i < len(slow):
        j = i
        while j < len(slow) and slow[j] == slow[i]:
            j += 1
        runs["slow" if slow[i] else "fast"].append(j - i)
        i = j
    return {"slow_share": round(sum(slow) / len(slow), 3) if slow else None,
            "slow_run_windows": runs["slow"], "fast_run_windows": runs["fast"]}


def _spin(cpu: int, stop: Any) -> None:
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        sum(i & 7 for i in range(10_000))


def with_spinners(cpus: list[int], probes: int) -> float:
    """Median probe of this (pinned) process while a spinner keeps each of ``cpus`` busy."""
    stops = []
    for c in cpus:
        stop = mp.Event()
        proc = mp.Process(target=_spin, args=(c, stop))
        proc.start()
        stops.append((stop, proc))
    time.sleep(0.1)
    value = statistics.median(probe() for _ in range(probes))
    for stop, proc in stops:
        stop.set()
        proc.join()
    return value


def after_sleep(n: int = 40) -> dict[str, float]:
    slept, busy = [], []
    for _ in range(n):
        time.sleep(0.05)
        slept.append(probe())
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.05:
            pass
        busy.append(probe())
    return {"after_sleep_us": round(statistics.median(slept), 1), "after_busy_us": round(statistics.median(busy), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="where to write the JSON")
    ap.add_argument("--sustained-s", type=float, default=20.0, help="seconds of back-to-back probes (default 20)")
    ap.add_argument("--idle-s", type=float, default=10.0, help="seconds of probes with sleeps between (default 10)")
    args = ap.parse_args()
    if not hasattr(os, "sched_setaffinity"):
        raise SystemExit("host_pace.py: needs Linux (sched_setaffinity)")
    cpus = sorted(os.sched_getaffinity(0))
    pinned = cpus[-1]  # CPU 0 takes more of the kernel's interrupts
    r: dict[str, Any] = {"what": __doc__.split("\n")[0], "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "machine": platform.node(), "cpus": cpus, "load_before": os.getloadavg(),
                         "pinned_cpu": pinned, "window_s": WINDOW_S, "slow_factor": SLOW_FACTOR}
    os.sched_setaffinity(0, {pinned})
    raw: list[float] = []
    sus = windows(args.sustained_s, 0.0, raw)
    fast = round(sorted(raw)[len(raw) // 10], 1)  # the fastest decile's edge: the host at full speed
    r["fast_pace_us"] = fast
    r["sustained"] = {"windows_us": sus, **mode_runs(sus, fast)}
    idle = windows(args.idle_s, 0.0005)
    r["idle"] = {"windows_us": idle, **mode_runs(idle, fast)}
    r["after_sleep"] = after_sleep()
    r["per_cpu_us"] = {}
    for c in cpus:
        os.sched_setaffinity(0, {c})
        r["per_cpu_us"][c] = round(statistics.median(probe() for _ in range(100)), 1)
    os.sched_setaffinity(0, {pinned})
    base = statistics.median(probe() for _ in range(200))
    others = [c for c in cpus if c != pinned]
    r["sibling"] = {"base_us": round(base, 1),
                    "ratio_with_spinner_on": {c: round(with_spinners([c], 100) / base, 3) for c in others}}
    r["all_busy_ratio"] = round(with_spinners(others, 200) / base, 3) if others else None
    r["load_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(r, indent=1) + "\n")
    for name in ("sustained", "idle"):
        x = r[name]
        print(f"{name}: fast pace {fast} us; slow windows {x['slow_share']:.0%}; slow runs (windows of {WINDOW_S} s) "
              f"{x['slow_run_windows'][:20]}; fast runs {x['fast_run_windows'][:20]}")
    print(f"after a sleep {r['after_sleep']['after_sleep_us']} us, after busy {r['after_sleep']['after_busy_us']} us; "
          f"per CPU {r['per_cpu_us']}")
    worst = max(r["sibling"]["ratio_with_spinner_on"].items(), key=lambda kv: kv[1], default=None)
    print(f"CPU {pinned} with one other CPU busy: worst ratio {worst}; all others busy: {r['all_busy_ratio']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
