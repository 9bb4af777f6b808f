"""The verdict rules that separate a card from its situation (issue 29): spread, busy, strict.

Driven through the check's backend interface with small fakes (tests/fakes/check.py; figures are
fixtures, not measurements): a noisy figure is never a PASS, a GPU another process uses is "busy"
and a shortfall there is not held against the card unless --strict, and wrong data FAILs whatever
the load.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fakes.check import FakeCheckBackend, core_error, healthy_state
from roofline_ext.check.run import ORDER, run_check
from roofline_ext.check.state import BUSY_UTILIZATION_PCT, situation_of
from roofline_ext.check.tolerances import DEFAULT_TOLERANCES, SPREAD_FRACTION, parse_tolerances, spread_bound
from roofline_ext.check.outcome import Situation, Verdict, judge_metric, settle
from roofline_ext.device.health import ComputeProcess

#: Another process, as NVML and /proc would name it (fixture).
LOAD = ComputeProcess(4242, 8 << 30, "python3 load.py --kind mixed")
#: The figures a healthy H200 gave beside the issue's load (fixture shaped on the issue's report):
#: BF16, FP32 and copy ~14-20% below, HBM read at a +-109% spread.
LOADED = {"bf16": 790.0, "fp32": 54.0, "hbm_read": 4.50, "hbm_copy": 3.60, "h2d": 52.0, "d2h": 53.0}


class SharedCardBackend(FakeCheckBackend):
    """The fake H200 with a CV per metric and other processes on the card at the start and/or end."""

    def __init__(self, *, figures=None, cvs=None, start_procs=(), end_procs=None, util=None, **kw):
        super().__init__(**kw)
        self.cvs = dict(cvs or {})
        if figures:
            self.figures[0].update(figures)
        me = ComputeProcess(os.getpid(), 600 << 20)
        self.start[0] = healthy_state(compute_processes=tuple(start_procs), utilization_gpu_pct=util,
                                      utilization_memory_pct=None if util is None else util // 2)
        # After the measurements this process holds a context: NVML lists it beside the others.
        ends = tuple(start_procs) if end_procs is None else tuple(end_procs)
        self.end[0] = healthy_state(compute_processes=(me,) + ends)

    def measure(self, index, metric, setup):
        m = super().measure(index, metric, setup)
        return type(m)(m.value, self.cvs.get(metric, m.cv), m.detail, m.telemetry)


def _check(backend, strict=False, **tol):
    return run_check("0", tolerances=parse_tolerances([f"{k}={v}" for k, v in tol.items()]), backend=backend,
                     strict=strict)


# --- the rules, one by one ------------------------------------------------------------------------

@pytest.mark.parametrize("measured,noisy,shared,expected", [
    (Verdict.PASS, False, False, Verdict.PASS),
    (Verdict.PASS, True, False, Verdict.UNKNOWN),
    (Verdict.PASS, False, True, Verdict.PASS),  # reached its figure even with company
    (Verdict.PASS, True, True, Verdict.UNKNOWN),
    (Verdict.WARN, False, False, Verdict.WARN),
    (Verdict.FAIL, False, False, Verdict.FAIL),
    (Verdict.FAIL, True, False, Verdict.WARN),  # a shortfall on noise is not established: no drain
    (Verdict.FAIL, False, True, Verdict.UNKNOWN),
    (Verdict.WARN, True, True, Verdict.UNKNOWN),
])
def test_settle_table(measured, noisy, shared, expected):
    assert settle(measured, noisy, shared) is expected


def test_spread_bound_is_half_the_tolerance_and_follows_an_override():
    assert SPREAD_FRACTION == 0.5
    assert spread_bound(DEFAULT_TOLERANCES["hbm_read"]) == pytest.approx(0.025)
    r = _check(SharedCardBackend(cvs={"hbm_read": 0.03}))  # 3%: above 2.5% ...
    assert r.devices[0].metric("hbm_read").noisy
    r = _check(SharedCardBackend(cvs={"hbm_read": 0.03}), hbm=0.08)  # ... below 4%
    m = r.devices[0].metric("hbm_read")
    assert not m.noisy and m.verdict is Verdict.PASS and m.spread_bound == pytest.approx(0.04)


def test_a_noisy_figure_within_tolerance_is_not_a_pass():
    """The issue's HBM read: within tolerance by its median, at a +-109% spread."""
    m = judge_metric("hbm_read", "HBM read", "TB/s", 4.50, 1.09, {"calibration": 4.61, "reference": 4.61}, 0.05,
                     spread_bound=0.025)
    assert m.measured_verdict is Verdict.PASS and m.verdict is Verdict.UNKNOWN and m.noisy
    assert m.reason.startswith("noisy: ±109.0% spread") and "±2.5%" in m.reason
    assert m.to_dict()["noisy"] is True and m.to_dict()["measured_verdict"] == "PASS"


