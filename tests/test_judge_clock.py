"""The judge's account of its own time (judge/clock.py): exclusive phases that add up."""
from __future__ import annotations

from roofline_ext.judge.clock import HARNESS_PHASES, PhaseClock


class _Fake:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_nested_phases_charge_the_innermost_only():
    t = _Fake()
    c = PhaseClock(t)
    with c("reference"):
        t.t += 1.0
        with c("guard"):
            t.t += 0.25
        t.t += 0.5
    with c("compare"):
        t.t += 2.0
    assert c.totals == {"reference": 1.5, "guard": 0.25, "compare": 2.0}
    assert sum(c.totals.values()) == t.t  # nothing counted twice, nothing lost while a phase was open
    assert c.judge_s() == 2.25  # guard and compare are the judge's; the reference call is any harness's


def test_time_outside_every_phase_is_not_charged():
    t = _Fake()
    c = PhaseClock(t)
    t.t += 5.0
    with c("load"):
        t.t += 1.0
    t.t += 3.0
    assert c.totals == {"load": 1.0}
    assert c.judge_s() == 0.0


def test_harness_phases_are_what_a_judge_free_harness_spends():
    assert set(HARNESS_PHASES) == {"load", "setup", "inputs", "candidate", "reference", "timed_loop", "measured"}
