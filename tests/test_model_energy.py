"""The energy roofline's CPU half: costs, the floor, the lowest-of-measured rule, the below-floor flag,
the counter-window uncertainty, the measuring loop on a fake counter and clock (tests/fakes/energy.py), and the chart.

Figures labelled "issue 27" are the H200 feasibility run of 2026-12-01 (idle 78 W; cuBLAS BF16
8192^3 at 666 TFLOP/s, 687 W = 1.03 pJ/FLOP, 0.91 above idle; copy_ of 4 GiB at 4.27 TB/s, 594 W =
139 pJ/byte, 121 above idle). They are example inputs here, not values the package holds.
"""
from __future__ import annotations

import math
import sys
import types

import pytest

from roofline_ext.errors import RooflineError, UserError
from roofline_ext.measure.energy import (
    EnergyCounterError,
    EnergyMeasurement,
    NvmlEnergyReader,
    measure_energy,
    probe_counter,
    window_uncertainty,
)
from roofline_ext.model.energy import (
    BELOW_FLOOR_MESSAGE,
    LOWER_CLOCKS_NOTE,
    EnergyCost,
    EnergyCosts,
    EnergyKernel,
    energy_floor,
    energy_floor_for,
    lowest_costs,
    memory_energy,
    task_energy,
)

from fakes.energy import FakeBoard, issue_costs, record

# --------------------------------------------------------------------------------------------------
# The floor
# --------------------------------------------------------------------------------------------------

def test_gemm_floor_by_hand_with_issue_figures():
    # issue 27 figures: a BF16 8192^3 GEMM: 2*8192^3 FLOPs, A and B read and C written once (2 B each).
    n = 8192
    flops = 2 * n**3
    r, w = 2 * n * n * 2, n * n * 2
    f = energy_floor(issue_costs(), flops=flops, nbytes=r + w, dtype="bf16", read_bytes=r, write_bytes=w,
                     t_min_s=1.5e-3)
    # No hbm_read/hbm_write: copy pairs (2 bytes per pair, min(r, w) pairs) and the rest at the
    # cheapest measured pattern, which is the copy again: every byte at 121 pJ.
    compute = flops * 0.91e-12
    memory = (r + w) * 121e-12
    assert f.e_min_j == pytest.approx(compute + memory, rel=1e-12)
    # By hand: 1.0995e12 FLOPs x 0.91 pJ = 1.000556 J; 402,653,184 bytes x 121 pJ = 0.048721 J.
    assert compute == pytest.approx(1.000556, rel=1e-6)
    assert memory == pytest.approx(0.048721, rel=1e-5)
    assert f.e_min_j == pytest.approx(1.049277, rel=1e-6)
    assert f.compute_unit == "bf16" and f.simt_unit == "fp32"
    # Whole board: idle over the time floor plus the above-idle floor.
    assert f.e_min_total_j == pytest.approx(78.0 * 1.5e-3 + f.e_min_j)
    assert f.uncertainty_j == pytest.approx(flops * 0.01e-12 + (r + w) * 2e-12)
    assert f.note == LOWER_CLOCKS_NOTE
    assert "not measured" in f.memory_rule


def test_a_gemm_cost_gives_back_the_bytes_its_kernel_moved_so_that_gemm_is_not_below_its_floor():
    # The H200's cuBLAS TF32 8192^3 (2026-12-02): its J/FLOP holds the energy of its own A, B, C
    # traffic; charged again as the task's bytes, that GEMM came out 5.6% below its own floor.
    n, elem = 8192, 4
    flops, r, w = 2.0 * n**3, 2.0 * n * n * elem, 1.0 * n * n * elem
    measured_j = 2.09  # its energy per call above idle
    gemm = EnergyKernel("tf32", "torch.matmul tf32", flops, record(measured_j), "library",
                        hbm_bytes_per_call=r + w)
    costs = EnergyCosts({"tf32": gemm.cost(),
                         "hbm_read": EnergyCost("hbm_read", 110e-12, 0.0, "torch sum"),
                         "hbm_write": EnergyCost("hbm_write", 61e-12, 0.0, "torch fill_"),
                         "hbm_copy": EnergyCost("hbm_copy", 110e-12, 0.0, "torch copy_")})
    assert costs.get("tf32").bytes_per_unit == pytest.approx((r + w) / flops)
    f = energy_floor(costs, flops=flops, nbytes=r + w, dtype="float32", read_bytes=r, write_bytes=w)
    assert f.e_min_j <= measured_j  # the kernel that set the cost is at or above the floor
    te = task_energy(f, record(measured_j))
    assert not te.below_floor and te.fraction <= 1.0
    # taken out at the dearest HBM cost (110 pJ), the task's own bytes charged by the pattern rule
    compute = flops * (measured_j / flops - (r + w) / flops * 110e-12)
    assert {t.key: t.j_per_unit for t in f.terms}["tf32"] == pytest.approx(compute / flops)
    # the same cost without the bytes it moved (as recorded before they were kept) double counts
    plain = EnergyCosts({**costs.costs, "tf32": EnergyCost("tf32", measured_j / flops, 0.0, "no bytes", "library")})
    assert energy_floor(plain, flops=flops, nbytes=r + w, dtype="float32", read_bytes=r,
                        write_bytes=w).e_min_j > measured_j
    # and the field round-trips through the costs' JSON
    assert EnergyCosts.from_dict(costs.to_dict()).get("tf32").bytes_per_unit == pytest.approx((r + w) / flops)


