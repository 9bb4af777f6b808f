"""``analyze --time --energy`` without a GPU: a call's energy on a fake counter (the probe once per
device, the flush inside the window), the reasons it may not be measured, and how the figures reach
the results and the text (docs/energy.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from roofline_ext.measure import energy as energy_mod
from roofline_ext.measure.energy import measure_call_energy

from fakes.energy import FakeBoard


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
    from roofline_ext.runner.analyze import assess_task
    from roofline_ext.runner.timed import candidate_record

    board = FakeBoard(interval=0.1)
    e = measure_call_energy(lambda: board.advance(0.002, 600.0), device=0, call_ms=2.0, reader=board,
                            sync=lambda: None, clock=board.clock, sleep=board.sleep)
    timing = {"median_ms": 2.0, "best_ms": 2.0, "cv": 0.0}
    reference = {"t_ref_ms": 2.0, "reference": timing, "device": "NVIDIA H200", "energy": e}
    cand = candidate_record("c.py", None, {"judgement": {"verdict": "correct"}, "t_new_ms": 1.0,
                                           "candidate_timing": {**timing, "median_ms": 1.0, "energy": e}})
    assert cand.energy is e and cand.timing is not None and not cand.timing.has("energy")  # a typed series
    task = Path(__file__).resolve().parents[1] / "examples" / "gelu_chain.py"
    result = assess_task(task, "H200", timing=reference, candidates=[cand], measured=None).to_dict()
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


def _costs_doc():
    from roofline_ext.model.energy import COMPUTE_KEYS, HBM_KEYS, EnergyCost, lowest_costs

    costs = [EnergyCost(k, 1e-12, 1e-14, f"test {k}") for k in COMPUTE_KEYS]
    costs += [EnergyCost(k, 1.2e-10, 1e-12, f"test {k}") for k in HBM_KEYS]
    return {"date": "2026-12-02", "costs": lowest_costs(costs, idle_w=78.0).to_dict()}


def test_energy_costs_round_trip_and_bad_files_are_one_line(tmp_path, capsys):
    import json

    from roofline_ext import cli
    from roofline_ext.cli.commands.analyze import _energy_costs
    from roofline_ext.errors import UserError

    good = tmp_path / "energy.json"
    good.write_text(json.dumps(_costs_doc()))
    costs = _energy_costs(str(good))
    assert costs.require("hbm_read").j_per_unit == 1.2e-10 and costs.idle_w == 78.0
    for text, words in (("{", "not JSON"), ('{"costs": {"costs": {"bf16": {"key": "bf16"}}}}', "has no 'j_per_unit'"),
                        ('[1, 2]', "a 'costs' mapping")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(UserError, match=words):
            _energy_costs(str(bad))
    task = str(Path(__file__).resolve().parents[1] / "examples" / "gelu_chain.py")
    rc = cli.main(["analyze", task, "--energy-costs", str(good), "--gpu", "H200"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--energy-costs is for --energy" in err[0], err


def test_a_measured_call_is_held_against_its_energy_floor():
    from roofline_ext.cli.commands.analyze import _energy_rows
    from roofline_ext.model.energy import EnergyCosts
    from roofline_ext.model.gpu import resolve_gpu
    from roofline_ext.runner.analyze import assess_task

    task = Path(__file__).resolve().parents[1] / "examples" / "gelu_chain.py"
    board = FakeBoard(interval=0.1)
    e = measure_call_energy(lambda: board.advance(0.001, 500.0), device=0, call_ms=1.0, reader=board,
                            sync=lambda: None, clock=board.clock, sleep=board.sleep)
    timing = {"t_ref_ms": 1.0, "energy": e}
    costs = EnergyCosts.from_dict(_costs_doc()["costs"])
    result = assess_task(task, resolve_gpu("H200"), timing=timing, energy_costs=costs).to_dict()
    floor = result["energy"]["floor"]
    e = result["energy"]["reference"]  # the measurement, held against the floor
    # the floor is the counts at the costs: every compulsory byte at 120 pJ, the SIMT FLOPs at 1 pJ
    assert floor["e_min_j"] == pytest.approx(result["bytes"] * 1.2e-10 + result["simt_flops"] * 1e-12, rel=1e-9)
    assert e["fraction_of_floor"] == pytest.approx(floor["e_min_j"] / e["j_per_call_above_idle"])
    assert e["below_floor"] is (e["fraction_of_floor"] > 1)
    rows = dict(_energy_rows(result))
    assert "of it" in rows["energy"] and "mJ per call above idle" in rows["energy floor"]
    # a cost the task needs but nobody measured: the floor says so in one line, the energy stays
    result = assess_task(task, resolve_gpu("H200"), timing=timing, energy_costs=EnergyCosts(costs={})).to_dict()
    assert "floor" not in result["energy"] and result["energy"]["floor_error"].startswith("no measured energy per FLOP for fp32")


def _fake_pynvml(idle_w=100.0, step_s=0.1):
    """A ``pynvml`` whose functions fill a module-level cache on first use, as the real bindings'
    ``_nvmlGetFunctionPointer_cache`` does, over a counter that steps every ``step_s``."""
    import time
    import types

    mod = types.ModuleType("pynvml")
    mod._nvmlGetFunctionPointer_cache = {}
    mod.NVML_ERROR_NOT_SUPPORTED = 3

    def used(name, value=None):
        def fn(*args):
            # A callable, as the real cache holds ctypes function pointers: code, not data.
            mod._nvmlGetFunctionPointer_cache.setdefault(name, lambda *a: 0)
            return value(*args) if callable(value) else value
        return fn
    mod.nvmlInit = used("nvmlInitWithFlags")
    mod.nvmlShutdown = used("nvmlShutdown")
    mod.nvmlDeviceGetHandleByPciBusId = used("nvmlDeviceGetHandleByPciBusId_v2", "handle")
    mod.nvmlDeviceGetTotalEnergyConsumption = used(
        "nvmlDeviceGetTotalEnergyConsumption", lambda h: int(time.perf_counter() / step_s) * int(idle_w * step_s * 1e3))
    return mod


@pytest.mark.slow
def test_the_energy_warm_up_leaves_the_worker_nothing_to_see_after_a_task(monkeypatch):
    """The H200 run of 2026-12-02 replaced the timing worker after every --energy task: NVML's
    first use filled pynvml's function cache, which the worker's snapshot read as the task's
    patch, and each task paid NVML's start and the idle probe again. The worker's prepare step
    (measure.energy.warm_up) now opens the counter and takes the probe before the snapshot."""
    import sys

    from roofline_ext.runner import process_state

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    monkeypatch.setattr(energy_mod, "_bus_id", lambda device: "00000000:00:06.0")
    cold = process_state.snapshot()
    warm = energy_mod.warm_up(0)
    assert warm["energy"]["idle_w"] == pytest.approx(100.0, rel=0.05), warm
    # Without the warm-up, NVML's first use is a change the worker would replace itself for.
    assert any("_nvmlGetFunctionPointer_cache" in r for r in process_state.changes(cold))
    before = process_state.snapshot()
    m = measure_call_energy(lambda: None, device=0, call_ms=1.0, sync=lambda: None)
    assert "error" not in m and m["idle_w"] == warm["energy"]["idle_w"]  # the warm-up's probe
    assert process_state.changes(before) == []


def test_the_energy_warm_up_says_why_without_a_counter(monkeypatch):
    def no_counter(device):
        raise energy_mod.EnergyCounterError("measuring energy needs NVML's Python bindings, which are not installed")
    monkeypatch.setattr(energy_mod, "counter_for", no_counter)
    assert energy_mod.warm_up(0) == {"energy": {"error": "measuring energy needs NVML's Python bindings, which "
                                                         "are not installed"}}
    assert energy_mod._PROBES == {}


def test_energy_runs_warm_up_in_each_timing_worker_before_its_snapshot(monkeypatch, tmp_path):
    """--energy asks the pool for the warm-up step; without it the pool gets none."""
    from roofline_ext.runner import batch as batch_mod

    made: list[dict] = []

    class Stop(Exception):
        pass

    def spy(*args, **kwargs):
        made.append(kwargs)
        raise Stop  # only the pool's options are wanted
    monkeypatch.setattr(batch_mod, "Pool", spy)
    task = tmp_path / "t.py"
    task.write_text("x = 1\n")
    for energy in (True, False):
        opts = batch_mod.BatchOptions(timing=batch_mod.TimingOptions(energy=energy))
        with pytest.raises(Stop):
            batch_mod.run_batch([task], "H200", opts)
    assert [m["energy_warm_up"] for m in made] == [batch_mod.ENERGY_WARM_UP_FN, None]
    assert batch_mod.ENERGY_WARM_UP_FN == "roofline_ext.measure.energy:warm_up"
