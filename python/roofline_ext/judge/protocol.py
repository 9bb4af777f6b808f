"""How one candidate is judged: correctness sets, checks inside the timed loop, and the defences.

The order is the defence (docs/scoring.md, "How a candidate is judged"):

1. :meth:`Judge.before_import` fingerprints the judge's surroundings (:mod:`.guard`) *before* the
   candidate is imported, and draws the run's seed.
2. For each correctness set the candidate runs first, on inputs of its own, and its outputs are
   copied to memory only the judge holds; only then does the reference run, on a copy of the
   inputs the judge made before the candidate saw them. No reference output of those inputs
   exists while candidate code runs, so there is nothing to read from the harness; the copies are
   digested when made and checked before use, so a candidate cannot rewrite them either.
3. Before every comparison the fingerprint is checked: a replaced function, a hook, a thread or
   process, or a walk of the garbage collector makes the result *invalid*.
4. Inside the timed loop, at two trials drawn from the OS's entropy (not from the seed), the
   candidate gets fresh inputs: once a new set at fresh addresses, once new values written into
   the timed tensors in place (same addresses). Their outputs are copied outside the events and
   compared after the timing; a wrong one means the timed calls are not the checked calls.
   Then a short pass times the candidate on new values in the same tensors, a new set before
   every trial (:meth:`Judge.new_values`): a candidate that replays what it computed for values it
   saw before computes on every trial there, and its median gives it away.
5. The event-timed median is held against an all-stream measure (:mod:`.streams`).

The judge does not import the candidate, build models or make inputs itself: the caller passes
those steps in, so one protocol serves the GPU timing worker and the CPU-only correctness check.
"""
from __future__ import annotations

import gc
import math
import secrets
import statistics
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import torch
from torch.autograd.graph import increment_version

from ..measure.timing import event_times_ms
from ..model.verdict import Judgement, Verdict
from .clock import PhaseClock
from .compare import Comparison, compare_outputs, flatten
from .guard import Guard, candidate_code, digest
from .streams import check_all_streams

TIMED_CHECKS = 3
TIMED_KINDS = ("fresh", "in-place", "in-place")
# A call on fresh values in place that takes this much longer than the timed calls' median (and
# 80 us more) means the other timed calls did less work: they replayed something computed before.
# The median, not the p90: the checked calls are timed trials too, and with 30 trials (or the 10 an
# adaptive run may stop at) their 3 are the top tenth, so a p90 is their own time (seen on the H200,
# 2026-12-02: a content-keyed cache at 0.10 ms median against 0.34 ms for the real product passed).
# The 80 us: a checked call follows the judge's synchronise, so the GPU is idle when it starts and
# its launch is not hidden behind earlier trials; honest candidates of the suite read up to 47 us
# over 1.5x their median there on the H200 (before the events below were made ahead), and the
# margin is held at about 1.7x that.
_REPLAY_FACTOR, _REPLAY_MS = 1.5, 0.080


# The new-values pass (step 4b): this many trials, each on values the candidate has not seen, in
# the tensors it was timed on. Its median more than 1.5x the timed median plus 5 us means the timed
# calls did less work than a call on new values needs. The sets are made before the pass (so no
# trial waits on the host), within this much memory.
NEW_VALUE_TRIALS = 8
_NEW_VALUES_FACTOR, _NEW_VALUES_MS = 1.5, 0.005
_NEW_VALUES_BYTES = 2 << 30
# GPU cycles of a spin kernel queued after each trial's flush, ahead of its start event (about
# 130 us at the H200's 1.98 GHz): the host then launches the call while the GPU still spins, so
# the events hold the call's GPU time and not the host's delay in launching it. Without it, an
# honest 5 us in-place ReLU read 16 us timed and 42 us on new values on a busy host (H200,
# 2026-12-02): host latency, not work, and 2.6x over a rule of 1.5x + 5 us. The timed loop keeps
# the host's part (it is the candidate's cost), so an honest call reads no slower here than there.
_LAUNCH_AHEAD_CYCLES = 1 << 18


def draw_seed() -> int:
    """A per-run seed for the judge's input sets, from the OS's entropy (reported, so replayable)."""
    return secrets.randbelow(2**31 - 1) + 1