def test_a_noisy_shortfall_is_a_warn_not_a_fail():
    m = judge_metric("fp32", "FP32", "TFLOP/s", 50.0, 0.2, {"calibration": 65.4}, 0.05, spread_bound=0.025)
    assert m.measured_verdict is Verdict.FAIL and m.verdict is Verdict.WARN and "noisy" in m.reason


def test_a_steady_figure_at_the_bound_is_judged():
    m = judge_metric("fp32", "FP32", "TFLOP/s", 65.0, 0.025, {"calibration": 65.4}, 0.05, spread_bound=0.025)
    assert m.verdict is Verdict.PASS and not m.noisy


def test_noise_without_anything_to_compare_with_says_both():
    m = judge_metric("fp32", "FP32", "TFLOP/s", 65.0, 0.5, {}, 0.05, missing="no calibration", spread_bound=0.025)
    assert m.verdict is Verdict.UNKNOWN and "nothing to compare with" in m.reason and "noisy" in m.reason


# --- who shares the GPU -----------------------------------------------------------------------------

def test_busy_from_processes_at_the_start_names_them():
    s = situation_of(healthy_state(compute_processes=(LOAD,)),
                     healthy_state(compute_processes=(ComputeProcess(os.getpid(), 1), LOAD)))
    assert s.busy and s.shared and "pid 4242 python3 load.py --kind mixed (8192 MiB)" in s.who()
    assert s.processes == ({"pid": 4242, "used_bytes": 8 << 30, "name": "python3 load.py --kind mixed"},)


def test_busy_from_a_process_that_started_mid_check():
    s = situation_of(healthy_state(), healthy_state(compute_processes=(ComputeProcess(os.getpid(), 1), LOAD)))
    assert s.busy and "when it ended" in s.who() and "pid 4242" in s.who()


def test_busy_from_utilisation_alone():
    """A container may hide the other process from NVML's list; the utilisation still shows it."""
    s = situation_of(healthy_state(utilization_gpu_pct=97, utilization_memory_pct=60), healthy_state())
    assert s.busy and "97% busy (memory 60%)" in s.who()
    assert not situation_of(healthy_state(utilization_gpu_pct=BUSY_UTILIZATION_PCT - 1), healthy_state()).busy


def test_our_own_earlier_work_is_not_a_busy_gpu():
    me = ComputeProcess(os.getpid(), 1)
    s = situation_of(healthy_state(compute_processes=(me,), utilization_gpu_pct=99),
                     healthy_state(compute_processes=(me,)))
    assert not s.busy


def test_pids_of_another_namespace_are_not_named():
    """This process is not in NVML's end list under its own pid: the pids are the driver's, not ours,
    so /proc here would name the wrong processes; the count still makes the GPU busy."""
    other = ComputeProcess(77, 1 << 30, "bash")  # whatever pid 77 is here
    s = situation_of(healthy_state(), healthy_state(compute_processes=(ComputeProcess(5001, 1), other)))
    assert s.busy and "one of them is this process" in s.who() and "bash" not in s.who()
    assert not situation_of(healthy_state(), healthy_state(compute_processes=(ComputeProcess(5001, 1),))).busy


