"""benchmarks/levels_time.py: the statistics on batch JSON documents (|Δt_ref| median and p90, failed
tasks kept apart, the 95 %-within-2 % rule, the bounds), and the whole script end to end with a fake
``analyze`` that writes batch JSON from a plan (the real runs need an H200)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fakes.benchmark_loader import load_benchmark



@pytest.fixture()
def lt():
    yield load_benchmark("levels_time.py")
    sys.modules.pop("levels_time", None)


def _doc(times: dict[str, float | None]) -> dict:
    """A batch document as analyze writes it: None stands for a task that failed."""
    rows = [{"task": n, "status": "ok", "t_ref_ms": t} if t is not None else
            {"task": n, "status": "error", "error_kind": "timing", "error": "CUDA error"} for n, t in times.items()]
    return {"complete": True, "summary": {"total": len(rows)}, "tasks": rows}


# --- the statistics ------------------------------------------------------------------------------------

def test_t_refs_keeps_failed_and_untimed_tasks_apart(lt):
    doc = _doc({"a": 1.0, "b": None})
    doc["tasks"].append({"task": "c", "status": "ok", "t_ref_ms": None})
    ok, failed = lt.t_refs(doc)
    assert ok == {"a": 1.0}
    assert set(failed) == {"b", "c"} and "timing" in failed["b"] and "None" in failed["c"]
    assert lt.t_refs(None) == ({}, {})


def test_quantile_interpolates_like_numpy(lt):
    assert lt.quantile([], 0.9) is None
    assert lt.quantile([5.0], 0.9) == 5.0
    assert lt.quantile([4.0, 1.0, 3.0, 2.0, 0.0], 0.9) == pytest.approx(3.6)
    assert lt.quantile([float(i) for i in range(11)], 0.5) == 5.0


def test_compare_median_p90_and_failed_apart(lt):
    a = _doc({"t0": 1.0, "t1": 2.0, "t2": 4.0, "t3": 1.0, "t4": 1.0, "gone": 1.0})
    b = _doc({"t0": 1.001, "t1": 1.996, "t2": 4.0, "t3": 1.003, "t4": 1.05, "gone": None, "new": 1.0})
    cmp = lt.compare(a, b)
    assert cmp["tasks"] == 7 and cmp["compared"] == 5 and cmp["failed_count"] == 2
    failed = {f["task"]: f for f in cmp["failed"]}
    assert failed["gone"]["a"] == "ok" and failed["gone"]["b"].startswith("error")
    assert failed["new"]["a"] == "missing" and failed["new"]["b"] == "ok"
    assert cmp["deltas"]["t1"] == pytest.approx(-0.002)  # signed, b relative to a
    assert cmp["median_abs"] == pytest.approx(0.002)
    assert cmp["p90_abs"] == pytest.approx(0.003 + 0.6 * 0.047)
    assert cmp["max_abs"] == pytest.approx(0.05) and cmp["worst"][0]["task"] == "t4"
    v = lt.repeat_verdict(cmp)
    assert not v["pass"] and v["checks"]["median_abs"]["pass"] and not v["checks"]["p90_abs"]["pass"]


def _with_clock(doc: dict, mhz: dict[str, float], slowdown: tuple[str, ...] = ()) -> dict:
    """The doc with each named task's reference telemetry (median SM clock), as the runs record it."""
    for row in doc["tasks"]:
        if row["task"] in mhz:
            row["timing"] = {"reference": {"telemetry": {"sm_clock_mhz": {"median": mhz[row["task"]]},
                                                         "temperature_c": {"median": 60}, "slowdown": list(slowdown)}}}
    return doc


