"""benchmarks/runner_speed.py: the GPU sections' bookkeeping runs to the end and writes its JSON,
with the command it would run faked (the real runs need an H200); the counting section for real
on a small folder of our own."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from fakes.runner import good_tasks

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "runner_speed.py"


@pytest.fixture()
def bench():
    spec = importlib.util.spec_from_file_location("runner_speed", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["runner_speed"] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("runner_speed", None)


def _fake_cli(argv_log):
    def cli(self, *argv):
        argv_log.append(argv)
        target = Path(argv[0])
        files = sorted(target.glob("*.py")) if target.is_dir() else [target]
        old = "process" in argv
        tasks = [{"task": f.stem, "status": "ok", "t_ref_ms": 1.0 if old else 1.01, "wall_s": 0.2,
                  "wall_parts_s": {"count": 0.01, "reference": 0.19, "candidates": 0.0}} for f in files]
        doc = json.dumps({"complete": True, "tasks": tasks, "summary": {"total": len(tasks), "ok": len(tasks)}})
        out = argv[argv.index("--json") + 1] if "--json" in argv and argv.index("--json") + 1 < len(argv) else None
        if out and not out.startswith("--"):
            Path(out).write_text(doc)
            doc = ""
        return {"cmd": " ".join(argv), "wall_s": 0.5 * len(files), "rc": 0, "peak_pss_mib": 1.0,
                "peak_rss_sum_mib": 2.0, "stdout": doc, "stderr_tail": []}
    return cli


def test_gpu_sections_run_to_the_end(bench, tmp_path, monkeypatch):
    kb = tmp_path / "kb"
    good_tasks(kb / "level1", names=[f"{i}_t" for i in range(1, 13)], sizes=[8] * 12)
    calls = []
    monkeypatch.setattr(bench.Bench, "cli", _fake_cli(calls))
    monkeypatch.setattr(bench, "_machine", lambda env: {"gpu": "NVIDIA H200 (faked)", "cpus": 2})
    out = tmp_path / "rs.json"
    assert bench.main([str(out), "--kernelbench", str(kb), "--sections", "level1,bias,trivial", "--no-pycache",
                       "--old-limit", "3"]) == 0
    rep = json.loads(out.read_text())["sections"]
    assert rep["level1"]["new"]["tasks"] == 12 and rep["level1"]["old"]["tasks_run"] == 3
    assert rep["level1"]["old"]["wall_s_scaled_to_level"] == pytest.approx(1.5 * 12 / 3)
    assert rep["bias"]["max_abs_rel_diff"] == pytest.approx(0.01) and rep["bias"]["within_3_percent"]
    assert len(rep["bias"]["tasks"]) == 10
    assert rep["trivial"]["in_batch_wall_s"] == 0.2 and rep["trivial"]["added_per_trivial_task_s"] == 0.5
    assert any("--isolation" in a and "--inputs" in a for a in calls)  # the old path, as it was


@pytest.mark.slow
def test_count_section_for_real(bench, tmp_path):
    kb = tmp_path / "kb"
    good_tasks(kb / "level2", names=("1_a", "2_b"), sizes=(8, 16))
    out = tmp_path / "rs.json"
    assert bench.main([str(out), "--kernelbench", str(kb), "--sections", "count", "--count-levels", "2",
                       "--no-pycache"]) == 0
    c = json.loads(out.read_text())["sections"]["count"]
    assert c["new_one_batch"]["tasks"] == c["new_one_batch"]["ok"] == 2 and c["old_one_batch"]["ok"] == 2
    assert c["per_level"]["2"]["new"]["ok"] == c["per_level"]["2"]["old"]["ok"] == 2
    assert c["new_per_level_commands"]["wall_s"] > 0 and c["new_per_level_commands"]["peak_pss_mib"] > 0
