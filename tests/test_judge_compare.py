"""The strict judge's comparison, the verdict vocabulary and the fingerprint, in-process on the CPU.

Each rule has a case it must refuse and an honest case it must pass (docs/scoring.md)."""
from __future__ import annotations

import math
import sys
import textwrap
import threading

import pytest

torch = pytest.importorskip("torch")

from roofline_ext.judge.compare import compare_outputs  # noqa: E402
from roofline_ext.judge.guard import Guard  # noqa: E402
from roofline_ext.model.verdict import Judgement, Verdict, clip_score, verdict_text  # noqa: E402
from roofline_ext.runner.timed import candidate_record  # noqa: E402

TOL = 1e-4


@pytest.fixture
def soft():
    torch.manual_seed(0)
    return torch.softmax(torch.randn(64, 4096), dim=1)


def test_zeros_for_a_softmax_are_degenerate_though_kernelbench_passes_them():
    # KernelBench level1/23_Softmax's shape of problem: a wide row of uniform inputs, every output
    # (about 1/n) under the absolute tolerance.
    torch.manual_seed(0)
    soft = torch.softmax(torch.rand(4, 1 << 17), dim=1)
    assert float(soft.max()) < TOL
    zeros = torch.zeros_like(soft)
    strict = compare_outputs(soft, zeros, TOL)
    assert not strict.ok and strict.kind == "degenerate" and "degenerate" in strict.reason
    assert compare_outputs(soft, zeros, TOL, mode="kernelbench").ok  # KernelBench issue #165, by name


@pytest.mark.parametrize("make, kind", [
    (lambda r: torch.full_like(r, float(r.mean())), "degenerate"),
    (lambda r: r.mean() + 1e-12 * torch.randn_like(r), "degenerate"),
    (lambda r: r.mean() + r.std() * torch.randn_like(r), "degenerate"),
    (lambda r: r.half(), "dtype"),
    (lambda r: r[:, :-1], "shape"),
    (lambda r: torch.full_like(r, float("nan")), "nonfinite"),
    (lambda r: r * 1.01, "rel_l2"),
    (lambda r: r.double(), "dtype"),
])
def test_strict_refusals(soft, make, kind):
    c = compare_outputs(soft, make(soft), TOL)
    assert not c.ok and c.kind == kind, c


def test_a_tensor_subclass_is_refused(soft):
    class Sub(torch.Tensor):
        pass

    c = compare_outputs(soft, soft.clone().as_subclass(Sub), TOL)
    assert not c.ok and c.kind == "type"


@pytest.mark.parametrize("make", [
    lambda r: r.clone(),
    lambda r: r.t().contiguous().t(),                 # another layout, the same values
    lambda r: (r.double() * (1 + 1e-7)).float(),      # rounding
])
def test_honest_outputs_pass(soft, make):
    assert compare_outputs(soft, make(soft), TOL).ok


def test_relative_error_sees_what_the_absolute_tolerance_hides():
    ref = torch.rand(1000) * 1e-6 + 1e-6   # every value far under atol
    c = compare_outputs(ref, ref * 2, TOL)
    assert not c.ok and c.kind in ("rel_l2", "degenerate")
    assert compare_outputs(ref, ref * 2, TOL, mode="kernelbench").ok


def test_a_constant_reference_accepts_a_constant_output():
    ref = torch.ones(100)
    assert compare_outputs(ref, torch.ones(100), TOL).ok


def test_integer_outputs_must_be_equal_and_structures_must_match():
    a = torch.arange(10)
    assert compare_outputs(a, a.clone(), TOL).ok
    b = a.clone()
    b[3] += 1
    assert compare_outputs(a, b, TOL).kind == "values"
    assert compare_outputs((a, a), (a,), TOL).kind == "structure"
    assert compare_outputs([a, 2.0], [a, 2.0], TOL).ok
    assert not compare_outputs([a, 2.0], [a, 3.0], TOL).ok


