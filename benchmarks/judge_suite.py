"""The judge on a GPU: the exploit suite timed (every cheat refused, every honest candidate
correct), and the judge's cost on KernelBench level 1 with one honest candidate per task.

    python3 benchmarks/judge_suite.py OUT.json [--kernelbench DIR/level1] [--trials N]

1. The suite (tests/exploits): one batch ``analyze level1 --new candidates --time`` on this GPU;
   each case's verdict, defence and reason against what the manifest demands.
2. With ``--kernelbench``: a candidate per task that is the task's own ``Model`` (``ModelNew =
   Model``: honest by construction, so every verdict must be ``correct``), timed with ``--time``;
   the batch's wall and each candidate job's split between the timed loop and the rest (loading,
   building, the judge), so the judge's share of the wall can be read off.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from exploits.manifest import CASES, stage  # noqa: E402


def _analyze(args: list[str]) -> tuple[int, float]:
    t0 = time.perf_counter()
    rc = subprocess.call([sys.executable, "-m", "roofline_ext.cli", "analyze", *args])
    return rc, time.perf_counter() - t0


def suite(tmp: Path, trials: int) -> dict:
    tasks, cands, by_label = stage(CASES, tmp / "suite")
    out = tmp / "suite.json"
    rc, wall = _analyze([str(tasks), "--new", str(cands), "--time", "--trials", str(trials), "--json", str(out),
                         "--no-progress"])
    doc = json.loads(out.read_text())
    rows, bad = [], []
    for r in doc["tasks"]:
        for c in r.get("candidates") or ():
            case = by_label[f"{r['task'].split('/')[-1]}:{c['sample']}"]
            gainless = (not case.honest and c["verdict"] == "correct" and case.max_speedup is not None
                        and (c.get("speedup") or 0.0) <= case.max_speedup)
            ok = c["verdict"] in case.verdicts and (gainless or case.defence is None or c.get("defence") == case.defence)
            rows.append({"candidate": case.candidate, "task": case.task, "honest": case.honest, "where": case.where,
                         "expected": list(case.verdicts), "expected_defence": case.defence,
                         "verdict": c["verdict"], "defence": c.get("defence"), "reason": c.get("reason"),
                         "t_new_ms": c.get("t_new_ms"), "speedup": c.get("speedup"), "ok": ok,
                         "evidence": (c.get("judgement") or {}).get("evidence")})
            if not ok:
                bad.append(case.candidate)
    # A cheat scored "correct" counts as not refused, whatever its speed-up (the manifest allows it
    # for a replay that gains nothing; the row's "ok" says whether it stayed within that).
    return {"exit_code": rc, "wall_s": wall, "cases": rows, "cheats_refused": sum(
        1 for x in rows if not x["honest"] and x["verdict"] != "correct"), "cheats": sum(not x["honest"] for x in rows),
        "honest_correct": sum(1 for x in rows if x["honest"] and x["verdict"] == "correct"),
        "honest": sum(x["honest"] for x in rows), "mismatches": bad, "gpu": doc.get("gpu")}


def kernelbench(level: Path, tmp: Path, trials: int, limit: int | None = None, keep: Path | None = None) -> dict:
    tasks = sorted(level.glob("*.py"))
    if limit and limit < len(tasks):  # an even spread over the level, not its first files
        tasks = [tasks[round(i * len(tasks) / limit)] for i in range(limit)]
        sub = tmp / "kb-tasks"
        sub.mkdir()
        for task in tasks:
            (sub / task.name).write_text(task.read_text())
        level = sub
    cands = tmp / "kb-candidates"
    cands.mkdir()
    for task in tasks:
        (cands / task.name).write_text(task.read_text() + "\n\nModelNew = Model  # honest: the reference itself\n")
    out = keep or tmp / "kb.json"  # kept: a run cut short still leaves the tasks it finished
    rc, wall = _analyze([str(level), "--new", str(cands), "--time", "--trials", str(trials), "--json", str(out),
                         "--no-progress"])
    doc = json.loads(out.read_text())
    verdicts: dict[str, int] = {}
    refused = []
    job_s = loop_s = ref_s = judge_s = 0.0
    phases: dict[str, float] = {}
    for r in doc["tasks"]:
        ref_s += (r.get("wall_parts_s") or {}).get("reference") or 0.0
        for c in r.get("candidates") or ():
            verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
            if c["verdict"] not in ("correct", "below_floor"):
                refused.append({"task": r["task"], "verdict": c["verdict"], "reason": c.get("reason")})
            job_s += c.get("job_s") or 0.0
            loop_s += c.get("timed_loop_s") or 0.0
            judge_s += c.get("judge_s") or 0.0
            for k, v in (c.get("phases_s") or {}).items():
                phases[k] = phases.get(k, 0.0) + v
    # judge_s: the phases only the judge spends (fingerprints, its copies and digests, the strict
    # comparisons, the checked trials, the new-values and all-stream passes; judge/clock.py), as a
    # fraction of the batch's wall: what the judge adds. The candidate jobs' time outside their
    # timed loop (loading and building too) is kept as the upper bound it was before.
    return {"exit_code": rc, "wall_s": wall, "tasks": len(doc["tasks"]), "verdicts": verdicts,
            "refused_honest": refused, "reference_jobs_s": ref_s, "candidate_jobs_s": job_s,
            "candidate_timed_loops_s": loop_s, "judge_and_setup_s": job_s - loop_s,
            "judge_and_setup_fraction_of_wall": (job_s - loop_s) / wall if wall else None,
            "judge_s": judge_s, "judge_fraction_of_wall": judge_s / wall if wall else None,
            "phases_s": {k: round(v, 3) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kernelbench", type=Path)
    ap.add_argument("--trials", type=int, default=100, help="timed trials per candidate of the suite")
    ap.add_argument("--kb-trials", type=int, default=100, help="timed trials per task of KernelBench (its default)")
    ap.add_argument("--kb-limit", type=int, help="time this many tasks of the level, evenly spread (default all)")
    ap.add_argument("--kb-json", type=Path, help="also keep the KernelBench batch's own JSON here")
    ap.add_argument("--kb-only", action="store_true", help="skip the exploit suite (the judge's cost only)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        result: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        if not a.kb_only:
            result["suite"] = suite(tmp, a.trials)
            Path(a.out).write_text(json.dumps(result, indent=1) + "\n")  # kept if the second part is cut short
        if a.kernelbench:
            result["kernelbench_level1_honest"] = kernelbench(a.kernelbench, tmp, a.kb_trials, a.kb_limit, a.kb_json)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    s = result.get("suite")
    if s:
        print(f"judge suite: {s['cheats_refused']}/{s['cheats']} cheats refused, {s['honest_correct']}/"
              f"{s['honest']} honest correct, mismatches: {s['mismatches'] or 'none'}; wall {s['wall_s']:.1f} s")
    kb = result.get("kernelbench_level1_honest")
    if kb:
        print(f"KernelBench L1 honest candidates: {kb['verdicts']} in {kb['wall_s']:.1f} s wall; the judge's own "
              f"phases {kb['judge_s']:.1f} s = {100 * (kb['judge_fraction_of_wall'] or 0):.1f}% of it; "
              f"phases {kb['phases_s']}")
    return 0 if not (s or {}).get("mismatches") else 1


if __name__ == "__main__":
    sys.exit(main())
