"""Task timing: the logic that runs without a GPU here, and on the H200 a task whose floor is known."""
from __future__ import annotations

import textwrap

import pytest
import torch

from roofline_ext.measure import timing
from roofline_ext.runner import timing_jobs
from roofline_ext.errors import UserError
from roofline_ext.runner.isolation import run_isolated

GOOD = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(1024)]
def get_init_inputs():
    return []
"""


def write(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def test_time_task_refuses_unknown_dtype_before_loading(tmp_path):
    with pytest.raises(UserError, match="fp32, fp16, bf16"):
        timing_jobs.time_task(write(tmp_path, "good.py", GOOD), dtype="fp4")


def test_compare_uses_kernelbench_tolerance():
    a = torch.ones(100)
    assert timing_jobs.compare(a, a + 5e-5, 1e-4)["ok"]
    bad = timing_jobs.compare(a, a + 5e-3, 1e-4)
    assert not bad["ok"] and "atol=rtol=0.0001" in bad["reason"]
    assert timing_jobs.compare(a, a + 5e-3, 1e-2)["ok"]
    assert not timing_jobs.compare(a, torch.ones(99), 1e-2)["ok"]
    nan = a.clone()
    nan[3] = float("nan")
    assert not timing_jobs.compare(a, nan, 1e-2)["ok"]
    assert not timing_jobs.compare((a, a), a, 1e-2)["ok"]


@pytest.mark.slow
def test_isolated_worker_reports_broken_file(tmp_path):
    p = write(tmp_path, "broken.py", "def f(:\n")
    r = run_isolated({"path": str(p)}, timeout_s=60)
    assert r["ok"] is False and r["kind"] == "syntax" and "broken.py:1" in r["error"]


@pytest.mark.slow
def test_isolated_worker_survives_a_crashing_task(tmp_path):
    # The task kills its own process, as an illegal memory access would: recorded, not fatal to us.
    p = write(tmp_path, "segv.py", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    r = run_isolated({"path": str(p)}, timeout_s=60)
    assert r == {"ok": False, "kind": "crash", "error": r["error"]}
    assert "SIGSEGV" in r["error"]


@pytest.mark.slow
def test_isolated_worker_times_out_a_hang(tmp_path):
    p = write(tmp_path, "hang.py", "import time\ntime.sleep(600)\n")
    r = run_isolated({"path": str(p)}, timeout_s=3)
    assert r["ok"] is False and r["kind"] == "timeout" and "3 s" in r["error"]


@pytest.mark.slow
def test_isolated_worker_without_gpu_says_why(tmp_path):
    from roofline_ext.device.status import availability

    if availability().ok:
        pytest.skip("this machine has a GPU")
    r = run_isolated({"path": str(write(tmp_path, "good.py", GOOD))}, timeout_s=120)
    assert r["ok"] is False and r["kind"] == "gpu-unavailable"
    assert availability().message in r["error"]


@pytest.mark.gpu
def test_timing_overhead_under_5us():
    assert timing.timing_overhead_us() < 5.0


@pytest.mark.gpu
def test_a_microsecond_kernel_stops_as_soon_as_the_timer_can_tell_no_more():
    # x + 1 on 1024 floats: a few us, a target (±0.5%) finer than the event timer's step. The step
    # read off the series must be a plausible timer step (CUDA documents about 0.5 us; Hopper with
    # driver 580 shows 32 ns), and whichever way the series ended, it ended for its reason: within the
    # precision, within one step (after RESOLUTION_MIN_TRIALS), or at the cap with an interval wider
    # than both. The outcome itself is the host's: x + 1 is host-bound, and on an H100 (2026-12-06)
    # one run stopped at one step while another's interval stayed wider for the whole second. A cap
    # reached with the interval at one step (what float32 event times did before _STEP_SLACK) fails.
    import torch

    x = torch.randn(1024, device="cuda")
    t = timing.time_callable(lambda: x + 1, trials=None, warmup=10)
    step = t["timer_step_ms"]
    assert step is not None and 1e-7 <= step <= 1e-3, step
    half = max(t["median_ms"] - t["ci_low_ms"], t["ci_high_ms"] - t["median_ms"])
    within_step = half <= step * (1 + timing._STEP_SLACK)
    if t["stopped"] == "precision":
        assert t["ci_rel"] <= t["precision"], t
    elif t["stopped"] == "resolution":
        assert within_step and t["trials"] >= timing.RESOLUTION_MIN_TRIALS, t
    elif t["stopped"] == "host-bound":  # the GPU ran dry waiting for the launches: the shorter cap
        assert t["host_bound"] is True and t["timed_s"] >= timing.HOST_BOUND_MAX_TIME_S, t
        assert not within_step and t["ci_rel"] > t["precision"], (half, step, t)
    else:
        assert t["stopped"] == "max-time" and t["timed_s"] >= timing.DEFAULT_MAX_TIME_S, t
        assert not within_step and t["ci_rel"] > t["precision"], (half, step, t)


@pytest.mark.gpu
def test_host_bound_series_are_told_from_gpu_bound_ones():
    # The detector on the card (measure/timing.py, backlog_share): a 4096^3 matmul (about 0.2-0.5 ms
    # of GPU per call, queued in microseconds) leaves the GPU a backlog; 300 one-element adds per
    # call (a Python loop of launches, each far shorter on the GPU than on the host) leave it none.
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    gpu_bound = timing.time_callable(lambda: a @ a, trials=None, warmup=3)
    assert gpu_bound["host_bound"] is False and gpu_bound["backlog_share"] > 0.5, gpu_bound
    x = torch.randn(1, device="cuda")

    def launches():
        y = x
        for _ in range(300):
            y = y + 1
        return y

    host_bound = timing.time_callable(launches, trials=None, warmup=3)
    assert host_bound["host_bound"] is True and host_bound["backlog_share"] < timing.HOST_BOUND_BACKLOG, host_bound
    assert host_bound["stopped"] in ("precision", "host-bound"), host_bound
    assert host_bound["timed_s"] < timing.HOST_BOUND_MAX_TIME_S + 0.1, host_bound  # never the 1 s cap


@pytest.mark.gpu
def test_known_floor_task_fraction_between_0_and_1(tmp_path):
    # y = x * 2 on 256 Mi float32: compulsory bytes = 1 GiB read + 1 GiB written, no tensor FLOPs.
    from roofline_ext.device.listing import device

    body = GOOD.replace("torch.randn(1024)", "torch.randn(256 * 1024 * 1024)")
    p = write(tmp_path, "scale.py", body)
    r = timing_jobs.time_task(p, trials=20, warmup=3)
    d = device(0)
    floor_ms = 2 * 2**30 / (d.theoretical_bandwidth_tbps * 1e12) * 1e3
    frac = floor_ms / r["t_ref_ms"]
    assert 0.5 < frac < 1.0, (floor_ms, r["t_ref_ms"])
    assert r["reference"]["cv"] < 0.05
    # The card as it ran the series: read by NVML, not copied from anywhere, and physically sane.
    tel = r["reference"]["telemetry"]
    assert "error" not in tel and tel["samples"] >= 1, tel
    sm = tel["sm_clock_mhz"]
    assert 100 <= sm["min"] <= sm["median"] <= sm["max"] <= (d.max_sm_clock_mhz or 5000), (sm, d)
    assert 0 < tel["power_w"]["median"] <= (d.power_limit_w or 2000) * 1.2, tel
    # The host's pace before and after the series: a loop of some microseconds, not zero, not seconds.
    host = r["reference"]["host"]
    assert 1.0 < host["pace_us"] < 1e6 and 1.0 < host["pace_after_us"] < 1e6, host


@pytest.mark.gpu
def test_candidate_checked_and_timed(tmp_path):
    body = GOOD + textwrap.dedent("""
    class ModelNew(torch.nn.Module):
        def forward(self, x):
            return x + x
    """)
    r = timing_jobs.time_task(write(tmp_path, "cand.py", body), trials=10, warmup=2)
    assert r["correctness"]["ok"] and r["t_new_ms"] > 0 and r["speedup"] > 0
    wrong = GOOD + textwrap.dedent("""
    class ModelNew(torch.nn.Module):
        def forward(self, x):
            return x * 2.01
    """)
    r = timing_jobs.time_task(write(tmp_path, "wrong.py", wrong), trials=5, warmup=1)
    assert r["correctness"]["ok"] is False