def test_elementwise_floor_reads_and_writes_by_pattern():
    costs = EnergyCosts({
        "fp32": EnergyCost("fp32", 10e-12, 0.0, "own simt fp32"),
        "hbm_read": EnergyCost("hbm_read", 100e-12, 0.0, "own read"),
        "hbm_write": EnergyCost("hbm_write", 140e-12, 0.0, "own write"),
        "hbm_copy": EnergyCost("hbm_copy", 110e-12, 0.0, "own copy"),
    })
    # x + y on 1 Mi float32 elements: 8 MiB read, 4 MiB written, 1 Mi SIMT FLOPs.
    n = 1 << 20
    f = energy_floor(costs, flops=0, simt_flops=n, nbytes=12 * n, dtype="float32", read_bytes=8 * n,
                     write_bytes=4 * n)
    # separate: 8n*100 + 4n*140 = 1360n pJ; paired: 8n*110 (4n pairs) + 4n*100 = 1280n pJ -> paired
    assert f.e_min_j == pytest.approx(n * 10e-12 + 1280 * n * 1e-12)
    assert f.memory_rule.startswith("read-write pairs")
    assert {t.key: t.count for t in f.terms} == {"fp32": n, "hbm_copy": 8 * n, "hbm_read": 4 * n}
    # Without a split: every byte at the cheapest pattern (read, 100 pJ).
    g = energy_floor(costs, flops=0, simt_flops=n, nbytes=12 * n, dtype="float32")
    assert g.e_min_j == pytest.approx(n * 10e-12 + 12 * n * 100e-12)
    assert g.e_min_total_j is None  # no idle power, no time floor


def test_separate_patterns_win_when_copy_is_dear():
    costs = EnergyCosts({k: EnergyCost(k, v, 0.0, k) for k, v in
                         (("hbm_read", 100e-12), ("hbm_write", 100e-12), ("hbm_copy", 150e-12))})
    terms, rule = memory_energy(costs, 200, 100, 100)
    assert sum(t.energy_j for t in terms) == pytest.approx(200 * 100e-12)
    assert rule == "reads at hbm_read, writes at hbm_write"


def test_float32_goes_to_tf32_unless_strict_and_fp64_simt():
    costs = EnergyCosts({k: EnergyCost(k, v, 0.0, k) for k, v in
                         (("tf32", 2e-12), ("fp32", 8e-12), ("fp64", 20e-12), ("hbm_read", 1e-10))})
    assert energy_floor(costs, flops=1e9, nbytes=0, dtype="float32").e_min_j == pytest.approx(2e-3)
    assert energy_floor(costs, flops=1e9, nbytes=0, dtype="float32", strict_fp32=True).e_min_j == pytest.approx(8e-3)
    f = energy_floor(costs, flops=0, simt_flops=1e9, nbytes=0, dtype="float64")
    assert f.simt_unit == "fp64" and f.e_min_j == pytest.approx(20e-3)


