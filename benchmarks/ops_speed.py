"""Per-op analysis against today's whole-task count, on KernelBench L3 ResNet101 and DenseNet201
(issue 16: per-op at most 2x the count), each measured in fresh processes.

    python benchmarks/ops_speed.py [KB_LEVEL3_DIR] [--out FILE.json]

Per task and mode, 3 fresh interpreters each count the task 3 times (the first count of a process
pays torch's warm-up, so both the first and the warm median are reported): ``count`` is
``count_task(path)``; ``ops`` is ``count_task(path, ops=True)`` plus the per-op floors on the H200
datasheet roof (``analyze_task(..., per_op=True)`` with those counts).
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("10_ResNet101", "16_DenseNet201")

CHILD = r"""
import json, sys, time
from roofline_ext.runner.analyze import analyze_task
from roofline_ext.tasks.counting import count_task
path, mode = sys.argv[1], sys.argv[2]
ts = []
for _ in range(3):
    t0 = time.perf_counter()
    c = count_task(path, ops=(mode == "ops"))
    if mode == "ops":
        analyze_task(path, "H200", per_op=True, counts=c, measured=None)
    ts.append(time.perf_counter() - t0)
print(json.dumps(ts))
"""


def main() -> int:
    args = sys.argv[1:]
    out = None
    if "--out" in args:
        out = args[args.index("--out") + 1]
        del args[args.index("--out"):args.index("--out") + 2]
    level3 = Path(args[0]) if args else ROOT / ".." / "shared" / "kernelbench" / "level3"
    env = {"PYTHONPATH": str(ROOT / "python")}
    import os
    env = {**os.environ, **env}
    result = {}
    for name in TASKS:
        path = str(level3 / f"{name}.py")
        per = {}
        for mode in ("count", "ops"):
            runs = [json.loads(subprocess.check_output([sys.executable, "-c", CHILD, path, mode], env=env))
                    for _ in range(3)]
            per[mode] = {"first_s": statistics.median(r[0] for r in runs),
                         "warm_s": statistics.median(t for r in runs for t in r[1:])}
        per["ratio_warm"] = per["ops"]["warm_s"] / per["count"]["warm_s"]
        per["ratio_first"] = per["ops"]["first_s"] / per["count"]["first_s"]
        result[name] = per
        print(name, json.dumps(per))
    if out:
        Path(out).write_text(json.dumps(result, indent=1))
    return 0 if all(r["ratio_warm"] <= 2 and r["ratio_first"] <= 2 for r in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
