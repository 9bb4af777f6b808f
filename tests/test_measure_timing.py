"""How many trials (measure/timing.py, measure/median_ci.py): a fixed count is exact, the adaptive loop
stops when the median's 95% interval is narrow enough or at its cap and says which, the interval is
the one the binomial gives, and the options reach the CLI, the JSON, the CSV and the tables. No GPU:
the loops run on a stand-in event source whose GPU clock a fake ``fn()`` advances."""
from __future__ import annotations

import math
import random
import struct

import pytest

from roofline_ext import cli
from roofline_ext.errors import UserError
from roofline_ext.measure import median_ci, timing
from roofline_ext.measure.timing import MIN_TRIALS, TrialRule, fewest_trials, time_callable, trial_rule


class FakeGpu:
    """A GPU clock (ms) that ``fn()`` advances by the next time of a series, a host clock (s) that
    advances by ``wall_s`` per call, and events that can be read only after a synchronize (as CUDA's
    ``elapsed_time`` raises on an event not yet complete). ``log`` is the order of calls.

    The GPU runs a call's work once the host has queued it and the GPU is free (``gpu_free_s``, on
    the host's clock), and a synchronize waits for it: with ``wall_s`` under a call's GPU time the
    GPU has a backlog when the host is done (GPU-bound), above it the GPU keeps pace and runs dry
    (host-bound)."""

    def __init__(self, series, wall_s: float = 0.0001) -> None:
        self.series = iter(series)
        self.gpu_ms = 0.0
        self.host_s = 0.0
        self.gpu_free_s = 0.0
        self.wall_s = wall_s
        self.log: list[str] = []
        self.syncs = 0
        self.pending: list[FakeEvent] = []

    # the three things the loop is handed
    def fn(self) -> None:
        self.log.append("fn")
        ms = next(self.series)
        self.gpu_ms += ms
        self.host_s += self.wall_s
        self.gpu_free_s = max(self.gpu_free_s, self.host_s) + ms / 1000

    def before(self) -> None:
        self.log.append("before")

    def clock(self) -> float:
        return self.host_s

    # the event source
    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def synchronize(self) -> None:
        self.syncs += 1
        self.host_s = max(self.host_s, self.gpu_free_s)
        for e in self.pending:
            e.done = True
        self.pending.clear()


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.at, self.done = gpu, None, False

    def record(self) -> None:
        self.at, self.done = self.gpu.gpu_ms, False
        self.gpu.pending.append(self)

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.done and end.done):
            raise RuntimeError("event read before a synchronize")
        return end.at - self.at


def _run(gpu: FakeGpu, trials, warmup: int = 3) -> dict:
    return time_callable(gpu.fn, trials=trials, warmup=warmup, flush=gpu.before, events=gpu, clock=gpu.clock)


