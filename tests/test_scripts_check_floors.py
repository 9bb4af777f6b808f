"""scripts/check-floors: every timed task against every floor, from analyze's JSON.

The documents are made up here in analyze's layout (docs/json.md), and one is made for real by
`analyze --time --compile` through the CPU stand-in of the timing worker, so that the script
reads what the runner writes.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check-floors"


def _roof(t_min):
    return {"t_min_ms": t_min, "bound": "memory"} if t_min is not None else None


def _task(name, t_ref, t_compile=None, floors=(1.0, 1.0, 1.0), **extra):
    roofs = dict(zip(("datasheet", "derived", "measured"), map(_roof, floors)))
    return {"task": name, "path": f"{name}.py", "status": "ok", "roofs": roofs, "t_ref_ms": t_ref,
            "t_compile_ms": t_compile, "compiled_correct": True if t_compile is not None else None,
            "compile_error": None, "timing": {}, **extra}


def _doc(tasks, folder=None, complete=True):
    return {"gpu": "NVIDIA H200", "folder": folder, "timed": True, "complete": complete, "tasks": tasks}


def _run(tmp_path, *docs, extra=()):
    files = []
    for k, doc in enumerate(docs):
        f = tmp_path / f"level{k + 1}.json"
        f.write_text(json.dumps(doc))
        files.append(str(f))
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), *files, "--json", str(out), *extra],
                          capture_output=True, text=True, timeout=60)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def test_passes_when_every_time_is_at_or_above_every_floor_and_counts_what_was_skipped(tmp_path):
    compile_timeout = _task("4_timeout", 2.0, None, compile_error="timed out after 30 s (killed)",
                            timing={"compile_error_kind": "timeout"})
    incorrect = _task("5_wrong", 2.0, 0.1, compiled_correct=False)  # below, but not the reference's result
    error = {"task": "6_broken", "path": "6_broken.py", "status": "error", "error_kind": "import",
             "error": "No module named 'einops'"}
    doc = _doc([_task("1_a", 2.0, 1.5, worker_replaced=["patched: torch.matmul"]), _task("2_b", 1.0, 1.0, floors=(1.0, 0.8, None)),
                _task("3_c", 3.0), compile_timeout, incorrect, error])
    proc, rep = _run(tmp_path, doc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: no time below any floor" in proc.stdout
    assert rep["checked"] == {"eager": 5, "compile": 2}
    assert rep["skipped"] == {"compile failed (timeout)": 1, "not timed (import)": 1,
                              "compiled output incorrect (time not checked)": 1}
    assert rep["roof_missing"] == {"measured": 2}  # 2_b: eager and compiled
    assert rep["highest"]["eager/datasheet"] == [1.0, "level1:2_b"]  # exactly at the floor passes
    assert rep["incorrect_compiled"] == ["level1:5_wrong"]
    assert rep["worker_replaced"] == {"patched: torch.matmul": 1}
    assert "level1:6_broken" in proc.stdout and "einops" in proc.stdout  # listed, with its reason


def test_fails_naming_every_task_below_any_floor(tmp_path):
    level1 = _doc([_task("1_a", 2.0, 0.9), _task("2_b", 2.0, 2.0)])  # 1_a compiled beats every floor
    level2 = _doc([_task("1_x", 0.79, None, floors=(0.5, 0.8, 0.6))])  # eager beats the derived floor only
    proc, rep = _run(tmp_path, level1, level2)
    assert proc.returncode == 1
    below = {(b["task"], b["variant"], b["roof"]) for b in rep["below"]}
    assert below == {("level1:1_a", "compile", r) for r in ("datasheet", "derived", "measured")} | {
        ("level2:1_x", "eager", "derived")}
    assert "FAIL: 4 time(s) below a floor" in proc.stdout
    assert "level2:1_x eager 0.79 ms < derived floor 0.8 ms" in proc.stdout


def test_a_stopped_run_reports_the_tasks_it_never_reached(tmp_path):
    folder = tmp_path / "level1"
    folder.mkdir()
    for name in ("1_a", "2_b", "3_c"):
        (folder / f"{name}.py").write_text("")
    doc = _doc([_task("1_a", 2.0, 1.5) | {"path": str(folder / "1_a.py")}], folder=str(folder), complete=False)
    proc, rep = _run(tmp_path, doc)
    assert proc.returncode == 0
    assert rep["not_reached"] == ["level1:2_b", "level1:3_c"]
    assert rep["skipped"]["not reached (the run was stopped first)"] == 2
    assert "stopped early" in proc.stderr


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"tasks": 3}'])
def test_bad_input_is_one_line_and_exit_2(tmp_path, content):
    f = tmp_path / "x.json"
    f.write_text(content)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(f)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_nothing_timed_is_not_a_pass(tmp_path):
    proc, _ = _run(tmp_path, _doc([{"task": "1_a", "status": "error", "error_kind": "timeout", "error": "x"}]))
    assert proc.returncode == 2 and "nothing was timed" in proc.stdout


@pytest.mark.slow
def test_reads_what_analyze_writes(tmp_path, capsys, monkeypatch):
    """A real `analyze --time --compile` document (CPU stand-in timings; no warm-up and the eager model
    for the compiled one, to stay fast: the compiler is test_runner_compile's):
    the stand-in reports t_ref about 1 ms and t_compile 0.5 ms against floors of microseconds."""
    import roofline_ext.model.gpu as gpu_mod
    from roofline_ext.cli import main
    from fakes.runner import good_tasks, install_fake_backend

    monkeypatch.setattr(gpu_mod, "local_device", lambda: None)
    install_fake_backend(tmp_path, monkeypatch, compile_warm_up=False, real_compile=False)
    folder = tmp_path / "tasks"
    good_tasks(folder, names=("1_a", "2_b"), sizes=(8, 8))
    out = tmp_path / "level1.json"
    assert main(["analyze", str(folder), "--gpu", "H200", "--no-progress", "--json", str(out), "--compile"]) == 0
    capsys.readouterr()
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 timed eager, 2 compiled (correct)" in proc.stdout
    times = json.loads(out.read_text())["tasks"][0]
    slow = tmp_path / "slow.json"  # the same document with a compiled time below the datasheet floor
    times["t_compile_ms"] = times["roofs"]["datasheet"]["t_min_ms"] / 2
    slow.write_text(json.dumps({**json.loads(out.read_text()), "tasks": [times]}))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(slow)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "1_a compile" in proc.stdout


def test_a_resumed_sweep_counts_each_task_once_and_only_unfinished_tasks_as_not_reached(tmp_path):
    """kb-floors with RESUME: an earlier stopped run's file plus the new run's, which timed what the
    earlier one lacked. Each task is counted once (the result that got furthest), and "not reached"
    lists only tasks that no file has."""
    folder = tmp_path / "level1"
    folder.mkdir()
    for name in ("1_a", "2_b", "3_c", "4_d"):
        (folder / f"{name}.py").write_text("# task\n")

    def task(name, *args, **kw):
        return {**_task(name, *args, **kw), "path": str(folder / f"{name}.py")}

    earlier = _doc([task("1_a", 2.0, 1.5), task("2_b", 2.0)], folder=str(folder), complete=False)  # 2_b: no compile
    later = _doc([task("2_b", 2.0, 1.8), task("3_c", 2.0, 1.2)], folder=str(folder), complete=False)
    proc, rep = _run(tmp_path, earlier, later)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rep["tasks"] == 3
    assert rep["checked"] == {"eager": 3, "compile": 3}
    assert rep["not_reached"] == ["level1:4_d"]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("level1:2_b ")]
    assert len(lines) == 1 and "1.8 ms" in lines[0]  # the later file's result, which has the compile
