"""The runner's pure parts: the SOL score, matching candidate files to tasks, the batch summary, the
ordered writer, the progress bar, and the timing code that runs on any device (inputs made on the
target device, correctness over several input sets), here on the CPU and the meta device."""
from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from pathlib import Path

import pytest
import torch

from roofline_ext.errors import UserError
from roofline_ext.report.progress import Progress
from roofline_ext.report.summary import BatchWriter, batch_summary, summary_csv, summary_table
from roofline_ext.runner.candidates import Candidate, match_candidates
from roofline_ext.model.scoring import below_floor, candidate_roofs, sol_score
from roofline_ext.runner.timing_jobs import check_correctness
from roofline_ext.tasks.building import make_inputs
from roofline_ext.tasks.loading import load_task


# --- the score ---------------------------------------------------------------------------------------

def test_sol_score_anchors():
    assert sol_score(2.0, 2.0, 1.0) == pytest.approx(0.5)  # as fast as the reference
    assert sol_score(1.0, 2.0, 1.0) == pytest.approx(1.0)  # on the floor
    assert sol_score(3.0, 2.0, 1.0) == pytest.approx(1 / 3)  # twice the reference's gap
    assert 0 < sol_score(1e6, 2.0, 1.0) < 1e-5


def test_the_examples_in_docs_scoring_md():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "scoring.md").read_text()
    rows = [line.split("|")[1:5] for line in doc.splitlines() if line.startswith("| ") and " ms |" in line]
    assert len(rows) == 6
    for t_new, _, _, score in rows:
        s = sol_score(float(t_new.split()[0]), 0.5, 0.1)
        assert (s is None) if "none" in score else s == pytest.approx(float(score), abs=5e-4)


def test_sol_score_is_undefined_below_the_floor_or_without_a_gap():
    assert sol_score(0.5, 2.0, 1.0) is None and below_floor(0.5, 1.0)
    assert sol_score(1.5, 1.0, 1.0) is None  # the reference is on the floor: no gap to close
    assert sol_score(1.5, 0.9, 1.0) is None
    assert sol_score(None, 2.0, 1.0) is None and sol_score(1.5, 2.0, None) is None


def test_candidate_roofs():
    roofs = {"datasheet": {"t_min_ms": 1.0}, "derived": None, "measured": {"t_min_ms": 1.5}}
    r = candidate_roofs(roofs, 3.0, 1.2)
    assert r["datasheet"] == {"fraction": pytest.approx(1 / 1.2), "score": pytest.approx(1 / (1 + 0.2 / 2.0)),
                              "below_floor": False}
    assert r["derived"] is None
    assert r["measured"]["below_floor"] is True and r["measured"]["score"] is None


# --- candidates ---------------------------------------------------------------------------------------

