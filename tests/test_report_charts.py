"""Roofline charts from a stored calibration JSON and from an analysis result (CPU only).

The calibration is tests/data/calibration-h200-example.json, a hand-made fixture (not a
measurement). The PNGs were looked at when these tests were written; the tests check what can be
checked without eyes: the files exist, are images of the expected size and carry the expected text.
"""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from roofline_ext.report import charts as plot  # noqa: E402
from roofline_ext.errors import UserError  # noqa: E402

DATA = Path(__file__).parent / "data" / "calibration-h200-example.json"


def example() -> dict:
    return json.loads(DATA.read_text())


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_calibration_chart_png(tmp_path):
    out = plot.plot_calibration(example(), tmp_path / "h200.png")
    assert out == tmp_path / "h200.png"
    w, h = png_size(out)
    assert (w, h) == (1575, 1020)
    # A chart with lines and text, not an empty canvas.
    assert out.stat().st_size > 60_000


def test_calibration_chart_svg_has_every_roof(tmp_path):
    out = plot.plot_calibration(str(DATA), tmp_path / "h200.svg")  # from the JSON file itself
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    # matplotlib writes text as glyph paths with the string in a comment-like id; check the labels
    # it keeps as plain text in <!-- --> comments.
    for label in ("HBM 4.31 TB/s measured", "L2 10.9 TB/s measured", "FP32: 65.6 measured",
                  "TF32: 478 measured", "FP16/BF16: 952 measured, 738 sustained, 989 datasheet",
                  "FP8: 1873 measured, 1979 datasheet", "TEST FIXTURE"):
        assert label in text, label
    assert len(text) > 50_000


def test_calibration_without_sustained_or_l2(tmp_path):
    cal = example()
    del cal["peaks"]["sustained"]
    del cal["peaks"]["burst"]["l2_bandwidth_tbps"]
    out = plot.plot_calibration(cal, tmp_path / "quick.svg")
    text = out.read_text()
    assert "FP16/BF16: 952 measured, 989 datasheet" in text
    assert "sustained" not in text and "L2 " not in text


def test_unknown_gpu_draws_measured_roofs_only(tmp_path):
    cal = example()
    cal["gpu"]["name"] = "NVIDIA Mystery GPU"
    cal["datasheet"] = None
    out = plot.plot_calibration(cal, tmp_path / "mystery.svg")
    text = out.read_text()
    assert "NVIDIA Mystery GPU: measured roofline" in text
    assert "FP16/BF16: 952 measured, 738 sustained -->" in text
    assert "datasheet" not in text


def test_bad_extension_and_missing_folder(tmp_path):
    with pytest.raises(UserError, match=r"\.png or \.svg"):
        plot.plot_calibration(example(), tmp_path / "chart.pdf")
    with pytest.raises(UserError, match="does not exist"):
        plot.plot_calibration(example(), tmp_path / "nope" / "chart.png")


def test_nothing_to_draw(tmp_path):
    with pytest.raises(UserError, match="HBM bandwidth"):
        plot.plot_roofline(tmp_path / "x.png", title="x", measured={"fp32": 60.0})
    with pytest.raises(UserError, match="compute peak"):
        plot.plot_roofline(tmp_path / "x.png", title="x", measured={"bandwidth_tbps": 4.0})


def test_matplotlib_missing_is_a_one_line_user_error(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UserError, match=r"install roofline-ext\[plot\]"):
        plot.plot_calibration(example(), tmp_path / "x.png")


def test_chart_leaves_pyplot_alone(tmp_path):
    import matplotlib

    backend = matplotlib.get_backend()
    plot.plot_calibration(example(), tmp_path / "a.png")
    assert matplotlib.get_backend() == backend
    if "matplotlib.pyplot" in sys.modules:
        assert not sys.modules["matplotlib.pyplot"].get_fignums()


# --- analysis charts -----------------------------------------------------------------------------

def analysis_result(**changes) -> dict:
    """The fields of an ``analyze`` result that the chart reads (a 4096x1024x4096 BF16 matmul)."""
    r = {
        "task": "matmul_task", "path": "matmul_task.py", "status": "ok",
        "flops": 34359738368, "simt_flops": 16777216, "bytes": 50331648,
        "arithmetic_intensity": 683.0, "dtype": "torch.bfloat16", "compute_dtype": "torch.bfloat16",
        "gpu": "NVIDIA H200 SXM 141GB", "sku": "H200", "regime": "burst", "compute_unit": "bf16",
        "bound": "compute", "primary_roof": "datasheet", "t_ref_ms": 0.09, "t_new_ms": 0.05,
        "roofs": {
            "datasheet": {"compute_unit": "bf16", "compute_tflops": 989.4, "bandwidth_tbps": 4.8,
                          "t_min_ms": 0.03474},
            "derived": None,
            "measured": {"compute_unit": "bf16", "compute_tflops": 949.3, "bandwidth_tbps": 4.312,
                         "t_min_ms": 0.03619},
        },
    }
    r.update(changes)
    return r


