#!/usr/bin/env python3
"""The test suite's wall time: the fast lane (``pytest -m "not slow"``) and the whole suite.

Each lane runs as ``python3 -m pytest -q -p no:randomly [-m "not slow"]`` from the repository root, in
a process of its own; the wall is the clock around that process, and the counts (passed, skipped,
failed, errors, deselected) come from pytest's last summary line. Writes one JSON document to OUT.

  python benchmarks/suite_wall.py OUT.json                  # both lanes (the whole suite: 12-20 min on 2 cores)
  python benchmarks/suite_wall.py OUT.json --fast-only      # the fast lane only
  python benchmarks/suite_wall.py OUT.json --fast-only --whole-from durations.txt
        # the whole suite's wall and counts read from the summary line of an earlier full run's
        # output (e.g. `python3 -m pytest -q --durations=150 -p no:randomly > durations.txt`),
        # labelled as recorded there, not measured by this script

Both lanes run as the README's command does: on tests/conftest.py's default of two pytest-xdist
workers where pytest-xdist is installed (``workers`` in the JSON; docs/testing.md). ``--serial``
adds ``-n 0`` to each lane, for the one-process figure to compare with.

Exit status: 0 when every lane it ran passed, 1 otherwise (the JSON is written either way).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FAST = ["-m", "not slow"]
# pytest's last line: "==== 1600 passed, 80 skipped, 3 deselected in 95.12s (0:01:35) ====" (-q drops the rules).
_COUNT = re.compile(r"(\d+) (passed|skipped|failed|errors?|deselected|xfailed|xpassed|warnings?)")
_IN = re.compile(r" in ([0-9.]+)s")


def summary(text: str) -> dict[str, Any]:
    """The counts and pytest's own duration from the last summary line of a pytest run's output."""
    for line in reversed(text.strip().splitlines()):
        if _IN.search(line) and _COUNT.search(line):
            counts: dict[str, Any] = {"passed": 0, "skipped": 0, "failed": 0, "errors": 0, "deselected": 0}
            for n, what in _COUNT.findall(line):
                key = {"error": "errors", "warning": "warnings"}.get(what, what)
                counts[key] = counts.get(key, 0) + int(n)
            counts["pytest_reported_s"] = float(_IN.search(line).group(1))
            counts["summary_line"] = line.strip("= ").strip()
            return counts
    raise ValueError("no pytest summary line found")


def run_lane(extra: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *extra]
    load0 = os.getloadavg()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"command": " ".join(["python3", "-m", "pytest", "-q", "-p", "no:randomly",
                                *(f'"{a}"' if " " in a else a for a in extra)]),
           "wall_s": round(wall, 2), "exit_code": proc.returncode, "source": "measured by benchmarks/suite_wall.py",
           # CPU time of pytest and every process it waited for (workers, fork servers, zygotes): what
           # the lane costs whatever else the machine runs; the wall is what it took on a machine this loaded.
           "cpu_s": round((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), 2),
           "load_avg_1min_before_after": [round(load0[0], 2), round(os.getloadavg()[0], 2)]}
    try:
        out.update(summary(proc.stdout))
    except ValueError:
        out["output_tail"] = (proc.stdout + proc.stderr)[-4000:]
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED ", "ERROR "))]
    if failed:
        out["failures"] = failed
    return out


def recorded(path: Path) -> dict[str, Any]:
    text = path.read_text(errors="replace")
    out: dict[str, Any] = {"source": f"recorded from an earlier full run's output ({path.name}), not measured by "
                                     "this script", "command": "python3 -m pytest -q --durations=150 -p no:randomly"}
    out.update(summary(text))
    out["wall_s"] = out["pytest_reported_s"]
    return out


def default_workers() -> int:
    """The xdist workers a plain ``python3 -m pytest`` gets here (tests/conftest.py's rule): two,
    or fewer cores; none without pytest-xdist."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(2, cores) if cores >= 2 else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="where the JSON goes")
    ap.add_argument("--fast-only", action="store_true", help="run only the fast lane (-m 'not slow')")
    ap.add_argument("--whole-from", type=Path, metavar="PYTEST_OUTPUT",
                    help="with --fast-only: the whole suite's figures from this earlier full run's output")
    ap.add_argument("--note", default=None, help="a free-text note stored in the JSON")
    ap.add_argument("--serial", action="store_true", help="run each lane in one process (-n 0)")
    args = ap.parse_args(argv)
    extra = ["-n", "0"] if args.serial else []

    doc: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    try:
        import pytest
        doc["pytest"] = pytest.__version__
    except ImportError:
        pass
    try:
        import xdist
        doc["pytest_xdist"] = xdist.__version__
    except ImportError:
        pass
    doc["workers"] = 0 if args.serial else default_workers()
    lanes_ok = True
    fast = run_lane(FAST + extra)
    doc["fast_lane"] = fast
    lanes_ok &= fast["exit_code"] == 0
    if not args.fast_only:
        whole = run_lane(extra)
        lanes_ok &= whole["exit_code"] == 0
        doc["whole_suite"] = whole
    elif args.whole_from is not None:
        doc["whole_suite"] = recorded(args.whole_from)
    if args.note:
        doc["note"] = args.note
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return 0 if lanes_ok else 1


if __name__ == "__main__":
    sys.exit(main())
