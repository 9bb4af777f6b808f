"""The exploit suite on a GPU, timed: every cheat refused (those that need the timed loop
included), every honest candidate correct and scored, in one batch through the default pool.

A cheat that only the floor would catch is not counted as caught here: the floor is not a defence
(docs/scoring.md), so every cheat must be refused by a verdict of the judge itself."""
from __future__ import annotations

import json

import pytest

from exploits.manifest import CASES, stage
from roofline_ext import cli

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    root = tmp_path_factory.mktemp("exploits-gpu")
    tasks, cands, by_label = stage(CASES, root)
    out = root / "judged.json"
    rc = cli.main(["analyze", str(tasks), "--new", str(cands), "--time", "--trials", "30", "--json", str(out),
                   "--no-progress"])
    doc = json.loads(out.read_text())
    got: dict = {"_tasks": {}, "_rc": rc,
                 "_failed": [(r["task"], r.get("status"), r.get("error")) for r in doc["tasks"] if r.get("status") != "ok"]}
    for r in doc["tasks"]:
        got["_tasks"][r["task"].split("/")[-1].removesuffix(".py")] = r
        for c in r.get("candidates") or ():
            got[by_label[f"{r['task'].split('/')[-1]}:{c['sample']}"].candidate] = c
    return got


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.candidate)
def test_verdict_on_the_gpu(timed, case):
    if case.candidate not in timed:  # say why: the task's own row (its failure), not a KeyError
        row = timed["_tasks"].get(case.task)
        if row is None:  # the task has no row at all (seen twice on the H200, 2026-12-02: 7_matmul_2048)
            pytest.fail(f"{case.candidate}: task {case.task} has no row in the batch's JSON; rows: "
                        f"{sorted(timed['_tasks'])}; exit code {timed['_rc']}; failed: {timed['_failed']!r}")
        pytest.fail(f"{case.candidate}: no candidate row; task {case.task}: status {row.get('status')!r}, "
                    f"error {row.get('error')!r}, {len(row.get('candidates') or ())} candidate(s)")
    c = timed[case.candidate]
    assert c["verdict"] in case.verdicts, f"{case.candidate}: {c['verdict']} ({c.get('reason')})"
    if not case.honest and c["verdict"] == "correct":  # scored only when the score gains nothing
        assert case.max_speedup is not None and c["speedup"] <= case.max_speedup, c
        return
    if case.defence is not None:
        assert c["defence"] == case.defence, c.get("reason")
    if case.honest:
        assert c["t_new_ms"] and c["t_new_ms"] > 0 and c["speedup"]
        streams = (c["judgement"]["evidence"] or {}).get("all_streams") or {}
        assert streams.get("ok") is True
    else:
        assert c["t_new_ms"] is None


def test_a_real_speedup_is_scored(timed):
    c = timed["honest_fast_row_sums"]
    assert c["verdict"] == "correct" and c["speedup"] >= 10
