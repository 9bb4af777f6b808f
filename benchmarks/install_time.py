"""Wall and CPU time of the README's install command, as a user runs it (issue 28).

Each run: a fresh clone of a commit, a fresh venv (pip upgraded first, untimed, as .ci/run does),
then exactly `python -m pip install ".[test]"` from the clone under /usr/bin/time, with no pip cache
(PIP_NO_CACHE_DIR=1: every wheel fetched as on a new machine) and ROOFLINE_ENABLE_CUDA=ON, as CI
(--enable-cuda '' leaves it unset, as a user runs it: AUTO, which probes for nvcc once more).
pip runs with -v (the same work; only its output differs) so that each phase can be timed from
its lines: resolving, the build's CMake configure and Ninja build, then pip installing every wheel.

The machine is shared: the load average before and after each run is recorded with it, and
several commits can be interleaved (--commit A --commit B --runs 3 runs A B A B A B).

    python3 benchmarks/install_time.py --commit main --commit fast-install --runs 3 \
        --out benchmarks/results/install-2cpu-DATE.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# pip -v lines that open each phase, in the order they appear (the first match of each counts).
PHASES = [
    ("build_requires", re.compile(r"Installing build dependencies: started")),
    ("metadata", re.compile(r"Preparing metadata \(pyproject\.toml\): started")),
    ("build_wheel", re.compile(r"Building wheel for roofline-ext \(pyproject\.toml\): started")),
    ("cmake_configure", re.compile(r"\*\*\* Configuring CMake")),
    ("ninja", re.compile(r"\*\*\* Building project with Ninja")),
    ("wheel_done", re.compile(r"Building wheel for roofline-ext \(pyproject\.toml\): finished")),
    ("install_wheels", re.compile(r"Installing collected packages")),
    ("installed", re.compile(r"^Successfully installed")),
]

TIME_FIELDS = {
    "user_s": "User time (seconds)",
    "sys_s": "System time (seconds)",
    "max_rss_kb": "Maximum resident set size (kbytes)",
}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def parse_time_v(text: str) -> dict:
    out: dict = {}
    for key, label in TIME_FIELDS.items():
        m = re.search(re.escape(label) + r":\s*([0-9.]+)", text)
        if m:
            out[key] = float(m.group(1))
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\):\s*(\S+)", text)
    if m:
        parts = [float(p) for p in m.group(1).split(":")]
        out["wall_s_time"] = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    return out


def timed_pip(python: str, clone: Path, log: Path, enable_cuda: str) -> tuple[dict, dict]:
    """Runs the README's command; returns /usr/bin/time's figures and each phase's start (s)."""
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PYTHONUNBUFFERED="1")
    env.pop("ROOFLINE_ENABLE_CUDA", None)
    if enable_cuda:
        env["ROOFLINE_ENABLE_CUDA"] = enable_cuda
    time_out = log.with_suffix(".time")
    cmd = ["/usr/bin/time", "-v", "-o", str(time_out), python, "-m", "pip", "install", "-v", ".[test]"]
    phases: dict = {}
    t0 = time.monotonic()
    with subprocess.Popen(cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as proc, log.open("w") as fh:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = round(time.monotonic() - t0, 2)
            fh.write(f"{now:8.2f} {line}")
            for name, pattern in PHASES:
                # "Installing collected packages" also opens the build requirements' install: only
                # the one after the wheel is built counts.
                late = name in ("install_wheels", "installed")
                if name not in phases and pattern.search(line.strip()) and (not late or "wheel_done" in phases):
                    phases[name] = now
    wall = round(time.monotonic() - t0, 2)
    if proc.returncode != 0:
        raise SystemExit(f"pip install failed (exit {proc.returncode}); see {log}")
    figures = parse_time_v(time_out.read_text())
    figures["wall_s"] = wall
    figures["cpu_s"] = round(figures["user_s"] + figures["sys_s"], 2)
    return figures, phases


def built_archs(python: str) -> dict:
    """The SASS and PTX in the installed _core, by cuobjdump where one is on PATH (else {})."""
    so = subprocess.run([python, "-c", "import roofline_ext._core as c; assert c.CUDA_COMPILED; print(c.__file__)"],
                        capture_output=True, text=True, check=True).stdout.strip()
    tool = shutil.which("cuobjdump")
    if not tool:
        return {}
    elf = subprocess.run([tool, "--list-elf", so], capture_output=True, text=True).stdout
    ptx = subprocess.run([tool, "--list-ptx", so], capture_output=True, text=True).stdout
    return {"sass": re.findall(r"\.(sm_\w+)\.cubin", elf), "ptx": re.findall(r"\.(sm_\w+)\.ptx", ptx)}


def one_run(commit: str, work: Path, index: int, enable_cuda: str) -> dict:
    clone = work / f"clone-{index}"
    venv = work / f"venv-{index}"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
    sha = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True, capture_output=True)
    load_before = load_average()
    figures, phases = timed_pip(python, clone, work / f"pip-{index}.log", enable_cuda)
    run = {"commit": commit, "sha": sha, "ROOFLINE_ENABLE_CUDA": enable_cuda or "(unset: AUTO)",
           "load_before": load_before, "load_after": load_average(),
           **figures, "phase_start_s": phases, "archs": built_archs(python)}
    shutil.rmtree(clone)
    shutil.rmtree(venv)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", action="append", required=True, help="a commit of this repository (repeatable)")
    ap.add_argument("--runs", type=int, default=1, help="runs of each commit, interleaved")
    ap.add_argument("--enable-cuda", default="ON",
                    help="ROOFLINE_ENABLE_CUDA for the install (CI's ON by default; '' leaves it unset, AUTO as a user)")
    ap.add_argument("--out", type=Path, help="append the runs to this JSON file")
    ap.add_argument("--keep-logs", type=Path, help="copy each run's timestamped pip -v log here")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="install-time-") as tmp:
        work = Path(tmp)
        for _ in range(args.runs):
            for commit in args.commit:
                run = one_run(commit, work, len(runs), args.enable_cuda)
                runs.append(run)
                print(json.dumps(run), flush=True)
                if args.keep_logs:
                    args.keep_logs.mkdir(parents=True, exist_ok=True)
                    shutil.copy(work / f"pip-{len(runs) - 1}.log", args.keep_logs / f"pip-{len(runs) - 1}-{commit}.log")
    if args.out:
        doc = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
        doc["runs"].extend(runs)
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