@dataclass
class _Captured:
    kind: str          # "fresh" or "in-place"
    trial: int
    seed: int
    pristine: list[Any]
    digests: list[Any]
    frozen: list[Any] | None = None
    refusal: Comparison | None = None
    events: tuple[Any, Any] | None = None  # around the checked call (in place, on a GPU): its own time


@dataclass
class Judge:
    """One candidate's judge. Make it with :meth:`before_import`; feed it the candidate's calls."""

    guard: Guard
    reference: Any
    make_inputs: Callable[[int], list[Any]]
    call: Callable[..., Any]          # task.call: user code, its failures as one-line TaskErrors
    tolerance: float
    mode: str = "strict"
    seed: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    checks: int = 0
    timed_checks: int = 0
    verdict: Judgement | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    clock: PhaseClock = field(default_factory=PhaseClock)  # where the judge's time goes (.clock)

    @classmethod
    def before_import(cls, reference: Any, make_inputs: Callable[[int], list[Any]], call: Callable[..., Any],
                      tolerance: float, *, mode: str = "strict", seed: int | None = None,
                      device: torch.device | None = None, namespaces: Iterable[tuple[str, Any]] = (),
                      clock: PhaseClock | None = None) -> "Judge":
        """Fingerprint everything the judge relies on, before any candidate code is imported."""
        clock = clock or PhaseClock()
        with clock("guard"):
            guard = Guard.take(reference, namespaces)
        return cls(guard, reference, make_inputs, call, tolerance, mode, seed or draw_seed(),
                   device or torch.device("cpu"), clock=clock)

    # --- the verdict -------------------------------------------------------------------------------

    @property
    def decided(self) -> bool:
        return self.verdict is not None

    def _invalid(self, defence: str, reason: str, **evidence: Any) -> None:
        if self.verdict is None:
            self.verdict = self._judgement(Verdict.INVALID, reason, defence, evidence)

    def _incorrect(self, reason: str, comparison: Comparison) -> None:
        if self.verdict is None:
            self.verdict = self._judgement(Verdict.INCORRECT, reason, None, {"comparison": comparison.to_dict()})

    def _judgement(self, verdict: Verdict, reason: str | None, defence: str | None,
                   evidence: dict[str, Any]) -> Judgement:
        return Judgement(verdict, reason, defence, {**self.evidence, **evidence}, self.mode, self.seed,
                         self.checks, self.timed_checks)

    def judgement(self) -> Judgement:
        """The verdict: the first defence or comparison that refused, else ``correct``."""
        return self.verdict or self._judgement(Verdict.CORRECT, None, None, {})

    def _guarded(self, where: str) -> bool:
        with self.clock("guard"):
            changes = self.guard.check(where)
        if changes:
            self._invalid(_defence_of(changes[0]), changes[0], changes=changes[:20])
        return not changes

    # --- correctness -------------------------------------------------------------------------------

    def correctness(self, candidate: Any, first_inputs: list[Any] | None, sets: int) -> bool:
        """Run ``sets`` input sets (the first the timed one when given, the rest from the run's seed);
        True when every one matched and no defence fired."""
        for i in range(max(1, sets)):
            if i == 0 and first_inputs is not None:
                inputs = first_inputs
            else:
                with self.clock("inputs"):
                    inputs = self.make_inputs(self.seed + i)
            if not self._one_set(candidate, inputs, f"input set {i + 1} of {sets}"):
                return False
        return True

    def _one_set(self, candidate: Any, inputs: list[Any], label: str) -> bool:
        with self.clock("copies"):
            pristine = _clone(inputs)
            digests = _digests(pristine)
        with self.clock("candidate"), torch.no_grad(), candidate_code():
            out = self.call(candidate, "ModelNew.forward", "forward", *inputs)
            self._sync()
        with self.clock("copies"):
            frozen, refusal = self._freeze(out)
            aliased = _aliases(out, inputs) if refusal is None else []
            del out
        return self._judge_outputs(frozen, refusal, inputs, pristine, digests, aliased, label)

    def _judge_outputs(self, frozen: list[Any] | None, refusal: Comparison | None, inputs: list[Any] | None,
                       pristine: list[Any], digests: list[Any], aliased: list[tuple[int, int]], label: str,
                       defence_if_wrong: str | None = None) -> bool:
        # No garbage collection from the fingerprint check to the end of the comparison: a
        # collection runs finalizers and gc callbacks, code of the candidate's that could change
        # what the comparison uses after the check looked, and undo it before the next one.
        with _collector_off():
            return self._checked_comparison(frozen, refusal, inputs, pristine, digests, aliased, label,
                                            defence_if_wrong)

    def _checked_comparison(self, frozen: list[Any] | None, refusal: Comparison | None, inputs: list[Any] | None,
                            pristine: list[Any], digests: list[Any], aliased: list[tuple[int, int]], label: str,
                            defence_if_wrong: str | None) -> bool:
        self.checks += defence_if_wrong is None
        # A timed check's reference call and comparison are the judge's own cost (a harness without
        # the judge checks the correctness sets only).
        checked_in_loop = defence_if_wrong is not None
        if not self._guarded(f"before comparing {label}"):
            return False
        with self.clock("timed_checks" if checked_in_loop else "copies"):
            changed = _digests(pristine) != digests
        if changed:
            self._invalid("harness", f"{label}: the judge's own copy of the inputs was changed while the "
                                     "candidate ran")
            return False
        if refusal is not None:
            return self._refused(label, refusal, defence_if_wrong)
        with self.clock("timed_checks" if checked_in_loop else "reference"), torch.no_grad():
            ref = self.call(self.reference, "Model.forward", "forward", *pristine)
            self._sync()
        for o, j in aliased:
            if inputs is not None and _digest_one(inputs[j]) == digests[j] and not _aliases_any(ref, pristine[j]):
                self._invalid("alias", f"{label}: output {o} shares memory with input {j}, which the call did not "
                                       "write (and the reference's output does not alias its input)")
                return False
        assert frozen is not None
        with self.clock("timed_checks" if checked_in_loop else "compare"):
            comparison = compare_outputs(ref, frozen, self.tolerance, self.mode)
        with self.clock("timed_checks" if checked_in_loop else "copies"):
            _scrub(ref, keep=[*pristine, *_weights(self.reference)])
            del ref
        if not comparison.ok:
            return self._refused(label, comparison, defence_if_wrong)
        self.evidence["max_abs_diff"] = max(self.evidence.get("max_abs_diff", 0.0), comparison.max_abs_diff)
        self.evidence["rel_l2"] = max(self.evidence.get("rel_l2", 0.0), comparison.rel_l2)
        return True

    def _refused(self, label: str, comparison: Comparison, defence: str | None) -> bool:
        if defence is None:
            self._incorrect(f"{label}: {comparison.reason}", comparison)
        else:
            self._invalid(defence, f"{label}: {comparison.reason} (the checked calls were right: the timed "
                                   "calls are not the calls that were checked)", comparison=comparison.to_dict())
        return False

    def _freeze(self, out: Any) -> tuple[list[Any] | None, Comparison | None]:
        """The outputs' leaves, copied to memory only the judge holds (None and the refusal when a
        leaf cannot be judged strictly: its type is not exactly a tensor)."""
        leaves = flatten(out)
        frozen = []
        for i, t in enumerate(leaves):
            if isinstance(t, torch.Tensor):
                if type(t) is not torch.Tensor and self.mode == "strict":
                    name = f"{type(t).__module__}.{type(t).__qualname__}"
                    return None, Comparison(False, self.tolerance, f"output {i} is a {name}, not a torch.Tensor",
                                            "type")
                frozen.append(t.detach().as_subclass(torch.Tensor).clone())
            else:
                frozen.append(t)
        return frozen, None

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # --- the timed loop ----------------------------------------------------------------------------

    def timed(self, candidate: Any, args: list[Any], time_fn: Callable[..., dict[str, Any]], *, trials: int,
              warmup: int, flush: Callable[[], None], device: int | None = None) -> dict[str, Any] | None:
        """Time ``candidate(*args)`` with ``time_fn(fn, before=...)``, two trials of it checked on fresh
        inputs; None when a defence fired before or during the timing. ``device`` (a CUDA index):
        checked calls far slower than the timed ones are first held to the all-stream measure
        (:meth:`_replay_or_unseen`), so the verdict names the cause the evidence shows."""
        if not self._guarded("before timing"):
            return None
        picks = secrets.SystemRandom().sample(range(warmup, warmup + trials), min(TIMED_CHECKS, trials))
        plan = dict(zip(picks, TIMED_KINDS))
        state: dict[str, Any] = {"n": 0, "inputs": args, "pending": None}
        captured: list[_Captured] = []

        def before() -> None:
            # The judge's own work first, the flush last: no trial starts with inputs the judge
            # wrote still in L2.
            if (state["pending"] is not None and "out" in state) or state["n"] in plan:
                # Its synchronise waits out the trials queued so far: the loop's GPU time, charged
                # to the loop (the clock is wall time), not to the check that follows.
                self._sync()
            with self.clock("timed_checks"):
                self._capture_pending(state)
                kind = plan.get(state["n"])
                if kind is not None:
                    cap = self._prepare(kind, state["n"], args, 1000 + len(captured), state)
                    captured.append(cap)
                    state["pending"] = cap
                # Every trial's inputs look written: a cache keyed on a tensor's version counter
                # (which any in-place write bumps, and which costs nothing to read) would replay on
                # every timed trial, where nothing writes the inputs, yet compute on every checked
                # one. Bumped, it misses on all of them: it computes what it is timed on.
                _bump_versions(state["inputs"])
            flush()

        def fn() -> Any:
            # One call site for every trial, checked or not: a candidate that reads its caller's
            # line number (sys._getframe(1).f_lineno) cannot tell the checked trials apart.
            state["n"] += 1
            cap = state["pending"]
            events = cap.events if cap is not None else None
            if events is not None:
                events[0].record()
            out = candidate(*state["inputs"])
            if events is not None:
                events[1].record()
            if cap is not None:
                state["out"], state["inputs"] = out, args
            return out

        with self.clock("timed_loop"), torch.no_grad(), candidate_code():
            timing = time_fn(fn, before)
        with self.clock("timed_checks"):
            self._capture_pending(state)
        if not self._guarded("after timing"):
            return None
        for cap in captured:
            self.timed_checks += 1
            label = f"the timed call of trial {cap.trial - warmup + 1} ({cap.kind} inputs, seed {cap.seed})"
            if not self._judge_outputs(cap.frozen, cap.refusal, None, cap.pristine, cap.digests, [], label,
                                       defence_if_wrong="timed-output"):
                return None
        checked = [c.events[0].elapsed_time(c.events[1]) for c in captured if c.events is not None]
        replay = replay_evidence(checked, timing)
        if replay is not None:
            self._replay_or_unseen(candidate, args, replay, checked, timing, device)
            return None
        return timing

    def _replay_or_unseen(self, candidate: Any, args: list[Any], replay: str, checked: list[float],
                          timing: dict[str, Any], device: int | None) -> None:
        """Checked calls far slower than the timed calls' median: invalid either way, but for which
        reason? Work the timing events do not see (another stream) makes the timed calls look fast
        just as a replay does, and a checked call, which starts on an idle GPU, also times the host's
        launches that the loop hides behind the flush. Seen on an H100 (2026-12-06): a candidate
        sleeping 1 ms on a side stream read 0.18 ms checked against 0.064 ms timed and was called a
        replay. The all-stream measure sees such work directly, so it speaks first; the replay
        verdict stands where it finds every call's work inside the events."""
        suspect = {"reason": replay, "checked_ms": checked, "median_ms": timing.get("median_ms"),
                   "p90_ms": timing.get("p90_ms")}
        self.evidence["replay_suspect"] = suspect  # in the verdict's evidence whichever defence names it
        if device is not None and not self.all_streams(candidate, args, timing["median_ms"], device):
            return
        self._invalid("timed-output", replay, checked_ms=checked, p90_ms=timing.get("p90_ms"),
                      median_ms=timing.get("median_ms"))

    def _prepare(self, kind: str, trial: int, args: list[Any], k: int, state: dict[str, Any]) -> _Captured:
        seed = self.seed + k
        fresh = self.make_inputs(seed)
        if kind == "in-place":
            # Same tensors, new values: a cache keyed on the inputs' addresses is now stale.
            for a, f in zip(args, fresh):
                if isinstance(a, torch.Tensor) and isinstance(f, torch.Tensor) and a.shape == f.shape:
                    a.copy_(f)
            fresh = args
        else:
            state["inputs"] = fresh
        pristine = _clone(fresh)
        events = None
        if kind == "in-place" and self.device.type == "cuda":
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            # torch creates a CUDA event at its first record(). Made inside the checked call, the
            # stop event's creation delays its timestamp past a short kernel's end: honest calls
            # of 5-30 us read 20-50 us slower there (H200, 2026-12-02). Recorded once here, before
            # the sync, each is a real event by then.
            for e in events:
                e.record()
        self._sync()
        return _Captured(kind, trial, seed, pristine, _digests(pristine), events=events)

    def _capture_pending(self, state: dict[str, Any]) -> None:
        cap = state.get("pending")
        if cap is None or "out" not in state:
            return
        self._sync()  # whatever the candidate left running on any stream finishes before the copy
        cap.frozen, cap.refusal = self._freeze(state.pop("out"))
        state["pending"] = None

    # --- the timed calls against calls on new values --------------------------------------------------

    def new_values(self, candidate: Any, args: list[Any], timed_median_ms: float, flush: Callable[[], None],
                   *, events: Any = None) -> bool:
        """Step 4b (:meth:`_new_values`), its time charged to ``new_values``."""
        with self.clock("new_values"):
            return self._new_values(candidate, args, timed_median_ms, flush, events=events)

    def _new_values(self, candidate: Any, args: list[Any], timed_median_ms: float, flush: Callable[[], None],
                    *, events: Any = None) -> bool:
        """Time the candidate on new values in the timed tensors (the same addresses, the same
        sizes), a new set before every trial, measured as the timed loop is: the values written
        and the L2 flushed before each trial, outside the events, with no synchronise between
        trials; on a GPU a spin kernel follows the flush, so the host's launch delay is not timed. An honest kernel takes as long as in the timed loop; a candidate that replays what
        it computed for values it saw before (a cache keyed on the inputs' contents, however it is
        padded) computes on every trial here. False (and invalid) when the pass is far slower.

        The trials alternate with trials on the timed values written back the same way (the same
        copy, the same flush): recorded as ``same_values_median_ms`` and ``matched_ratio``, the
        two sides of one measurement with nothing else different. The decision is still the new
        values' median against the timed one; the matched ratio is the evidence a tighter rule
        for calls of tens of microseconds needs (docs/scoring.md, "What the time rules cannot
        see"), gathered until the GPU runs have shown its honest spread."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        size = sum(t.numel() * t.element_size() for t in tensors)
        budget = _NEW_VALUES_BYTES
        if self.device.type == "cuda":
            budget = min(budget, torch.cuda.mem_get_info(self.device)[0] // 4)
        k = min(NEW_VALUE_TRIALS, budget // size - 1) if size else 0  # k new sets and the timed values
        if k < 3:  # no tensor input to change, or no room for three sets: recorded, not a verdict
            why = "no tensor inputs" if not size else f"{k} set(s) of {size / 2**20:.0f} MiB fit in {budget / 2**20:.0f} MiB"
            self.evidence["new_values"] = {"skipped": why}
            return True
        timed_values = _clone(args)
        sets = [self.make_inputs(self.seed + 2000 + i) for i in range(k)]
        self._sync()
        step = {"i": 0}
        ahead = self.device.type == "cuda"

        def before() -> None:  # trial 2j: the timed values again; trial 2j+1: new set j
            i = step["i"]
            fresh = timed_values if i % 2 == 0 else sets[(i // 2) % k]
            step["i"] += 1
            for a, f in zip(args, fresh):
                if isinstance(a, torch.Tensor) and isinstance(f, torch.Tensor) and a.shape == f.shape:
                    a.copy_(f)
            flush()
            if ahead:
                torch.cuda._sleep(_LAUNCH_AHEAD_CYCLES)

        with torch.no_grad(), candidate_code():
            ms = event_times_ms(lambda: candidate(*args), 2 * k, 0, before, events=events)
        sets.clear()  # the sets are freed before the next step
        timed_values.clear()
        median, same = statistics.median(ms[1::2]), statistics.median(ms[0::2])
        limit = _NEW_VALUES_FACTOR * timed_median_ms + _NEW_VALUES_MS
        record = {"trials": k, "median_ms": median, "timed_median_ms": timed_median_ms, "limit_ms": limit,
                  "same_values_median_ms": same, "matched_ratio": median / same if same > 0 else None,
                  "launch_ahead_cycles": _LAUNCH_AHEAD_CYCLES if ahead else 0}
        self.evidence["new_values"] = record
        if median > limit:
            self._invalid("timed-output", f"the candidate took {median:.4g} ms per call on new values in the same "
                                          f"tensors, {timed_median_ms:.4g} ms in the timed loop: the timed calls "
                                          "reuse work done before instead of computing", new_values=record)
            return False
        return self._guarded("after the new-values pass")

    # --- after the verdict: measuring more of a correct candidate ------------------------------------

    def guarded_call(self, what: str, thunk: Callable[[], Any]) -> Any:
        """``thunk()`` (which calls the candidate: its energy window, say) as candidate code, then a
        fingerprint check: a candidate that patched what measured it is invalid, and the value is
        None. A measurement taken after the verdict is held to the same guard as the timing."""
        with self.clock("measured"), torch.no_grad(), candidate_code():
            value = thunk()
        return value if self._guarded(f"after {what}") else None

    # --- all the work ------------------------------------------------------------------------------

    def all_streams(self, candidate: Any, args: list[Any], event_ms: float, device: int) -> bool:
        """The event time against the all-stream measure; False (and invalid) when work was unseen."""
        def call() -> Any:
            with candidate_code():  # the candidate's calls only: the profiler's own machinery is not audited
                return candidate(*args)

        with self.clock("all_streams"), torch.no_grad():
            check = check_all_streams(call, event_ms, device)
        self.evidence["all_streams"] = check.to_dict()
        if not check.ok:
            self._invalid("all-streams", check.reason or "work the timing events did not see",
                          all_streams=check.to_dict())
            return False
        return self._guarded("after the all-stream check")


def replay_evidence(checked_ms: list[float], timing: dict[str, Any]) -> str | None:
    """Why the timed calls look like replays, or None: the calls on new values written in place
    (same tensors, same addresses: an honest kernel takes as long as on any other trial) took far
    longer than the timed calls' median. The fastest such call is used, so one slow outlier is not
    enough."""
    median = timing.get("median_ms")
    if not checked_ms or not median:
        return None
    fastest = min(checked_ms)
    if fastest > _REPLAY_FACTOR * median + _REPLAY_MS:
        return (f"the timed calls on new values took {fastest:.4g} ms, the other timed calls {median:.4g} ms "
                f"(median): the timed calls reuse work done before instead of computing")
    return None


def _defence_of(change: str) -> str:
    if "thread(s) started" in change or "child process" in change:
        return "thread"
    if ": called " in change:
        return "inspection"
    if "the reference model's" in change or "torch flag" in change:
        return "harness"
    return "identity"


# --- tensors the judge holds ------------------------------------------------------------------------

@contextmanager
def _collector_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _bump_versions(inputs: list[Any]) -> None:
    for x in inputs:
        if isinstance(x, torch.Tensor):
            increment_version(x)


def _weights(model: Any) -> list[Any]:
    if not isinstance(model, torch.nn.Module):
        return []
    return [*model.parameters(), *model.buffers()]


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _digest_one(x: Any) -> Any:
    return digest(x) if isinstance(x, torch.Tensor) else repr(x)[:200]


def _digests(inputs: list[Any]) -> list[Any]:
    return [_digest_one(x) for x in inputs]


def _span(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def _aliases(out: Any, inputs: list[Any]) -> list[tuple[int, int]]:
    """(output leaf, input) pairs that share storage."""
    leaves = flatten(out)
    return [(o, j) for o, t in enumerate(leaves) if isinstance(t, torch.Tensor)
            for j, x in enumerate(inputs) if isinstance(x, torch.Tensor) and _overlap(t, x)]


def _aliases_any(out: Any, x: Any) -> bool:
    return isinstance(x, torch.Tensor) and any(isinstance(t, torch.Tensor) and _overlap(t, x) for t in flatten(out))


def _scrub(out: Any, keep: list[Any]) -> None:
    """Overwrite the reference's outputs before they are freed, so that memory a later allocation
    reuses (``torch.empty`` in a candidate) never holds a right answer."""
    for t in flatten(out):
        if not isinstance(t, torch.Tensor) or any(isinstance(k, torch.Tensor) and _overlap(t, k) for k in keep):
            continue
        try:
            if t.is_floating_point() or t.is_complex():
                t.detach().fill_(math.nan)
            else:
                t.detach().zero_()
        except RuntimeError:  # an output that cannot be written (an expanded view): leave it
            continue
