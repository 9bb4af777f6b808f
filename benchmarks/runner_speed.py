"""How fast is the runner, and does reusing workers bias the times? Old path against new, side by side.

Every figure comes from the real command, ``python -m roofline_ext.cli analyze ...``, run as a user
runs it; ``--isolation process`` is the first versions' path (counting in the command's own process,
timing in a fresh interpreter per task), the default is the pool (docs/runner.md). Sections:

``count``    counting KernelBench levels 1-3: wall and peak memory (PSS and RSS summed over the
             command and all its worker processes), per level and as one batch of all 250 tasks;
             new and old path. Needs no GPU.
``level1``   ``analyze level1 --time`` (100 trials, L2 flushed): wall, new and old path
             (``--old-limit N`` times only the first N tasks on the old path and scales up).
``bias``     ``t_ref`` of 10 tasks, old path against new, alternating rounds, the same input
             placement on both (``--inputs cpu``): reuse must not move a time by more than 3 %.
             The new path's default placement (``--inputs auto``) is reported beside it.
``trivial``  a task computing ``x + 1`` on 1,024 floats: ``analyze TINY.py --time`` alone, old and
             new, and the time it adds inside a batch (its own ``wall_s``, and the difference
             between a batch of 11 copies and one of 1, per copy).

Python's bytecode cache: on a machine whose torch has none, imports take 2-3 times longer. By
default the script points ``PYTHONPYCACHEPREFIX`` at a folder next to OUT.json and fills it once
before measuring (``--no-pycache`` measures without it); the JSON says which.

    python benchmarks/runner_speed.py OUT.json --kernelbench ../shared/kernelbench \\
        [--sections count,level1,bias,trivial] [--level1-paths new,old] [--trials 100]
        [--old-limit N] [--device 0]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SECTIONS = ("count", "level1", "bias", "trivial")
TINY = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(1024)]


def get_init_inputs():
    return []
"""


# --- running the command and watching its memory ----------------------------------------------------

