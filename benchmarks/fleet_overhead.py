"""What does the Dask fleet add beyond the checks themselves? (issue 18: ≤ 5 s with 4 workers)

Starts a real ``distributed.LocalCluster`` of N worker processes on this host (one ``GPU``
resource each, as dask-cuda declares them), runs ``roofline-ext fleet --scheduler ADDRESS --json``
as a user would (a fresh command, its start-up included) and reports:

- ``command_wall_s``: the whole command, from exec to exit;
- ``fleet_wall_s``: the fleet's own wall (connect, inventory, schedule, gather);
- ``critical_path_s``: the longest chain of checks. Workers that share one physical GPU take turns
  (the fleet chains them), so on a one-GPU host the chain is the sum of their checks; with one GPU
  per worker it is the slowest worker's check;
- ``overhead_s`` = fleet wall − critical path, and ``command_overhead_s`` = command wall − critical path.

    python benchmarks/fleet_overhead.py OUT.json [--workers 4]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args(argv)

    import distributed

    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, resources={"GPU": 1}, silence_logs=50) as cluster:
        cmd = [sys.executable, "-m", "roofline_ext.cli", "fleet", "--scheduler", cluster.scheduler_address, "--json"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        command_wall = time.monotonic() - t0
    doc = json.loads(proc.stdout)
    cp = doc["critical_path_s"]
    uuids = {r.get("uuid") for r in doc["results"] if r.get("uuid")}
    result = {
        "workers": args.workers, "gpus": len(uuids), "shared_gpus": len(uuids) < len(doc["results"]),
        "verdict": doc["verdict"], "exit_code": proc.returncode,
        "worker_check_wall_s": [r["wall_s"] for r in doc["results"]],
        "command_wall_s": round(command_wall, 3), "fleet_wall_s": doc["wall_s"], "critical_path_s": cp,
        "overhead_s": doc["overhead_s"], "command_overhead_s": round(command_wall - cp, 3),
        "target_s": 5.0, "fleet": doc, "stderr_tail": proc.stderr[-2000:],
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"fleet of {args.workers} workers on {len(uuids)} GPU(s): command {command_wall:.2f} s, fleet "
          f"{doc['wall_s']:.2f} s, critical path {cp:.2f} s -> overhead {doc['overhead_s']:.2f} s "
          f"(command {command_wall - cp:.2f} s; target <= 5 s)")
    return 0 if command_wall - cp <= 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