def test_missing_cost_and_bad_counts_are_one_line_errors():
    with pytest.raises(UserError, match="no measured energy per FLOP for fp16"):
        energy_floor(issue_costs(), flops=1.0, nbytes=1.0, dtype="fp16")
    with pytest.raises(UserError, match="any HBM pattern"):
        energy_floor(EnergyCosts({"bf16": EnergyCost("bf16", 1e-12, 0, "k")}), flops=1, nbytes=1, dtype="bf16")
    with pytest.raises(UserError, match="flops must be non-negative"):
        energy_floor(issue_costs(), flops=-1, nbytes=1, dtype="bf16")
    with pytest.raises(UserError, match="finite"):
        energy_floor(issue_costs(), flops=math.inf, nbytes=1, dtype="bf16")
    with pytest.raises(UserError, match="unsupported dtype"):
        energy_floor(issue_costs(), flops=1, nbytes=1, dtype="complex64")
    # Zero FLOPs of a unit not measured need no cost.
    assert energy_floor(issue_costs(), flops=0, nbytes=10, dtype="fp16").e_min_j == pytest.approx(10 * 121e-12)


def test_costs_are_validated():
    with pytest.raises(UserError, match="unknown energy cost"):
        EnergyCost("fp4", 1e-12, 0, "k")
    with pytest.raises(UserError, match="must be positive"):
        EnergyCost("bf16", 0.0, 0, "k")  # a counter that could not resolve it is not a free FLOP
    with pytest.raises(UserError, match="origin"):
        EnergyCost("bf16", 1e-12, 0, "k", origin="vendor")
    with pytest.raises(UserError, match="filed under"):
        EnergyCosts({"fp16": EnergyCost("bf16", 1e-12, 0, "k")})


def test_floor_from_a_time_floor_result():
    from roofline_ext.model.floors import roofline_result

    r = roofline_result(2 * 4096**3, 3 * 4096 * 4096 * 2, "bf16", "H200", None)
    assert r is not None
    f = energy_floor_for(r, issue_costs())
    assert f.flops == r.flops and f.nbytes == r.nbytes and f.compute_unit == "bf16"
    assert f.t_min_s == pytest.approx(r.roofs[r.primary_roof].t_min_ms * 1e-3)
    with pytest.raises(UserError, match="no 'measured' roof"):
        energy_floor_for(r, issue_costs(), roof="measured")


# --------------------------------------------------------------------------------------------------
# The lowest of what was measured
# --------------------------------------------------------------------------------------------------

def test_the_floor_per_unit_is_the_lowest_kernel_whoever_wrote_it():
    # Per call: own BF16 kernel 1e12 FLOPs at 1.0 J above idle; cuBLAS 2e12 FLOPs at 1.82 J (0.91 pJ).
    own = EnergyKernel("bf16", "own wgmma bf16", 1e12, record(1.0, sigma=0.01))
    lib = EnergyKernel("bf16", "cuBLAS bf16 8192^3", 2e12, record(1.82, sigma=0.02), origin="library")
    copy_own = EnergyKernel("hbm_copy", "own copy", 1e9, record(0.125))
    copy_lib = EnergyKernel("hbm_copy", "torch copy_", 1e9, record(0.130), origin="library")
    costs = lowest_costs([own, lib, copy_own, copy_lib], idle_w=78.0)
    assert costs.require("bf16").source == "cuBLAS bf16 8192^3"
    assert costs.require("bf16").origin == "library"
    assert costs.require("bf16").j_per_unit == pytest.approx(0.91e-12)
    assert costs.require("bf16").uncertainty == pytest.approx(0.01e-12)
    assert costs.require("hbm_copy").source == "own copy"
    assert [c.source for c in costs.considered["bf16"]] == ["cuBLAS bf16 8192^3", "own wgmma bf16"]
    # The total figure rides with the kernel that won: (1.82 J + 78 W x 2 s / 100 calls) / 2e12.
    assert costs.require("bf16").j_total_per_unit == pytest.approx((1.82 + 1.56) / 2e12)
    assert costs.to_dict()["note"] == LOWER_CLOCKS_NOTE


def test_a_kernel_below_the_counter_is_refused_not_taken_as_free():
    k = EnergyKernel("fp32", "tiny", 1e6, record(-0.001, sigma=0.01))
    with pytest.raises(UserError, match="too little for the counter"):
        lowest_costs([k])


# --------------------------------------------------------------------------------------------------
# A task against its floor
# --------------------------------------------------------------------------------------------------

def _floor():
    return energy_floor(issue_costs(), flops=1e12, nbytes=1e9, dtype="bf16", t_min_s=2e-3)