def _one_before_per_call(gpu: FakeGpu) -> None:
    assert gpu.log == ["before", "fn"] * (len(gpu.log) // 2)


def _stable(n: int = 10**6, seed: int = 1):
    rng = random.Random(seed)
    return (1.0 + rng.uniform(-0.001, 0.001) for _ in range(n))  # ±0.1% around 1 ms


def _noisy(n: int = 10**6, seed: int = 2):
    rng = random.Random(seed)
    return (rng.choice((1.0, 3.0)) * rng.uniform(0.5, 1.5) for _ in range(n))  # two modes, wide


# --- a fixed count ---------------------------------------------------------------------------------

def test_fixed_count_is_exact_with_one_flush_per_call():
    gpu = FakeGpu([5.0] * 3 + [float(i) for i in range(1, 38)])
    t = _run(gpu, 37)
    assert t["trials"] == 37 and t["warmup"] == 3 and t["mode"] == "fixed" and t["stopped"] == "fixed"
    assert gpu.log.count("fn") == 40 and gpu.log.count("before") == 40
    _one_before_per_call(gpu)
    assert gpu.syncs == 2  # after the warm-up and after the last trial: none per trial
    assert t["median_ms"] == 19.0 and t["best_ms"] == 1.0  # the warm-up's times are not in it
    assert "timed_s" not in t


def test_event_times_ms_keeps_its_signature_and_count():
    gpu = FakeGpu([2.0] * 12)
    assert timing.event_times_ms(gpu.fn, 10, 2, gpu.before, events=gpu) == [2.0] * 10
    _one_before_per_call(gpu)


def test_a_fixed_count_reports_the_precision_it_bought():
    t = _run(FakeGpu(_stable()), 100)
    assert t["trials"] == 100 and t["precision_reached"] is True and 0 < t["ci_rel"] < 0.001
    t = _run(FakeGpu(_noisy()), 20)
    assert t["trials"] == 20 and t["precision_reached"] is False and t["ci_rel"] > 0.1


# --- adaptive --------------------------------------------------------------------------------------

def test_stable_series_stops_early_at_the_precision():
    gpu = FakeGpu(_stable(), wall_s=0.001)
    t = _run(gpu, None)
    assert t["mode"] == "adaptive" and t["stopped"] == "precision" and t["precision_reached"] is True
    assert t["ci_rel"] <= timing.DEFAULT_PRECISION and t["precision"] == timing.DEFAULT_PRECISION
    # The minimum time (50 ms of 1 ms trials) is what holds it, not the interval: far below 100.
    assert t["timed_s"] >= timing.DEFAULT_MIN_TIME_S and MIN_TRIALS <= t["trials"] < 100
    assert gpu.syncs <= 4  # the warm-up, then one per chunk
    _one_before_per_call(gpu)


def test_noisy_series_runs_to_the_cap_and_says_so():
    gpu = FakeGpu(_noisy(), wall_s=0.0001)  # GPU-bound: 2 ms a call on average, 0.1 ms of host
    t = _run(gpu, TrialRule(max_time_s=0.5))
    assert t["stopped"] == "max-time" and t["precision_reached"] is False
    assert t["ci_rel"] > t["precision"]
    assert t["host_bound"] is False and t["backlog_share"] > 0.5
    # The last chunk is cut to what the cap leaves (at the mean trial so far): about 0.5 s.
    assert 0.5 <= t["timed_s"] <= 0.56 and 200 <= t["trials"] <= 300
    assert gpu.syncs < 20
    _one_before_per_call(gpu)


def test_a_host_bound_series_stops_at_its_shorter_cap():
    # The same noisy GPU times, but the host takes 4 ms to queue each call: the GPU runs dry after
    # each one, so the events time the host, and the series stops at the host-bound cap (0.25 s).
    gpu = FakeGpu(_noisy(), wall_s=0.004)
    t = _run(gpu, None)
    assert t["stopped"] == "host-bound" and t["host_bound"] is True and t["backlog_share"] < timing.HOST_BOUND_BACKLOG
    assert timing.HOST_BOUND_MAX_TIME_S <= t["timed_s"] <= timing.HOST_BOUND_MAX_TIME_S + 0.01
    assert t["precision_reached"] is False
    # --max-time S sets both caps: the same series then runs to S.
    gpu = FakeGpu(_noisy(), wall_s=0.004)
    t = _run(gpu, TrialRule(max_time_s=0.5, host_bound_max_time_s=0.5))
    assert t["stopped"] == "max-time" and t["host_bound"] is True and t["timed_s"] >= 0.5
    # A precise host-bound series still stops at the precision, well before either cap.
    t = _run(FakeGpu(_stable(), wall_s=0.004), None)
    assert t["stopped"] == "precision" and t["host_bound"] is True
    assert timing._stop(TrialRule(), 100, 0.3, 0.02, None, host_bound=True) == "host-bound"
    assert timing._stop(TrialRule(), 100, 0.3, 0.02, None, host_bound=False) is None
    assert timing.next_chunk(TrialRule(min_time_s=0.0), 40, 0.24, 0.01, None, host_bound=True) == 1  # 10 ms left at 6 ms
    assert timing.backlog_share(0.0, 0.0) is None and timing.backlog_share(0.9, 0.1) == pytest.approx(0.1)


def test_the_minimum_count_holds_whatever_the_clock():
    # A cap shorter than one trial: still min_trials timed calls after the warm-up (the judge's
    # checked trials lie among them).
    gpu = FakeGpu([1.0] * 100, wall_s=1.0)
    t = _run(gpu, TrialRule(max_time_s=0.1), warmup=4)
    assert t["trials"] == MIN_TRIALS == fewest_trials(None) and gpu.log.count("fn") == 4 + MIN_TRIALS
    assert t["stopped"] == "precision"  # a constant series is known exactly: min_time is capped too
    _one_before_per_call(gpu)


def test_trial_cap_and_min_time_of_zero():
    t = _run(FakeGpu(_noisy()), TrialRule(max_trials=64, max_time_s=100.0))
    assert t["trials"] == 64 and t["stopped"] == "max-trials" and not t["precision_reached"]
    t = _run(FakeGpu([1.0] * 100), TrialRule(min_time_s=0.0, min_trials=12))
    assert t["trials"] == 12 and t["stopped"] == "precision" and t["ci_rel"] == 0.0


def test_next_chunk_aims_at_the_trials_the_interval_predicts():
    rule = TrialRule(min_time_s=0.0, max_time_s=100.0)
    # ci 1% at n=40 against 0.5%: 40 * 4 * 1.1 = 176 wanted, 136 more; at most a doubling: 40.
    assert timing.next_chunk(rule, 40, 0.04, 0.01) == 40
    # ci 0.55%: 40 * 1.21 * 1.1 = 53.24 -> 54 wanted, 14 more.
    assert timing.next_chunk(rule, 40, 0.04, 0.0055) == 14
    assert timing.next_chunk(rule, 40, 0.04, 0.0051) == 10  # at least a quarter more
    assert timing.next_chunk(rule, 5, 0.005, None) == 5  # no interval yet: double
    capped = TrialRule(min_time_s=0.0, max_time_s=0.05)
    assert timing.next_chunk(capped, 40, 0.04, 0.01) == 10  # 10 ms left at 1 ms a trial
    slow_start = TrialRule(min_time_s=0.5, max_time_s=1.0)
    # What the minimum time still needs, in chunks that stop once at the host-bound cap (0.25 s).
    assert timing.next_chunk(slow_start, 10, 0.01, 0.001) == 240
    assert timing.next_chunk(slow_start, 250, 0.25, 0.001) == 250
    # Any series is decided at the host-bound cap: a chunk ends there (25 trials of 2 ms from 0.2 s),
    # so one near the line is not read again only a doubled chunk later.
    assert timing.next_chunk(TrialRule(min_time_s=0.0), 100, 0.2, 0.01) in (24, 25)  # float rounding


# --- the timer's step --------------------------------------------------------------------------------

STEP_MS = 32e-6  # the H100's event step with driver 580 (2026-12-06): 32 ns


def _quantized(center_ms: float, spread_steps: int, n: int = 10**6, seed: int = 3):
    """Times in whole timer steps around ``center_ms``, skewed and wide (launch jitter): the kind of
    series whose median interval stalls at one step on either side."""
    rng = random.Random(seed)
    base = round(center_ms / STEP_MS)
    return (STEP_MS * (base + round(rng.gauss(0, spread_steps / 3)) + int(rng.expovariate(1 / spread_steps)))
            for _ in range(n))


def test_a_target_finer_than_the_timer_stops_at_one_step_not_the_cap():
    # ~5 us with a few us of jitter: ±0.5% is ±25 ns, under the 32 ns step.
    gpu = FakeGpu(_quantized(0.005, 40), wall_s=30e-6)
    t = _run(gpu, None)
    assert t["stopped"] == "resolution" and t["precision_reached"] is False
    assert t["timer_step_ms"] == pytest.approx(STEP_MS)
    half_ms = max(t["median_ms"] - t["ci_low_ms"], t["ci_high_ms"] - t["median_ms"])
    assert half_ms <= STEP_MS * (1 + 1e-6) and t["ci_rel"] > t["precision"]
    assert timing.RESOLUTION_MIN_TRIALS <= t["trials"] and t["timed_s"] < timing.DEFAULT_MAX_TIME_S / 2
    _one_before_per_call(gpu)


def test_the_step_is_read_only_from_a_long_series():
    # A short series spread over many steps shows gaps of several steps: no resolution stop before
    # RESOLUTION_MIN_TRIALS, whatever its interval; the cap (here 500 trials' worth) comes first.
    gpu = FakeGpu(_quantized(0.005, 40), wall_s=1e-3)  # host-bound: its cap is 0.25 s, 250 trials
    t = _run(gpu, TrialRule(max_time_s=0.5))
    assert t["trials"] < timing.RESOLUTION_MIN_TRIALS and t["stopped"] == "host-bound"
    assert timing._stop(TrialRule(), 999, 0.2, 0.006, None) is None
    assert timing._stop(TrialRule(), 1000, 0.2, 0.006, 0.0064) == "resolution"
    assert timing._stop(TrialRule(), 1000, 0.2, 0.007, 0.0064) is None  # wider than one step: go on
    assert timing._stop(TrialRule(), 1000, 0.01, 0.006, 0.0064) is None  # before the minimum time


def _float32(ms):
    """What CUDA events hand back: float32 milliseconds, whose rounding makes a difference of two
    times a step apart differ from the step in its fifth significant digit."""
    return (struct.unpack("f", struct.pack("f", x))[0] for x in ms)


def test_float32_event_times_still_stop_at_one_step():
    # Session 16's tiny task on an H100 (2026-12-06): median 4.736 us, interval up to 4.768 us (read
    # as float32), step read off the series 3.19993e-5 ms: the half-width came out 1.6e-5 of a step
    # wider than the step, so the series ran the whole 1 s cap (23,757 trials) instead of stopping.
    median, high, step = 0.004736000206321478, 0.004767999984323978, 3.1999312341213226e-05
    assert timing._stop(TrialRule(), 23757, 0.2, (high - median) / median, step / median) == "resolution"
    assert timing._stop(TrialRule(), 23757, 0.2, 1.002 * step / median, step / median) is None  # a real 0.2% more
    gpu = FakeGpu(_float32(_quantized(0.0047, 40)), wall_s=30e-6)
    t = _run(gpu, None)
    assert t["stopped"] == "resolution" and t["timed_s"] < timing.DEFAULT_MAX_TIME_S / 2, t


def test_kernels_above_the_step_still_stop_at_the_precision():
    # 1 ms in 32 ns steps: one step is 0.0032%, far inside ±0.5%; the precision stop comes first.
    t = _run(FakeGpu(_quantized(1.0, 40), wall_s=1e-3), None)
    assert t["stopped"] == "precision" and t["precision_reached"] is True


def test_timer_step_ignores_float_rounding_and_a_constant_series():
    xs = [0.004991999827325344, 0.004992, 0.005023999, 0.005056, 0.004959999]
    assert timing.timer_step_ms(xs) == pytest.approx(STEP_MS, rel=1e-3)
    assert timing.timer_step_ms([0.005] * 10) is None
    assert timing._step_rel([0.005] * 2000, 0.005) is None
    assert timing._step_rel(xs * 400, 0.005) == pytest.approx(STEP_MS / 0.005, rel=1e-3)
    assert timing._step_rel(xs, 0.005) is None  # too few trials to read a step from


def test_next_chunk_aims_at_one_step_when_that_is_wider_than_the_precision():
    rule = TrialRule(min_time_s=0.0, max_time_s=100.0)
    # ci 0.8% at n=1000 against a step of 0.64% (wider than 0.5%): 1000 * 1.5625 * 1.1 -> 719 more.
    assert timing.next_chunk(rule, 1000, 0.1, 0.008, 0.0064) == 719
    assert timing.next_chunk(rule, 1000, 0.1, 0.008, 0.001) == 1000  # a fine step: the precision's


# --- the interval, by hand ---------------------------------------------------------------------------

def test_interval_of_ten_is_the_second_and_ninth_values():
    # P(B <= 1) = 11/1024 <= 2.5% < P(B <= 2) = 56/1024: k = 2, coverage 1 - 22/1024.
    iv = median_ci.median_interval([7, 1, 5, 6, 20, 4, 5, 5, 6, 5])
    assert (iv.median, iv.low, iv.high) == (5, 4, 7)
    assert iv.rel == pytest.approx(2 / 5)  # the wider side: 7 - 5, not 5 - 4
    assert iv.coverage == pytest.approx(1 - 22 / 1024)


@pytest.mark.parametrize("n, k, tail_count", [
    (6, 1, 1),       # [min, max]: 1 - 2/64
    (20, 6, 1 + 20 + 190 + 1140 + 4845 + 15504),  # ranks 6 and 15
    (100, 40, None),  # ranks 40 and 61, the textbook table's
])
def test_ranks_match_the_binomial(n, k, tail_count):
    assert median_ci.lower_rank(n) == k
    if tail_count is not None:
        assert median_ci.coverage(n) == pytest.approx(1 - 2 * tail_count / 2 ** n)
    below = sum(math.comb(n, i) for i in range(k)) / 2 ** n
    assert below <= 0.025 < below + math.comb(n, k) / 2 ** n  # k is the largest rank that holds


def test_no_interval_under_six_values():
    assert median_ci.lower_rank(5) is None  # [min, max] of 5 covers only 1 - 2/32 = 93.75%
    iv = median_ci.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert iv.median == 3.0 and iv.rel is None and iv.low is None
    t = _run(FakeGpu([1.0, 2.0, 3.0]), 3, warmup=0)
    assert t["ci_rel"] is None and t["precision_reached"] is False


def test_large_series_use_the_normal_ranks_and_hold_the_level():
    for n in (1001, 1100, 3000):
        k = median_ci.lower_rank(n)
        exact, below = 0, 0  # the largest j with 40 * sum_{i<j} C(n, i) <= 2^n
        while (below + math.comb(n, exact)) * 40 <= 2 ** n:
            below += math.comb(n, exact)
            exact += 1
        assert exact - 1 <= k <= exact and median_ci.coverage(n) >= 0.95


# --- the rule and where it travels ---------------------------------------------------------------------

def test_rule_forms_and_errors():
    assert trial_rule(7) == TrialRule(fixed=7) and fewest_trials(7) == 7
    assert trial_rule(None) == TrialRule() and TrialRule().adaptive
    rule = TrialRule(precision=0.01, max_time_s=2.0)
    assert trial_rule(rule.to_dict()) == rule  # as a job's JSON-able argument
    for bad, needle in ((0, "--trials must be at least 1"), ({"precision": 0}, "--precision"),
                        ({"max_time_s": -1}, "--max-time"), ({"colour": 1}, "unknown trial settings"),
                        (2.5, "trials must be a count")):
        with pytest.raises(UserError, match=needle):
            trial_rule(bad)


def test_timing_options_default_to_adaptive():
    from roofline_ext.runner.batch import TimingOptions

    assert TimingOptions().rule() == TrialRule()
    assert TimingOptions(trials=100).rule().fixed == 100
    assert TimingOptions(precision=0.002, max_time_s=3.0).rule() == TrialRule(precision=0.002, max_time_s=3.0)
    with pytest.raises(UserError, match="--precision"):
        TimingOptions(precision=2.0)


def test_the_judge_gets_the_minimum_when_adaptive():
    from roofline_ext.measure.task_timing import timed_and_seen

    seen = {}

    class Judge:
        def timed(self, candidate, args, time_fn, *, trials, warmup, flush, device=None):
            seen.update(trials=trials, warmup=warmup)
            return None  # as after a defence fired: no all-stream measure follows

    for trials, fewest in ((TrialRule().to_dict(), MIN_TRIALS), (25, 25), (TrialRule(min_trials=16), 16)):
        timed_and_seen(Judge(), None, [], None, trials, 10, None, 0)
        assert seen == {"trials": fewest, "warmup": 10}


@pytest.mark.parametrize("argv, needle", [
    (["--precision", "0"], "--precision must be more than 0 and less than 100"),
    (["--precision", "100"], "--precision must be more than 0 and less than 100"),
    (["--max-time", "0"], "--max-time must be more than 0 seconds"),
    (["--max-time", "2", "--trials", "50"], "--max-time is for adaptive trials"),
])
def test_bad_trial_flags_exit_2(capsys, argv, needle):
    from pathlib import Path

    task = Path(__file__).resolve().parent.parent / "examples" / "softmax.py"
    rc = cli.main(["analyze", str(task), "--time", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_flags_become_timing_options(monkeypatch):
    import argparse

    from roofline_ext.cli.commands import analyze

    monkeypatch.setattr(analyze, "_measured_peaks_for", lambda gpu, regime: None)
    monkeypatch.setattr(analyze, "_candidates", lambda args, paths: None)
    parser = argparse.ArgumentParser()
    analyze.register(parser.add_subparsers())

    def timing_of(*flags: str):
        args = parser.parse_args(["analyze", "t.py", "--time", *flags])
        args.debug = False  # a flag of the top-level parser
        return analyze._options(args, None, []).timing

    assert timing_of().rule() == TrialRule()  # adaptive, ±0.5%, 1 s
    # --max-time is every series' cap, a host-bound one's too.
    assert timing_of("--precision", "0.2", "--max-time", "4").rule() == TrialRule(
        precision=0.002, max_time_s=4.0, host_bound_max_time_s=4.0)
    assert timing_of("--trials", "100").rule() == TrialRule(fixed=100)


# --- what the outputs say ---------------------------------------------------------------------------------

def _stats(**kw):
    base = {"median_ms": 1.0, "best_ms": 0.9, "cv": 0.01, "trials": 240, "mode": "adaptive", "ci_rel": 0.0031,
            "precision": 0.005, "precision_reached": True, "stopped": "precision"}
    return {**base, **kw}


def test_text_lines_say_trials_and_interval():
    from roofline_ext.cli.commands.analyze import _ci_cells, _trials_text

    assert _trials_text(_stats(), ", ") == ", 240 trials (adaptive), median ±0.31% (95% CI)"
    missed = _trials_text(_stats(ci_rel=0.012, precision_reached=False, stopped="max-time"), ", ")
    assert missed.endswith("median ±1.20% (95% CI), NOT within ±0.50% (time cap)")
    assert _trials_text({"trials": 100}, ", ") == ", 100 trials"  # a result of the first layout
    assert _ci_cells(_stats()) == ("240", "0.31%")
    assert _ci_cells(_stats(ci_rel=0.02, precision_reached=False)) == ("240", "2.00% (missed)")
    timer = _stats(ci_rel=0.0064, precision_reached=False, stopped="resolution")
    assert _ci_cells(timer) == ("240", "0.64% (timer)")
    assert _trials_text(timer, ", ").endswith("NOT within ±0.50% (timer's step)")
    assert _ci_cells({}) == ("-", "-")


def test_csv_rows_carry_the_precision():
    from roofline_ext.report.summary import TIMED_COLUMNS, _timed_rows

    result = {"task": "t", "status": "ok", "t_ref_ms": 1.0, "timing": {"reference": _stats()},
              "candidates": [{"candidate": "c.py", "status": "ok", "correct": True, "t_new_ms": 0.5,
                              "timing": _stats(trials=80, ci_rel=0.009, precision_reached=False)}]}
    row = _timed_rows(result)[0]
    assert {"trials_mode", "ref_trials", "ref_ci_rel", "ref_precision_reached", "new_trials", "new_ci_rel",
            "new_precision_reached"} <= set(TIMED_COLUMNS)
    assert (row["trials_mode"], row["ref_trials"], row["ref_ci_rel"], row["ref_precision_reached"]) == (
        "adaptive", 240, 0.0031, True)
    assert (row["new_trials"], row["new_ci_rel"], row["new_precision_reached"]) == (80, 0.009, False)


# --- the warm-up's time bound ----------------------------------------------------------------------

@pytest.mark.parametrize("trials", [None, 12])
def test_a_time_bounded_warm_up_stops_after_three_calls_once_that_long_has_passed(trials):
    # 30 ms of host time per call: 3 calls are 90 ms, past the 50 ms bound (2 calls would be too,
    # but fewer than 3 are never enough).
    gpu = FakeGpu(_stable(), wall_s=0.03)
    t = time_callable(gpu.fn, trials=trials, warmup=10, flush=gpu.before, events=gpu, clock=gpu.clock,
                      warmup_s=timing.DEFAULT_WARMUP_S)
    assert t["warmup"] == timing.MIN_WARMUP == 3
    assert gpu.log.count("fn") == 3 + t["trials"]
    _one_before_per_call(gpu)


def test_a_short_call_still_makes_every_warm_up_call_and_none_without_a_bound():
    fast = FakeGpu(_stable(), wall_s=0.001)  # 10 calls are 10 ms, short of 50 ms
    t = time_callable(fast.fn, trials=20, warmup=10, flush=fast.before, events=fast, clock=fast.clock,
                      warmup_s=timing.DEFAULT_WARMUP_S)
    assert t["warmup"] == 10 and fast.log.count("fn") == 30
    slow = FakeGpu(_stable(), wall_s=0.03)  # no bound (a candidate's timing, the judge's count): all 10
    t = time_callable(slow.fn, trials=20, warmup=10, flush=slow.before, events=slow, clock=slow.clock)
    assert t["warmup"] == 10 and slow.log.count("fn") == 30 and slow.syncs == 2


# --- the host's pace beside a reference's series ------------------------------------------------------

def test_host_pace_is_the_median_probe_in_microseconds():
    from roofline_ext.measure.task_timing import host_pace

    ticks = iter([0.0, 0.001, 1.0, 1.0003, 2.0, 2.0002])  # probes of 1000, 300 and 200 us
    pace = host_pace(clock=lambda: next(ticks), probes=3)
    assert pace["pace_us"] == pytest.approx(300.0) and pace["load_1m"] >= 0
    real = host_pace()  # the real loop: some microseconds, not zero, not seconds
    assert 1.0 < real["pace_us"] < 1e6, real
