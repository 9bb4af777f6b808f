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