def test_fraction_of_the_floor_and_above_it():
    f = _floor()  # 0.91 J + 0.121 J = 1.031 J above idle
    t = task_energy(f, record(2.062, sigma=0.01))
    assert t.fraction == pytest.approx(0.5)
    assert not t.below_floor and not t.below_floor_beyond_uncertainty and t.message is None
    # Whole board: (78 W x 2 ms + 1.031 J) over (2.062 J + 78 W x 2 s / 100 calls)
    assert t.fraction_total == pytest.approx((0.156 + 1.031) / (2.062 + 1.56))
    assert t.to_dict()["floor"]["e_min_j"] == pytest.approx(1.031)


def test_below_the_floor_is_flagged_as_a_time_below_the_time_floor():
    f = _floor()
    t = task_energy(f, record(0.9, sigma=0.01))
    assert t.below_floor and t.message == BELOW_FLOOR_MESSAGE
    assert t.below_floor_beyond_uncertainty  # 1.031 - 0.0119 > 0.9 + 0.01
    # Within the uncertainties: flagged, but not beyond them.
    near = task_energy(f, record(1.02, sigma=0.02))
    assert near.below_floor and not near.below_floor_beyond_uncertainty
    # Exactly at the floor is not below it.
    assert not task_energy(f, record(f.e_min_j)).below_floor
    # Nothing above idle though the floor is positive: below.
    none = task_energy(f, record(0.0))
    assert none.fraction is None and none.below_floor


# --------------------------------------------------------------------------------------------------
# The counter window's uncertainty
# --------------------------------------------------------------------------------------------------

def test_uncertainty_formula():
    u = window_uncertainty(resolution_j=1e-3, update_interval_s=0.1, power_w=687.0, window_s=2.0, poll_gap_s=0.004,
                           calls=500, idle_w=78.0, idle_window_s=1.0, idle_poll_gap_s=0.001)
    window = 1e-3 + 687.0 * 0.004          # r + P x min(g, tau)
    idle = (1e-3 + 78.0 * 0.001) / 1.0     # (r + P_idle x min(g_idle, tau)) / W_idle
    assert u.window_j == pytest.approx(window)
    assert u.idle_w == pytest.approx(idle)
    assert u.total_per_call_j == pytest.approx(window / 500)
    assert u.above_idle_per_call_j == pytest.approx((window + idle * 2.0) / 500)
    # A gap longer than the interval is capped by it: a reading is never staler than one interval.
    long = window_uncertainty(resolution_j=1e-3, update_interval_s=0.1, power_w=687.0, window_s=2.0, poll_gap_s=0.5,
                              calls=4, idle_w=78.0, idle_window_s=1.0, idle_poll_gap_s=0.001)
    assert long.window_j == pytest.approx(1e-3 + 68.7)
    with pytest.raises(UserError, match="calls must be at least 1"):
        window_uncertainty(resolution_j=1e-3, update_interval_s=0.1, power_w=1, window_s=1, poll_gap_s=0,
                           calls=0, idle_w=0, idle_window_s=1, idle_poll_gap_s=0)


def test_record_from_window_and_a_counter_going_backwards():
    m = EnergyMeasurement.from_window(calls=100, window_s=2.0, window_j=1374.0, idle_w=78.0, idle_window_s=1.0,
                                      resolution_j=1e-3, update_interval_s=0.1, poll_gap_s=0.02,
                                      idle_poll_gap_s=0.001, updates=20)
    assert m.power_w == pytest.approx(687.0)
    assert m.j_per_call_total == pytest.approx(13.74)
    assert m.j_per_call_above_idle == pytest.approx((1374.0 - 156.0) / 100)
    assert m.intervals == pytest.approx(20)
    assert m.to_dict()["relative_uncertainty"] == pytest.approx(m.uncertainty_above_idle_j / m.j_per_call_above_idle)
    with pytest.raises(EnergyCounterError, match="went backwards"):
        EnergyMeasurement.from_window(calls=1, window_s=1.0, window_j=-1.0, idle_w=0, idle_window_s=1.0,
                                      resolution_j=1e-3, update_interval_s=0.1, poll_gap_s=0, idle_poll_gap_s=0,
                                      updates=1)


# --------------------------------------------------------------------------------------------------
# The loop, on a fake counter and a fake clock
# --------------------------------------------------------------------------------------------------

