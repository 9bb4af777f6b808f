"""RoofSet (model/roofs.py): every roof of one GPU, resolved once per run and carried on the result,
so that the charts draw the roofs the floors were computed against (issue 25, item 2).

The calibration is tests/data/calibration-h200-example.json, a hand-made TEST FIXTURE.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from roofline_ext.model.floors import roofline
from roofline_ext.model.gpu import GpuChoice
from roofline_ext.model.roofs import Roof, RoofSet, datasheet_roof
from roofline_ext.peaks import cache as cb
from roofline_ext.peaks.datasheet import lookup
from roofline_ext.peaks.derived import derived_peaks_for_device
from roofline_ext.peaks.record import CalibrationRecord
from roofline_ext.peaks.units import UNITS

DATA = Path(__file__).parent / "data" / "calibration-h200-example.json"

MATMUL = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, A, B):
        return A @ B

def get_inputs():
    return [torch.randn(256, 512), torch.randn(512, 128)]

def get_init_inputs():
    return []
"""


def example() -> dict:
    return json.loads(DATA.read_text())


def h200_card(uuid: str | None = None) -> SimpleNamespace:
    """An H200 as NVML describes it (what device.listing gives), without a GPU."""
    return SimpleNamespace(name="NVIDIA H200", uuid=uuid or example()["gpu"]["uuid"], cc_major=9, cc_minor=0,
                           sm_count=132, max_sm_clock_mhz=1980, max_mem_clock_mhz=3201, memory_bus_width_bits=6016)


def sheet_choice(name: str) -> GpuChoice:
    sheet = lookup(name)
    assert sheet is not None
    return GpuChoice(sheet.full_name, sheet, None, "flag")


def local_h200() -> GpuChoice:
    return GpuChoice("NVIDIA H200", lookup("NVIDIA H200"), h200_card(), "local")


# --- resolving -------------------------------------------------------------------------------------

def test_datasheet_only_gpu_has_one_roof_and_says_why_not_the_others():
    roofs = RoofSet.resolve(sheet_choice("H100 SXM"))
    sheet = lookup("H100 SXM")
    assert roofs.sku == "H100 SXM" and roofs.regime == "burst"
    assert roofs.derived is None and roofs.measured is None
    assert "no GPU of this machine" in roofs.missing["derived"]
    assert "roofline-ext calibrate" in roofs.missing["measured"]
    ds = roofs.datasheet
    assert isinstance(ds, Roof) and ds.name == "datasheet" and ds.source == sheet.source
    assert ds.bandwidth_tbps == sheet.bandwidth_tbps and ds.l2_bandwidth_tbps is None
    # Every unit of the registry the SKU has, in registry order: fp64_tensor is not dropped.
    assert list(ds.peaks) == [u for u in UNITS if sheet.peak(u) is not None]
    assert ds.peak("fp64_tensor") == sheet.fp64_tensor == 66.9
    json.dumps(roofs.to_dict())  # JSON-ready


def test_fp64_tensor_only_where_the_datasheet_has_it():
    v100 = datasheet_roof("V100")
    assert v100 is not None and lookup("V100").fp64_tensor is None
    assert "fp64_tensor" not in v100.peaks and v100.peak("fp64") == lookup("V100").fp64
    assert datasheet_roof("A100").peak("fp64_tensor") == lookup("A100").fp64_tensor
    assert datasheet_roof("no such gpu") is None


def test_unknown_part_has_no_datasheet_roof_and_says_so():
    roofs = RoofSet.resolve(GpuChoice("Mystery GPU", None, None, "flag"))
    assert roofs.datasheet is None and roofs.sku is None
    assert "not in the datasheet table" in roofs.missing["datasheet"]
    assert roofs.to_dict()["roofs"] == {"datasheet": None, "derived": None, "measured": None}