def test_task_chart_with_calibration(tmp_path):
    out = plot.plot_task(analysis_result(), tmp_path / "task.svg", calibration=example())
    text = out.read_text()
    assert "matmul_task on NVIDIA H200 SXM 141GB" in text
    assert "reference: 382 TFLOP/s, 40% of the measured roof" in text
    assert "candidate: 688 TFLOP/s, 72% of the measured roof" in text
    assert "FP16/BF16: 952 measured, 989 datasheet" in text
    assert "TF32" not in text  # only the ceilings that bind a BF16 task


def test_task_chart_draws_this_cards_calibration_found_by_uuid(tmp_path, monkeypatch):
    """Two cards of one model: the chart gets the calibration of the card analyzed (by UUID), never
    the newest one of the same name."""
    from types import SimpleNamespace

    from roofline_ext.model.gpu import GpuChoice
    from roofline_ext.peaks import cache as cb
    from roofline_ext.runner.analyze import calibration_for

    monkeypatch.setenv(cb.CACHE_ENV, str(tmp_path / "cache"))
    mine = example()
    other = example()
    other["date"] = "2099-01-01T00:00:00+00:00"  # newer, same model, another card
    other["gpu"] = dict(other["gpu"], uuid="GPU-other-card")
    other["peaks"]["burst"]["bf16"] = 500.0
    cb.save(mine)
    cb.save(other)
    card = SimpleNamespace(uuid=mine["gpu"]["uuid"], name="NVIDIA H200")
    cal = calibration_for(GpuChoice("NVIDIA H200", None, card, "local"))
    assert cal["gpu"]["uuid"] == mine["gpu"]["uuid"]
    text = plot.plot_task(analysis_result(), tmp_path / "task.svg", cal).read_text()
    assert "GPU-00000000-fixture" in text and "952 measured" in text and "500 measured" not in text


def test_task_chart_datasheet_only_untimed(tmp_path):
    r = analysis_result(t_ref_ms=None, t_new_ms=None, gpu="NVIDIA H100 SXM5 80GB", sku="H100 SXM")
    r["roofs"]["measured"] = None
    out = plot.plot_task(r, tmp_path / "task.png")
    assert png_size(out) == (1575, 1020)
    text = plot.plot_task(r, tmp_path / "task.svg").read_text()
    assert "matmul_task (not timed)" in text and "no calibration cached" in text


def test_task_chart_with_measured_peaks_given_directly(tmp_path):
    text = plot.plot_task(analysis_result(), tmp_path / "t.svg", calibration=None).read_text()
    # No cache here: the two measured peaks the analysis used are drawn.
    assert "FP16/BF16: 949 measured" in text and "HBM 4.31 TB/s measured" in text


# --- the hierarchical chart from recorded H200 results ----------------------------------------------

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def recorded_h200() -> dict:
    """The full H200 calibration of 2026-11-30 with the mix envelope, the L2 plateaus and shared
    memory of the 2026-12-01 runs on the same H200 model (benchmarks/results), as a full
    calibration of this version holds them: every number is a recorded measurement."""
    cal = json.loads((RESULTS / "calibration-full-h200-2026-11-30.json").read_text())
    mix = json.loads((RESULTS / "bandwidth-mix-h200-2026-12-01.json").read_text())
    l2 = json.loads((RESULTS / "l2-curve-h200-2026-12-01.json").read_text())
    smem = json.loads((RESULTS / "smem-h200-2026-12-01.json").read_text())
    e = cal["burst"]["entries"]
    e["hbm_mix"] = {"points": mix["envelope"]}
    e["l2"]["near_plateau"], e["l2"]["far_plateau"] = l2["near"], l2["far"]
    e["smem"] = {"value": smem["tbps_median"], "clock_derived": smem["ceiling_tbps"]}
    return cal


def _lines(fig) -> dict:
    out = {}
    for ax in [a for top in fig.axes for a in (top, *top.child_axes)]:  # the inset is a child axes
        for line in ax.get_lines():
            if line.get_gid():
                out[line.get_gid()] = (list(line.get_xdata()), list(line.get_ydata()))
    return out


