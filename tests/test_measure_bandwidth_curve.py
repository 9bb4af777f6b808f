"""The L2 curve and its two plateaus (CPU policy, GPU bounds), and what the table-driven core
reports for every pattern (bytes read and written, the timeline stamp, throttle counts)."""
from __future__ import annotations

import importlib
import json

import pytest

from roofline_ext.measure import bandwidth as bw
MiB = 1 << 20
L2 = 50 * MiB  # an H200's


def _pt(ws, t):
    return bw.L2Point(ws, t, t, 0.01, 1, ws, 30, {})


# A curve of the published shape: ~13 TB/s up to a few MB, ~9.8 from 17 to 28 MB, HBM past the L2.
CURVE = [_pt(1 * MiB, 13.4), _pt(2 * MiB, 13.1), _pt(4 * MiB, 12.6), _pt(6 * MiB, 11.0), _pt(12 * MiB, 10.1),
         _pt(18 * MiB, 9.85), _pt(25 * MiB, 9.80), _pt(28 * MiB, 9.6), _pt(40 * MiB, 7.0), _pt(100 * MiB, 4.6)]


def test_working_sets_cover_both_plateaus_densely():
    sizes = bw.l2_working_sets(L2)
    assert sizes[0] == MiB and sizes[-1] == 2 * L2
    lo, hi = bw.L2_PLATEAU_WINDOWS["near"]
    assert sum(1 for s in sizes if s <= hi * L2) >= 4  # 1, 2, 3, 4 MiB
    flo, fhi = bw.L2_PLATEAU_WINDOWS["far"]
    assert sum(1 for s in sizes if flo * L2 <= s <= fhi * L2) >= 4


def test_near_and_far_plateaus():
    p = bw.l2_plateaus(CURVE, L2)
    assert p["near"].tbps == 13.4 and p["near"].working_set_bytes == MiB and p["near"].points == 3
    assert p["near"].min_tbps == 12.6
    assert p["far"].tbps == 9.85 and p["far"].working_set_bytes == 18 * MiB
    assert p["far"].lo_bytes == L2 // 3 and p["far"].points == 3
    # The existing plateau (L2/8 .. L2/2) is unchanged by the curve.
    assert bw.l2_plateau(CURVE, L2).working_set_bytes == 12 * MiB


def test_a_window_with_no_point_is_none():
    assert bw.l2_plateaus([_pt(30 * MiB, 9.0)], L2)["near"] is None


def test_l2_result_json_has_the_curve_and_plateaus():
    p = bw.l2_plateaus(CURVE, L2)
    r = bw.L2Result(L2, CURVE, bw.l2_plateau(CURVE, L2), None, near=p["near"], far=p["far"])
    d = json.loads(json.dumps(r.to_dict()))
    assert d["near"]["tbps"] == 13.4 and d["far"]["tbps"] == 9.85
    assert d["curve_mib_tbps"]["18"] == 9.85 and list(d["curve_mib_tbps"])[0] == "1"


def test_calibration_l2_entry_carries_the_plateaus():
    run = importlib.import_module("roofline_ext.calibration.pipeline")
    p = bw.l2_plateaus(CURVE, L2)
    e = run._l2_entry(bw.L2Result(L2, CURVE, bw.l2_plateau(CURVE, L2), None, near=p["near"], far=p["far"]))
    assert e["value"] == 10.1  # l2_bandwidth_tbps keeps its rule
    assert e["near_plateau"]["tbps"] == 13.4 and e["far_plateau"]["tbps"] == 9.85
    assert e["curve_mib_tbps"]["100"] == 4.6


L2_VARIANTS = ("cg", "cg_spread", "cg_pipe")


def test_default_l2_configs_never_cache_in_l1_and_fit_every_working_set():
    # Every L2 variant loads with ld.global.cg (L2 only); nc_na, a hint, must not come back.
    assert {c["load"] for c in bw.DEFAULT_L2_CONFIGS} <= set(L2_VARIANTS)
    assert any(c["blocks_per_sm"] > 0 for c in bw.DEFAULT_L2_CONFIGS)  # a persistent grid is tried
    for ws in bw.l2_working_sets(L2):
        assert all(ws % bw._chunk_bytes(c) == 0 for c in bw.DEFAULT_L2_CONFIGS), ws


# --------------------------------------------------------------------------------------------------
# GPU
# --------------------------------------------------------------------------------------------------

def _core():
    from roofline_ext.device.status import core

    return core()


