"""What one strict comparison costs on this machine: the one-round-trip path of judge/compare.py
against its elementwise (exact) path, and the judge's other per-set work (clone, digest), on
output sizes KernelBench level 1 produces (up to 1.6 G elements: 19_ReLU's 4096 x 393216).

    python3 benchmarks/judge_compare_speed.py OUT.json [--device cuda|cpu]

Each figure is the median of 5 calls after one warm-up, synchronised wall-clock seconds (the
judge's cost is host wall time: its synchronises are part of it).
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from roofline_ext.judge import compare as cmp
from roofline_ext.judge import guard


def _wall(fn, dev, reps: int = 5) -> float:
    fn()
    out = []
    for _ in range(reps):
        torch.cuda.synchronize(dev) if dev.type == "cuda" else None
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize(dev) if dev.type == "cuda" else None
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def _row(n: int, dtype: torch.dtype, dev: torch.device) -> dict:
    """One size and dtype: each path's comparison and digest, timed on the same pair of outputs."""
    ref = torch.randn(n, device=dev, dtype=dtype)
    new = ref + (1e-6 * torch.randn(n, device=dev)).to(dtype)
    tol = 1e-4 if dtype == torch.float32 else 1e-2
    verdicts = []
    row: dict = {"elements": n, "dtype": str(dtype).replace("torch.", "")}
    fast, native, core_fn = cmp._accumulate, cmp._native_sums, guard.cuda_function
    # native: the GPU pass (csrc/judge_stats.cu); fast: the torch path in one round trip per chunk;
    # exact: the elementwise torch path (the judge's first version).
    for name, native_on, acc in (("native", True, fast), ("fast", False, fast), ("exact", False, cmp._accumulate_exact)):
        cmp._accumulate = acc
        cmp._native_sums = native if native_on else (lambda *_: None)
        guard.cuda_function = core_fn if native_on else (lambda name: None)  # the digest's torch path
        try:
            row[f"compare_{name}_s"] = _wall(lambda: verdicts.append(cmp.compare_outputs(ref, new, tol)), dev)
            row[f"digest_{name}_s"] = _wall(lambda: guard.digest(ref), dev) if name != "exact" else None
        finally:
            cmp._accumulate, cmp._native_sums, guard.cuda_function = fast, native, core_fn
    row["same_verdict"] = len({(v.ok, v.kind) for v in verdicts}) == 1 and verdicts[0].ok
    row["clone_s"] = _wall(lambda: ref.clone(), dev)
    row["speedup_native_over_exact"] = row["compare_exact_s"] / row["compare_native_s"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    dev = torch.device(a.device)
    sizes = [1 << 20, 1 << 26, 4096 * 393216] if dev.type == "cuda" else [1 << 20, 1 << 24]
    rows = []
    for n in sizes:
        for dtype in (torch.float32, torch.bfloat16):
            rows.append(_row(n, dtype, dev))
            print(json.dumps(rows[-1]), flush=True)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "rows": rows}
    Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["same_verdict"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