def _tree_memory(root: int) -> tuple[int, int]:
    """PSS and RSS in bytes, summed over ``root`` and every process below it (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    pss = rss = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key in ("Pss", "Rss"):
                    kib = int(rest.split()[0]) * 1024
                    pss, rss = (pss + kib, rss) if key == "Pss" else (pss, rss + kib)
        except OSError:
            continue
    return pss, rss


def run(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``; its wall time, exit code, peak memory of its process tree, last stderr lines."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = [0, 0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            pss, rss = _tree_memory(proc.pid)
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    if Path("/proc/self/smaps_rollup").exists():
        watcher.start()
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    done.set()
    return {"cmd": " ".join(cmd[2:]), "wall_s": round(wall, 3), "rc": proc.returncode,
            "peak_pss_mib": round(peak[0] / 2**20, 1), "peak_rss_sum_mib": round(peak[1] / 2**20, 1),
            "stdout": out, "stderr_tail": err.strip().splitlines()[-6:]}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.work = Path(tempfile.mkdtemp(prefix="runner_speed_"))
        self.env = self._env()
        self.report: dict[str, Any] = {"benchmark": "runner_speed", "date": dt.datetime.now().isoformat(timespec="seconds"),
                                       "machine": _machine(self.env), "pycache": self.env.get("PYTHONPYCACHEPREFIX"),
                                       "sections": {}, "targets": {
                                           "level1_time_wall_s": 180, "trivial_added_s": 0.5,
                                           "bias_t_ref_rel": 0.03, "count_l1_l3_wall_s": 15,
                                           "count_l1_l3_memory_gib": 2}}

    def _env(self) -> dict[str, str]:
        import roofline_ext

        env = dict(os.environ, PYTHONUNBUFFERED="1")
        root = str(Path(roofline_ext.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        if not self.args.no_pycache:
            cache = Path(self.args.pycache or self.out.with_suffix(".pycache")).resolve()
            cache.mkdir(parents=True, exist_ok=True)
            env["PYTHONPYCACHEPREFIX"] = str(cache)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            # Fill the cache once, so that no measured run pays for writing it.
            subprocess.run([sys.executable, "-c", "import torch, torch._dynamo, roofline_ext.cli, "
                            "roofline_ext.runner.forkserver, roofline_ext.tasks.counting"], env=env, check=False)
        return env

    def cli(self, *argv: str) -> dict[str, Any]:
        return run([sys.executable, "-m", "roofline_ext.cli", "analyze", *argv, "--no-progress"], self.env)

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.report, indent=1, default=str) + "\n")

    def level(self, n: int) -> Path:
        p = Path(self.args.kernelbench) / f"level{n}"
        if not p.is_dir():
            raise SystemExit(f"runner_speed: {p}: no such folder (give --kernelbench)")
        return p

    def subset(self, name: str, files: list[Path]) -> Path:
        d = self.work / name
        d.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy(f, d / f.name)
        return d

    def timing_args(self) -> list[str]:
        return ["--time", "--trials", str(self.args.trials), "--device", str(self.args.device),
                "--timeout", str(self.args.timeout)]


def _doc(res: dict[str, Any], path: Path | None = None) -> dict[str, Any]:
    text = path.read_text() if path is not None and path.exists() else res.get("stdout") or "{}"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {}


def _slim(res: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in res.items() if k != "stdout"}


# --- sections ------------------------------------------------------------------------------------------

def section_count(b: Bench) -> dict[str, Any]:
    levels = [int(n) for n in b.args.count_levels.split(",")]
    out: dict[str, Any] = {"per_level": {}, "levels": levels}
    for n in levels:
        row = {}
        for path, extra in (("new", []), ("old", ["--isolation", "process"])):
            res = b.cli(str(b.level(n)), "--gpu", "H200", "--json", *extra)
            s = _doc(res).get("summary", {})
            row[path] = {**_slim(res), "tasks": s.get("total"), "ok": s.get("ok")}
        out["per_level"][n] = row
    for path in ("new", "old"):
        lv = [out["per_level"][n][path] for n in levels]
        out[f"{path}_per_level_commands"] = {"wall_s": round(sum(r["wall_s"] for r in lv), 2),
                                         "peak_pss_mib": max(r["peak_pss_mib"] for r in lv),
                                         "peak_rss_sum_mib": max(r["peak_rss_sum_mib"] for r in lv)}
    script = ("import sys; from pathlib import Path\n"
              "from roofline_ext.model.gpu import resolve_gpu\n"
              "from roofline_ext.runner.batch import BatchOptions, run_batch\n"
              "from roofline_ext.tasks.loading import find_task_files\n"
              f"paths = [p for n in {tuple(levels)!r} for p in find_task_files(Path({str(Path(b.args.kernelbench).resolve())!r}) / f'level{{n}}')]\n"
              "rs = run_batch(paths, resolve_gpu('H200'), BatchOptions(isolation=sys.argv[1]))\n"
              "print(len(rs), sum(r['status'] == 'ok' for r in rs))\n")
    for path, iso in (("new", "pool"), ("old", "process")):
        res = run([sys.executable, "-c", script, iso], b.env)
        total, ok = (res["stdout"].split() + ["0", "0"])[:2]
        out[f"{path}_one_batch"] = {**_slim(res), "tasks": int(total), "ok": int(ok)}
    return out


def section_level1(b: Bench) -> dict[str, Any]:
    level1 = b.level(1)
    from roofline_ext.tasks.loading import find_task_files

    tasks = find_task_files(level1)
    out: dict[str, Any] = {}
    if "new" in b.args.level1_paths:
        res = b.cli(str(level1), *b.timing_args(), "--json", str(b.work / "l1_new.json"))
        doc = _doc(res, b.work / "l1_new.json")
        out["new"] = {**_slim(res), **_level_figures(doc)}
    if "old" not in b.args.level1_paths:
        return out
    old_tasks = tasks[: b.args.old_limit] if b.args.old_limit else tasks
    folder = b.subset("l1_old", old_tasks) if b.args.old_limit else level1
    res = b.cli(str(folder), *b.timing_args(), "--isolation", "process", "--inputs", "cpu",
                "--json", str(b.work / "l1_old.json"))
    doc = _doc(res, b.work / "l1_old.json")
    out["old"] = {**_slim(res), **_level_figures(doc), "tasks_run": len(old_tasks),
                  "wall_s_scaled_to_level": round(res["wall_s"] * len(tasks) / max(1, len(old_tasks)), 1)}
    if "new" in out:
        out["speedup_wall"] = round(out["old"]["wall_s_scaled_to_level"] / out["new"]["wall_s"], 2)
    return out


def _level_figures(doc: dict[str, Any]) -> dict[str, Any]:
    tasks = doc.get("tasks") or []
    walls = [t["wall_s"] for t in tasks if t.get("wall_s") is not None]
    slow = sorted(tasks, key=lambda t: -(t.get("wall_s") or 0))[:5]
    return {"tasks": len(tasks), "ok": sum(t.get("status") == "ok" for t in tasks),
            "failures": [(t["task"], t.get("error")) for t in tasks if t.get("status") != "ok"][:20],
            "wall_per_task_median_s": round(statistics.median(walls), 3) if walls else None,
            "slowest": [(t["task"], t.get("wall_s")) for t in slow],
            "worker_replacements": sum(1 for t in tasks if t.get("worker_replaced"))}


def section_bias(b: Bench) -> dict[str, Any]:
    from roofline_ext.tasks.loading import find_task_files

    tasks = find_task_files(b.level(1))
    if b.args.bias_tasks:
        names = set(b.args.bias_tasks.split(","))
        tasks = [t for t in tasks if t.stem in names or t.name in names]
    folder = b.subset("bias", tasks[:10])
    runs = {"old": ["--isolation", "process", "--inputs", "cpu"], "new": ["--inputs", "cpu"], "new_auto": []}
    times: dict[str, dict[str, list[float]]] = {k: {} for k in runs}
    for rnd in range(b.args.bias_rounds):
        for path, extra in runs.items():
            out_json = b.work / f"bias_{path}_{rnd}.json"
            res = b.cli(str(folder), *b.timing_args(), *extra, "--json", str(out_json))
            for t in _doc(res, out_json).get("tasks") or []:
                if t.get("t_ref_ms"):
                    times[path].setdefault(t["task"], []).append(t["t_ref_ms"])
    rows, worst = [], 0.0
    for task in sorted(times["old"]):
        old = statistics.median(times["old"][task])
        new = statistics.median(times["new"].get(task, [float("nan")]))
        auto = statistics.median(times["new_auto"].get(task, [float("nan")]))
        rel = new / old - 1
        worst = max(worst, abs(rel)) if rel == rel else worst
        rows.append({"task": task, "t_ref_old_ms": old, "t_ref_new_ms": new, "rel_diff": round(rel, 4),
                     "t_ref_new_inputs_auto_ms": auto, "rounds_old": times["old"][task],
                     "rounds_new": times["new"].get(task)})
    return {"tasks": rows, "max_abs_rel_diff": round(worst, 4), "within_3_percent": worst <= 0.03,
            "rounds": b.args.bias_rounds}


def section_trivial(b: Bench) -> dict[str, Any]:
    one = b.work / "tiny" / "tiny.py"
    one.parent.mkdir(parents=True, exist_ok=True)
    one.write_text(TINY)
    out: dict[str, Any] = {}
    out["alone_new"] = _slim(b.cli(str(one), *b.timing_args(), "--json"))
    out["alone_old"] = _slim(b.cli(str(one), *b.timing_args(), "--isolation", "process", "--inputs", "cpu", "--json"))
    from roofline_ext.tasks.loading import find_task_files

    batch = b.subset("tiny_in_batch", find_task_files(b.level(1))[:10])
    shutil.copy(one, batch / "999_tiny.py")
    res = b.cli(str(batch), *b.timing_args(), "--json", str(b.work / "tiny_batch.json"))
    tiny = next((t for t in _doc(res, b.work / "tiny_batch.json").get("tasks") or [] if t["task"] == "999_tiny"), {})
    out["in_batch_wall_s"] = tiny.get("wall_s")
    out["in_batch_wall_parts_s"] = tiny.get("wall_parts_s")
    walls = {}
    for k in (1, 11):
        d = b.work / f"tiny_x{k}"
        d.mkdir(parents=True, exist_ok=True)
        for i in range(k):
            shutil.copy(one, d / f"{i}_tiny.py")
        walls[k] = b.cli(str(d), *b.timing_args(), "--json", str(d / "out.json"))["wall_s"]
    out["batch_of_1_wall_s"], out["batch_of_11_wall_s"] = walls[1], walls[11]
    out["added_per_trivial_task_s"] = round((walls[11] - walls[1]) / 10, 3)
    return out


def _machine(env: dict[str, str]) -> dict[str, Any]:
    probe = ("import json, os, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
             "'gpu': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}))")
    try:
        info = json.loads(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                         timeout=300).stdout or "{}")
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        info = {}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {**info, "python": platform.python_version(), "cpus": cpus, "platform": platform.platform(),
            "loadavg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="where to write the JSON report")
    ap.add_argument("--kernelbench", default=str(Path(__file__).resolve().parents[2] / "shared" / "kernelbench"),
                    help="the folder holding level1, level2, level3 (default ../shared/kernelbench)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="per-task limit passed to analyze")
    ap.add_argument("--old-limit", type=int, default=0, metavar="N",
                    help="time only the first N level-1 tasks on the old path and scale (0: all)")
    ap.add_argument("--count-levels", default="1,2,3", help="the levels the count section counts")
    ap.add_argument("--level1-paths", default="new,old",
                    help="which paths the level1 section runs: new, old or both (to split a long run)")
    ap.add_argument("--bias-tasks", help="comma-separated task names for the bias section (default: first 10)")
    ap.add_argument("--bias-rounds", type=int, default=2)
    ap.add_argument("--pycache", help="PYTHONPYCACHEPREFIX folder (default: next to OUT.json)")
    ap.add_argument("--no-pycache", action="store_true", help="measure without a bytecode cache")
    args = ap.parse_args(argv)
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(wanted) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    b = Bench(args)
    gpu = b.report["machine"].get("gpu")
    for name in wanted:
        if name != "count" and not gpu:
            b.report["sections"][name] = {"skipped": "no GPU on this machine"}
            continue
        t0 = time.monotonic()
        print(f"runner_speed: {name} ...", file=sys.stderr, flush=True)
        b.report["sections"][name] = {**globals()[f"section_{name}"](b), "section_wall_s": round(time.monotonic() - t0, 1)}
        b.save()  # after every section: a run cut short keeps what it measured
    b.save()
    print(json.dumps({k: v for k, v in b.report.items() if k != "sections"}, indent=1), file=sys.stderr)
    print(f"runner_speed: written to {b.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