def test_derived_roof_from_the_device():
    roofs = RoofSet.resolve(local_h200())
    expected = derived_peaks_for_device(h200_card())
    d = roofs.derived
    assert d is not None and "derived" not in roofs.missing
    assert d.peak("fp32") == pytest.approx(66.90816) and d.bandwidth_tbps == pytest.approx(4.814, abs=1e-3)
    assert d.peaks == {u: expected.peak(u) for u in UNITS if expected.peak(u) is not None}
    assert "fp64_tensor" in d.peaks and "132 SMs" in d.source
    assert roofs.derived_peaks == expected


def test_measured_roof_from_the_calibration_fixture_per_regime():
    cal = example()
    record = CalibrationRecord.read(cal)
    for regime in ("burst", "sustained"):
        peaks = record.measured_peaks(regime)
        roofs = RoofSet.resolve(local_h200(), regime, measured=peaks, calibration=cal)
        m = roofs.measured
        assert m is not None and m.regime == regime and m.label == f"measured ({regime})"
        stored = cal["peaks"][regime]
        assert m.bandwidth_tbps == stored["bandwidth_tbps"]
        assert m.peaks == {u: stored[u] for u in UNITS if u in stored}
        # The floor never uses L2, so the model's peaks lack it: the roof takes it from the calibration.
        assert "l2_bandwidth_tbps" not in peaks
        assert m.l2_bandwidth_tbps == stored.get("l2_bandwidth_tbps")
        assert cal["gpu"]["uuid"] in m.source and roofs.calibration is not None
        # What the floors get is the mapping as handed in (its read:write envelope with it).
        assert roofs.measured_peaks is peaks
    assert RoofSet.resolve(local_h200(), "burst", measured=record.measured_peaks()).measured.peak("fp64_tensor") \
        == cal["peaks"]["burst"]["fp64_tensor"]


def test_regime_is_checked():
    with pytest.raises(ValueError, match="unknown regime 'peak'"):
        RoofSet.resolve(local_h200(), "peak")


def test_the_runner_resolves_this_cards_calibration_from_the_cache(tmp_path, monkeypatch):
    from roofline_ext.runner.analyze import resolve_roofs

    monkeypatch.setenv(cb.CACHE_ENV, str(tmp_path / "cache"))
    cb.save(example())
    roofs = resolve_roofs(local_h200(), True, "burst")
    assert roofs.measured is not None and roofs.measured.peak("bf16") == example()["peaks"]["burst"]["bf16"]
    assert roofs.calibration is not None and roofs.calibration.gpu.uuid == example()["gpu"]["uuid"]
    assert roofs.measured.l2_bandwidth_tbps == example()["peaks"]["burst"]["l2_bandwidth_tbps"]
    # Peaks handed in as a plain mapping name no calibration; False asks for no measured roof.
    given = resolve_roofs(local_h200(), {"bandwidth_tbps": 4.0, "bf16": 700.0}, "burst")
    assert given.calibration is None and given.measured.source == "measured peaks as given to analyze"
    assert resolve_roofs(local_h200(), False).missing["measured"] == "measured roofs left out by the caller"


# --- the result carries the roofs its floors used; its JSON is unchanged ---------------------------

@pytest.fixture
def task(tmp_path) -> Path:
    pytest.importorskip("torch")
    p = tmp_path / "mm.py"
    p.write_text(textwrap.dedent(MATMUL))
    return p


