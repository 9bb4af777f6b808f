"""analyze --time: argument handling and result shape without a GPU (the timing process is faked
where noted), and the batch going on past a task whose timing process died."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from roofline_ext import cli
from roofline_ext.runner import timed as timed_analysis
from roofline_ext.device.status import availability

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_time_without_gpu_exits_3_one_line(capsys):
    if availability().ok:
        pytest.skip("this machine has a GPU")
    rc = cli.main(["analyze", str(EXAMPLES / "softmax.py"), "--time"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3
    assert err[-1].startswith("roofline-ext: error: ") and availability().message in err[-1]


@pytest.mark.parametrize("argv, needle", [
    (["--new", "nope.py"], "no such candidate file"),
    (["--trials", "0"], "--trials must be at least 1"),
])
def test_bad_timing_arguments_exit_2(capsys, argv, needle):
    rc = cli.main(["analyze", str(EXAMPLES / "softmax.py"), *argv])
    assert rc == 2 and needle in capsys.readouterr().err


def test_new_with_folder_is_refused(capsys):
    rc = cli.main(["analyze", str(EXAMPLES), "--new", str(EXAMPLES / "softmax.py")])
    assert rc == 2 and "--new takes one task file" in capsys.readouterr().err


def _fake_timing(t_ref, t_new=None, ok=True):
    res = {"t_ref_ms": t_ref, "t_new_ms": t_new, "device": "NVIDIA H200", "dtype": "torch.float32",
           "reference": {"median_ms": t_ref, "best_ms": t_ref, "cv": 0.01, "trials": 100}}
    if t_new is not None:
        res.update(candidate_timing={"median_ms": t_new, "best_ms": t_new, "cv": 0.01, "trials": 100},
                   correctness={"ok": ok, "tolerance": 1e-4, "reason": None if ok else "differs"},
                   speedup=t_ref / t_new)
    return {"ok": True, "result": res}


def test_timed_result_has_fractions_of_every_roof(monkeypatch):
    # softmax example: 8192 x 8192 float32 in and out = 536.9 MB; H200 datasheet 4.8 TB/s -> 0.1118 ms.
    monkeypatch.setattr("roofline_ext.runner.isolation.run_isolated", lambda kw, timeout_s: _fake_timing(0.2, 0.125))
    measured = {"bandwidth_tbps": 4.6, "fp32": 60.0, "tf32": 450.0, "fp16": 900.0, "bf16": 900.0}
    r = timed_analysis.analyze_and_time(EXAMPLES / "softmax.py", "H200", measured=measured)
    ds, me = r["roofs"]["datasheet"], r["roofs"]["measured"]
    assert ds["t_min_ms"] == pytest.approx(8192 * 8192 * 4 * 2 / 4.8e12 * 1e3, rel=1e-6)
    assert ds["ref_fraction"] == pytest.approx(ds["t_min_ms"] / 0.2)
    assert ds["new_fraction"] == pytest.approx(ds["t_min_ms"] / 0.125)
    assert me["ref_fraction"] == pytest.approx(me["t_min_ms"] / 0.2)
    assert r["speedup"] == pytest.approx(1.6) and r["correct"] is True
    assert not r["impossible"]


def test_time_below_floor_is_flagged(monkeypatch):
    monkeypatch.setattr("roofline_ext.runner.isolation.run_isolated", lambda kw, timeout_s: _fake_timing(0.05))
    r = timed_analysis.analyze_and_time(EXAMPLES / "softmax.py", "H200", measured=None)
    assert r["impossible"] is True
    assert any("below a floor" in n for n in r["notes"])
    assert any("roofline-ext calibrate" in n for n in r["notes"])


def test_incorrect_candidate_is_said(monkeypatch):
    monkeypatch.setattr("roofline_ext.runner.isolation.run_isolated",
                        lambda kw, timeout_s: _fake_timing(0.2, 0.1, ok=False))
    r = timed_analysis.analyze_and_time(EXAMPLES / "softmax.py", "H200", measured=None)
    assert r["correct"] is False and any("INCORRECT" in n for n in r["notes"])


def test_batch_goes_on_past_a_crashed_timing(monkeypatch, tmp_path):
    # One task's timing process dies (as with an illegal memory access); the other is timed.
    for name in ("softmax.py", "layernorm.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)

    def fake(kw, timeout_s):
        if kw["path"].endswith("layernorm.py"):
            return {"ok": False, "kind": "crash", "error": "worker killed by SIGSEGV"}
        return _fake_timing(0.2)

    monkeypatch.setattr("roofline_ext.runner.isolation.run_isolated", fake)
    import sys

    monkeypatch.setattr(sys.modules["roofline_ext.device.status"], "require_measurement", lambda device=0: None)
    out = tmp_path / "out.json"
    rc = cli.main(["analyze", str(tmp_path), "--time", "--json", str(out), "--no-progress", "--gpu", "H200"])
    doc = json.loads(out.read_text())
    assert rc == 1
    by = {r["task"]: r for r in doc["tasks"]}
    assert by["layernorm"]["status"] == "error" and by["layernorm"]["error_kind"] == "crash"
    assert "SIGSEGV" in by["layernorm"]["error"]
    assert by["softmax"]["status"] == "ok" and by["softmax"]["t_ref_ms"] == 0.2
