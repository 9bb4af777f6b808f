"""benchmarks/energy_roofline.py's orchestration on CPU: a fake energy counter and clock, fake
kernels (and a fake native core for the own-kernel set-up), checking the J per unit arithmetic, the
repeat statistics, the JSON keys, and that a peer whose output fails its check is not counted."""
from __future__ import annotations

import json

import pytest
from fakes.benchmark_loader import load_benchmark
from fakes.energy import FakeBoard

er = load_benchmark("energy_roofline.py", "energy_roofline_bench")
IDLE_W = 78.0


# The fake counter and clock of the energy model's own tests (whole mJ, 78 W idle).
Board = FakeBoard


def kernel(board: Board, key: str, name: str, *, watts, call_s: float, work: float, origin: str = "own",
           check=None) -> object:
    """A fake kernel item: each call runs ``call_s`` at ``watts`` (a number, or a list by repeat:
    the setup counts how often it ran) and reports ``work``."""
    repeats = []

    def setup():
        w = watts[len(repeats)] if isinstance(watts, list) else watts
        repeats.append(w)

        def call():
            board.advance(call_s, w)
            return work, call_s
        return er.Prepared(call=call, call_s=call_s, check=check, info={"watts": w})
    return er.Item(key, name, origin, setup)


def measure(board: Board, items, repeats: int = 1):
    return er.run_all(items, repeats, reader=board, clock=board.clock, sleep=board.sleep)


# --------------------------------------------------------------------------------------------------
# The rules
# --------------------------------------------------------------------------------------------------

def test_the_benchmark_measures_with_the_packages_code():
    # Calibration's energy phase and this benchmark measure the same way because it is one code:
    # the workload loop, the window rule and the own kernels are the package's, not copies.
    from roofline_ext.measure import energy_kernels, energy_workload

    assert er.measure_workload is energy_workload.measure_workload
    assert er.window_for is energy_workload.window_for and er.reps_for is energy_kernels.reps_for
    assert er.Prepared is energy_workload.EnergyWorkload and er.Unsupported is energy_workload.Unsupported
    assert er.compute_workload is energy_kernels.compute_workload and er.hbm_workload is energy_kernels.hbm_workload
    assert er.own_buffer_bytes(50 << 20) == 1 << 30 and er.own_buffer_bytes(128 << 20) == 2 << 30


def test_window_and_call_rules():
    # Short batches: the 1 s floor; batches at or beyond the counter's interval: tau / (sqrt(6) x 1.5%).
    assert er.window_for(0.005, 0.1) == 1.0
    assert er.window_for(0.5, 0.1) == pytest.approx(0.1 / (6 ** 0.5 * 0.015))
    assert er.window_for(2.0, 0.1, floor_s=5.0) == 5.0
    # Kernels 0.97 / 0.03 x the fixed overhead for a 97% duty: 20 ms -> 647 ms of 2 ms launches.
    assert er.reps_for(0.020, 0.002) == 324
    assert er.reps_for(0.0, 0.002) == 125  # the 250 ms minimum
    # A 90% duty: 9x the overhead, 180 ms of launches (given a 20 ms minimum).
    assert er.reps_for(0.020, 0.002, duty=0.9, min_kernel_s=0.02) == 90
    assert er.reps_for(0.5, 0.001) == 1500  # capped: the call at most 2 s
    with pytest.raises(er.UserError):
        er.reps_for(0.01, 0.001, duty=1.0)


def test_spread_statistics():
    s = er.spread_stats([1.00, 1.02, 1.01])
    assert s["median"] == 1.01 and s["min"] == 1.00 and s["max"] == 1.02
    assert s["spread"] == pytest.approx(0.02) and s["repeatable"] is True
    assert er.spread_stats([1.0, 1.05])["repeatable"] is False
    assert er.spread_stats([1.0])["repeatable"] is None  # one repeat tests nothing
    assert er.spread_stats([])["median"] is None


# --------------------------------------------------------------------------------------------------
# The arithmetic
# --------------------------------------------------------------------------------------------------