def test_misses_are_told_apart_by_the_cards_clock(lt):
    a = _with_clock(_doc({"gemm": 10.0, "net": 1.0, "ok": 2.0, "faster": 5.0, "bare": 3.0}),
                    {"gemm": 1980, "net": 1980, "ok": 1980, "faster": 1700})
    c = _with_clock(_doc({"gemm": 10.5, "net": 1.3, "ok": 2.01, "faster": 4.5, "bare": 3.3}),
                    {"gemm": 1850, "net": 1980, "ok": 1700, "faster": 1980}, ("sw_power_cap",))
    m = lt.misses_by_clock(lt.compare(a, c), a, c, 0.02)
    rows = {r["task"]: r for r in m["rows"]}
    assert set(rows) == {"gemm", "net", "faster", "bare"}  # "ok" is within 2%, whatever its clock
    assert rows["gemm"]["by_clock"] and rows["gemm"]["clock_rel"] == pytest.approx(1850 / 1980 - 1, abs=1e-6)
    assert rows["faster"]["by_clock"]  # faster in c at a higher clock: the card again
    assert not rows["net"]["by_clock"] and rows["net"]["clock_rel"] == 0  # same clock: not the card's
    assert not rows["bare"]["by_clock"] and rows["bare"]["a"] is None  # no telemetry: cannot say
    assert rows["gemm"]["b"]["slowdown"] == ["sw_power_cap"]
    assert (m["misses"], m["with_card_state"], m["explained_by_clock"]) == (4, 3, 2)
    assert m["with_host_pace"] == 0 and not any(r["by_host"] for r in m["rows"])  # older runs: no pace
    for doc, pace in ((a, 200.0), (c, 260.0)):  # the host 30% slower in c
        for row in doc["tasks"]:
            if "timing" in row:
                row["timing"]["reference"]["host"] = {"pace_us": pace}
    m = lt.misses_by_clock(lt.compare(a, c), a, c, 0.02)
    rows = {r["task"]: r for r in m["rows"]}
    assert rows["net"]["by_host"] and rows["net"]["host_pace_rel"] == pytest.approx(0.3)
    assert not rows["faster"]["by_host"]  # faster in c on a slower host: not the host
    assert (m["with_host_pace"], m["slower_host"]) == (3, 2)
    # Read after the series too (session 17 on): the pace around it is the mean of both. A host as
    # fast as a's before c's series of "net" but far slower after it is still the slower host.
    for row in c["tasks"]:
        if row["task"] == "net":
            row["timing"]["reference"]["host"] = {"pace_us": 200.0, "pace_after_us": 360.0}
    rows = {r["task"]: r for r in lt.misses_by_clock(lt.compare(a, c), a, c, 0.02)["rows"]}
    assert rows["net"]["by_host"] and rows["net"]["host_pace_rel"] == pytest.approx(0.4)
    # A slower run at a lower clock by less than clock_tol is not put on the card.
    loose = {r["task"]: r for r in lt.misses_by_clock(lt.compare(a, c), a, c, 0.02, clock_tol=0.10)["rows"]}
    assert not loose["gemm"]["by_clock"] and loose["faster"]["by_clock"]  # 6.6% lower vs 16.5% higher


def test_repeat_verdict_passes_within_bounds(lt):
    a = _doc({f"t{i}": 1.0 for i in range(20)})
    b = _doc({f"t{i}": 1.0 + (0.001 if i % 2 else 0.0) + (0.015 if i == 19 else 0.0) for i in range(20)})
    v = lt.repeat_verdict(lt.compare(a, b))
    assert v["pass"], v


def test_within_2pct_counts_failed_tasks_against(lt):
    names = [f"t{i}" for i in range(20)]
    a = _doc({n: 1.0 for n in names})
    c = _doc({n: (None if n == "t0" else 1.01) for n in names})
    frac = lt.within_fraction(lt.compare(a, c), 0.02)
    # 19 of 19 compared are within, but the failed one counts: 19 / 20 = 0.95 passes, just.
    assert frac["within"] == 19 and frac["of_tasks"] == 20 and frac["fraction"] == pytest.approx(0.95)
    assert frac["fraction_of_compared"] == 1.0 and lt.trials100_verdict(frac)["pass"]
    c2 = _doc({n: (None if n in ("t0", "t1") else 1.01) for n in names})
    assert not lt.trials100_verdict(lt.within_fraction(lt.compare(a, c2), 0.02))["pass"]
    empty = lt.within_fraction(lt.compare(None, None), 0.02)
    assert empty["fraction"] is None and not lt.trials100_verdict(empty)["pass"]


