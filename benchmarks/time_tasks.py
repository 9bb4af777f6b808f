"""Time every task in examples/ plus the task zoo with PyTorch eager on this GPU, and tabulate each
task's fraction of the datasheet floor and of the measured floor (issue: "how close to the limit is
PyTorch?").

Runs the real command, ``roofline-ext analyze DIR --time --json``, so the numbers are exactly what a
user gets (each task in its own process, L2 flushed before every trial, >= 100 trials). Measured
peaks come from the calibration cache (run ``roofline-ext calibrate`` first; scripts/gpu-check
does). Writes ``benchmarks/results/tasks-<gpu>-<date>.json`` and ``.md``; exits 1 when an eager time
falls below the measured floor (then the count or the peak is wrong and must be found).
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from task_zoo import write_zoo  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="TASK",
                    help="time only these tasks and replace their rows in today's table (after a fix)")
    args = ap.parse_args(argv)
    from roofline_ext.device.status import availability
    from roofline_ext.device.listing import device
    from roofline_ext.measure.timing import timing_overhead_us

    a = availability()
    if not a.ok:
        print(f"time_tasks: no GPU: {a.message}", file=sys.stderr)
        return 3
    gpu = device(0)
    work = Path(tempfile.mkdtemp(prefix="roofline-tasks-"))
    write_zoo(work)
    for f in sorted((HERE.parent / "examples").glob("*.py")):
        shutil.copy(f, work / f"example_{f.name}")
    if args.only:
        unknown = [t for t in args.only if not (work / f"{t}.py").exists()]
        if unknown:
            print(f"time_tasks: unknown task(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        for f in work.glob("*.py"):
            if f.stem not in args.only:
                f.unlink()
    out_json = work / "results.json"
    cmd = [sys.executable, "-m", "roofline_ext.cli", "analyze", str(work), "--time", "--json", str(out_json),
           "--no-progress", "--trials", "100", "--timeout", "120"]
    print("running:", " ".join(cmd), flush=True)
    rc = subprocess.run(cmd).returncode
    doc = json.loads(out_json.read_text())
    overhead = timing_overhead_us()

    rows, below = [], []
    for r in doc["tasks"]:
        if r["status"] != "ok":
            rows.append({"task": r["task"], "error": r.get("error")})
            continue
        roofs = r["roofs"]
        ds, me = roofs.get("datasheet") or {}, roofs.get("measured") or {}
        row = {
            "task": r["task"], "dtype": str(r["compute_dtype"]).replace("torch.", ""), "bound": r["bound"],
            "gflop": r["flops"] / 1e9, "simt_gflop": r["simt_flops"] / 1e9, "mb": r["bytes"] / 1e6,
            "t_ref_ms": r["t_ref_ms"], "cv": r["timing"]["reference"]["cv"],
            "floor_datasheet_ms": ds.get("t_min_ms"), "frac_datasheet": ds.get("ref_fraction"),
            "floor_measured_ms": me.get("t_min_ms"), "frac_measured": me.get("ref_fraction"),
            "bound_measured": me.get("bound"),
        }
        rows.append(row)
        if row["frac_measured"] is not None and row["frac_measured"] > 1.0:
            below.append(row["task"])

    stamp = dt.date.today().isoformat()
    slug = gpu.name.replace("NVIDIA ", "").replace(" ", "-").lower()
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    payload = {"gpu": gpu.name, "uuid": gpu.uuid, "driver": gpu.driver_version, "date": stamp,
               "command": " ".join(cmd[1:]), "timing_overhead_us": overhead, "tasks": rows,
               "below_measured_floor": below, "analyze_exit_code": rc, "analyze": doc}
    previous = res / f"tasks-{slug}-{stamp}.json"
    if args.only and previous.exists():
        # Keep the full table; the re-timed rows replace theirs, and say they come from a later run.
        old = json.loads(previous.read_text())
        new_rows = {r["task"]: dict(r, retimed=dt.datetime.now(dt.timezone.utc).isoformat(timespec="minutes"))
                    for r in rows}
        rows = [new_rows.pop(r["task"], r) for r in old["tasks"]] + list(new_rows.values())
        below = [r["task"] for r in rows if (r.get("frac_measured") or 0) > 1.0]
        old.setdefault("retimed", []).append({"tasks": args.only, "command": " ".join(cmd[1:]),
                                              "uuid": gpu.uuid, "analyze": doc})
        payload = dict(old, tasks=rows, below_measured_floor=below)
    (res / f"tasks-{slug}-{stamp}.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")

    def pct(x):
        return "-" if x is None else f"{x:.0%}"

    lines = [f"PyTorch eager on {gpu.name}, {stamp}: fraction of the roofline floor reached "
             f"(floor / time; 100% = at the hardware limit). Timing overhead per trial: "
             f"{payload['timing_overhead_us']:.2f} us. Rows marked * were re-timed in a later run after a fix.",
             "", "| task | dtype | bound | PyTorch ms | CV | floor ms (datasheet) | % datasheet | floor ms (measured) | % measured |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['task']} | error: {r['error']} ||||||||")
            continue
        fm = "-" if r["floor_measured_ms"] is None else f"{r['floor_measured_ms']:.4g}"
        lines.append(f"| {r['task']}{' *' if r.get('retimed') else ''} | {r['dtype']} | {r['bound']} | {r['t_ref_ms']:.4g} | {r['cv']:.1%} | "
                     f"{r['floor_datasheet_ms']:.4g} | {pct(r['frac_datasheet'])} | {fm} | {pct(r['frac_measured'])} |")
    (res / f"tasks-{slug}-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\ntiming overhead per trial (empty task): {overhead:.2f} us (budget 5 us)")
    if below:
        print(f"BELOW THE MEASURED FLOOR (count or peak wrong): {', '.join(below)}")
        return 1
    if overhead >= 5.0:
        return 1
    return 0 if rc in (0,) else 1


if __name__ == "__main__":
    sys.exit(main())