def test_joules_per_flop_and_per_byte_from_fake_energy_and_work():
    board = Board()
    items = [kernel(board, "fp16", "fake fp16", watts=700.0, call_s=0.005, work=2e12),
             kernel(board, "hbm_copy", "fake copy", watts=600.0, call_s=0.004, work=8e9, origin="library")]
    fp16, copy = measure(board, items)
    assert fp16.status == "ok" and copy.status == "ok"
    # (700 - 78) W x 5 ms over 2e12 FLOPs above idle; 700 W x 5 ms in total.
    want = (700.0 - IDLE_W) * 0.005 / 2e12
    assert fp16.cost.j_per_unit == pytest.approx(want, rel=0.01)
    assert fp16.cost.j_total_per_unit == pytest.approx(700.0 * 0.005 / 2e12, rel=0.01)
    assert abs(fp16.cost.j_per_unit - want) <= fp16.cost.uncertainty + 1e-3 * want
    assert fp16.kernel.work_per_call == 2e12
    assert fp16.measurement.window_s >= 1.0 and fp16.measurement.idle_w == pytest.approx(IDLE_W, rel=0.01)
    assert fp16.duty == pytest.approx(1.0, abs=0.01)  # the fake kernel runs the whole call
    assert copy.cost.j_per_unit == pytest.approx((600.0 - IDLE_W) * 0.004 / 8e9, rel=0.01)
    assert copy.cost.origin == "library" and copy.duty == pytest.approx(1.0, abs=0.01)


def test_long_calls_lengthen_the_window():
    board = Board()
    (run,) = measure(board, [kernel(board, "fp32", "long", watts=500.0, call_s=0.3, work=1e12)])
    assert run.window_rule_s == pytest.approx(er.window_for(0.3, run.measurement.update_interval_s))
    assert run.measurement.window_s >= run.window_rule_s > 2.0


# --------------------------------------------------------------------------------------------------
# Repeats, failures, the record
# --------------------------------------------------------------------------------------------------

def test_repeat_statistics_and_the_3_percent_test():
    board = Board()
    items = [kernel(board, "bf16", "steady", watts=[600.0, 612.0, 606.0], call_s=0.005, work=1e12),
             kernel(board, "fp32", "wobbly", watts=[400.0, 440.0, 420.0], call_s=0.005, work=1e11)]
    runs = measure(board, items, repeats=3)
    assert [r.repeat for r in runs] == [0, 0, 1, 1, 2, 2]  # the whole set, once per repeat
    doc = er.document(runs, {"name": "Fake GPU", "driver_version": "1.0"}, {"repeats": 3})
    steady, wobbly = doc["figures"]
    pj = [r.cost.pj_per_unit for r in runs if r.item.name == "steady"]
    s = steady["pj_per_unit"]
    assert s["n"] == 3 and s["median"] == sorted(pj)[1] and s["min"] == min(pj) and s["max"] == max(pj)
    assert s["spread"] == pytest.approx(max(pj) / min(pj) - 1)
    assert s["spread"] == pytest.approx((612.0 - IDLE_W) / (600.0 - IDLE_W) - 1, abs=0.003)
    assert s["repeatable"] is True
    assert wobbly["pj_per_unit"]["spread"] == pytest.approx((440.0 - IDLE_W) / (400.0 - IDLE_W) - 1, abs=0.003)
    assert wobbly["pj_per_unit"]["repeatable"] is False
    assert doc["not_repeatable"] == ["fp32 wobbly"]
    # The costs are the median repeats': 606 W for the steady kernel.
    assert doc["costs"]["costs"]["bf16"]["j_per_unit"] == pytest.approx(sorted(pj)[1] * 1e-12)