def test_card_bound_fraction_leaves_the_host_bound_tasks_out(lt):
    names = [f"t{i}" for i in range(10)]
    a = _doc({n: 1.0 for n in names})
    for row in a["tasks"]:  # t0 and t1 were host-bound in run A, t2 was not (and one never says)
        if row["task"] in ("t0", "t1", "t2"):
            row["timing"] = {"reference": {"median_ms": 1.0, "host_bound": row["task"] != "t2"}}
    c = _doc({n: (1.3 if n in ("t0", "t2") else 1.0) for n in names})
    assert lt.host_bound_tasks(a) == ["t0", "t1"] and lt.host_bound_tasks(None) == []
    got = lt.card_bound_within(lt.compare(a, c), lt.host_bound_tasks(a), 0.02)
    # t2 (card-bound, 30% off) still counts against; t0's 30% is the host's and is left out.
    assert got["compared"] == 8 and got["within"] == 7 and got["fraction"] == pytest.approx(7 / 8)
    assert got["host_bound"] == 2 and got["host_bound_tasks"] == ["t0", "t1"] and got["host_bound_within"] == 1


def test_verdict_bounds_and_missing_figures(lt):
    v = lt.verdict({"wall": (119.9, "<=", 120.0), "frac": (0.96, ">=", 0.95)})
    assert v["pass"] and v["checks"]["wall"]["bound"] == "<= 120"
    assert not lt.verdict({"wall": (120.1, "<=", 120.0)})["pass"]
    assert not lt.verdict({"wall": (None, "<=", 120.0)})["pass"]  # nothing measured is no pass


def test_should_start(lt):
    assert lt.should_start(0.0, None, 540.0)
    assert lt.should_start(300.0, 200.0, 540.0)
    assert not lt.should_start(300.0, 250.0, 540.0)
    assert not lt.should_start(541.0, None, 540.0)


# --- end to end, with a fake analyze -----------------------------------------------------------------------

FAKE = r'''
import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps(argv) + "\n")
targets = []
for a in argv:
    if a.startswith("--"):
        break
    targets.append(Path(a))
out = Path(argv[argv.index("--json") + 1])
if "--verbose" in argv:  # the timeline as analyze prints it, then a line that is not part of it
    print("roofline-ext: where the time went (s since the command started):\n"
          "     0.70  Python started and roofline_ext imported; the pool starts\n"
          "     1.20  count tiny: 0.10 s\n     1.50  workers and fork server stopped; the report follows\n"
          "roofline-ext: analyzed 1 task(s)", file=sys.stderr)
if len(targets) == 1 and targets[0].is_file():  # the tiny task: one result object
    out.write_text(json.dumps({"task": targets[0].stem, "status": "ok", "t_ref_ms": 0.01}))
    sys.exit(0)
counter = Path(os.environ["FAKE_COUNTER"])
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
plan = json.loads(Path(os.environ["FAKE_PLAN"]).read_text())[k]
rows = []
for t in targets:
    for f in sorted(t.glob("*.py")):
        name = f"{t.name}/{f.stem}"
        ms = plan.get(name)
        rows.append({"task": name, "status": "ok", "t_ref_ms": ms} if ms is not None else
                    {"task": name, "status": "error", "error_kind": "timing", "error": "fake"})
out.write_text(json.dumps({"complete": True, "tasks": rows, "summary": {"total": len(rows)}}))
sys.exit(1 if any(r["status"] != "ok" for r in rows) else 0)
'''

PLAN = [  # runs A, B (the repeat) and C (--trials 100)
    {"level1/a": 1.0, "level1/b": 2.0, "level1/c": 4.0, "level1/d": 1.0, "level2/e": 1.0, "level3/f": 1.0},
    {"level1/a": 1.001, "level1/b": 2.004, "level1/c": 4.0, "level1/d": 1.003, "level2/e": 1.05, "level3/f": None},
    {"level1/a": 1.01, "level1/b": 2.0, "level1/c": 4.1, "level1/d": 1.0, "level2/e": 1.0, "level3/f": 1.0},
]


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    kb = tmp_path / "kb"
    for name in PLAN[0]:
        (kb / name).parent.mkdir(parents=True, exist_ok=True)
        (kb / f"{name}.py").write_text("# a task the fake never loads\n")
    script = tmp_path / "fake_analyze.py"
    script.write_text(FAKE)
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "argv.log"))
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAKE_PLAN", str(tmp_path / "plan.json"))
    common = ["--kernelbench", str(kb), "--analyze-cmd", f"{sys.executable} {script}",
              "--bare-cmd", f"{sys.executable} -c pass", "--pycache", str(tmp_path / "pyc"),
              "--expect-tasks", "6", "--tiny-runs", "2"]
    return tmp_path, common


