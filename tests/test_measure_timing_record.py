"""``measure/timing_record.py``: a timed series and the timing worker's reply as typed records.

``from_dict`` is the validation of a reply (a bad key is named), ``to_dict`` gives back the keys in
their order (the producer's order for what it makes, a reply's own for what was read), and every
reference timing recorded on an H100 (benchmarks/results) round-trips byte for byte.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from roofline_ext.measure.timing import TrialRule, series_stats, timing_stats
from roofline_ext.measure.timing_record import STATS_KEYS, TimingReply, TimingReplyError, TimingStats
from roofline_ext.report.writers import dumps

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
RECORDED = RESULTS / "levels-time-h100-2026-12-06-s15-b-runA.json.gz"
MS = [1.0 + 0.001 * (i % 7) for i in range(40)]


def _reply(**over):
    stats = timing_stats(MS, 10, TrialRule(), "precision")
    reply = {"task": "t.py", "device": "NVIDIA H100 80GB HBM3", "dtype": "torch.float32", "seed": 42,
             "inputs": "gpu", "weights": "gpu", "reference": stats, "t_ref_ms": stats["median_ms"]}
    reply.update(over)
    return reply


# --- the producer's record ------------------------------------------------------------------------------

def test_the_producer_writes_todays_keys_in_todays_order():
    fixed = series_stats(MS, 10, TrialRule(fixed=40), "fixed")
    assert list(fixed.to_dict()) == list(STATS_KEYS[:-3])  # no timed_s, no backlog: a fixed count
    adaptive = series_stats(MS, 10, TrialRule(), "precision", timed_s=0.05, backlog=0.62)
    assert list(adaptive.to_dict()) == list(STATS_KEYS) and adaptive.timed_s == 0.05
    assert adaptive.backlog_share == 0.62 and adaptive.host_bound is False
    assert series_stats(MS, 10, TrialRule(), "host-bound", timed_s=0.25, backlog=0.01).host_bound is True
    assert timing_stats(MS, 10, TrialRule(fixed=40), "fixed") == fixed.to_dict()
    assert fixed.mode == "fixed" and fixed.trials == 40 and fixed.precision_reached is True


def test_few_trials_keep_their_null_interval():
    t = series_stats([1.0, 2.0, 3.0], 0, TrialRule(fixed=3), "fixed")
    d = t.to_dict()
    assert d["ci_rel"] is None and "ci_rel" in d and t.has_interval and t.precision_reached is False
    assert TimingStats.from_dict(d) == t


# --- round trips ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stats", [
    series_stats(MS, 10, TrialRule(), "resolution", timed_s=1.0),
    series_stats(MS, 3, TrialRule(fixed=40, precision=0.001), "fixed"),
    TimingStats.of(median_ms=1.0, best_ms=0.9, cv=0.01, trials=100),  # an older layout
])
def test_a_series_round_trips(stats):
    assert TimingStats.from_dict(stats.to_dict()) == stats
    assert TimingStats.read(stats.to_dict()) == stats
    assert dumps(TimingStats.from_dict(stats.to_dict()).to_dict()) == dumps(stats.to_dict())


def test_a_reply_round_trips_with_its_order_and_its_untyped_keys():
    raw = _reply(energy={"j_per_call_total": 3.0, "nested": {"a": [1, 2]}}, kernel_profile=None, state={"pid": 7},
                 t_compile_ms=None, compile_error_kind="timeout", compile_error="ran past 600 s")
    raw = {"t_ref_ms": raw.pop("t_ref_ms"), **raw}  # an order of its own
    reply = TimingReply.from_dict(raw)
    assert dumps(reply.to_dict()) == dumps(raw)
    assert TimingReply.from_dict(reply.to_dict()) == reply
    assert isinstance(reply.reference, TimingStats) and reply.reference.median_ms == raw["t_ref_ms"]
    assert reply.extra["state"] == {"pid": 7} and reply.has("kernel_profile") and reply.kernel_profile is None
    assert reply.compile_asked and reply.compiled_correct is None and reply.compile_error == "ran past 600 s"


def test_a_reply_is_frozen_and_its_dict_fresh():
    import dataclasses

    raw = _reply(compiled_correctness={"ok": True, "reason": None})
    reply = TimingReply.from_dict(raw)
    raw["compiled_correctness"]["ok"] = False  # the caller's dict is not the record's
    assert reply.compiled_correct is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        reply.t_ref_ms = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        reply.compiled_correctness["ok"] = False  # type: ignore[index]
    d = reply.to_dict()
    d["reference"]["median_ms"] = -1.0
    d["compiled_correctness"]["ok"] = None
    assert reply.to_dict()["reference"]["median_ms"] > 0 and reply.to_dict()["compiled_correctness"]["ok"] is True


def test_with_values_appends_new_keys_and_without_drops_them():
    reply = TimingReply.from_dict(_reply(energy={"j": 1.0}))
    cand = series_stats(MS, 10, TrialRule(), "precision")
    one = reply.without("energy").with_values(candidate="c.py", candidate_timing=cand.to_dict(), t_new_ms=0.5,
                                              speedup=2.0)
    assert list(one.to_dict())[-4:] == ["candidate", "candidate_timing", "t_new_ms", "speedup"]
    assert "energy" not in one.to_dict() and one.energy is None and one.candidate_timing == cand
    assert list(reply.with_values(t_ref_ms=9.0).to_dict()) == list(reply.to_dict())  # in its place


@pytest.mark.skipif(not RECORDED.exists(), reason="the recorded H100 results are not in this checkout")
def test_every_recorded_reference_timing_round_trips_byte_for_byte():
    doc = json.loads(gzip.open(RECORDED).read())
    timed = [t for t in doc["tasks"] if t.get("timing")]
    assert len(timed) == 250
    for task in timed:
        reply = TimingReply.from_dict(task["timing"])
        assert dumps(reply.to_dict(), indent=1) == dumps(task["timing"], indent=1), task["task"]
        assert TimingReply.from_dict(reply.to_dict()) == reply
        assert reply.reference is not None and reply.t_ref_ms == reply.reference.median_ms
        assert reply.reference.mode == "adaptive" and reply.reference.has("timer_step_ms")
        assert TimingReply.of_result(task) == reply


def test_older_recorded_layouts_read_too():
    """A series of 2026-12-02 has no timer_step_ms; it reads and writes back as it was."""
    older = sorted(RESULTS.glob("judge-cost-level1-*.json.gz"))
    if not older:
        pytest.skip("no older recorded results in this checkout")
    doc = json.loads(gzip.open(older[0]).read())
    for task in doc["tasks"]:
        if not task.get("timing"):
            continue
        reply = TimingReply.from_dict(task["timing"])
        assert dumps(reply.to_dict()) == dumps(task["timing"])
        assert reply.reference is not None and not reply.reference.has("timer_step_ms")


# --- validation -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, words", [
    ({"reference": {**_reply()["reference"], "trials": 2.5}}, "the timing reply.reference.trials is 2.5, not an integer"),
    ({"reference": {**_reply()["reference"], "mode": "quick"}}, "reference.mode is 'quick', not one of adaptive, fixed"),
    ({"reference": {**_reply()["reference"], "precision_reached": 1}}, "precision_reached is 1, not true or false"),
    ({"reference": {"mean_ms": 1.0}}, "the timing reply.reference has no 'median_ms'"),
    ({"reference": [1.0]}, "the timing reply.reference is a list, not an object"),
    ({"t_ref_ms": "1.0"}, "the timing reply.t_ref_ms is '1.0', not a number"),
    ({"t_ref_ms": True}, "t_ref_ms is True, not a number"),
    ({"seed": None}, "the timing reply.seed is None, not an integer"),
    ({"compiled_correctness": "yes"}, "compiled_correctness is 'yes', not an object"),
])
def test_a_bad_reply_is_refused_naming_the_key(change, words):
    with pytest.raises(TimingReplyError) as err:
        TimingReply.from_dict(_reply(**change))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_reply_without_its_required_keys_is_refused():
    raw = _reply()
    del raw["reference"]
    with pytest.raises(TimingReplyError, match="has no 'reference'"):
        TimingReply.from_dict(raw)
    assert TimingReply.from_dict(raw, required=("t_ref_ms",)).reference is None  # a caller's own dict
    with pytest.raises(TimingReplyError, match="is 'oops', not an object"):
        TimingReply.from_dict("oops")


def test_read_never_raises_and_keeps_a_bad_value_as_it_was():
    raw = {"median_ms": 1.0, "trials": "many", "ci_rel": 0.01}
    t = TimingStats.read(raw)
    assert t is not None and t.trials is None and t.ci_rel == 0.01 and t.to_dict() == raw
    assert TimingStats.read(None) is None and TimingStats.read([1]) is None
    assert TimingReply.read({}) is None and TimingReply.of_result({"status": "ok"}) is None
    assert TimingStats.read({"trials": 100}).has_interval is False  # the first layout


def test_the_runner_turns_a_bad_reply_into_the_tasks_failure_and_a_bad_candidate_into_its_own():
    from roofline_ext.runner.timed import candidate_record

    rec = candidate_record("c.py", 3, {"judgement": {"verdict": "correct"}, "t_new_ms": 1.0,
                                       "candidate_timing": {"median_ms": "fast"}})
    assert rec.status == "error" and rec.error_kind == "error"
    assert "candidate_timing.median_ms is 'fast', not a number" in (rec.error or "")


def test_a_references_card_and_host_state_are_typed_and_checked():
    ref = {"median_ms": 1.2, "trials": 300, "stopped": "precision",
           "telemetry": {"samples": 9, "sm_clock_mhz": {"min": 1965, "median": 1980.0, "max": 1980},
                         "slowdown": ["sw_power_cap"]},
           "host": {"pace_us": 212.5, "load_1m": 0.4}}
    s = TimingStats.from_dict(ref)
    assert s.sm_clock_mhz == 1980.0 and s.host_pace_us == 212.5 and not s.extra
    assert s.to_dict() == ref and list(s.to_dict()) == list(ref)
    bare = TimingStats.from_dict({"median_ms": 1.0})  # a candidate's, or one from before 2026-12-06
    assert bare.sm_clock_mhz is None and bare.host_pace_us is None and bare.host_paces_us == ()
    assert s.host_paces_us == (212.5,)  # no reading after the series: only the one before
    both = TimingStats.from_dict({"median_ms": 1.0, "host": {"pace_us": 300, "pace_after_us": 180.5}})
    assert both.host_paces_us == (300.0, 180.5)
    with pytest.raises(TimingReplyError, match=r"telemetry is 'fast', not an object"):
        TimingStats.from_dict({"median_ms": 1.0, "telemetry": "fast"})
