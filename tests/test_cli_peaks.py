"""``roofline-ext peaks [NAME] [--json]``."""
from __future__ import annotations

import json

from roofline_ext.cli import main
from roofline_ext.peaks.datasheet import all_skus, known_names


def test_table_lists_every_sku(capsys):
    assert main(["peaks"]) == 0
    out = capsys.readouterr().out
    for name in known_names():
        assert name in out
    assert "Dense peaks" in out and "FP32 accumulation" in out
    assert "989.4" in out and "1979 " not in out  # the dense H100 figure, never the sparse one


def test_table_json(capsys):
    assert main(["peaks", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in data] == [s.name for s in all_skus()]
    h100 = next(d for d in data if d["name"] == "H100 SXM")
    assert h100["fp16"] == 989.4 and h100["boost_clock_mhz"] == 1830 and h100["simt_clock_mhz"] == 1980


def test_one_sku_by_device_name(capsys):
    assert main(["peaks", "NVIDIA H100 80GB HBM3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NVIDIA H100 80GB HBM3 -> H100 SXM")
    assert "989.4 TFLOP/s" in out and "1830 MHz" in out and "source" in out


def test_one_sku_json(capsys):
    assert main(["peaks", "NVIDIA L40", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "L40" and data["bandwidth_tbps"] == 0.864


def test_friendly_name(capsys):
    assert main(["peaks", "4090"]) == 0
    assert "RTX 4090" in capsys.readouterr().out


def test_unknown_name_is_a_one_line_error(capsys):
    assert main(["peaks", "NVIDIA GH200 480GB"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err
    assert "unknown GPU 'NVIDIA GH200 480GB'" in err and "known: H100 SXM" in err