def test_nan_where_the_reference_has_nan_is_equal():
    ref = torch.tensor([1.0, float("nan"), 3.0, 2.5])
    assert compare_outputs(ref, ref.clone(), TOL).ok
    assert compare_outputs(ref, torch.tensor([1.0, 0.0, 3.0, 2.5]), TOL).kind == "nonfinite"


# --- the verdict vocabulary ------------------------------------------------------------------------

def test_judgement_round_trips_and_says_itself():
    j = Judgement(Verdict.INVALID, "torch.allclose was replaced", "identity", {"changes": ["x"]}, seed=7, checks=1)
    assert Judgement.from_dict(j.to_dict()) == j
    assert verdict_text("invalid", "why", "identity") == "INVALID (identity): why"
    assert verdict_text("below_floor", "faster than the derived floor") == "BELOW FLOOR: faster than the derived floor"
    assert clip_score(1.0000001) == 1.0 and clip_score(-1e-9) == 0.0 and clip_score(None) is None


def score_candidate(rec, roofs, t_ref) -> dict:
    """The candidate put on the roofs as a timed result does (CandidateResult.scored), as its JSON."""
    return rec.scored(roofs, t_ref).to_dict()


def _record(verdict: str, t_new: float = 0.1):
    value = {"judgement": {"verdict": verdict, "reason": None, "defence": None}, "t_new_ms": t_new,
             "candidate_timing": {"median_ms": t_new}, "correctness": {"ok": verdict == "correct"}}
    return candidate_record("c.py", None, value)


def test_only_a_correct_candidate_is_timed_and_scored():
    roofs = {"datasheet": {"t_min_ms": 0.05}}
    for verdict in ("incorrect", "invalid"):
        rec = score_candidate(_record(verdict), roofs, 0.2)
        assert rec["t_new_ms"] is None and rec["roofs"]["datasheet"] is None and rec["verdict"] == verdict
    rec = score_candidate(_record("correct"), roofs, 0.2)
    assert rec["verdict"] == "correct" and 0 < rec["roofs"]["datasheet"]["score"] <= 1


def test_below_any_floor_is_its_own_verdict_and_never_scored():
    roofs = {"datasheet": {"t_min_ms": 0.05}, "derived": {"t_min_ms": 0.02}}
    rec = score_candidate(_record("correct", t_new=0.04), roofs, 0.2)
    assert rec["verdict"] == "below_floor" and rec["below_floor"] == ["datasheet"]
    assert all(r["score"] is None for r in rec["roofs"].values())


def test_a_failed_candidate_is_an_error():
    rec = candidate_record("c.py", None, kind="import", error="c.py: loading failed").to_dict()
    assert rec["verdict"] == "error" and rec["correct"] is None


# --- the fingerprint -------------------------------------------------------------------------------

def test_the_guard_sees_a_replaced_function_a_swapped_code_and_changed_weights(monkeypatch):
    model = torch.nn.Linear(4, 4)
    guard = Guard.take(model)
    assert guard.check("now") == []
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(torch.nn.Linear.forward, "__code__", (lambda self, x: x).__code__)
    with torch.no_grad():
        model.weight.add_(1.0)
    changes = " | ".join(guard.check("now"))
    assert "torch.allclose" in changes and "Linear.forward" in changes and "weight" in changes


def test_a_code_swap_undone_before_the_check_is_still_seen():
    # Swapped and restored between two checks, from another thread, by the descriptor: the audit
    # hook's log of function writes keeps it (guard._log_since), though the identities match again.
    from roofline_ext.judge import compare as cmp

    guard = Guard.take()
    original = cmp._one.__code__

    def swap_and_restore():
        type(cmp._one).__code__.__set__(cmp._one, (lambda i, a, b, tol: None).__code__)
        cmp._one.__code__ = original

    t = threading.Thread(target=swap_and_restore)
    t.start()
    t.join()
    assert cmp._one.__code__ is original
    changes = guard.check("now")
    assert changes == ["now: roofline_ext.judge.compare._one: its code was replaced"]
    assert Guard.take().check("later") == []  # a fingerprint taken after the write starts clean


