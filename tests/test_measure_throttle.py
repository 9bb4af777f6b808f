"""Throttled repetitions (measure/throttle.py): placing repetitions on the telemetry timeline,
flagging them, and leaving them out only when asked. Pure functions, no GPU."""
from __future__ import annotations

import pytest

from roofline_ext.measure import throttle as th

BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
        0x20: "sw_thermal_slowdown"}


def names_of(mask):
    return [n for b, n in BITS.items() if mask & b]


def samples(clock_at, reasons_at=lambda t: 0, duration=1.0, step=0.025):
    return [{"t_s": i * step, "sm_clock_mhz": clock_at(i * step), "reasons": reasons_at(i * step)}
            for i in range(int(duration / step) + 1)]


def test_windows_run_back_to_back_up_to_the_end_stamp():
    w = th.rep_windows([2.0, 3.0, 5.0], end_s=10.0)
    assert w == [pytest.approx((9.990, 9.992)), pytest.approx((9.992, 9.995)), pytest.approx((9.995, 10.0))]


def test_clean_run_flags_nothing():
    windows = th.rep_windows([2.0] * 100, end_s=0.9)  # 0.7 .. 0.9 s
    flags, median = th.flag_reps(windows, samples(lambda t: 1980.0), names_of=names_of)
    assert median == 1980.0 and all(f == [] for f in flags)
    r = th.report(flags, median)
    assert (r.reps, r.placed, r.flagged) == (100, 100, 0) and r.low_clock_mhz == pytest.approx(1782.0)


def test_slowdown_reason_and_low_clock_flag_the_repetitions_near_them():
    def clock(t):
        return 1200.0 if 0.80 <= t < 0.85 else 1980.0

    def reasons(t):
        return 0x20 if 0.70 <= t < 0.75 else 0x1 | 0x2  # idle / application clocks never flag

    windows = th.rep_windows([2.0] * 100, end_s=0.9)
    flags, _ = th.flag_reps(windows, samples(clock, reasons), names_of=names_of)
    thermal = [i for i, f in enumerate(flags) if "sw_thermal_slowdown" in f]
    low = [i for i, f in enumerate(flags) if "low_clock" in f]
    assert thermal and all(windows[i][1] <= 0.75 + 0.03 for i in thermal)
    assert low and all(0.78 <= windows[i][0] <= 0.86 for i in low)
    r = th.report(flags, 1980.0)
    assert r.flagged == len(set(thermal) | set(low)) and r.by_reason["low_clock"] == len(low)


def test_power_cap_flags_unless_allowed():
    windows = th.rep_windows([2.0] * 10, end_s=0.5)
    ss = samples(lambda t: 1755.0, lambda t: 0x4)
    assert all(f == ["sw_power_cap"] for f in th.flag_reps(windows, ss, names_of=names_of)[0])
    assert all(f == [] for f in th.flag_reps(windows, ss, names_of=names_of, allowed=("sw_power_cap",))[0])


def test_a_repetition_far_from_every_sample_is_unplaced_not_clean():
    windows = th.rep_windows([2.0] * 5, end_s=5.0)  # 5 s: the samples stop at 1 s
    flags, _ = th.flag_reps(windows, samples(lambda t: 1980.0))
    assert flags == [None] * 5 and th.report(flags, None).placed == 0


def test_samples_outside_the_timed_loop_never_count():
    # The GPU idled (345 MHz) just before the loop; the loop itself (0.50 .. 0.51 s) fell between
    # two samples: its repetitions are unplaced, not flagged for the idle clock.
    ss = samples(lambda t: 345.0 if t < 0.5 else 1980.0, duration=1.0, step=0.025)
    ss = [s for s in ss if not 0.5 <= s["t_s"] <= 0.52]
    flags, median = th.flag_reps(th.rep_windows([1.0] * 10, end_s=0.51), ss)
    assert flags == [None] * 10 and median is None


def test_low_kernel_clock_flags_its_own_launch():
    windows = th.rep_windows([2.0] * 6, end_s=5.0)
    flags, _ = th.flag_reps(windows, [], kernel_clocks_mhz=[1980, 1975, 1500, 1980, 0.0, 1979])
    assert flags[2] == ["low_kernel_clock"] and flags[4] is None and flags[0] is None


def test_discard_keeps_the_unflagged_while_half_remain():
    times = [1.0, 1.0, 2.0, 1.0]
    assert th.kept_times(times, [[], [], ["low_clock"], []], discard=False) == times
    assert th.kept_times(times, [[], [], ["low_clock"], []], discard=True) == [1.0, 1.0, 1.0]
    # Throttled throughout: the figure is what throttled hardware does, nothing is dropped.
    assert th.kept_times(times, [["x"], ["x"], ["x"], []], discard=True) == times


def test_assess_row_places_the_core_row_on_the_sampler_timeline():
    row = {"times_ms": [2.0] * 50, "timed_end_s": 1000.91}  # steady clock; sampler started at 1000.0
    ss = samples(lambda t: 1300.0 if t > 0.88 else 1980.0)  # the last sample only
    rep, kept = th.assess_row(row, ss, 1000.0, names_of=names_of, discard=True)
    assert rep.flagged > 0 and rep.discarded == rep.flagged and len(kept) == 50 - rep.flagged
    rep2, kept2 = th.assess_row(row, ss, None)
    assert rep2.placed == 0 and rep2.flagged == 0 and len(kept2) == 50
