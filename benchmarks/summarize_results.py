"""The short table scripts/gpu-check prints last: the newest results of each benchmark in
benchmarks/results/, ours against the peers measured in the same run."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def newest(pattern: str) -> dict | None:
    files = [f for f in RESULTS.glob(pattern) if "harness" not in f.name and "peers" not in f.name]
    for f in sorted(files, key=lambda f: f.stat().st_mtime, reverse=True):
        try:
            return json.loads(f.read_text())
        except ValueError:  # a run cut short: look at the one before
            continue
    return None


def fmt(x) -> str:
    return "?" if x is None else f"{x:.4g}"


def main() -> int:
    rows: list[tuple[str, str, str, str]] = []
    bw = newest("bandwidth-*.json")
    if bw:
        pats = bw["ours"]["patterns"]
        theo = bw["ours"].get("theoretical_tbps")
        for pat, peer in (("read", "torch_sum"), ("write", "torch_fill"), ("copy", "torch_copy"), ("triad", "torch_triad")):
            p = pats.get(pat)
            if p:
                ratio = bw["ratios"].get(f"{pat}/{peer}")
                rows.append((f"HBM {pat}", f"{p['tbps_median']:.3f} TB/s ({p['tbps_median'] / theo:.1%} of NVML)",
                             f"{peer} {bw['peers'][peer]['tbps_median']:.3f}", f"{ratio:.3f}x" if ratio else "-"))
        if bw["ours"].get("l2"):
            rows.append(("L2 read plateau", f"{bw['ours']['l2']['plateau_tbps']:.2f} TB/s", "-", "-"))
    cp = newest("compute-*.json")
    if cp and cp.get("ours"):
        for prec, r in cp["ours"]["precisions"].items():
            if r.get("status") != "ok":
                rows.append((f"{prec}", f"unsupported ({r.get('reason', '')[:40]})", "-", "-"))
                continue
            peer = (cp["peers"].get(prec) or {}).get("best") or {}
            ratio = cp["ratios"].get(prec)
            rows.append((f"{prec} ({r.get('path')})", f"{r['tflops_median']:.1f} TFLOP/s",
                         f"{peer.get('op', 'peer')} {peer['tflops_median']:.1f}" if peer else "-",
                         f"{ratio:.3f}x" if ratio else "-"))
    walls = RESULTS / "walltimes.txt"
    if walls.exists():
        for line in walls.read_text().splitlines():
            label, ms = line.split()
            budget = {"calibrate-quick": "budget 15 s", "calibrate-full": "budget 180 s"}.get(label, "-")
            rows.append((label, f"wall {int(ms) / 1000:.1f} s (start-up included)", budget, "-"))
    full = newest("calibration-full-*.json")
    if full:
        for unit, e in (full.get("sustained") or {}).get("entries", {}).items():
            b = (full.get("burst") or {}).get("entries", {}).get(unit, {})
            rows.append((f"sustained {unit}", f"{fmt(e.get('value'))} at {fmt(e.get('sm_clock_mhz'))} MHz, "
                         f"{fmt(e.get('power_w'))} W", f"burst {fmt(b.get('value'))}", "-"))
    tk = newest("tasks-*.json")
    if tk:
        fr = [t["frac_measured"] for t in tk["tasks"] if t.get("frac_measured") is not None]
        fd = [t["frac_datasheet"] for t in tk["tasks"] if t.get("frac_datasheet") is not None]
        errs = sum(1 for t in tk["tasks"] if "error" in t)
        if fd:
            rows.append((f"{len(tk['tasks'])} tasks, eager", f"median {statistics.median(fd):.0%} of datasheet floor",
                         f"median {statistics.median(fr):.0%} of measured" if fr else "no measured roof",
                         f"{len(tk['below_measured_floor'])} below floor, {errs} errors"))
        rows.append(("timing overhead", f"{tk['timing_overhead_us']:.2f} us/trial", "budget 5 us", "-"))
    if not rows:
        print("no results in benchmarks/results/")
        return 1
    header = ("what", "ours", "peer (same run)", "ratio")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