def _files(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_text("")
    return [folder / n for n in names]


def test_candidates_match_by_name_and_by_kernelbench_naming(tmp_path):
    tasks = _files(tmp_path / "level2", "1_Conv.py", "12_Gemm.py", "3_Relu.py")
    _files(tmp_path / "run", "12_Gemm.py", "level_2_problem_1_sample_3_kernel.py",
           "level_2_problem_1_sample_0_kernel.py", "level_1_problem_1_sample_0_kernel.py",
           "level_2_problem_99_sample_0_kernel.py", "README.py", "_private.py")
    matched, unmatched = match_candidates(tasks, tmp_path / "run")
    assert [c.sample for c in matched[tasks[0]]] == [0, 3]
    assert matched[tasks[1]] == [Candidate(tmp_path / "run" / "12_Gemm.py")]
    assert tasks[2] not in matched
    assert sorted(p.name for p in unmatched) == ["README.py", "level_1_problem_1_sample_0_kernel.py",
                                                 "level_2_problem_99_sample_0_kernel.py"]


def test_candidates_of_several_levels_need_a_level_folder(tmp_path):
    tasks = _files(tmp_path / "mine", "1_Conv.py")
    _files(tmp_path / "run", "level_1_problem_1_sample_0_kernel.py", "level_2_problem_1_sample_0_kernel.py")
    with pytest.raises(UserError, match="levels 1, 2"):
        match_candidates(tasks, tmp_path / "run")
    _files(tmp_path / "run1", "level_3_problem_1_sample_0_kernel.py")
    matched, _ = match_candidates(tasks, tmp_path / "run1")  # one level: the folder need not say which
    assert matched[tasks[0]][0].sample == 0


# --- summary and writer ---------------------------------------------------------------------------------

def _cand(speedup, score, correct=True, status="ok", below=()):
    return {"status": status, "correct": correct if status == "ok" else None, "speedup": speedup,
            "below_floor": list(below),
            "roofs": {"datasheet": {"fraction": 0.5, "score": score}, "derived": None, "measured": None}}


RESULTS = [
    {"task": "a", "path": "a.py", "status": "ok", "t_ref_ms": 1.0, "wall_s": 1.0,
     "roofs": {"datasheet": {"ref_fraction": 0.2}}, "candidates": [_cand(2.0, 0.6), _cand(4.0, 0.8)]},
    {"task": "b", "path": "b.py", "status": "ok", "t_ref_ms": 2.0, "wall_s": 3.0,
     "roofs": {"datasheet": {"ref_fraction": 0.4}},
     "candidates": [_cand(None, None, correct=False), _cand(None, None, status="error")]},
    {"task": "c", "path": "c.py", "status": "error", "error_kind": "crash", "error": "x", "wall_s": 0.5},
]


def test_batch_summary_figures():
    s = batch_summary(RESULTS)
    assert s["tasks"] == {"total": 3, "ok": 2, "failed": 1, "timed": 2, "host_bound": 0}
    assert s["candidates"] == {"total": 4, "correct": 2, "incorrect": 1, "invalid": 0, "failed": 1, "below_floor": 0}
    assert "host-bound" not in summary_table(s)
    assert s["speedup_geomean"] == pytest.approx(math.sqrt(8.0))
    assert s["speedup_geomean_best_per_task"] == pytest.approx(4.0)
    ds = s["roofs"]["datasheet"]
    assert ds["reference_fraction_median"] == pytest.approx(0.3) and ds["score_median"] == pytest.approx(0.7)
    assert ds["candidate_fraction_median"] == 0.5 and ds["scored"] == 2
    assert s["roofs"]["measured"]["score_median"] is None
    assert s["wall_s"] == {"sum": 4.5, "median_per_task": 1.0}
    rows = {(r["figure"], r["roof"]): r["value"] for r in csv.DictReader(io.StringIO(summary_csv(s)))}
    assert rows[("candidates_correct", "")] == "2" and rows[("score_median", "measured")] == ""
    table = summary_table(s)
    assert "4: 2 correct, 1 incorrect, 0 invalid, 1 failed" in table and "2.83x" in table and "0.700" in table


def test_batch_summary_counts_host_bound_references():
    # A reference whose series was host-bound (measure/timing.py) is counted and said in the table.
    host = dict(RESULTS[0], timing={"reference": {"median_ms": 1.0, "host_bound": True, "backlog_share": 0.001}})
    card = dict(RESULTS[1], timing={"reference": {"median_ms": 1.0, "host_bound": False, "backlog_share": 0.97}})
    s = batch_summary([host, card, RESULTS[2]])
    assert s["tasks"]["host_bound"] == 1
    rows = {(r["figure"], r["roof"]): r["value"] for r in csv.DictReader(io.StringIO(summary_csv(s)))}
    assert rows[("tasks_host_bound", "")] == "1"
    assert "2 timed (1 host-bound: their time is the host's launches)" in summary_table(s)
    assert "host_pace_us" not in s  # no pace was read: nothing to say


def test_batch_summary_says_the_hosts_pace_and_when_it_moved():
    # The pace read around each reference's series (measure/task_timing.host_pace), before and after.
    def ref(host_bound, before, after):
        return {"median_ms": 1.0, "host_bound": host_bound, "host": {"pace_us": before, "pace_after_us": after}}
    host = dict(RESULTS[0], timing={"reference": ref(True, 320.0, 310.0)})
    card = dict(RESULTS[1], timing={"reference": ref(False, 160.0, 170.0)})
    s = batch_summary([host, card, RESULTS[2]])
    assert s["host_pace_us"] == {"min": 160.0, "median": 240.0, "max": 320.0}
    rows = {(r["figure"], r["roof"]): r["value"] for r in csv.DictReader(io.StringIO(summary_csv(s)))}
    assert rows[("host_pace_us_max", "")] == "320.0"
    assert "pace 160-320 us (a fixed Python loop, lower is faster): 2.0x apart, and host-bound" in summary_table(s)
    steady = batch_summary([dict(host, timing={"reference": ref(True, 160.0, 170.0)}), card])
    line = [x for x in summary_table(steady).splitlines() if x.startswith("host")]
    assert line == ["host        pace 160-170 us (a fixed Python loop, lower is faster)"]


def test_writer_keeps_task_order_for_results_that_finish_out_of_order(tmp_path):
    w = BatchWriter(tmp_path / "r.json", tmp_path / "r.csv", meta={"timed": True},
                    summary_csv_path=tmp_path / "s.csv")
    for i in (2, 0, 1):
        w.add(RESULTS[i], i)
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["complete"] is False
    assert [t["task"] for t in doc["tasks"]] == ["a", "b", "c"]
    assert doc["summary"]["failed"] == 1 and doc["summary"]["candidates"]["total"] == 4
    rows = list(csv.DictReader((tmp_path / "r.csv").read_text().splitlines()))
    assert [r["task"] for r in rows] == ["a", "a", "b", "b", "c"]  # one row per candidate
    assert (tmp_path / "s.csv").read_text().startswith("figure,roof,value")


def test_progress_logs_above_itself_and_estimates(capsys):
    with Progress(4, enabled=False) as bar:
        assert bar.eta_s() is None
        bar.advance("a")
        bar.log("what a task printed")
        assert bar.eta_s() >= 0
    assert "what a task printed" in capsys.readouterr().err


def test_a_batch_shows_its_tasks_on_the_bar_the_caller_makes(tmp_path):
    """The runner takes its progress bar from the caller (the CLI passes report.progress.Progress):
    made with the number of tasks, entered around the batch, told each task's start and end."""
    from roofline_ext.runner.analyze import assess_batch

    seen: list = []

    class Bar:
        def __init__(self, total):
            seen.append(("made", total))

        def __enter__(self):
            seen.append("entered")
            return self

        def __exit__(self, *exc):
            seen.append("left")

        def start(self, name):
            seen.append(("start", name))

        def advance(self, name):
            seen.append(("advance", name))

        def log(self, text):
            seen.append(("log", text))

    def fails(path):
        raise ValueError(f"{path.name}: no")

    paths = [tmp_path / "a.py", tmp_path / "b.py"]
    results = assess_batch(paths, fails, progress=Bar)
    assert [r.error_kind for r in results] == ["internal", "internal"]  # a failing task is its error row
    assert seen == [("made", 2), "entered", ("start", "a.py"), ("advance", "a.py"),
                    ("start", "b.py"), ("advance", "b.py"), "left"]
    assert len(assess_batch(paths, fails)) == 2  # no bar given: none shown
    # The flag the runner took before issue 25: False still means no bar; True says what to pass.
    assert len(assess_batch(paths, fails, progress=False)) == 2
    with pytest.raises(TypeError, match="factory"):
        assess_batch(paths, fails, progress=True)


def test_the_runner_imports_nothing_of_the_report():
    """runner/ (rank 8) may import report/ (7) by rank, but does not (issue 25, step 4): the CLI
    passes the progress bar in, and results leave through the writer the caller gives."""
    import ast

    import roofline_ext.runner as runner

    folder = Path(runner.__file__).parent

    def reaches_report(node) -> bool:
        if isinstance(node, ast.Import):
            return any(a.name.startswith("roofline_ext.report") for a in node.names)
        if not isinstance(node, ast.ImportFrom):
            return False
        # runner/'s modules sit two levels below the package: "..report" or "from .. import report"
        target = "roofline_ext" if node.level == 2 else "" if node.level else (node.module or "")
        full = [f"{target}.{node.module}" if node.level and node.module else target]
        if node.level == 2 and not node.module:
            full = [f"{target}.{a.name}" for a in node.names]
        return any(f == "roofline_ext.report" or f.startswith("roofline_ext.report.") for f in full)

    found = [f"{path.name}:{node.lineno}" for path in sorted(folder.glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(), str(path))) if reaches_report(node)]
    assert found == []