def _watched_module(name, **functions):
    """A module the guard watches (its name is under roofline_ext), new to the process: a module
    seen before keeps the bindings it had at its first fingerprint."""
    import types

    # The process's base fingerprint (taken once, reused by every later take) is made first if no
    # test has made it yet, so that this test's module never joins it: under xdist a test of this
    # kind may be a worker's first take, and a later test would then compare the module's functions
    # (written by the earlier test, the module long gone) with the base.
    Guard.take()
    mod = types.ModuleType(f"roofline_ext._test_{name}")
    mod.__dict__.update(functions)
    sys.modules[mod.__name__] = mod
    return mod


def test_a_swapped_closure_cell_and_keyword_defaults_changed_in_place_are_seen():
    # Neither is an attribute write the audit hook sees: the cell's contents and the dict's items
    # change while the function's __closure__ and __kwdefaults__ stay the same objects.
    def wrap(fn):
        def wrapper(*a, **k):
            return fn(*a, **k)
        return wrapper

    def keyed(x, *, scale=1.0):
        return x * scale

    mod = _watched_module("closure", wrapped=wrap(abs), keyed=keyed)
    try:
        guard = Guard.take()
        assert guard.check("now") == []
        cell = mod.wrapped.__closure__[0]
        cell.cell_contents = lambda x: 0
        keyed.__kwdefaults__["scale"] = 0.0
        changes = " | ".join(guard.check("now"))
        assert "wrap.<locals>.wrapper: a callable in its closure was replaced" in changes
        assert "keyed: its keyword defaults were changed in place" in changes
        cell.cell_contents = abs
        keyed.__kwdefaults__["scale"] = 1.0
        assert guard.check("restored") == []
    finally:
        del sys.modules[mod.__name__]


def test_defaults_set_to_none_are_a_write_too():
    def f(x, y=2, *, z=3):
        return x + y + z

    mod = _watched_module("defaults", f=f)
    try:
        guard = Guard.take()
        f.__defaults__ = None  # CPython audits this as object.__delattr__
        f.__kwdefaults__ = None
        changes = guard.check("now")
        assert any("f: its defaults was replaced" in c for c in changes)
        assert any("f: its kwdefaults was replaced" in c for c in changes)
    finally:
        del sys.modules[mod.__name__]


def test_a_signal_handler_an_armed_timer_and_exception_hooks_are_seen(monkeypatch):
    import signal

    guard = Guard.take()
    was = signal.getsignal(signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, lambda *a: None)
    try:
        assert any("signal handlers changed" in c for c in guard.check("now"))
    finally:
        signal.signal(signal.SIGUSR1, was)
    assert guard.check("restored") == []
    signal.setitimer(signal.ITIMER_VIRTUAL, 30.0)
    try:
        assert any("interval timers armed changed" in c for c in guard.check("now"))
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0.0)
    monkeypatch.setattr(sys, "unraisablehook", lambda *a: None)
    assert any("sys.unraisablehook changed" in c for c in guard.check("now"))


def test_the_native_audit_log_is_out_of_the_candidates_reach():
    # The hook and its log are the core's (csrc/judge_audit.cpp): clearing what Python can reach
    # hides nothing.
    from roofline_ext.judge import guard as g

    guard = Guard.take()
    assert g._native is not None, "the native core has no audit hook: the judge fell back to Python's"

    def f(x):
        return x

    mod = _watched_module("native_log", f=f)
    try:
        guard = Guard.take()
        f.__code__ = (lambda x: 0).__code__
        g._LOG.clear()
        assert any("f: its code was replaced" in c for c in guard.check("now"))
    finally:
        del sys.modules[mod.__name__]