def test_analyze_carries_the_roof_set_and_its_json_is_unchanged(task, tmp_path, monkeypatch):
    from roofline_ext.report.writers import dumps, public
    from roofline_ext.runner.analyze import ROOF_SET_KEY, analyze_task, resolve_roofs

    monkeypatch.setenv(cb.CACHE_ENV, str(tmp_path / "cache"))
    peaks = CalibrationRecord.read(example()).measured_peaks("burst")
    choice = local_h200()
    own = analyze_task(task, choice, measured=peaks, t_ref_ms=0.01)
    once = resolve_roofs(choice, peaks, "burst")
    shared = analyze_task(task, choice, roofs=once, t_ref_ms=0.01)
    assert shared[ROOF_SET_KEY] is once and isinstance(own[ROOF_SET_KEY], RoofSet)
    assert ROOF_SET_KEY not in public(shared)
    # One JSON whether the task resolved its roofs or was handed the run's.
    own_json, shared_json = dumps(public(own)), dumps(public(shared))
    assert "roof_set" not in shared_json
    drop = ("count_seconds",)  # the counting's own wall time differs between two runs
    assert {k: v for k, v in json.loads(own_json).items() if k not in drop} == \
        {k: v for k, v in json.loads(shared_json).items() if k not in drop}
    # And the roofs of the JSON are what the floor gives for the peaks the first versions looked
    # up (derived from the device, the measured peaks as given): nothing changed in the numbers.
    counts = json.loads(shared_json)
    expected = roofline(counts["flops"], counts["bytes"], counts["compute_dtype"], choice.sheet, 0.01,
                        simt_flops=counts["simt_flops"], derived=derived_peaks_for_device(choice.device),
                        measured=peaks, read_bytes=counts["input_bytes"] + counts["param_bytes"],
                        write_bytes=counts["output_bytes"])
    assert counts["roofs"] == json.loads(dumps(expected["roofs"]))
    m = counts["roofs"]["measured"]
    assert m["compute_tflops"] == once.measured.peak(m["compute_unit"])
    assert m["bandwidth_tbps"] == pytest.approx(once.measured.bandwidth_tbps, rel=0.2)  # at the task's mix


def test_roofs_of_another_regime_are_refused(task):
    from roofline_ext.runner.analyze import analyze_task

    with pytest.raises(ValueError, match="resolved for the burst regime"):
        analyze_task(task, local_h200(), regime="sustained", roofs=RoofSet.resolve(local_h200()))


# --- the charts draw the RoofSet's roofs -----------------------------------------------------------

def analysis_result(**changes) -> dict:
    """The fields of an ``analyze`` result that the chart reads (a BF16 matmul on an H200)."""
    r = {
        "task": "matmul_task", "path": "matmul_task.py", "status": "ok",
        "flops": 34359738368, "simt_flops": 16777216, "bytes": 50331648,
        "arithmetic_intensity": 683.0, "dtype": "torch.bfloat16", "compute_dtype": "torch.bfloat16",
        "gpu": "NVIDIA H200", "sku": "H200", "regime": "burst", "compute_unit": "bf16",
        "bound": "compute", "primary_roof": "datasheet", "t_ref_ms": 0.09, "t_new_ms": None,
        "roofs": {"datasheet": {"compute_unit": "bf16", "compute_tflops": 989.4, "bandwidth_tbps": 4.8,
                                "t_min_ms": 0.03474},
                  "derived": None,
                  "measured": {"compute_unit": "bf16", "compute_tflops": 700.0, "bandwidth_tbps": 4.0,
                               "t_min_ms": 0.049}},
    }
    r.update(changes)
    return r


