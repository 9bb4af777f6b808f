"""The suite's own machinery (tests/conftest.py, docs/testing.md): two xdist workers by default, the
tests of a module that conftest's ONE_WORKER names on one worker, a ``serial`` test with nothing beside it, and ``-p
no:xdist`` or ``-n 0`` still running everything in one process.

Each case runs pytest in a fresh interpreter on a small probe suite that uses this repository's
conftest.py and pytest settings (copied from pyproject.toml), so what is checked is the real hooks
and markers. Each probe test writes when it started and ended, and in which worker.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
import json, os, time
from pathlib import Path
import pytest

LOG = Path(__file__).with_name("log")

def _record(name, seconds):
    t0 = time.monotonic()
    time.sleep(seconds)
    with open(LOG / f"{name}.json", "w") as f:
        json.dump({"start": t0, "end": time.monotonic(), "pid": os.getpid(),
                   "worker": os.environ.get("PYTEST_XDIST_WORKER")}, f)

@pytest.mark.parametrize("i", range(6))
def test_plain(i):
    _record(f"plain{i}", 0.4)

@pytest.mark.serial
@pytest.mark.parametrize("i", range(2))
def test_alone(i):
    _record(f"alone{i}", 0.6)
'''

GROUPED = '''
import pytest
from test_probe import _record

@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    _record(f"grouped{i}", 0.1)
'''


def _probe_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    (suite / "tests" / "log").mkdir(parents=True)
    (suite / "tests" / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (suite / "tests" / "test_probe.py").write_text(textwrap.dedent(PROBE))
    # A module of ONE_WORKER's (its name is one of them): all its tests go to one worker.
    (suite / "tests" / "test_runner_fleet.py").write_text(textwrap.dedent(GROUPED))
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    lines = ["[pytest]"]
    for key, value in ini.items():
        if isinstance(value, list):
            lines.append(f"{key} =")
            lines += [f"    {v}" for v in value]
        else:
            lines.append(f"{key} = {value}")
    (suite / "pytest.ini").write_text("\n".join(lines) + "\n")
    return suite


def _run(suite: Path, *args: str) -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           *args], cwd=suite, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "12 passed" in proc.stdout, proc.stdout[-2000:]
    log = suite / "tests" / "log"
    return {p.stem: json.loads(p.read_text()) for p in log.glob("*.json")}


def _overlap(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


@pytest.mark.slow
def test_two_workers_by_default_and_a_serial_test_runs_alone(tmp_path):
    pytest.importorskip("xdist")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: the suite runs in one process (no workers to check)")
    runs = _run(_probe_suite(tmp_path))
    assert {r["worker"] for r in runs.values()} == {"gw0", "gw1"}, runs
    assert len({runs[f"grouped{i}"]["worker"] for i in range(4)}) == 1, runs  # ONE_WORKER's module on one worker
    for name in ("alone0", "alone1"):
        others = [k for k in runs if k != name]
        assert not [k for k in others if _overlap(runs[name], runs[k])], (name, runs)


@pytest.mark.slow
def test_the_lock_would_see_an_overlap():
    """The overlap check above can fail: two intervals that share a moment are seen."""
    assert _overlap({"start": 0.0, "end": 1.0}, {"start": 0.5, "end": 2.0})
    assert not _overlap({"start": 0.0, "end": 1.0}, {"start": 1.0, "end": 2.0})


@pytest.mark.slow
@pytest.mark.parametrize("flag", [("-p", "no:xdist"), ("-n", "0")], ids=["no-xdist", "n0"])
def test_without_workers_everything_runs_in_this_one_process(tmp_path, flag):
    runs = _run(_probe_suite(tmp_path), *flag)
    assert len(runs) == 12 and {r["worker"] for r in runs.values()} == {None}
    assert len({r["pid"] for r in runs.values()}) == 1


def test_suite_wall_reads_the_counts_from_pytests_last_line():
    from fakes.benchmark_loader import load_benchmark

    bench = load_benchmark("suite_wall.py")
    text = "bringing up nodes...\n....\n=== 1900 passed, 140 skipped, 3 deselected, 2 warnings in 250.50s (0:04:10) ===\n"
    got = bench.summary(text)
    assert (got["passed"], got["skipped"], got["deselected"], got["failed"]) == (1900, 140, 3, 0)
    assert got["pytest_reported_s"] == 250.5 and got["warnings"] == 2
    with pytest.raises(ValueError):
        bench.summary("no summary here\n")