# --- timing code that runs on any device ------------------------------------------------------------------

TASK = """
import numpy as np
import torch
class Model(torch.nn.Module):
    def forward(self, x, k):
        return x * 2
def get_inputs():
    return [torch.randn(64), {extra}]
"""


def _task(tmp_path, extra="3"):
    p = tmp_path / "t.py"
    p.write_text(textwrap.dedent(TASK.replace("{extra}", extra)))
    return load_task(p)


def test_inputs_are_made_on_the_target_device_and_seeded(tmp_path):
    task = _task(tmp_path)
    meta = torch.device("meta")
    args, made = make_inputs(task, meta, None, 7, "auto")
    assert made == "gpu" and args[0].device == meta and args[1] == 3  # factories ran on the device
    a, _ = make_inputs(task, torch.device("cpu"), None, 7, "auto")
    b, made_cpu = make_inputs(task, torch.device("cpu"), None, 7, "cpu")
    assert made_cpu == "cpu" and torch.equal(a[0], b[0])
    c, _ = make_inputs(task, torch.device("cpu"), torch.float16, 8)
    assert c[0].dtype == torch.float16 and not torch.equal(c[0].float(), a[0])
    task.unload()


def test_inputs_fall_back_to_the_cpu_when_get_inputs_needs_it(tmp_path):
    task = _task(tmp_path, extra="torch.from_numpy(torch.ones(2).numpy())")  # .numpy() fails off the CPU
    args, made = make_inputs(task, torch.device("meta"), None, 7, "auto")
    assert made == "cpu" and all(t.device.type == "meta" for t in args)  # made on the CPU, then moved
    task.unload()


def test_correctness_runs_several_fresh_input_sets(tmp_path):
    task = _task(tmp_path)
    cpu = torch.device("cpu")
    seen = []

    class Same(torch.nn.Module):
        def forward(self, x, k):
            seen.append(x[0].item())
            return x * 2

    class WrongOnThird(torch.nn.Module):
        calls = 0

        def forward(self, x, k):
            WrongOnThird.calls += 1
            return x * 2 + (1.0 if WrongOnThird.calls == 3 else 0.0)

    model = task.model_cls()
    ok = check_correctness(task, model, Same(), cpu, None, 42, 5)
    assert ok["ok"] and ok["passed"] == ok["trials"] == 5 and len(set(seen)) == 5
    bad = check_correctness(task, model, WrongOnThird(), cpu, None, 42, 5)
    assert not bad["ok"] and bad["passed"] == 2 and bad["trials"] == 3
    assert bad["reason"].startswith("input set 3 of 5:")
    task.unload()