def test_end_to_end_with_a_fake_analyze(lt, fake):
    tmp, common = fake
    out = tmp / "res" / "levels.json"
    assert lt.main([str(out), *common]) == 0
    rep = json.loads(out.read_text())
    assert rep["skipped"] == {} and set(rep["sections"]) == {"levels", "repeat", "trials100", "tiny"}
    assert rep["pycache"] == str((tmp / "pyc").resolve()) and rep["date_utc"].endswith("+00:00")
    lv = rep["sections"]["levels"]
    assert lv["run_a"]["tasks"] == 6 and lv["run_a"]["complete"] is True and lv["verdict"]["pass"]
    rp = rep["sections"]["repeat"]["a_vs_b"]
    assert rp["compared"] == 5 and [f["task"] for f in rp["failed"]] == ["level3/f"]
    assert rp["median_abs"] == pytest.approx(0.002) and not rep["sections"]["repeat"]["verdict"]["pass"]
    tc = rep["sections"]["trials100"]
    assert tc["within_2pct"]["within"] == 5 and tc["within_2pct"]["of_tasks"] == 6
    assert tc["worst10"][0] == {"task": "level1/c", "rel": pytest.approx(0.025), "a_ms": 4.0, "b_ms": 4.1}
    assert not tc["verdict"]["pass"]
    tiny = rep["sections"]["tiny"]
    assert len(tiny["bare_walls_s"]) == len(tiny["tiny_walls_s"]) == 2 and tiny["ratio"] > 0
    assert tiny["tiny_status"] == "ok" and tiny["verdict"]["checks"]["all_runs_rc_zero"]["pass"]
    assert rep["verdicts"] == {"levels": True, "repeat": False, "trials100": False, "tiny": tiny["verdict"]["pass"]}
    calls = [json.loads(line) for line in (tmp / "argv.log").read_text().splitlines()]
    batch = [c for c in calls if c[0].endswith("level1")]
    assert len(batch) == 3 and all(c[:3] == [str(tmp / "kb" / lv) for lv in ("level1", "level2", "level3")]
                                   for c in batch)
    assert all("--time" in c and "--no-progress" in c and "--json" in c for c in calls)
    assert "--trials" not in batch[1] and batch[2][batch[2].index("--trials") + 1] == "100"
    tiny_calls = [c for c in calls if c[0].endswith("tiny.py")]
    # The warm-up, the section's own warm-up, the measured runs, and one with --verbose (not measured).
    assert len(tiny_calls) == 1 + 1 + 2 + 1 and "--verbose" in tiny_calls[-1]
    assert not any("--verbose" in c for c in tiny_calls[:-1])
    assert tiny["verbose_timeline"][0].endswith("where the time went (s since the command started):")
    assert [line.split()[0] for line in tiny["verbose_timeline"][1:]] == ["0.70", "1.20", "1.50"]
    assert calls.index(batch[0]) == 5  # tiny runs first by default, then A, B and C back to back
    assert "x + 1" in Path(tiny_calls[0][0]).read_text()


def test_budget_skips_sections_and_still_writes(lt, fake):
    tmp, common = fake
    out = tmp / "skipped.json"
    assert lt.main([str(out), *common, "--budget-s", "0"]) == 0
    rep = json.loads(out.read_text())
    assert rep["sections"] == {} and rep["skipped"]["levels"].startswith("budget")
    # repeat and trials100 have no run A to compare with once levels was skipped.
    assert "no run A" in rep["skipped"]["repeat"] and rep["skipped"]["tiny"].startswith("budget")


def test_repeat_against_an_earlier_run_a(lt, fake, tmp_path):
    _, common = fake
    a = tmp_path / "A.json"
    a.write_text(json.dumps(_doc({"level1/a": 1.0, "level1/b": 2.0})))
    out = tmp_path / "later.json"
    assert lt.main([str(out), *common, "--sections", "repeat", "--run-a", str(a)]) == 0
    rep = json.loads(out.read_text())["sections"]["repeat"]["a_vs_b"]
    # the fake's first batch is PLAN[0]: a and b agree exactly, the other four are missing from A.
    assert rep["compared"] == 2 and rep["median_abs"] == 0.0 and rep["failed_count"] == 4
