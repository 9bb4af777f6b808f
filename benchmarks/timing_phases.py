"""Where a reference timing job's wall goes, phase by phase, on the GPU (issue 28).

The timing worker of ``analyze --time`` runs one ``time_reference`` job per task and, after each,
the checks that let it be reused (``compiling.reset``, ``process_state.changes``,
``gpu_backend.cleanup``). This script runs the same functions in one process, task after task,
with each phase wrapped in a timer, so the batch's per-task overhead (the wall of the job minus
its timed trials) can be split into what it is: loading the task file, building the model
(``Model(*init)`` and its move to the GPU), making the inputs, the first forward, the warm-up and
trials, and the after-job checks. The numbers are the functions' own; the worker's channel and the
runner's bookkeeping are not in them (the batch's ``wall_parts_s`` has those).

    python3 benchmarks/timing_phases.py OUT.json DIR [DIR...] [--limit N] [--weights auto|cpu] [--trials N]

``--weights cpu`` draws the initial weights on the CPU as the first versions did (``auto``: as the
job does, on the GPU with ``--inputs auto``), so the two builds can be compared on one machine.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable


def _timer(phases: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            phases[name] = phases.get(name, 0.0) + time.perf_counter() - t0
    return wrapped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--limit", type=int, default=0, help="at most N tasks per folder (0: all)")
    ap.add_argument("--weights", choices=("auto", "cpu"), default="auto")
    ap.add_argument("--trials", type=int, default=None,
                    help="a fixed count (default: adaptive, as analyze --time; the first run of this "
                    "script, 2026-12-02, used the function's default of 100 fixed trials)")
    args = ap.parse_args(argv)

    import torch

    from roofline_ext.measure import task_timing as measured
    from roofline_ext.runner import compiling, gpu_backend, process_state, timing_jobs
    from roofline_ext.tasks import building

    setup = gpu_backend.setup(0)
    compiling.reset()
    before = process_state.snapshot(renew=compiling.reset)
    phases: dict[str, float] = {}
    # The functions the job calls, by the names it looks them up under (the job is runner/timing_jobs.py;
    # it builds with tasks/building.py and times with measure/task_timing.py).
    building.load_task = _timer(phases, "load", building.load_task)
    building.make_inputs = _timer(phases, "inputs", building.make_inputs)
    measured.time_call = _timer(phases, "trials+warmup", measured.time_call)
    timing_jobs.L2Flush = _timer(phases, "flush_buffer", timing_jobs.L2Flush)
    building.build_where = _timer(phases, "build", building.build_where)
    if args.weights == "cpu":
        timing_jobs.weights_for = lambda inputs: "cpu"
    rows = []
    for d in args.dirs:
        files = sorted(Path(d).glob("*.py"), key=lambda p: (len(p.name.split("_")[0]), p.name))
        if args.limit:
            files = files[:args.limit]
        for f in files:
            phases.clear()
            t0 = time.perf_counter()
            row: dict[str, Any] = {"task": f"{Path(d).name}/{f.stem}"}
            try:
                res = timing_jobs.time_reference(f, trials=args.trials)
                row["t_ref_ms"] = res["t_ref_ms"]
                row["trials"] = res["reference"]["trials"]
                row["timed_s"] = res["reference"].get("timed_s")
            except Exception as exc:  # a task that fails is a row, not the end
                row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            row["job_s"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            compiling.reset()
            phases["after:reset"] = time.perf_counter() - t1
            t1 = time.perf_counter()
            changed = process_state.changes(before)
            phases["after:state_check"] = time.perf_counter() - t1
            t1 = time.perf_counter()
            reasons = gpu_backend.cleanup(0)
            phases["after:cleanup"] = time.perf_counter() - t1
            row["phases_s"] = dict(phases)
            row["replace"] = changed + reasons
            if row["replace"]:
                before = process_state.snapshot(renew=compiling.reset)
            rows.append(row)
            print(f"{row['task']}: {row['job_s']:.2f} s " + " ".join(f"{k}={v:.3f}" for k, v in phases.items()),
                  file=sys.stderr, flush=True)
    total: dict[str, float] = defaultdict(float)
    for r in rows:
        for k, v in r["phases_s"].items():
            total[k] += v
    summary = {"tasks": len(rows), "job_s": sum(r["job_s"] for r in rows),
               "timed_s": sum(r.get("timed_s") or 0 for r in rows),
               "phases_s": dict(sorted(total.items(), key=lambda kv: -kv[1])),
               "median_job_s": statistics.median(r["job_s"] for r in rows) if rows else None}
    doc = {"benchmark": "timing_phases", "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "setup": setup,
           "weights": args.weights, "dirs": args.dirs, "trials": args.trials or "adaptive",
           "summary": summary, "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