def test_probe_finds_interval_resolution_and_idle_power():
    board = FakeBoard(interval=0.1, quantum_mj=1000)  # a counter that steps in whole joules
    p = probe_counter(board, clock=board.clock, sleep=board.sleep)
    assert p.update_interval_s == pytest.approx(0.1, abs=0.002)
    assert p.resolution_j == pytest.approx(1.0)  # the gcd of the steps: 7 J and 8 J steps of 7.8 J
    assert p.idle_w == pytest.approx(78.0, rel=0.02)
    assert p.idle_window_s >= 1.0 and p.updates >= 3


def test_measure_loop_on_a_fake_counter():
    board = FakeBoard(interval=0.1)
    calls = []

    def work() -> None:  # 4 ms per call at 687 W (issue 27's BF16 power)
        calls.append(board.t)
        board.advance(0.004, 687.0)

    m = measure_energy(work, reader=board, clock=board.clock, sleep=board.sleep)
    assert m.update_interval_s == pytest.approx(0.1, abs=0.002)
    assert m.window_s >= 1.0 and m.intervals >= 10
    assert m.idle_w == pytest.approx(78.0, rel=0.01)
    assert m.power_w == pytest.approx(687.0, rel=0.01)
    true_total, true_above = 687.0 * 0.004, (687.0 - 78.0) * 0.004
    assert abs(m.j_per_call_total - true_total) <= m.uncertainty_total_j
    assert abs(m.j_per_call_above_idle - true_above) <= m.uncertainty_above_idle_j
    assert m.relative_uncertainty is not None and m.relative_uncertainty < 0.01
    assert m.poll_gap_s == pytest.approx(0.004)
    assert m.calls >= 250


def test_window_grows_to_ten_intervals_on_a_slow_counter():
    board = FakeBoard(interval=0.25)  # 10 intervals = 2.5 s, longer than the 1 s minimum
    m = measure_energy(lambda: board.advance(0.01, 500.0), reader=board, clock=board.clock, sleep=board.sleep)
    assert m.window_s >= 2.5
    assert m.update_interval_s == pytest.approx(0.25, abs=0.002)


def test_calls_longer_than_the_interval_stay_within_their_uncertainty():
    board = FakeBoard(interval=0.1)
    m = measure_energy(lambda: board.advance(0.15, 600.0), reader=board, clock=board.clock, sleep=board.sleep)
    # A reading is never staler than one interval: the window's bound is r + P x tau, not P x 0.15 s.
    assert m.uncertainty_total_j == pytest.approx((1e-3 + m.power_w * 0.1) / m.calls)
    assert abs(m.j_per_call_total - 600.0 * 0.15) <= m.uncertainty_total_j
    assert abs(m.j_per_call_above_idle - (600.0 - 78.0) * 0.15) <= m.uncertainty_above_idle_j


def test_batches_and_sync_are_used():
    board = FakeBoard()
    synced = []
    m = measure_energy(lambda: board.advance(0.001, 300.0), reader=board, clock=board.clock, sleep=board.sleep,
                       sync=lambda: synced.append(1), batch=8)
    assert m.calls % 8 == 0
    assert m.poll_gap_s == pytest.approx(0.008)
    assert len(synced) > m.calls // 8  # every batch, and the warm-up


def test_a_counter_that_never_moves_is_an_error():
    class Stuck:
        def read_mj(self) -> int:
            return 12345

    board = FakeBoard()
    with pytest.raises(EnergyCounterError, match="not updating"):
        measure_energy(lambda: None, reader=Stuck(), clock=board.clock, sleep=board.sleep)


def test_bad_loop_arguments():
    board = FakeBoard()
    with pytest.raises(UserError, match="batch"):
        measure_energy(lambda: None, reader=board, batch=0, clock=board.clock, sleep=board.sleep)
    with pytest.raises(UserError, match="min_window_s"):
        measure_energy(lambda: None, reader=board, min_window_s=5, max_window_s=1, clock=board.clock,
                       sleep=board.sleep)


# --------------------------------------------------------------------------------------------------
# NVML through pynvml: the errors, with a fake module
# --------------------------------------------------------------------------------------------------