def test_task_chart_draws_the_roof_sets_measured_roof_not_the_caches(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from roofline_ext.report.charts import plot_task

    monkeypatch.setenv(cb.CACHE_ENV, str(tmp_path / "cache"))
    cb.save(example())  # the cache says bf16 949.3, HBM 4.312
    roofs = RoofSet.resolve(local_h200(), measured={"bandwidth_tbps": 4.0, "bf16": 700.0, "fp32": 60.0})
    text = plot_task(analysis_result(), tmp_path / "t.svg", example(), roofs=roofs).read_text()
    assert "FP16/BF16: 700 measured, 989 datasheet" in text and "HBM 4.00 TB/s measured" in text
    assert "952 measured" not in text and "4.31 TB/s" not in text
    assert "measured peaks as given to analyze" in text
    # Without the RoofSet (a result read back from JSON) the calibration handed in is drawn.
    text = plot_task(analysis_result(), tmp_path / "u.svg", example()).read_text()
    assert "FP16/BF16: 952 measured" in text


def test_task_chart_of_the_calibrated_roof_set_has_its_subtitle_and_l2(tmp_path):
    pytest.importorskip("matplotlib")
    from roofline_ext.report.charts import plot_task

    cal = example()
    roofs = RoofSet.resolve(local_h200(), measured=CalibrationRecord.read(cal).measured_peaks(), calibration=cal)
    text = plot_task(analysis_result(), tmp_path / "t.svg", roofs=roofs).read_text()
    assert cal["gpu"]["uuid"] in text and "TEST FIXTURE" in text
    assert "L2 10.9 TB/s measured" in text and "FP16/BF16: 952 measured, 989 datasheet" in text
    bare = plot_task(analysis_result(), tmp_path / "d.svg", roofs=RoofSet.resolve(sheet_choice("H200")))
    assert "roofline-ext calibrate" in bare.read_text() and "700 measured" not in bare.read_text()


def test_fp64_task_chart_draws_the_fp64_tensor_roof_it_used(tmp_path):
    pytest.importorskip("matplotlib")
    from roofline_ext.report.charts import plot_task

    r = analysis_result(compute_unit="fp64_tensor", dtype="torch.float64", compute_dtype="torch.float64")
    r["roofs"]["measured"] = None
    text = plot_task(r, tmp_path / "t.svg", roofs=RoofSet.resolve(sheet_choice("H100 SXM"))).read_text()
    assert "FP64 tensor: 66.9 datasheet" in text


def test_ops_chart_takes_the_roof_sets_peaks():
    pytest.importorskip("matplotlib")
    from roofline_ext.report import ops_chart

    roofs = RoofSet.resolve(local_h200(), measured={"bandwidth_tbps": 4.0, "bf16": 700.0})
    datasheet, measured = ops_chart._chart_peaks(analysis_result(), example(), None, roofs)
    assert measured == {"bandwidth_tbps": 4.0, "bf16": 700.0}
    assert datasheet["fp64_tensor"] == lookup("H200").fp64_tensor
    # Read back from JSON (no RoofSet): the calibration handed in.
    _, measured = ops_chart._chart_peaks(analysis_result(), example(), None, None)
    assert measured["bf16"] == example()["peaks"]["burst"]["bf16"]


def test_report_datasheet_chart_draws_the_roof_set_given():
    pytest.importorskip("matplotlib")
    from roofline_ext.report.html import datasheet_chart

    roofs = RoofSet.resolve(sheet_choice("H100 SXM"))
    page = datasheet_chart("NVIDIA H200", [analysis_result()], "c1-", roofs=roofs)
    assert "3.35 TB/s datasheet" in page  # the H100's HBM, not the H200's 4.8 looked up by name
    assert "4.80 TB/s" in datasheet_chart("NVIDIA H200", [analysis_result()], "c2-")


def test_analyze_plot_draws_the_roofs_the_run_resolved(task, tmp_path, monkeypatch, capsys):
    """``analyze --plot``: the chart of the run's own RoofSet (measured peaks as the run was given
    them), not a calibration looked up again from the cache."""
    pytest.importorskip("matplotlib")
    from roofline_ext.cli import main
    from roofline_ext.cli.commands import analyze as analyze_cmd

    monkeypatch.setenv(cb.CACHE_ENV, str(tmp_path / "cache"))
    cb.save(example())
    monkeypatch.setattr(analyze_cmd, "_measured_peaks_for",
                        lambda gpu, regime: {"bandwidth_tbps": 3.9, "tf32": 444.0, "fp32": 61.0})
    out = tmp_path / "chart.svg"
    assert main(["analyze", str(task), "--gpu", "H200", "--json", str(tmp_path / "r.json"), "--plot", str(out)]) == 0
    text = out.read_text()
    assert "TF32: 444 measured, 495 datasheet" in text and "HBM 3.90 TB/s measured" in text
    assert "478 measured" not in text  # the cached calibration's TF32
    assert "roof_set" not in (tmp_path / "r.json").read_text()