def test_a_peer_that_fails_its_check_is_reported_and_not_counted():
    board = Board()
    after = []

    def fails_after_the_window():
        after.append(1)
        return None if len(after) == 1 else "sampled block off by 3.2"

    items = [kernel(board, "bf16", "own bf16", watts=650.0, call_s=0.005, work=1e12),
             kernel(board, "bf16", "bad peer", watts=600.0, call_s=0.005, work=2e12, origin="library",
                    check=lambda: "destination differs from the source"),
             kernel(board, "bf16", "goes bad", watts=600.0, call_s=0.005, work=4e12, origin="library",
                    check=fails_after_the_window)]
    own, bad, late = measure(board, items)
    assert own.status == "ok"
    assert bad.status == "failed" and "before the window" in bad.reason and bad.kernel is None
    assert late.status == "failed" and "after the window" in late.reason and late.cost is None
    doc = er.document([own, bad, late], {"name": "Fake GPU"}, {})
    considered = [c["source"] for c in doc["costs"]["considered"]["bf16"]]
    assert considered == ["own bf16"]  # both peers would be cheaper per FLOP, had they counted
    late_record = next(f for f in doc["figures"] if f["name"] == "goes bad")["repeats"][0]
    assert late_record["counted"] is False and late_record["pj_per_unit"] > 0  # reported, not counted
    statuses = {f["name"]: f["status"] for f in doc["figures"]}
    assert statuses == {"own bf16": "ok", "bad peer": "failed", "goes bad": "failed"}


def test_unsupported_and_broken_units_are_reported_and_the_run_goes_on():
    board = Board()

    def no_fp8():
        raise er.Unsupported("wgmma: FP8 needs sm_89 or later")

    from roofline_ext._core import VerificationError  # the native core's own (every build has it)

    def wrong():
        raise VerificationError("fp16 mma.sync: 12 of 4096 outputs wrong")

    items = [er.Item("fp8", "own fp8", "own", no_fp8), er.Item("fp16", "own fp16", "own", wrong),
             kernel(board, "int8", "own int8", watts=600.0, call_s=0.005, work=4e12)]
    fp8, fp16, int8 = measure(board, items)
    assert (fp8.status, fp8.reason) == ("unsupported", "wgmma: FP8 needs sm_89 or later")
    assert er.describe(fp8, 1).endswith("unsupported: wgmma: FP8 needs sm_89 or later")
    assert fp16.status == "failed" and "12 of 4096" in fp16.reason
    assert int8.status == "ok"


def test_counter_too_coarse_for_the_work_is_unresolved():
    board = Board()
    (run,) = measure(board, [kernel(board, "fp64", "idle-ish", watts=IDLE_W - 5.0, call_s=0.005, work=1e9)])
    assert run.status == "unresolved" and run.cost is None and "too little for the counter" in run.reason


def test_json_keys():
    board = Board()
    runs = measure(board, [kernel(board, "tf32", "own tf32", watts=550.0, call_s=0.005, work=1e12),
                           kernel(board, "hbm_read", "torch sum", watts=450.0, call_s=0.002, work=4.0 * 2**30,
                                  origin="library")], repeats=2)
    doc = json.loads(json.dumps(er.document(runs, {"name": "Fake GPU", "driver_version": "570.1"}, {"repeats": 2},
                                            date="2026-12-02T04:00:00+00:00")))
    assert {"date", "gpu", "gpu_name", "driver_version", "settings", "figures", "costs", "target_spread",
            "not_repeatable"} <= set(doc)
    assert doc["gpu_name"] == "Fake GPU" and doc["driver_version"] == "570.1"
    tf32, read = doc["figures"]
    assert (tf32["unit"], tf32["per"], tf32["kernel"]) == ("J/FLOP", "FLOP", "ours")
    assert (read["unit"], read["per"], read["kernel"], read["origin"]) == ("J/byte", "byte", "library", "library")
    assert tf32["work_per_call"] == 1e12
    rep = tf32["repeats"][0]
    for key in ("work_per_call", "j_per_call_total", "j_per_call_above_idle", "uncertainty_total_j",
                "uncertainty_above_idle_j", "j_per_unit", "j_total_per_unit", "uncertainty_j_per_unit",
                "pj_per_unit", "pj_total_per_unit", "relative_uncertainty", "power_w", "idle_w", "window_s",
                "calls", "kernel_duty", "telemetry", "measurement", "cost"):
        assert key in rep, key
    assert rep["pj_per_unit"] == pytest.approx(rep["j_per_call_above_idle"] / 1e12 * 1e12)
    assert set(tf32["pj_per_unit"]) == {"n", "median", "min", "max", "spread", "repeatable"}
    assert doc["costs"]["costs"]["hbm_read"]["source"] == "torch sum"
    # The lines printed as each figure lands, and the closing table.
    assert "pJ/FLOP above idle" in er.describe(runs[0], 2) and "pJ/byte above idle" in er.describe(runs[1], 2)
    assert "own tf32" in er._table(doc) and "torch sum" in er._table(doc)