def test_idle_card_is_not_busy_and_nvml_missing_says_nothing():
    assert not situation_of(healthy_state(), healthy_state()).busy
    assert not situation_of(healthy_state().__class__(pci_bus_id="x", error="no NVML"), None).busy


# --- whole checks ---------------------------------------------------------------------------------

def test_the_issues_load_no_longer_calls_the_card_slow():
    b = SharedCardBackend(figures=LOADED, cvs={"hbm_read": 1.09}, start_procs=(LOAD,), util=98)
    r = _check(b)
    d = r.devices[0]
    assert r.verdict is Verdict.UNKNOWN and r.exit_code == 6 and r.busy
    for key in ("bf16", "fp32", "hbm_copy"):  # 14-20% below: FAIL alone, "busy" here
        m = d.metric(key)
        assert m.measured_verdict is Verdict.FAIL and m.verdict is Verdict.UNKNOWN and m.shared
        assert m.reason.startswith("busy: ") and "shared with another process" in m.reason
    assert d.metric("hbm_read").verdict is Verdict.UNKNOWN and d.metric("hbm_read").noisy
    assert d.reason.startswith("busy: the figures are shared") and "pid 4242 python3 load.py" in d.reason
    assert "more than" not in d.reason.split(";")[0]
    procs = next(s for s in d.state if s.key == "compute_processes")
    assert procs.verdict is Verdict.UNKNOWN and procs.value[0]["name"] == "python3 load.py --kind mixed"
    doc = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert doc["busy"] is True and doc["strict"] is False and doc["exit_code"] == 6
    dev = doc["devices"][0]
    assert dev["situation"]["busy"] and dev["situation"]["utilization_gpu_pct"] == 98
    assert dev["metrics"]["bf16"]["shared"] and dev["metrics"]["bf16"]["measured_verdict"] == "FAIL"
    assert not any(m["verdict"] == "PASS" and m["noisy"] for m in dev["metrics"].values())


def test_strict_judges_a_busy_card_as_measured():
    b = SharedCardBackend(figures=LOADED, start_procs=(LOAD,))
    r = _check(b, strict=True)
    d = r.devices[0]
    assert r.verdict is Verdict.FAIL and r.exit_code == 5 and r.strict
    assert d.metric("bf16").verdict is Verdict.FAIL and not d.metric("bf16").shared
    assert next(s for s in d.state if s.key == "compute_processes").verdict is Verdict.WARN
    assert d.situation.busy and d.situation.strict and not d.situation.shared


def test_wrong_data_fails_whatever_the_load():
    for strict in (False, True):
        b = SharedCardBackend(figures=LOADED, start_procs=(LOAD,), util=99)
        b.errors[(0, "bf16")] = core_error("VerificationError", "verification failed: 3 of 4 elements NaN")
        r = _check(b, strict=strict)
        m = r.devices[0].metric("bf16")
        assert m.verdict is Verdict.FAIL and "wrong data" in m.reason and r.exit_code == 5


def test_a_busy_card_that_is_fast_anyway_is_shared_not_slow():
    r = _check(SharedCardBackend(start_procs=(LOAD,)))
    d = r.devices[0]
    assert all(m.verdict is Verdict.PASS for m in d.metrics)
    assert r.verdict is Verdict.UNKNOWN and "every figure within tolerance even so" in d.reason


def test_a_real_fault_beside_a_load_still_shows():
    """An uncorrectable ECC error is the card's, whoever else is on it."""
    b = SharedCardBackend(figures=LOADED, start_procs=(LOAD,))
    b.end[0] = healthy_state(compute_processes=(ComputeProcess(os.getpid(), 1), LOAD), ecc_uncorrected_volatile=3)
    r = _check(b)
    assert r.verdict is Verdict.FAIL and "busy:" in r.devices[0].reason and "uncorrectable" in r.devices[0].reason


