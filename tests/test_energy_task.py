"""``analyze --time --energy`` without a GPU: a call's energy on a fake counter (the probe once per
device, the flush inside the window), the reasons it may not be measured, and how the figures reach
the results and the text (docs/energy.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from roofline_ext.measure import energy as energy_mod
from roofline_ext.measure.energy import measure_call_energy

from test_energy_model import FakeBoard


@pytest.fixture(autouse=True)
def _fresh_probes(monkeypatch):
    monkeypatch.setattr(energy_mod, "_PROBES", {})


def test_a_calls_energy_on_a_fake_counter_with_the_flush_inside_the_window():
    board = FakeBoard(interval=0.1)
    flushes = []

    def call():  # 2 ms at 600 W
        board.advance(0.002, 600.0)

    e = measure_call_energy(call, device=0, call_ms=2.0, flush=lambda: flushes.append(board.t), reader=board,
                            sync=lambda: None, clock=board.clock, sleep=board.sleep)
    assert "error" not in e and e["includes_flush"] is True
    assert e["batch"] == 10  # 20 ms of calls between synchronises
    assert e["calls"] >= 500 and len(flushes) >= e["calls"]  # a flush before every call
    assert e["j_per_call_above_idle"] == pytest.approx((600.0 - 78.0) * 0.002, rel=0.02)
    assert e["window_s"] >= 1.0


def test_the_idle_probe_is_taken_once_per_device():
    board = FakeBoard(interval=0.1)
    kw = dict(device=3, call_ms=1.0, reader=board, sync=lambda: None, clock=board.clock, sleep=board.sleep)
    measure_call_energy(lambda: board.advance(0.001, 500.0), **kw)
    probe = energy_mod._PROBES[3]
    measure_call_energy(lambda: board.advance(0.001, 500.0), **kw)
    assert energy_mod._PROBES[3] is probe


def test_no_counter_is_a_one_line_reason_not_a_failure(monkeypatch):
    def no_counter(device):
        raise energy_mod.EnergyCounterError("measuring energy needs NVML's Python bindings, which are not installed")

    monkeypatch.setattr(energy_mod, "counter_for", no_counter)
    e = measure_call_energy(lambda: None, device=0, call_ms=1.0, sync=lambda: None)
    assert e == {"error": "measuring energy needs NVML's Python bindings, which are not installed"}


def test_the_energy_reaches_the_result_and_the_text():
    from roofline_ext.cli.commands.analyze import energy_text
    from roofline_ext.runner.timed import candidate_record, merge_timing

    board = FakeBoard(interval=0.1)
    e = measure_call_energy(lambda: board.advance(0.002, 600.0), device=0, call_ms=2.0, reader=board,
                            sync=lambda: None, clock=board.clock, sleep=board.sleep)
    timing = {"median_ms": 2.0, "best_ms": 2.0, "cv": 0.0}
    reference = {"t_ref_ms": 2.0, "reference": timing, "device": "NVIDIA H200", "energy": e}
    cand = candidate_record("c.py", None, {"judgement": {"verdict": "correct"}, "t_new_ms": 1.0,
                                           "candidate_timing": {**timing, "median_ms": 1.0, "energy": e}})
    assert cand["energy"] is e and "energy" not in cand["timing"]
    result = merge_timing(lambda t_ref, t_new: {"roofs": {}}, reference, [cand])
    assert result["energy"] == {"reference": e} and "energy" not in result["timing"]
    text = energy_text(e)
    assert "mJ per call above idle" in text and "L2 flush" not in text and "W" in text
    assert energy_text({"error": "no counter"}) == "not measured: no counter"


def test_energy_without_the_pool_is_a_one_line_error(capsys):
    from roofline_ext import cli

    task = str(Path(__file__).resolve().parents[1] / "examples" / "gelu_chain.py")
    rc = cli.main(["analyze", task, "--energy", "--isolation", "process", "--gpu", "H200"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--energy needs the pool" in err[0], err
