"""The batch summary's energy part (report/energy_summary.py) on recorded H200 results: the
counts, the tasks below their floor, the table of the tasks furthest above it, and nothing at all
for a batch that measured no energy."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from roofline_ext.report.energy_summary import energy_summary
from roofline_ext.report.summary import batch_summary, summary_csv, summary_table

RECORDED = json.loads((Path(__file__).parent / "data" / "energy-level3-h200-2026-12-02.json").read_text())["tasks"]


def test_recorded_h200_references_none_below_and_the_furthest_first():
    e = energy_summary(RECORDED, furthest=3)
    assert e["measured"] == e["with_floor"] == 12 and e["unmeasured"] == 0 and e["below_floor"] == []
    fractions = sorted(r["energy"]["reference"]["fraction_of_floor"] for r in RECORDED)
    assert [t["fraction_of_floor"] for t in e["furthest_above"]] == fractions[:3]
    top = e["furthest_above"][0]
    assert top["task"] == "level3/4_LeNet5"  # 2% of its floor: the most wasteful of the twelve
    ref = next(r for r in RECORDED if r["task"] == top["task"])
    assert top["mj_per_call_above_idle"] == pytest.approx(ref["energy"]["reference"]["j_per_call_above_idle"] * 1e3)
    assert top["floor_mj"] == pytest.approx(ref["energy"]["floor"]["e_min_j"] * 1e3)
    # The floor is below the measured energy by the fraction the result states.
    assert top["floor_mj"] / top["mj_per_call_above_idle"] == pytest.approx(top["fraction_of_floor"], rel=1e-6)


def test_a_task_below_its_floor_and_one_unmeasured_are_said():
    results = copy.deepcopy(RECORDED)
    results[0]["energy"]["reference"].update(fraction_of_floor=1.2, below_floor=True)
    results[1]["energy"]["reference"] = {"error": "measuring energy needs NVML, which did not start: x"}
    s = batch_summary(results)
    assert s["energy"]["below_floor"] == [results[0]["task"]] and s["energy"]["unmeasured"] == 1
    text = summary_table(s)
    assert "energy      11 reference(s) measured, 1 not (see each task); 11 held against an energy floor, 1 below it" in text
    assert f"below their energy floor: {results[0]['task']}" in text
    assert "furthest above their energy floor" in text
    csv = summary_csv(s)
    assert "energy_below_floor,,1" in csv and "energy_measured,,11" in csv


def test_without_energy_the_summary_is_as_before():
    results = [{k: v for k, v in r.items() if k != "energy"} for r in RECORDED]
    s = batch_summary(results)
    assert "energy" not in s and "energy" not in summary_table(s) and "energy_" not in summary_csv(s)


def test_no_floor_says_how_to_get_one():
    results = copy.deepcopy(RECORDED)
    for r in results:
        r["energy"]["reference"].pop("fraction_of_floor")
        r["energy"].pop("floor")
    text = summary_table(batch_summary(results))
    assert "no energy floor (give --energy-costs FILE)" in text and "furthest above" not in text
