"""analyze --time: arguments, the result shape, fractions and scores, candidates in bulk, the batch
summary, and the batch going on past a task whose timing died. No GPU: the timing worker runs
with a CPU stand-in for the GPU backend (fakes/runner.py) that reports the times a test asks
for; ``--isolation process`` is tested with its subprocess faked, as before."""
from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest

from roofline_ext import cli
from roofline_ext.device.status import availability
from roofline_ext.peaks.datasheet import lookup
from roofline_ext.runner import timed as timed_analysis
from roofline_ext.model.scoring import sol_score
from fakes.runner import GOOD, install_fake_backend, write

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# softmax example: 8192 x 8192 float32 in and out = 536.9 MB; H200 datasheet 4.8 TB/s -> 0.1118 ms.
SOFTMAX_FLOOR_MS = 8192 * 8192 * 4 * 2 / 4.8e12 * 1e3


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    import roofline_ext.model.gpu as gpu_mod
    import roofline_ext.cli.commands.analyze as analyze_cmd

    monkeypatch.setattr(gpu_mod, "local_device", lambda: None)
    monkeypatch.setattr(analyze_cmd, "_measured_peaks_for", lambda gpu, regime: None)


def run(capsys, *argv):
    rc = cli.main(["analyze", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_time_without_gpu_exits_3_one_line(capsys):
    if availability().ok:
        pytest.skip("this machine has a GPU")
    rc = cli.main(["analyze", str(EXAMPLES / "softmax.py"), "--time"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3
    assert err[-1].startswith("roofline-ext: error: ") and availability().message in err[-1]


@pytest.mark.parametrize("argv, needle", [
    (["--new", "nope.py"], "no such candidate file or folder"),
    (["--trials", "0"], "--trials must be at least 1"),
    (["--correct-trials", "0"], "--correct-trials must be at least 1"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--timeout", "0"], "--timeout must be more than 0 seconds"),
])
def test_bad_timing_arguments_exit_2(capsys, argv, needle):
    rc = cli.main(["analyze", str(EXAMPLES / "softmax.py"), *argv])
    assert rc == 2 and needle in capsys.readouterr().err


def test_new_file_with_folder_is_refused(capsys):
    rc = cli.main(["analyze", str(EXAMPLES), "--new", str(EXAMPLES / "softmax.py")])
    assert rc == 2 and "--new takes one task file" in capsys.readouterr().err


def test_new_folder_needs_the_pool(capsys, tmp_path):
    rc = cli.main(["analyze", str(EXAMPLES), "--new", str(tmp_path), "--isolation", "process"])
    assert rc == 2 and "--new DIR needs the pool" in capsys.readouterr().err


# --- one task through the pool -------------------------------------------------------------------------

def _softmax(tmp_path: Path, candidate: str) -> tuple[Path, Path]:
    task = tmp_path / "softmax.py"
    shutil.copy(EXAMPLES / "softmax.py", task)
    cand = write(tmp_path / "cands", f"{candidate}.py", "import torch\nclass ModelNew(torch.nn.Module):\n"
                 "    def forward(self, x):\n        return torch.softmax(x, -1)\n")
    return task, cand


@pytest.mark.slow
def test_timed_result_has_fractions_and_scores_of_every_roof(tmp_path, capsys, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, times={"softmax": 0.2, "mine_fast": 0.125})
    task, cand = _softmax(tmp_path, "mine_fast")
    rc, out, err = run(capsys, task, "--new", cand, "--time", "--gpu", "H200", "--json")
    assert rc == 0, err
    r = json.loads(out)
    ds = r["roofs"]["datasheet"]
    assert ds["t_min_ms"] == pytest.approx(SOFTMAX_FLOOR_MS, rel=1e-6)
    assert ds["ref_fraction"] == pytest.approx(SOFTMAX_FLOOR_MS / 0.2)
    assert ds["new_fraction"] == pytest.approx(SOFTMAX_FLOOR_MS / 0.125)
    assert ds["score"] == pytest.approx(1 / (1 + (0.125 - SOFTMAX_FLOOR_MS) / (0.2 - SOFTMAX_FLOOR_MS)))
    assert r["score"] == ds["score"] and r["speedup"] == pytest.approx(1.6) and r["correct"] is True
    (c,) = r["candidates"]
    assert c["status"] == "ok" and c["roofs"]["datasheet"]["score"] == ds["score"] and c["below_floor"] == []
    assert r["t_ref_ms"] == 0.2 and r["t_new_ms"] == 0.125 and not r["impossible"]
    assert r["wall_s"] > 0 and set(r["wall_parts_s"]) == {"count", "reference", "candidates"}


@pytest.mark.slow
def test_text_report_shows_the_score(tmp_path, capsys, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, times={"softmax": 0.2, "mine_fast": 0.125})
    task, cand = _softmax(tmp_path, "mine_fast")
    rc, out, _ = run(capsys, task, "--new", cand, "--time", "--gpu", "H200")
    assert rc == 0
    assert "speed-up 1.6x" in out and "score" in out
    assert f"{sol_score(0.125, 0.2, SOFTMAX_FLOOR_MS):.3f}" in out


@pytest.mark.slow
def test_candidate_below_the_floor_is_flagged_not_scored(tmp_path, capsys, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, times={"softmax": 0.2, "mine_fast": 0.05})
    task, cand = _softmax(tmp_path, "mine_fast")
    rc, out, _ = run(capsys, task, "--new", cand, "--time", "--gpu", "H200", "--json")
    r = json.loads(out)
    assert rc == 0
    assert r["roofs"]["datasheet"]["score"] is None and r["roofs"]["datasheet"]["new_below_floor"] is True
    assert r["candidates"][0]["below_floor"] == ["datasheet"]
    assert any("below the datasheet floor" in n for n in r["notes"])


@pytest.mark.slow
def test_reference_below_the_floor_leaves_nothing_to_score(tmp_path, capsys, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, times={"softmax": 0.05, "mine_fast": 0.2})
    task, cand = _softmax(tmp_path, "mine_fast")
    r = json.loads(run(capsys, task, "--new", cand, "--time", "--gpu", "H200", "--json")[1])
    assert r["roofs"]["datasheet"]["score"] is None and r["impossible"] is True
    assert any("the reference is at or below the datasheet floor" in n for n in r["notes"])


@pytest.mark.slow
def test_incorrect_candidate_gets_no_fraction_and_no_score(tmp_path, capsys, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, times={"softmax": 0.2})
    task, cand = _softmax(tmp_path, "mine_wrong")
    rc, out, _ = run(capsys, task, "--new", cand, "--time", "--gpu", "H200", "--json")
    r = json.loads(out)
    assert rc == 1 and r["correct"] is False and r["verdict"] == "incorrect"  # refused: exit 1
    assert r["t_new_ms"] is None and r["roofs"]["datasheet"]["new_fraction"] is None
    assert r["roofs"]["datasheet"]["score"] is None and r["speedup"] is None
    assert any("INCORRECT" in n for n in r["notes"])


@pytest.mark.slow
def test_crashing_candidate_costs_the_candidate_only(tmp_path, capsys, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, times={"softmax": 0.2})
    task, cand = _softmax(tmp_path, "mine_crash")
    rc, out, err = run(capsys, task, "--new", cand, "--time", "--gpu", "H200", "--json")
    r = json.loads(out)
    assert rc == 1  # a candidate failed
    assert r["status"] == "ok" and r["t_ref_ms"] == 0.2
    (c,) = r["candidates"]
    assert c["status"] == "error" and c["error_kind"] == "crash" and "SIGSEGV" in c["error"]


# --- candidates in bulk, the summary -------------------------------------------------------------------

def _level(tmp_path: Path) -> tuple[Path, Path]:
    tasks, cands = tmp_path / "level1", tmp_path / "run"
    write(tasks, "1_small.py", GOOD.replace("{n}", "16"))
    write(tasks, "2_large.py", GOOD.replace("{n}", "32"))
    body = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    for name in ("level_1_problem_1_sample_0_kernel", "level_1_problem_1_sample_1_kernel",
                 "level_1_problem_2_sample_0_kernel", "level_2_problem_1_sample_0_kernel", "notes"):
        write(cands, f"{name}.py", body)
    return tasks, cands


@pytest.mark.slow
def test_new_dir_scores_every_sample_and_summarizes(tmp_path, capsys, monkeypatch):
    tasks, cands = _level(tmp_path)
    times = {"1_small": 0.4, "2_large": 0.8, "level_1_problem_1_sample_0_kernel": 0.2,
             "level_1_problem_1_sample_1_kernel": 0.1, "level_1_problem_2_sample_0_kernel": 0.4}
    install_fake_backend(tmp_path, monkeypatch, times=times)
    out_json, out_csv, sum_csv = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "s.csv"
    rc, _, err = run(capsys, tasks, "--new", cands, "--time", "--gpu", "H200", "--json", out_json, "--csv", out_csv,
                     "--summary-csv", sum_csv, "--no-progress")
    assert rc == 0, err
    assert "2 file(s) in" in err and "match no task" in err  # the other level's sample and notes.py
    doc = json.loads(out_json.read_text())
    by = {t["task"]: t for t in doc["tasks"]}
    assert [c["sample"] for c in by["1_small"]["candidates"]] == [0, 1]
    assert [c["speedup"] for c in by["1_small"]["candidates"]] == pytest.approx([2.0, 4.0])
    assert by["1_small"]["t_new_ms"] is None  # several candidates: each has its own
    s = doc["summary"]
    assert s["tasks"] == {"total": 2, "ok": 2, "failed": 0, "timed": 2, "host_bound": 0}  # the fake says none
    assert s["candidates"] == {"total": 3, "correct": 3, "incorrect": 0, "invalid": 0, "failed": 0, "below_floor": 0}
    assert s["speedup_geomean"] == pytest.approx((2.0 * 4.0 * 2.0) ** (1 / 3))
    assert s["speedup_geomean_best_per_task"] == pytest.approx((4.0 * 2.0) ** 0.5)
    scores = [c["roofs"]["datasheet"]["score"] for t in doc["tasks"] for c in t["candidates"]]
    assert s["roofs"]["datasheet"]["score_median"] == pytest.approx(sorted(scores)[1])
    rows = list(csv.DictReader(out_csv.read_text().splitlines()))
    assert [(r["task"], r["sample"]) for r in rows] == [("1_small", "0"), ("1_small", "1"), ("2_large", "0")]
    assert float(rows[1]["speedup"]) == pytest.approx(4.0) and rows[1]["datasheet_score"]
    figures = {(r["figure"], r["roof"]): r["value"] for r in csv.DictReader(sum_csv.read_text().splitlines())}
    assert figures[("candidates_correct", "")] == "3"
    assert float(figures[("score_median", "datasheet")]) == pytest.approx(sorted(scores)[1])
    assert "geometric mean" in err and "SOL score" in err  # the summary table


@pytest.mark.slow
def test_batch_goes_on_past_a_crashed_timing(tmp_path, capsys, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch)
    folder = tmp_path / "t"
    write(folder, "a_good.py", GOOD.replace("{n}", "8"))
    write(folder, "b_ref_segv.py", GOOD.replace("{n}", "8"))
    write(folder, "c_good.py", GOOD.replace("{n}", "16"))
    out = tmp_path / "out.json"
    rc, _, _ = run(capsys, folder, "--time", "--json", out, "--no-progress", "--gpu", "H200")
    doc = json.loads(out.read_text())
    assert rc == 1
    by = {r["task"]: r for r in doc["tasks"]}
    assert by["b_ref_segv"]["status"] == "error" and by["b_ref_segv"]["error_kind"] == "crash"
    assert "SIGSEGV" in by["b_ref_segv"]["error"]
    assert by["a_good"]["status"] == by["c_good"]["status"] == "ok" and by["c_good"]["t_ref_ms"] > 0


# --- --isolation process: the first versions' path -------------------------------------------------------

def _fake_timing(t_ref, t_new=None, ok=True):
    res = {"t_ref_ms": t_ref, "t_new_ms": t_new, "device": "NVIDIA H200", "dtype": "torch.float32",
           "reference": {"median_ms": t_ref, "best_ms": t_ref, "cv": 0.01, "trials": 100}}
    if t_new is not None:
        res.update(candidate="ModelNew in task",
                   candidate_timing={"median_ms": t_new, "best_ms": t_new, "cv": 0.01, "trials": 100},
                   correctness={"ok": ok, "tolerance": 1e-4, "reason": None if ok else "differs"},
                   speedup=t_ref / t_new)
    return {"ok": True, "result": res}


def test_process_path_gives_the_same_shape(monkeypatch):
    monkeypatch.setattr("roofline_ext.runner.isolation.run_isolated", lambda kw, timeout_s: _fake_timing(0.2, 0.125))
    measured = {"bandwidth_tbps": 4.6, "fp32": 60.0, "tf32": 450.0, "fp16": 900.0, "bf16": 900.0}
    r = timed_analysis.analyze_and_time(EXAMPLES / "softmax.py", "H200", measured=measured)
    ds, me = r["roofs"]["datasheet"], r["roofs"]["measured"]
    assert ds["ref_fraction"] == pytest.approx(ds["t_min_ms"] / 0.2)
    assert ds["new_fraction"] == pytest.approx(ds["t_min_ms"] / 0.125)
    assert me["ref_fraction"] == pytest.approx(me["t_min_ms"] / 0.2)
    assert ds["score"] == pytest.approx(sol_score(0.125, 0.2, ds["t_min_ms"]))
    assert r["speedup"] == pytest.approx(1.6) and r["correct"] is True and r["candidates"][0]["status"] == "ok"


def test_process_path_incorrect_candidate_is_not_scored(monkeypatch):
    monkeypatch.setattr("roofline_ext.runner.isolation.run_isolated",
                        lambda kw, timeout_s: _fake_timing(0.2, 0.1, ok=False))
    r = timed_analysis.analyze_and_time(EXAMPLES / "softmax.py", "H200", measured=None)
    assert r["correct"] is False and any("INCORRECT" in n for n in r["notes"])
    assert r["roofs"]["datasheet"]["new_fraction"] is None and r["roofs"]["datasheet"]["score"] is None


def test_process_path_batch_goes_on_past_a_crashed_timing(monkeypatch, tmp_path, capsys):
    for name in ("softmax.py", "layernorm.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)

    def fake(kw, timeout_s):
        if kw["path"].endswith("layernorm.py"):
            return {"ok": False, "kind": "crash", "error": "worker killed by SIGSEGV"}
        return _fake_timing(0.2)

    monkeypatch.setattr("roofline_ext.runner.isolation.run_isolated", fake)
    monkeypatch.setattr(sys.modules["roofline_ext.device.status"], "require_measurement", lambda device=0: None)
    out = tmp_path / "out.json"
    rc, _, _ = run(capsys, tmp_path, "--time", "--json", out, "--no-progress", "--gpu", "H200",
                   "--isolation", "process")
    doc = json.loads(out.read_text())
    assert rc == 1 and doc["isolation"] == "process"
    by = {r["task"]: r for r in doc["tasks"]}
    assert by["layernorm"]["status"] == "error" and by["layernorm"]["error_kind"] == "crash"
    assert by["softmax"]["status"] == "ok" and by["softmax"]["t_ref_ms"] == 0.2 and by["softmax"]["wall_s"] > 0


def test_datasheet_is_what_the_floor_uses():
    assert lookup("H200").bandwidth_tbps == 4.8  # SOFTMAX_FLOOR_MS above assumes it
