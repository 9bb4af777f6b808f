"""Issue 28's figure: the wall and peak memory of counting KernelBench levels 1-3 (250 tasks), as a
user runs it.

It runs the real command, ``python3 -m roofline_ext.cli analyze LEVEL1 LEVEL2 LEVEL3 --json OUT
--no-progress`` (count-only: no ``--time``), as a subprocess, ``--repeat`` times one after another,
and writes a JSON result: the date, the machine's cores, every wall, their median, the peak memory
and the git commit. The goal is at most 15 s and 2 GiB on a 2-core machine.

Peak memory is ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` read after each run: the largest
peak RSS of any single process of the command's tree that has been waited for (the command itself,
its fork server, each worker). It is not the sum over processes that run at the same time, and it
counts pages shared between the fork server and its workers in full, in each. Each run is measured
in a fresh child (the script forks a runner per repetition) so that one repetition's peak does not
hide the next one's.

    python3 benchmarks/count_levels_wall.py OUT.json [--kernelbench ../shared/kernelbench] [--repeat 3]

The default KernelBench folder is ``../shared/kernelbench`` relative to the repository root.
Measure on an otherwise idle machine: the figure is a wall time.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LEVELS = ("level1", "level2", "level3")


def git_commit() -> str | None:
    """HEAD's commit, with -dirty when tracked files differ (levels_time.py uses it too)."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out + ("-dirty" if dirty else "")


def _one_run(cmd: list[str], env: dict[str, str]) -> dict:
    """Run ``cmd`` in a child of a fresh fork, so that RUSAGE_CHILDREN covers this run alone; the
    fork reports its figures through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fresh runner: its RUSAGE_CHILDREN starts empty
        os.close(r)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        report = {"wall_s": wall, "rc": proc.returncode, "peak_rss_kib": usage.ru_maxrss,
                  "cpu_s": usage.ru_utime + usage.ru_stime, "stderr_tail": proc.stderr.decode(errors="replace")[-2000:]}
        with os.fdopen(w, "w") as fh:
            json.dump(report, fh)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def _summary(json_path: Path) -> dict:
    """Tasks counted and failed, from the command's own JSON report."""
    try:
        doc = json.loads(json_path.read_text())
    except (OSError, ValueError):
        return {}
    rows = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        return {}
    failed = sorted(row.get("task", "?") for row in rows if isinstance(row, dict) and row.get("status") != "ok")
    return {"tasks": len(rows), "failed": failed, "isolation": doc.get("isolation")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="where the JSON result goes")
    ap.add_argument("--kernelbench", type=Path, default=REPO.parent / "shared" / "kernelbench",
                    help="the KernelBench folder holding level1..level3 (default ../shared/kernelbench)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs the command")
    args = ap.parse_args(argv)

    levels = [args.kernelbench / lv for lv in LEVELS]
    missing = [str(p) for p in levels if not p.is_dir()]
    if missing:
        ap.error(f"no KernelBench level folder: {', '.join(missing)}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    load_before = os.getloadavg()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "analyze.json"
        cmd = [args.python, "-m", "roofline_ext.cli", "analyze", *map(str, levels), "--json", str(report),
               "--no-progress"]
        for i in range(args.repeat):
            load = os.getloadavg()
            run = _one_run(cmd, env)
            run.update(_summary(report))
            run["load_avg_before"] = load  # other work on the machine inflates wall and CPU alike
            runs.append(run)
            print(f"run {i + 1}: {run['wall_s']:.2f} s wall, {run['cpu_s']:.1f} s CPU, peak RSS {run['peak_rss_kib'] / 2**20:.2f} GiB, "
                  f"rc {run['rc']}", file=sys.stderr)
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    result = {
        "what": "python3 -m roofline_ext.cli analyze level1 level2 level3 --json OUT --no-progress (count only)",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_avg_before": load_before},
        "git_commit": git_commit(),
        "kernelbench": str(args.kernelbench),
        "walls_s": walls,
        "median_wall_s": statistics.median(walls),
        # CPU of the whole process tree (RUSAGE_CHILDREN: the command, its fork server, every
        # worker): on a shared 2-core machine the steadier figure of the two
        "cpu_s": cpus,
        "median_cpu_s": statistics.median(cpus),
        "peak_rss_gib": max(r["peak_rss_kib"] for r in runs) / 2**20,
        "peak_rss_is": "max over runs of getrusage(RUSAGE_CHILDREN).ru_maxrss: the largest single process "
                       "of the command's tree (not a sum over processes)",
        "env": {k: os.environ[k] for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX") if k in os.environ},
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    # The command exits 1 when a task fails (KernelBench's Mamba2 tasks need einops, which may be
    # missing): that is still a measured run; only no report at all is a failure of the measurement.
    return 0 if all(r.get("tasks") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