# --------------------------------------------------------------------------------------------------
# The own kernels' set-up, on a fake native core
# --------------------------------------------------------------------------------------------------

class FakeCore:
    """compute_paths / compute_run / bandwidth_run as the core returns them; every call spends
    ``overhead_s`` at 150 W (allocation, verification) and then its launches at 650 W."""

    OVERHEAD_S = 0.004
    LAUNCH_S = 0.002

    def __init__(self, board: Board, wrong: bool = False):
        self.board = board
        self.wrong = wrong

    def compute_paths(self, device):
        ok = {"supported": True, "reason": None}
        no = {"supported": False, "reason": "needs sm_89"}
        paths = {p: {"simt": ok if p in ("fp32", "fp64") else no, "mma.sync": ok, "wgmma": ok}
                 for p in ("fp32", "fp64", "tf32", "fp16", "bf16", "int8")}
        paths["fp8"] = {"simt": no, "mma.sync": no, "wgmma": no}
        return paths

    def _spend(self, launches: int) -> list[float]:
        self.board.advance(self.OVERHEAD_S, 150.0)
        self.board.advance(launches * self.LAUNCH_S, 650.0)
        return [self.LAUNCH_S * 1e3] * launches

    def compute_run(self, device, precision, path, reps=20, warmup=3, target_ms=2.0, iterations=0, **knobs):
        times = self._spend(warmup + reps)[warmup:]
        its = iterations or 1000
        return {"precision": precision, "path": path, "iterations": its, "flop_per_launch": 1e9 * its,
                "reps": reps, "times_ms": times, "median_ms": self.LAUNCH_S * 1e3, "instruction": "fake.mma",
                "config": dict(knobs), "verification": {"passed": not self.wrong}}

    def bandwidth_run(self, device, pattern, buffer_bytes, reps, warmup, configs, seed):
        times = self._spend(warmup + reps)[warmup:]
        return [{"pattern": pattern, "bytes_per_launch": 2 * buffer_bytes, "warmup": warmup, "reps": reps,
                 "times_ms": times, "skipped": None, "config": configs[0], "verification": {"passed": True}}]


def test_own_kernels_report_their_work_from_their_results():
    board = Board()
    core = FakeCore(board)
    items = er.own_items(core, 0, unusable=None, buffer_bytes=1 << 30, clock=board.clock)
    assert items["bf16"].name == "roofline_ext wgmma bf16" and items["fp32"].name == "roofline_ext simt fp32"
    bf16, copy, fp8 = measure(board, [items["bf16"], items["hbm_copy"], items["fp8"]])
    assert fp8.status == "unsupported" and "needs sm_89" in fp8.reason
    reps = bf16.info["reps_per_call"]
    assert reps == er.reps_for(FakeCore.OVERHEAD_S, FakeCore.LAUNCH_S)
    # Work from the result: flop_per_launch (1e9 x 1000 loop trips) x the launches timed.
    assert bf16.kernel.work_per_call == 1e12 * reps
    kernel_s = reps * FakeCore.LAUNCH_S
    above = (150.0 - IDLE_W) * FakeCore.OVERHEAD_S + (650.0 - IDLE_W) * kernel_s
    assert bf16.cost.j_per_unit == pytest.approx(above / (1e12 * reps), rel=0.01)
    assert bf16.duty == pytest.approx(kernel_s / (kernel_s + FakeCore.OVERHEAD_S), rel=0.02)
    assert copy.kernel.work_per_call == 2 * (1 << 30) * copy.info["reps_per_call"]
    assert copy.info["buffer_bytes"] == 1 << 30


