"""Reads in step: why the far L2 plateau is what it is (issue 17).

The L2 kernel's spread order starts block b at nchunks * frac(passes * b / grid) of the working
set, so g = gcd(passes, grid) blocks share each start and read the same chunks in step for the
whole launch. The 2026-12-01 sweep's far points followed g, not the working set: 10.1 TB/s at 18
MiB (g = 6), 9.6 at 22 MiB (g = 3), 9.0-9.3 where g = 1. The core now takes the passes nearest
its target with g = 1 (``coprime_passes``); ``shared_starts=True`` keeps the old choice, so this
script can put a number on the effect:

- for each far working set (16-28 MiB) and two persistent spread shapes, the kernel with passes
  chosen for g = 1, 2, 3, ... (all near the usual 2 GiB per launch, every launch verified);
- the far plateau of reads that are not in step (g = 1) beside the best with g > 1;
- with ``--ncu`` (Nsight Compute on PATH), L2 counters for g = 1 and the largest g at one size:
  the sectors the SMs asked L2 for, the hit rate, the sectors that crossed between the two L2
  partitions, and how busy the slices were.

    python benchmarks/l2_sharing.py OUT.json [--ncu]
"""
from __future__ import annotations

import csv
import io
import json
import math
import shutil
import statistics
import subprocess
import sys
import time

MIB = 1 << 20
SIZES_MIB = (16, 18, 20, 22, 24, 26, 28)
CONFIGS = ({"threads": 256, "unroll": 4, "blocks_per_sm": 64, "load": "cg_spread"},
           {"threads": 1024, "unroll": 2, "blocks_per_sm": 64, "load": "cg_spread"})
SHARES = (1, 2, 3, 4, 6, 8, 11, 12, 16, 22, 24, 32, 33)
TARGET_BYTES = 2 << 30
REPS, WARMUP = 20, 3
NCU_MIB = 18
NCU_METRICS = ["gpu__time_duration.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
               "lts__t_sector_op_read_hit_rate.pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
               "lts__t_sectors_srcunit_ltcfabric.sum", "lts__t_sectors.sum"]


def passes_with_share(p0: int, grid: int, share: int) -> int | None:
    """The passes nearest p0 (within 40%) whose gcd with the grid is exactly ``share``."""
    for d in range(0, max(2, int(p0 * 0.4))):
        for p in (p0 + d, p0 - d):
            if p >= 1 and math.gcd(p, grid) == share:
                return p
    return None


def _tbps(row: dict, key: str) -> float:
    return row["bytes_per_launch"] / (row[key] * 1e-3) / 1e12


def _grid(core, cfg: dict) -> int:
    row = core.bandwidth_l2_read(0, 16 * MIB, 16 * MIB, 1, 0, [cfg])[0]
    if row.get("skipped"):
        raise RuntimeError(f"{cfg}: {row['skipped']}")
    return int(row["config"]["grid"])