def test_without_the_native_hook_the_python_one_logs_the_same(tmp_path):
    # A core without judge_audit_install (or none at all): the module's own hook, same reasons.
    import subprocess

    script = tmp_path / "fallback.py"
    script.write_text(textwrap.dedent("""
        import gc, sys, types
        sys.modules["roofline_ext._core"] = None  # the import fails: no native core
        from roofline_ext.judge import guard as g
        mod = types.ModuleType("roofline_ext._test_fallback")
        def f(x):
            return x
        mod.f = f
        sys.modules[mod.__name__] = mod
        guard = g.Guard.take()
        assert g._native is None
        f.__code__ = (lambda x: 0).__code__
        with g.candidate_code():
            gc.get_objects()
        gc.get_objects()  # the judge's own call, on its own thread: not the candidate's
        print("|".join(guard.check("now")))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    reasons = out.stdout.strip().split("|")
    assert "now: __main__.f: its code was replaced" in reasons  # named where it was defined
    assert sum("called gc.get_objects" in r for r in reasons) == 1


def test_the_native_namespace_check_says_what_the_subset_test_says():
    from roofline_ext import _core
    from roofline_ext.judge import guard as g

    class Odd:
        def __eq__(self, other):
            raise RuntimeError("no comparing me")

    class K:
        def m(self):
            return 1

    f, odd = (lambda: 1), Odd()
    spaces = [({"a": f, "n": 1.5}, {"a": f, "n": 1.5}),             # unchanged
              ({"a": f, "n": 1.5 + 0.0}, {"a": f, "n": 1.5}),       # an equal number: no change
              ({"a": (lambda: 2)}, {"a": f}),                        # rebound
              ({}, {"a": f}),                                        # removed
              ({"a": odd}, {"a": Odd()}),                            # __eq__ raises: changed
              (vars(K), {"m": K.__dict__["m"]})]                     # a class's mappingproxy
    native = _core.judge_changed_spaces(spaces)
    python = [i for i, (live, saved) in enumerate(spaces)
              if not g.Fingerprint._subset_same(live, saved)]
    assert native == python == [2, 3, 4]


def test_a_name_a_class_gains_over_an_inherited_one_is_a_change():
    guard = Guard.take()
    torch.Tensor.abs = lambda self: torch.zeros_like(self)
    try:
        assert "now: torch.Tensor.abs was added over the one it inherits" in guard.check("now")
    finally:
        del torch.Tensor.abs
    torch.Tensor._roofline_test_new_name = 1  # a name no base has: not a change
    try:
        assert guard.check("now") == []
    finally:
        del torch.Tensor._roofline_test_new_name


def test_the_guard_sees_a_new_thread(monkeypatch):
    guard = Guard.take()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="sneaky", daemon=True)
    t.start()
    try:
        assert any("sneaky" in c for c in guard.check("now"))
    finally:
        stop.set()
        t.join()
    assert guard.check("now") == []


# --- the all-stream rule (the GPU half runs in tests/test_judge_gpu.py) ------------------------------

class _FakeGpu:
    """``fn()`` queues ``work_s`` of GPU work and returns at once; ``synchronize`` waits it out."""

    def __init__(self, work_s: float) -> None:
        self.work_s, self.pending = work_s, 0.0

    def fn(self) -> None:
        self.pending = self.work_s

    def synchronize(self, device=None) -> None:
        import time

        time.sleep(self.pending)
        self.pending = 0.0


def _streams(monkeypatch, gpu, work_s: float):
    import roofline_ext.judge.streams as streams

    fake = _FakeGpu(work_s)
    monkeypatch.setattr(torch.cuda, "synchronize", fake.synchronize)
    monkeypatch.setattr(streams, "_gpu_time_per_call", lambda fn, device: gpu)
    return streams, fake.fn


def test_unseen_gpu_work_is_invalid_when_the_profiler_confirms_it(monkeypatch):
    streams, fn = _streams(monkeypatch, (2.0, 2), 0.002)  # 2 ms of GPU work, 10 us of events
    check = streams.check_all_streams(fn, 0.01, 0)
    assert not check.ok and check.gpu_ms == 2.0 and "2 stream(s)" in check.reason


def test_wall_time_the_profiler_does_not_confirm_is_not_held_against_the_candidate(monkeypatch):
    streams, fn = _streams(monkeypatch, (0.009, 1), 0.002)  # a host hiccup, not GPU work
    assert streams.check_all_streams(fn, 0.01, 0).ok


def test_work_the_events_saw_is_never_questioned(monkeypatch):
    streams, fn = _streams(monkeypatch, None, 0.002)
    assert streams.check_all_streams(fn, 2.5, 0).ok  # the events saw 2.5 ms: nothing unseen


def test_without_a_profiler_only_a_large_wall_excess_is_invalid(monkeypatch):
    streams, fn = _streams(monkeypatch, None, 0.003)
    assert not streams.check_all_streams(fn, 0.01, 0).ok
    streams, fn = _streams(monkeypatch, None, 0.0)
    assert streams.check_all_streams(fn, 0.01, 0).ok


def test_calls_on_new_values_far_slower_than_the_rest_mean_replays():
    from roofline_ext.judge.protocol import replay_evidence

    timing = {"median_ms": 0.50, "p90_ms": 0.52}
    assert replay_evidence([2.7, 2.8], timing) is not None          # a cache that hits except on new values
    assert replay_evidence([0.51, 0.55], timing) is None            # an honest kernel: the same time
    assert replay_evidence([0.51, 3.0], timing) is None             # one slow outlier is not evidence
    assert replay_evidence([], timing) is None                      # no GPU events (the CPU judge)
    # the H200's content-keyed cache (tests/exploits replay_by_content): 3 checked calls of 30
    # trials are the top tenth, so the p90 is their own time; the median is not
    assert replay_evidence([0.34, 0.35], {"median_ms": 0.10, "p90_ms": 0.34}) is not None
    assert replay_evidence([0.36, 0.35], {"median_ms": 0.342, "p90_ms": 0.36}) is None  # the honest product
    # honest candidates of the suite on the H200, checked call against median (ms, 2026-12-02):
    # the idle GPU after the judge's synchronise shows their launch; none is evidence
    for checked, median in ((0.0648, 0.0116), (0.0853, 0.0304), (0.0598, 0.0140), (0.0900, 0.0423),
                            (0.0264, 0.0045), (0.0919, 0.0542)):
        assert replay_evidence([checked, checked], {"median_ms": median}) is None, (checked, median)


# --- the new-values pass (protocol step 4b), on a fake clock ---------------------------------------

class _Clock:
    """Events on a clock the candidate advances by the work it does (ms): the pass's arithmetic
    without a GPU."""

    def __init__(self):
        self.now = 0.0

    def event(self):
        clock = self

        class _Event:
            def record(self):
                self.at = clock.now

            def elapsed_time(self, end):
                return end.at - self.at

        return _Event()

    def synchronize(self):
        pass


def _judge_for(make_inputs):
    import torch

    from roofline_ext.judge.guard import Guard
    from roofline_ext.judge.protocol import Judge

    return Judge(Guard.take(torch.nn.Identity(), ()), torch.nn.Identity(), make_inputs,
                 lambda f, *a, **k: f(*a), 1e-4)


def _inputs(seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    return [torch.randn(64, 64, generator=g)]


def test_a_cache_keyed_on_the_inputs_contents_is_invalid_in_the_new_values_pass():
    clock = _Clock()
    cache = {}

    def replaying(x):  # 1 ms of work on values it has not seen, 0.1 ms (a spin) on values it has
        key = float(x[0, :8].sum())
        clock.now += 0.1 if key in cache else 1.0
        cache[key] = x.clone()
        return cache[key]

    judge = _judge_for(_inputs)
    args = _inputs(1)
    replaying(*args)  # the timed loop saw these values
    assert not judge.new_values(replaying, args, 0.1, lambda: None, events=clock)
    got = judge.judgement()
    assert got.verdict.value == "invalid" and got.defence == "timed-output"
    assert "new values" in got.reason and got.evidence["new_values"]["median_ms"] == 1.0
    assert got.evidence["new_values"]["matched_ratio"] == pytest.approx(10.0)  # replays on the timed values


def test_an_honest_candidate_takes_as_long_on_new_values():
    clock = _Clock()

    def honest(x):
        clock.now += 1.0
        return x * 2

    judge = _judge_for(_inputs)
    assert judge.new_values(honest, _inputs(1), 1.0, lambda: None, events=clock)
    assert judge.judgement().verdict.value == "correct"
    assert judge.evidence["new_values"]["trials"] == 8


def test_the_new_values_pass_writes_into_the_timed_tensors_and_skips_what_it_cannot_hold(monkeypatch):
    from roofline_ext.judge import protocol

    clock = _Clock()
    seen = []

    def recording(x):
        seen.append((x.data_ptr(), float(x[0, 0])))
        clock.now += 1.0
        return x

    judge = _judge_for(_inputs)
    args = _inputs(1)
    judge.new_values(recording, args, 1.0, lambda: None, events=clock)
    assert {ptr for ptr, _ in seen} == {args[0].data_ptr()}   # the same tensor every trial
    new, same = seen[1::2], seen[0::2]
    assert len({v for _, v in new}) == len(new) == 8            # new values on every other trial,
    assert {v for _, v in same} == {float(_inputs(1)[0][0, 0])}  # the timed values on the rest
    assert judge.evidence["new_values"]["matched_ratio"] == 1.0
    monkeypatch.setattr(protocol, "_NEW_VALUES_BYTES", 2 * 64 * 64 * 4)  # room for two sets only
    judge = _judge_for(_inputs)
    assert judge.new_values(recording, _inputs(1), 1.0, lambda: None, events=clock)
    assert "skipped" in judge.evidence["new_values"]


@pytest.mark.parametrize("scale,offset", [(1.0, 0.0), (1e-3, 5.0), (1e6, -2e6)])
def test_the_one_round_trip_sums_equal_the_exact_path(scale, offset):
    # compare._accumulate's fast path against the elementwise one on the same chunk: the same
    # float64 sums (to rounding), the same extremes, the same count of elements beyond tolerance.
    from roofline_ext.judge import compare as cmp

    g = torch.Generator().manual_seed(7)
    a = (torch.randn(100_003, generator=g, dtype=torch.float64) * scale + offset)
    b = a + torch.randn(100_003, generator=g, dtype=torch.float64) * 3e-4 * scale
    fast, exact = cmp._Sums(), cmp._Sums()
    cmp._accumulate(fast, a, b, 1e-4)
    cmp._accumulate_exact(exact, a, b, 1e-4)
    for k in ("sa", "sb", "saa", "sbb", "sab", "sdd"):
        assert getattr(fast, k) == pytest.approx(getattr(exact, k), rel=1e-9, abs=1e-12), k
    assert (fast.n, fast.bad, fast.max_abs, fast.b_min, fast.b_max) == \
        (exact.n, exact.bad, exact.max_abs, exact.b_min, exact.b_max)
    assert fast.bad > 0 or scale != 1.0  # the tolerance test ran where differences exceed it


def test_nan_or_inf_in_a_chunk_takes_the_exact_path():
    from roofline_ext.judge import compare as cmp

    a = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    b = a.clone()
    b[10] = math.inf
    s = cmp._Sums()
    cmp._accumulate(s, a, b, 1e-4)
    assert s.nonfinite and "NaN/Inf where the reference is finite" in s.nonfinite


# --- the timed loop (protocol step 4) without a GPU ---------------------------------------------------

def _loop(fn, before, trials: int = 12, warmup: int = 2):
    """A timing function as time_callable calls it: ``before()`` ahead of every call."""
    for _ in range(warmup + trials):
        before()
        fn()
    return {"median_ms": 1.0, "p90_ms": 1.0, "trials": trials}


def test_a_cache_keyed_on_the_version_counter_computes_on_every_timed_trial():
    # Nothing writes the inputs between timed trials, so a cache on (address, version) would
    # replay there and compute on every checked trial (each of which writes or replaces the
    # inputs): right on every check, free on every timed call. The loop bumps every trial's
    # versions, so the cache never hits.
    computed, cache = [], {}

    def version_keyed(x):
        key = (x.data_ptr(), x._version)
        if key not in cache:
            computed.append(key)
            cache.clear()
            cache[key] = torch.softmax(x, dim=1)
        return cache[key]

    from roofline_ext.judge.guard import Guard
    from roofline_ext.judge.protocol import Judge

    class Softmax(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1)

    ref = Softmax()
    judge = Judge(Guard.take(ref, ()), ref, _inputs, lambda f, what, phase, *a: f(*a), 1e-4)
    args = _inputs(1)
    timing = judge.timed(version_keyed, args, lambda fn, before: _loop(fn, before), trials=12, warmup=2,
                         flush=lambda: None)
    assert timing is not None and judge.judgement().verdict.value == "correct"
    assert len(computed) == 14  # every call of the loop, warm-up included, computed


def test_no_garbage_collection_between_a_check_and_its_comparison(monkeypatch):
    # A collection runs finalizers and gc callbacks: candidate code that could patch what the
    # comparison uses after the fingerprint check looked. The comparison must see the collector off.
    import gc

    from roofline_ext.judge import protocol

    seen = []
    real = protocol.compare_outputs

    def watching(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(protocol, "compare_outputs", watching)
    from roofline_ext.judge.guard import Guard
    from roofline_ext.judge.protocol import Judge

    ref = torch.nn.Identity()
    judge = Judge(Guard.take(ref, ()), ref, _inputs, lambda f, what, phase, *a: f(*a), 1e-4)
    assert gc.isenabled()
    # The judgement in the message: this failed once under xdist (session 14, not reproduced), and
    # which defence fired, with its evidence, is what tells a leftover of another test from a bug.
    assert judge.correctness(torch.nn.Identity(), _inputs(1), 2), judge.verdict
    assert seen == [False, False] and gc.isenabled()  # off for each comparison, on again after


def test_a_harness_walk_from_a_thread_that_ended_is_still_seen():
    # A thread the candidate starts runs outside candidate_code() (which marks the judge's own
    # thread); if it walks the collector and ends before the check, the thread check misses it,
    # so the audit hook logs audited calls on every thread but the judge's.
    import gc

    guard = Guard.take()
    t = threading.Thread(target=lambda: gc.get_objects(), name="walker")
    t.start()
    t.join()
    assert any("gc.get_objects" in c for c in guard.check("now"))


def test_a_replay_gap_is_named_by_the_all_stream_measure_when_that_sees_the_missing_work(monkeypatch):
    # Checked calls far slower than the timed ones: a replay, or work the events do not see (another
    # stream), which makes the timed calls look fast as well. Seen on an H100 (2026-12-06): 1 ms of
    # side-stream sleep read 0.18 ms checked, 0.064 ms timed, and was called a replay. The
    # all-stream measure speaks first; the replay verdict stands only where it finds nothing.
    from roofline_ext.judge.guard import Guard
    from roofline_ext.judge.protocol import Judge

    def judge_with(all_streams_ok):
        ref = torch.nn.Identity()
        judge = Judge(Guard.take(ref, ()), ref, _inputs, lambda f, what, phase, *a: f(*a), 1e-4)
        asked = []

        def all_streams(candidate, args, event_ms, device):
            asked.append((event_ms, device))
            if not all_streams_ok:
                judge._invalid("all-streams", "the GPU works 1.06 ms per call on 2 stream(s)")
            return all_streams_ok

        monkeypatch.setattr(judge, "all_streams", all_streams)
        return judge, asked

    timing = {"median_ms": 0.064, "p90_ms": 0.07}
    unseen, asked = judge_with(all_streams_ok=False)
    unseen._replay_or_unseen(None, [], "replayed", [0.18, 0.19], timing, device=0)
    j = unseen.judgement()
    assert (j.verdict.value, j.defence, asked) == ("invalid", "all-streams", [(0.064, 0)])
    assert j.evidence["replay_suspect"]["checked_ms"] == [0.18, 0.19]

    replay, asked = judge_with(all_streams_ok=True)
    replay._replay_or_unseen(None, [], "replayed", [0.18, 0.19], timing, device=0)
    j = replay.judgement()
    assert (j.verdict.value, j.defence, j.reason, len(asked)) == ("invalid", "timed-output", "replayed", 1)

    cpu, asked = judge_with(all_streams_ok=False)  # no CUDA device: nothing to measure streams with
    cpu._replay_or_unseen(None, [], "replayed", [0.18, 0.19], timing, device=None)
    assert (cpu.judgement().defence, asked) == ("timed-output", [])