@pytest.mark.gpu
def test_l2_curve_plateaus_are_ordered_and_bounded():
    from roofline_ext.device.listing import device
    from roofline_ext.measure.smem import smem_ceiling_tbps

    dev = device(0)
    sizes = [s for s in bw.l2_working_sets(dev.l2_bytes) if s <= dev.l2_bytes * 0.6]
    l2 = bw.measure_l2(0, dev.l2_bytes, sizes=sizes, reps=10, warmup=2)
    assert l2.near is not None and l2.far is not None
    theo = dev.theoretical_bandwidth_tbps
    # L2 is faster than HBM, the near partition no slower than the far one (within noise).
    assert l2.far.tbps > 1.2 * theo
    assert l2.near.tbps >= 0.97 * l2.far.tbps
    # No SM can take in more than its L1 moves: SMs x 128 B/clock x the maximum clock.
    ceiling = smem_ceiling_tbps(dev.sm_count, dev.max_sm_clock_mhz)
    assert all(p.tbps_best <= ceiling for p in l2.points), ceiling
    for p in l2.points:
        assert p.throttle is not None and p.throttle["reps"] == 10


@pytest.mark.gpu
@pytest.mark.parametrize("pattern, ratio", [("read", (1, 0)), ("write", (0, 1)), ("copy", (1, 1)), ("triad", (2, 1))])
def test_every_pattern_reports_its_read_and_write_bytes(pattern, ratio):
    core = _core()
    n = 64 * MiB
    t_before = core.steady_clock_s()
    rows = core.bandwidth_run(0, pattern, n, reps=3, warmup=1, configs=[bw._cfg(256, 1, 0, "plain")])
    r = rows[0]
    assert (r["read_parts"], r["write_parts"]) == ratio
    assert (r["read_bytes_per_launch"], r["write_bytes_per_launch"]) == (ratio[0] * n, ratio[1] * n)
    assert t_before < r["timed_end_s"] <= core.steady_clock_s()


@pytest.mark.gpu
def test_repetitions_are_placed_on_the_telemetry_timeline():
    from roofline_ext.device.listing import device

    # 4 GiB buffers, as calibration uses: 30 repetitions then span a few 25 ms sampling intervals
    # (with 1 GiB the whole timed loop fit between two samples on an H200 and none was placed).
    r = bw.measure_pattern(0, "copy", 4 << 30, configs=[bw.DEFAULT_CONFIGS["copy"][0]], reps=30, warmup=3,
                           theoretical_tbps=device(0).theoretical_bandwidth_tbps)
    assert r.throttle is not None and r.throttle["reps"] == 30
    if r.telemetry:  # NVML sampled: every repetition has a sample next to it
        assert r.throttle["placed"] == 30


@pytest.mark.gpu
def test_the_l2_variants_the_build_offers_all_skip_l1():
    caps = _core().bandwidth_capabilities()
    assert tuple(caps["loads"]["l2_read"]) == L2_VARIANTS
    assert caps["l2_default_config"]["load"] == "cg"


@pytest.mark.gpu
@pytest.mark.parametrize("order", L2_VARIANTS)
def test_every_l2_variant_verifies_on_both_grids_and_fails_when_short(order):
    core = _core()
    ws = 3 * MiB  # 3 MiB: a chunk count sharing factors with the grid, where the orders differ most
    cfgs = [bw._cfg(256, 4, 0, order), bw._cfg(512, 8, 64, order), bw._cfg(256, 16, 64, order)]
    rows = core.bandwidth_l2_read(0, ws, 256 * MiB, reps=3, warmup=1, configs=cfgs)
    assert len(rows) == len(cfgs)
    for r in rows:
        assert r["skipped"] is None and r["verification"]["passed"], r
        assert r["verification"]["expected"] == r["verification"]["observed"]
        assert r["bytes_per_launch"] == r["passes"] * ws and r["passes"] > 1
        assert r["config"]["load"] == order
    for cfg in cfgs[:2]:
        with pytest.raises(core.VerificationError, match="checksum"):
            core.bandwidth_l2_read(0, ws, 256 * MiB, reps=2, warmup=1, configs=[cfg], fault="short")


@pytest.mark.gpu
def test_an_l2_load_that_may_hit_l1_is_refused():
    core = _core()
    with pytest.raises(ValueError, match="ld.global.cg"):
        core.bandwidth_l2_read(0, 4 * MiB, 64 * MiB, reps=2, warmup=1, configs=[bw._cfg(256, 4, 0, "nc_na")])