def sweep(core) -> dict:
    out: dict = {"configs": [], "target_bytes_per_launch": TARGET_BYTES, "reps": REPS, "warmup": WARMUP}
    for cfg in CONFIGS:
        grid = _grid(core, cfg)
        label = f"{cfg['load']}/{cfg['threads']}x{cfg['unroll']}/persistent grid {grid}"
        entry: dict = {"label": label, "config": cfg, "grid": grid, "points": []}
        for mib in SIZES_MIB:
            ws = mib * MIB
            p0 = max(1, (TARGET_BYTES + ws // 2) // ws)
            for share in SHARES:
                if grid % share:
                    continue
                p = passes_with_share(p0, grid, share)
                if p is None:
                    continue
                row = core.bandwidth_l2_read(0, ws, p * ws, REPS, WARMUP, [cfg], shared_starts=True)[0]
                assert row["passes"] == p, (row["passes"], p)
                ok = bool(row["verification"]["passed"])  # the core raises on a failed check; belt and braces
                entry["points"].append({"mib": mib, "share": share, "passes": p, "verified": ok,
                                        "tbps_median": _tbps(row, "median_ms"), "tbps_best": _tbps(row, "best_ms"),
                                        "cv": row["cv"]})
            # The package's own choice (shared_starts False): must land on g = 1.
            row = core.bandwidth_l2_read(0, ws, TARGET_BYTES, REPS, WARMUP, [cfg])[0]
            entry["points"].append({"mib": mib, "share": math.gcd(row["passes"], grid), "passes": row["passes"],
                                    "verified": bool(row["verification"]["passed"]), "package_default": True,
                                    "tbps_median": _tbps(row, "median_ms"), "tbps_best": _tbps(row, "best_ms"),
                                    "cv": row["cv"]})
        out["configs"].append(entry)
    return out


def summarize(doc: dict) -> dict:
    pts = [dict(p, label=c["label"]) for c in doc["configs"] for p in c["points"] if p["verified"]]
    alone = [p for p in pts if p["share"] == 1]
    shared = [p for p in pts if p["share"] > 1]
    best_alone = max(alone, key=lambda p: p["tbps_median"])
    best_shared = max(shared, key=lambda p: p["tbps_median"])
    by_share: dict[int, list[float]] = {}
    for p in pts:
        by_share.setdefault(p["share"], []).append(p["tbps_median"])
    return {
        "far_plateau_not_in_step_tbps": best_alone["tbps_median"], "far_plateau_not_in_step_at": best_alone,
        "best_in_step_tbps": best_shared["tbps_median"], "best_in_step_at": best_shared,
        "median_tbps_by_share": {str(s): statistics.median(v) for s, v in sorted(by_share.items())},
        "package_default_shares": sorted({p["share"] for p in pts if p.get("package_default")}),
    }


def ncu_child() -> None:
    from roofline_ext import _core

    cfg = CONFIGS[0]
    grid = _grid(_core, cfg)
    ws = NCU_MIB * MIB
    p0 = (TARGET_BYTES + ws // 2) // ws
    for share in (1, max(s for s in SHARES if grid % s == 0 and passes_with_share(p0, grid, s))):
        p = passes_with_share(p0, grid, share)
        assert p is not None
        row = _core.bandwidth_l2_read(0, ws, p * ws, 2, 0, [cfg], shared_starts=True)[0]
        print(json.dumps({"share": share, "passes": p, "tbps_median": _tbps(row, "median_ms")}), flush=True)


def ncu() -> dict:
    cmd = ["ncu", "--clock-control", "none", "--kernel-name", "regex:l2_read", "--csv", "--print-units", "base",
           "--metrics", ",".join(NCU_METRICS), sys.executable, __file__, "--ncu-child"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    return {"command": " ".join(cmd[:8]) + " ...", "rc": p.returncode,
            "child": [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")],
            "rows": [{"id": r.get("ID"), "metric": r.get("Metric Name"), "unit": r.get("Metric Unit"),
                      "value": r.get("Metric Value")} for r in rows],
            "stderr_tail": p.stderr[-800:]}


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python benchmarks/l2_sharing.py OUT.json [--ncu]", file=sys.stderr)
        return 2
    from roofline_ext import _core

    t0 = time.perf_counter()
    doc = {"benchmark": "l2_sharing", "date": time.strftime("%Y-%m-%d"), "gpu": _core.cuda_devices()[0].get("name")}
    doc.update(sweep(_core))
    doc["summary"] = summarize(doc)
    if "--ncu" in argv:
        doc["ncu"] = ncu() if shutil.which("ncu") else {"skipped": "ncu is not on PATH"}
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    with open(argv[0], "w") as f:
        json.dump(doc, f, indent=1)
    for c in doc["configs"]:
        print(c["label"])
        for mib in SIZES_MIB:
            cells = [f"g={p['share']}{'*' if p.get('package_default') else ''}:{p['tbps_median']:.2f}"
                     for p in c["points"] if p["mib"] == mib]
            print(f"  {mib:3d} MiB  " + "  ".join(cells))
    s = doc["summary"]
    print(f"far plateau, reads not in step (g=1): {s['far_plateau_not_in_step_tbps']:.2f} TB/s "
          f"({s['far_plateau_not_in_step_at']['mib']} MiB); best in step: {s['best_in_step_tbps']:.2f} TB/s "
          f"(g={s['best_in_step_at']['share']}, {s['best_in_step_at']['mib']} MiB)")
    print("median by g:", ", ".join(f"{k}: {v:.2f}" for k, v in s["median_tbps_by_share"].items()))
    print("package default lands on g =", s["package_default_shares"])
    for r in (doc.get("ncu") or {}).get("rows", []):
        print(f"  ncu launch {r['id']}: {r['metric']:55s} {r['value']} {r['unit']}")
    if doc.get("ncu"):
        print("  ncu child:", doc["ncu"].get("child"), "rc", doc["ncu"].get("rc"))
    return 0


if __name__ == "__main__":
    if "--ncu-child" in sys.argv:
        ncu_child()
    else:
        sys.exit(main(sys.argv[1:]))