def test_own_kernel_whose_result_is_not_verified_fails():
    board = Board()
    items = er.own_items(FakeCore(board, wrong=True), 0, unusable=None, buffer_bytes=1 << 30, clock=board.clock)
    (run,) = measure(board, [items["fp16"]])
    assert run.status == "failed" and "verification did not pass" in run.reason


def test_no_native_core_makes_every_own_unit_unsupported():
    items = er.own_items(None, 0, unusable="no CUDA part in this build", buffer_bytes=1 << 30)
    board = Board()
    runs = measure(board, list(items.values()))
    assert len(runs) == 10 and {r.status for r in runs} == {"unsupported"}
    assert {r.reason for r in runs} == {"no CUDA part in this build"}


# --------------------------------------------------------------------------------------------------
# The command line and the chart
# --------------------------------------------------------------------------------------------------

def test_no_gpu_exits_2_with_one_line(monkeypatch, capsys, tmp_path):
    def no_gpu(index):
        raise er.NoGpu("no GPU to measure: torch sees no CUDA GPU; roofline_ext: no driver")

    monkeypatch.setattr(er, "open_gpu", no_gpu)
    assert er.main([str(tmp_path / "e.json")]) == 2
    out = capsys.readouterr()
    assert out.out.count("\n") == 1 and out.out.startswith("energy_roofline: no GPU to measure") and not out.err
    assert not (tmp_path / "e.json").exists()


def test_chart_from_the_median_repeats(tmp_path):
    pytest.importorskip("matplotlib")
    board = Board()
    runs = measure(board, [kernel(board, "bf16", "own bf16", watts=650.0, call_s=0.005, work=5e12),
                           kernel(board, "hbm_copy", "own copy", watts=550.0, call_s=0.004, work=1.6e10)])
    out = er.chart(runs, tmp_path / "energy.svg", title="fake energy roofline")
    text = out.read_text()
    assert "energy:bf16:compute" in text and "energy:hbm_copy:memory" in text


# --------------------------------------------------------------------------------------------------
# The torch peers' checks and work, on CPU torch standing in for CUDA
# --------------------------------------------------------------------------------------------------

class CpuTorch:
    """torch with "cuda" pointing at the CPU, and optionally a matmul that leaves its output alone."""

    def __init__(self, torch, broken_matmul: bool = False):
        import types

        self._torch = torch
        self.cuda = types.SimpleNamespace(synchronize=lambda device=None: None, empty_cache=lambda: None)
        self._broken = broken_matmul

    def device(self, *args):
        return self._torch.device("cpu")

    def matmul(self, a, b, out):
        if self._broken:  # a product that "ran" but wrote nothing: the check sees the NaN poison
            return out
        return self._torch.matmul(a, b, out=out)

    def __getattr__(self, name):
        return getattr(self._torch, name)


def test_torch_peers_check_their_output_and_count_their_work():
    torch = pytest.importorskip("torch")
    before = torch.get_float32_matmul_precision()
    for key in ("bf16", "fp16", "tf32"):
        p = er.gemm_setup(CpuTorch(torch), 0, key, 128)
        assert p.check() is None, key
        assert p.call() == (2.0 * 128 ** 3, None) and p.batch >= 1
        if key == "tf32":
            assert torch.get_float32_matmul_precision() == "high"
        p.close()
        assert torch.get_float32_matmul_precision() == before
    broken = er.gemm_setup(CpuTorch(torch, broken_matmul=True), 0, "bf16", 128)
    assert "non-finite" in broken.check()
    broken.close()
    for op, moved in (("copy_", 2 << 20), ("sum", 1 << 20), ("fill_", 1 << 20)):
        p = er.memory_setup(CpuTorch(torch), 0, op, 1 << 20)
        assert p.check() is None, op
        assert p.call() == (float(moved), None)
        p.close()
