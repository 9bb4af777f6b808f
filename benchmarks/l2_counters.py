"""Why the L2 curve reads what it reads: Nsight Compute counters on the L2 kernel (issue 17).

Runs the core's L2 read kernel at a near working set (1 MiB) and a far one (22 MiB, inside the
17-28 MB range where a published H200 figure is 9.8 TB/s), each with its best variant from
scripts/native-check, under ``ncu --clock-control none`` (the clocks as the measurement ran them),
and reports per working set:

- ``l1tex__t_sector_hit_rate.pct``: L1 hits (0 means ld.global.cg kept every load out of L1, so the
  near plateau is L2's);
- ``lts__t_sector_op_read_hit_rate.pct`` and ``dram__bytes_read.sum``: every read served by L2, none
  by HBM;
- ``lts__t_bytes.sum.per_second`` against the kernel's own figure, and
  ``lts__throughput.avg.pct_of_peak_sustained_elapsed``: how busy the L2 slices were;
- ``lts__t_sectors_srcunit_ltcfabric.sum`` (where the chip has it): sectors that crossed to the
  other L2 partition, the cost of the far plateau.

    python benchmarks/l2_counters.py OUT.json          # runs ncu on itself
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys

POINTS = {  # working set -> the variant that won it in the 2026-12-01 sweep
    1 << 20: {"threads": 512, "unroll": 8, "blocks_per_sm": 64, "load": "cg_spread"},
    22 << 20: {"threads": 256, "unroll": 4, "blocks_per_sm": 64, "load": "cg_spread"},
}
METRICS = ["gpu__time_duration.sum", "l1tex__t_sector_hit_rate.pct", "lts__t_sector_op_read_hit_rate.pct",
           "dram__bytes_read.sum", "lts__t_bytes.sum.per_second", "lts__t_bytes.sum",
           "lts__throughput.avg.pct_of_peak_sustained_elapsed", "sm__cycles_elapsed.avg.per_second"]
FABRIC = ["lts__t_sectors_srcunit_ltcfabric.sum", "lts__t_sectors.sum"]
BYTES_PER_LAUNCH = 1 << 30


def child() -> None:
    """Under ncu: one measurement per point (reps=3, warm-up 1); the kernel verifies its checksum."""
    from roofline_ext import _core

    for ws, cfg in POINTS.items():
        rows = _core.bandwidth_l2_read(0, ws, BYTES_PER_LAUNCH, 3, 1, [cfg])
        print(json.dumps({"ws": ws, "median_tbps": [r["bytes_per_launch"] / r["median_ms"] / 1e9 for r in rows],
                          "verified": [r["verification"]["passed"] for r in rows]}), flush=True)


def _ncu(metrics: list[str]) -> tuple[int, str, str]:
    # Every launch of the L2 kernel (verification, warm-up, timed reps: a handful per working set),
    # each 1 GiB of reads; the rows carry the launch ID in order, so both sets show.
    cmd = ["ncu", "--clock-control", "none", "--kernel-name", "regex:l2_read", "--csv", "--print-units", "base",
           "--metrics", ",".join(metrics), sys.executable, __file__, "--child"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def _parse(text: str) -> list[dict[str, str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def main(out: str) -> int:
    if shutil.which("ncu") is None:
        print("l2_counters: ncu is not on PATH", file=sys.stderr)
        return 3
    result: dict = {"points": {str(k): v for k, v in POINTS.items()}, "runs": []}
    for metrics in (METRICS, FABRIC):
        rc, so, se = _ncu(metrics)
        rows = _parse(so)
        result["runs"].append({"metrics": metrics, "rc": rc, "rows": [
            {"id": r.get("ID"), "kernel": r.get("Kernel Name", "")[:60], "metric": r.get("Metric Name"),
             "unit": r.get("Metric Unit"), "value": r.get("Metric Value")} for r in rows],
            "child_output": [ln for ln in so.splitlines() if ln.startswith("{")], "stderr_tail": se[-1500:]})
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    for run in result["runs"]:
        for r in run["rows"]:
            print(f"  launch {r['id']}: {r['metric']:55s} {r['value']} {r['unit']}")
        print("  child:", *run["child_output"], sep="\n    ")
        if run["rc"]:
            print(f"  ncu rc {run['rc']}: {run['stderr_tail'][-300:]}")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main(sys.argv[1]))