def test_hierarchical_chart_roofs_equal_the_recorded_json(tmp_path):
    cal = recorded_h200()
    roofs = plot.calibration_roofs(cal)
    fig = plot.roofline_figure(title="t", **roofs)
    lines = _lines(fig)
    burst, sheet, sus = cal["peaks"]["burst"], cal["datasheet"]["peaks"], cal["peaks"]["sustained"]
    e = cal["burst"]["entries"]
    # Memory slopes: y = bandwidth x intensity, so y / x is the roof in TB/s (TFLOP/s per FLOP/B).
    expect_slopes = {
        "roof:hbm:measured": burst["bandwidth_tbps"], "roof:hbm:datasheet": sheet["bandwidth_tbps"],
        "roof:hbm:sustained": sus["bandwidth_tbps"],
        "roof:hbm_mix:min": min(e["hbm_mix"]["points"].values()),
        "roof:hbm_mix:max": max(e["hbm_mix"]["points"].values()),
        "roof:l2_near:measured": e["l2"]["near_plateau"]["tbps"],
        "roof:l2_far:measured": e["l2"]["far_plateau"]["tbps"],
        "roof:smem:measured": e["smem"]["value"], "roof:smem:reference": e["smem"]["clock_derived"],
    }
    for gid, tbps in expect_slopes.items():
        xs, ys = lines[gid]
        assert ys[0] / xs[0] == pytest.approx(tbps, rel=1e-12), gid
        assert ys[-1] / xs[-1] == pytest.approx(tbps, rel=1e-12), gid
    # The single L2 plateau is not drawn beside its two plateaus.
    assert "roof:l2:measured" not in lines
    # Every compute unit, measured and datasheet: horizontal at the JSON's figure.
    for gid, value in {"roof:fp64:measured": burst["fp64"], "roof:fp64:datasheet": sheet["fp64"],
                       "roof:fp32:measured": burst["fp32"], "roof:fp32:sustained": sus["fp32"],
                       "roof:tf32:measured": burst["tf32"], "roof:tf32:datasheet": sheet["tf32"],
                       "roof:fp16/bf16:measured": max(burst["fp16"], burst["bf16"]),
                       "roof:fp16/bf16:sustained": sus["bf16"],
                       "roof:fp8:measured": burst["fp8"], "roof:fp8:datasheet": sheet["fp8"],
                       "roof:int8:measured": burst["int8"], "roof:int8:datasheet": sheet["int8"]}.items():
        assert set(lines[gid][1]) == {value}, gid
    # The inset: every envelope point at its read fraction, and the datasheet line.
    xs, ys = lines["mix:points"]
    assert sorted(zip(xs, ys)) == sorted((r / (r + w), v) for (r, w), v in
                                         (((float(k.split(":")[0]), float(k.split(":")[1])), v)
                                          for k, v in e["hbm_mix"]["points"].items()))
    assert set(lines["mix:datasheet"][1]) == {sheet["bandwidth_tbps"]}
    # And it renders, as PNG and as SVG with the numbers as text.
    assert png_size(plot.plot_calibration(cal, tmp_path / "h200.png")) == (1575, 1020)
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none"}):
        text = plot.plot_calibration(cal, tmp_path / "h200.svg").read_text()
    for label in ("L2 near 18.3 TB/s measured", "L2 far 9.12 TB/s measured",
                  "shared memory 33.2 TB/s measured (SMs x 128 B/clock 33.5)", "read:write mix 4.19-4.70",
                  "FP64: 33.2 measured", "INT8 (TOP/s): 1935 measured, 1979 datasheet"):
        assert label in text, label


def test_chart_without_a_sweep_or_plateaus_keeps_the_single_l2_slope():
    cal = example()  # the hand-made fixture: no hbm_mix, no plateaus, no shared memory
    roofs = plot.calibration_roofs(cal)
    assert roofs["levels"] == [] and roofs["mix"] is None
    lines = _lines(plot.roofline_figure(title="t", **roofs))
    xs, ys = lines["roof:l2:measured"]
    assert ys[0] / xs[0] == pytest.approx(cal["peaks"]["burst"]["l2_bandwidth_tbps"])
    assert not any(g.startswith(("roof:hbm_mix", "mix:", "roof:smem")) for g in lines)


def test_report_page_embeds_the_hierarchical_chart(tmp_path):
    from roofline_ext.report.html import build_report

    src = tmp_path / "cal.json"
    src.write_text(json.dumps(recorded_h200()))
    out, _ = build_report([src], tmp_path / "report.html")
    page = out.read_text()
    assert "L2 near 18.3 TB/s measured" in page and "HBM TB/s by read:write mix" in page
