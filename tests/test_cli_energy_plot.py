"""``analyze --energy --energy-costs FILE --energy-plot CHART``: the energy roofline with each
measured task on it, from recorded H200 results (the chart's points), and its argument checks."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from roofline_ext.cli import main
from roofline_ext.model.energy import EnergyCosts
from roofline_ext.report.energy_chart import plot_energy_roofline, task_points

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
CAL = RESULTS / "calibration-energy-h200-2026-12-02-1.json"


@pytest.fixture(scope="module")
def recorded():
    doc = json.loads(gzip.open(RESULTS / "levels-energy-ops-h200-2026-12-02-partial.json.gz").read())
    return doc["tasks"][:4]


def test_each_measured_task_is_a_point_over_its_floor(recorded, tmp_path):
    points, left_out = task_points(recorded)
    assert [p.label for p in points] == [r["task"] for r in recorded] and left_out == []
    for p, r in zip(points, recorded):
        assert p.fraction == pytest.approx(r["energy"]["reference"]["fraction_of_floor"], rel=1e-9)
        assert p.below_floor is False
    costs = EnergyCosts.from_calibration(json.loads(CAL.read_text()))
    svg = plot_energy_roofline(costs, tmp_path / "e.svg", title="H200: energy roofline", tasks=points).read_text()
    for r in recorded:
        assert f"energy:task:{r['task']}" in svg


def test_tasks_without_a_figure_or_a_floor_are_said_not_drawn(recorded):
    import copy

    rs = copy.deepcopy(recorded[:2])
    rs[0]["energy"]["reference"] = {"error": "this GPU has no NVML total-energy counter"}
    del rs[1]["energy"]["floor"]
    rs[1]["energy"]["floor_error"] = "no cost for fp64"
    points, left_out = task_points(rs)
    assert points == []
    assert left_out == [f"{rs[0]['task']}: energy not measured (this GPU has no NVML total-energy counter)",
                        f"{rs[1]['task']}: no energy floor (no cost for fp64)"]


@pytest.mark.parametrize("extra, message", [
    ([], "--energy-plot needs --energy-costs FILE"),
    (["--energy-costs", str(CAL)], ".png or .svg"),
])
def test_bad_energy_plot_arguments_are_one_line_exit_2(tmp_path, capsys, extra, message):
    task = tmp_path / "t.py"
    task.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
                    "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n")
    chart = tmp_path / ("e.png" if not extra else "e.pdf")
    assert main(["analyze", str(task), "--energy", "--energy-plot", str(chart), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not chart.exists()