def test_an_idle_card_is_judged_as_before():
    b = SharedCardBackend(figures=LOADED)
    r = _check(b)
    assert r.verdict is Verdict.FAIL and not r.busy and "busy" not in r.reason
    assert _check(SharedCardBackend()).verdict is Verdict.PASS


# --- progress -------------------------------------------------------------------------------------

class RecordingProgress:
    def __init__(self):
        self.events = []

    def plan(self, total):
        self.events.append(("plan", total))

    def start(self, name):
        self.events.append(("start", name))

    def advance(self, name):
        self.events.append(("advance", name))


def test_progress_counts_every_metric_of_every_gpu():
    b = FakeCheckBackend(n=2)
    b.caps = {"bf16": {"mma.sync": {"supported": False, "reason": "needs cc 8.0"}}, "fp32": {"simt": {"supported": True}}}
    p = RecordingProgress()
    run_check("all", backend=b, progress=p)
    assert p.events[0] == ("plan", 2 * len(ORDER))
    assert sum(e[0] == "advance" for e in p.events) == 2 * len(ORDER)
    assert sum(e[0] == "start" for e in p.events) == 2 * (len(ORDER) - 1)  # bf16 skipped: nothing to start
    assert ("start", "GPU 1: HBM copy") in p.events


@pytest.fixture
def fake_native(monkeypatch):
    b = SharedCardBackend(figures=LOADED, start_procs=(LOAD,))
    from roofline_ext.check import native_backend as native

    monkeypatch.setattr(native, "NativeCheckBackend", lambda: b)
    return b


def test_cli_text_has_no_bare_progress_lines_and_says_busy(fake_native, capsys):
    from roofline_ext.cli.app import main

    assert main(["check"]) == 6
    cap = capsys.readouterr()
    assert "roofline-ext: GPU" not in cap.err and "roofline-ext:" not in cap.err
    assert "busy: 1 other process(es) computing when the check began: pid 4242 python3 load.py" in cap.out
    assert "check: UNKNOWN (exit 6): GPU 0: busy: the figures are shared" in cap.out
    assert "(busy)" in cap.out  # the softened rows say so in the verdict column


def test_cli_no_progress_prints_nothing_on_stderr_and_strict_fails(fake_native, capsys):
    from roofline_ext.cli.app import main

    assert main(["check", "--no-progress"]) == 6
    assert capsys.readouterr().err == ""
    assert main(["check", "--no-progress", "--strict"]) == 5
    assert capsys.readouterr().err == ""
    assert main(["check", "--json", "--strict"]) == 5
    doc = json.loads(capsys.readouterr().out)
    assert doc["strict"] is True and doc["busy"] is True


def test_the_progress_bar_is_the_packages(monkeypatch):
    from roofline_ext.report import check_table

    made = []

    class Bar:
        def __init__(self, total, enabled=True, label="analyze"):
            made.append((total, label))
            self.done = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            made.append(("closed", self.done))

        def start(self, name):
            pass

        def advance(self, name):
            self.done += 1

    monkeypatch.setattr(check_table, "Progress", Bar)
    with check_table.CheckProgressBar(enabled=True) as p:
        run_check("0", backend=FakeCheckBackend(), progress=p)
    assert made == [(len(ORDER), "check"), ("closed", len(ORDER))]
    made.clear()
    with check_table.CheckProgressBar(enabled=False) as p:
        run_check("0", backend=FakeCheckBackend(), progress=p)
    assert made == []


def test_docs_state_the_rules_and_the_exit_codes():
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "check.md").read_text().split())
    assert "--strict" in text and "--no-progress" in text and "noisy" in text and "busy" in text
    assert f"{BUSY_UTILIZATION_PCT}%" in text and "half the metric's tolerance" in text
    for code in ("| 0 |", "| 4 |", "| 5 |", "| 6 |", "| 3 |", "| 2 |"):
        assert code in text
    assert Situation().to_dict()["busy"] is False