def _fake_pynvml(*, init_fails: bool = False, supported: bool = True) -> types.ModuleType:
    mod = types.ModuleType("pynvml")

    class NVMLError(Exception):
        def __init__(self, value: int, text: str):
            self.value = value
            super().__init__(text)

    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.NVML_ERROR_NOT_SUPPORTED = 3  # type: ignore[attr-defined]
    mod.shutdowns = 0  # type: ignore[attr-defined]

    def init() -> None:
        if init_fails:
            raise NVMLError(12, "NVML Shared Library Not Found")

    def energy(handle: object) -> int:
        if not supported:
            raise NVMLError(3, "Not Supported")
        return 1000

    def shutdown() -> None:
        mod.shutdowns += 1  # type: ignore[attr-defined]

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByPciBusId = lambda bus: object()  # type: ignore[attr-defined]
    mod.nvmlDeviceGetTotalEnergyConsumption = energy  # type: ignore[attr-defined]
    return mod


def test_nvml_reader_errors(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if not installed
    with pytest.raises(EnergyCounterError, match="nvidia-ml-py"):
        NvmlEnergyReader("00000000:01:00.0")
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(init_fails=True))
    with pytest.raises(EnergyCounterError, match="NVML, which did not start: NVML Shared Library Not Found"):
        NvmlEnergyReader("00000000:01:00.0")
    fake = _fake_pynvml(supported=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.raises(EnergyCounterError, match="no NVML total-energy counter"):
        NvmlEnergyReader("00000000:01:00.0")
    assert fake.shutdowns == 1  # type: ignore[attr-defined]
    fake = _fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with NvmlEnergyReader("00000000:01:00.0") as r:
        assert r.read_mj() == 1000
    assert fake.shutdowns == 1  # type: ignore[attr-defined]
    assert issubclass(EnergyCounterError, RooflineError)


# --------------------------------------------------------------------------------------------------
# The chart
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_chart_writes_png_and_svg(tmp_path, suffix):
    pytest.importorskip("matplotlib")
    from roofline_ext.report.energy_chart import plot_energy_roofline

    costs = issue_costs(fp16=EnergyCost("fp16", 0.95e-12, 0, "issue 27-like fp16 (example)"),
                        l2=EnergyCost("l2", 30e-12, 0, "example l2"))
    tasks = [task_energy(_floor(), record(2.062), label="gemm $x$ task"),
             task_energy(_floor(), record(0.9), label="below")]
    out = plot_energy_roofline(costs, tmp_path / f"energy{suffix}", title="H200 energy roofline (issue 27 figures)",
                               tasks=tasks)
    data = out.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG")
    else:
        text = data.decode()
        for gid in ("energy:bf16:compute", "energy:bf16:combined", "energy:hbm_copy:memory", "energy:l2:memory",
                    "energy:task:below"):
            assert gid in text
        assert "BELOW it" in text


def test_chart_refuses_a_bad_name_and_nothing_to_draw(tmp_path):
    pytest.importorskip("matplotlib")
    from roofline_ext.report.energy_chart import plot_energy_roofline

    with pytest.raises(UserError, match="ending in"):
        plot_energy_roofline(issue_costs(), tmp_path / "energy.pdf", title="t")
    with pytest.raises(UserError, match="no energy costs"):
        plot_energy_roofline(EnergyCosts({}), tmp_path / "energy.png", title="t")


def test_a_batch_chart_names_only_the_ends_and_every_task_below(tmp_path):
    pytest.importorskip("matplotlib")
    from roofline_ext.report.energy_chart import MAX_NAMED, plot_energy_roofline

    # 30 tasks from 1.1x to 30x their floor, and one below it: 250 names on one chart cover each other.
    tasks = [task_energy(_floor(), record(2.062 * (1.1 + i)), label=f"task{i:02d}") for i in range(30)]
    tasks.append(task_energy(_floor(), record(0.9), label="below"))
    text = plot_energy_roofline(issue_costs(), tmp_path / "batch.svg", title="t", tasks=tasks).read_text()
    named = [t.label for t in tasks if f"{t.label}: " in text]
    half = MAX_NAMED // 2
    # Every point is drawn; names go to the furthest above, the nearest, and the one below.
    assert all(f"energy:task:{t.label}" in text for t in tasks)
    assert sorted(named) == sorted([f"task{i:02d}" for i in range(30 - half, 30)] +
                                   [f"task{i:02d}" for i in range(half - 1)] + ["below"])
    assert "BELOW it" in text
