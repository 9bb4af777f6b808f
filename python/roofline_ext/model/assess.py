"""One task's result, assembled in one place from typed inputs: :func:`assess`.

What used to travel as a dict that four modules opened and changed (the analysis's keys, the
timing merged in, the candidates scored, the kernel profile and the energy floor attached) is made
here once, from the counts, the run's :class:`~roofline_ext.model.roofs.RoofSet`, the reference's
timing, the judged candidates and the reference's profile. The result is frozen: :class:`TaskResult`
for a counted task, :class:`ErrorResult` for a task that failed, :class:`CandidateResult` for each
candidate (the judge's verdict and its evidence carried as the worker gave them).
``to_dict()`` gives the JSON keys and values the outputs have always had, in their order; what
was once a private key of that dict (the typed floors, the roofline dict ``describe`` reads, why
there is no floor, the roof set) is an attribute here. Only the report's writer makes JSON of it.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import RooflineError, UserError
from ..measure.energy import EnergyMeasurement
from ..measure.timing_record import TimingReply, TimingReplyError, TimingStats, plain
from ..tasks.counting import Counts
from ..tasks.loading import TaskError
from .energy import energy_floor_for, task_energy
from .floors import roofline_result
from .gpu import GpuChoice
from .ops import attach_ops
from .profiled import place_profile
from .results import RooflineResult
from .roofs import RoofSet
from .scoring import candidate_roofs, reference_flags
from .verdict import Verdict, clip_score

__all__ = ["assess", "assess_failed", "place", "Placement", "TaskResult", "CandidateResult", "ErrorResult",
           "RunInfo"]

_NO_ROOFS: dict[str, Any] = {"datasheet": None, "derived": None, "measured": None}


# --- what the runner adds: the run's own facts ------------------------------------------------------

@dataclass(frozen=True)
class RunInfo:
    """What the runner knows of a task's run, not of the task: the name it shows (a folder of
    folders: ``level1/19_ReLU``), the wall time, its parts, and the workers replaced on the way.
    None/empty: not said (the key is left out of the JSON)."""

    task: str | None = None
    wall_s: float | None = None
    wall_parts_s: Mapping[str, float] | None = None
    worker_replaced: tuple[str, ...] | None = None

    def merged(self, *, task: str | None = None, wall_s: float | None = None,
               wall_parts_s: Mapping[str, float] | None = None,
               worker_replaced: Sequence[str] | None = None) -> RunInfo:
        """These facts with those given (a field given as None is kept)."""
        return RunInfo(task if task is not None else self.task, wall_s if wall_s is not None else self.wall_s,
                       wall_parts_s if wall_parts_s is not None else self.wall_parts_s,
                       tuple(worker_replaced) if worker_replaced is not None else self.worker_replaced)

    def apply(self, d: dict[str, Any]) -> dict[str, Any]:
        if self.task is not None:
            d["task"] = self.task  # in its place, first
        if self.wall_s is not None:
            d["wall_s"] = self.wall_s
        if self.wall_parts_s is not None:
            d["wall_parts_s"] = dict(self.wall_parts_s)
        if self.worker_replaced:
            d["worker_replaced"] = list(self.worker_replaced)
        return d


# --- a task that failed -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ErrorResult:
    """A task that failed: its one-line reason and the step that failed (``error_kind``)."""

    task: str
    path: str
    error_kind: str
    error: str
    run: RunInfo = RunInfo()

    @property
    def status(self) -> str:
        return "error"

    def with_run(self, **facts: Any) -> ErrorResult:
        """The same record with the runner's facts (:meth:`RunInfo.merged`)."""
        return dataclasses.replace(self, run=self.run.merged(**facts))

    @classmethod
    def from_exception(cls, path: str | os.PathLike[str], exc: BaseException) -> ErrorResult:
        """The record of ``exc``: a ``kind`` it carries, else ``error`` (a RooflineError) or
        ``internal`` (a bug: its type leads the message)."""
        kind = getattr(exc, "kind", None)
        if kind is None:
            kind = "error" if isinstance(exc, RooflineError) else "internal"
        message = " ".join(str(exc).split()) or type(exc).__name__
        if kind == "internal":
            message = f"{type(exc).__name__}: {message}"
        return cls(Path(path).stem, str(path), kind, message)

    def to_dict(self) -> dict[str, Any]:
        d = {"task": self.task, "path": self.path, "status": "error", "error_kind": self.error_kind,
             "error": self.error}
        return self.run.apply(d)


# --- a candidate ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CandidateScore:
    """A timed candidate on the task's roofs: its speed-up, per roof ``fraction``/``score``/
    ``below_floor`` (None where the roof does not apply or the candidate has no time), and the
    roofs whose floor it beat."""

    speedup: float | None
    roofs: Mapping[str, Mapping[str, Any] | None]
    below_floor: tuple[str, ...]


@dataclass(frozen=True)
class CandidateResult:
    """One candidate as the judge (and the timer) left it: ``verdict`` is the one vocabulary
    (:mod:`roofline_ext.model.verdict`), ``judgement``/``correctness`` the judge's evidence as the
    worker gave it. ``score`` is set once it was put on the roofs (:meth:`scored`)."""

    candidate: str
    sample: int | None
    wall_s: float | None
    status: str
    verdict: str
    reason: str | None
    defence: str | None
    correct: bool | None
    t_new_ms: float | None
    error_kind: str | None = None
    error: str | None = None
    correctness: Mapping[str, Any] | None = None
    judgement: Mapping[str, Any] | None = None
    timing: TimingStats | None = None
    energy: Mapping[str, Any] | None = None
    work: Mapping[str, Any] = field(default_factory=dict)  # job_s, timed_loop_s, judge_s, phases_s
    worker_replaced: tuple[str, ...] | None = None
    score: CandidateScore | None = None

    @classmethod
    def failed(cls, candidate: str, sample: int | None, *, kind: str | None, error: str | None,
               wall_s: float | None = None) -> CandidateResult:
        """A candidate that could not be judged or timed: ``kind``/``error`` say why."""
        return cls(candidate, sample, wall_s, "error", Verdict.ERROR.value, error, None, None, None,
                   error_kind=kind, error=error)

    @classmethod
    def from_reply(cls, candidate: str, sample: int | None, value: Mapping[str, Any], *,
                   wall_s: float | None = None) -> CandidateResult:
        """What ``time_candidate`` (or ``judge_candidate``) returned. Without a ``judgement`` (the
        first versions' path, ``--isolation process``) the verdict is correctness alone. Its
        ``candidate_timing`` is read through :meth:`TimingStats.from_dict` (a bad one raises
        :class:`~roofline_ext.measure.timing_record.TimingReplyError`)."""
        judgement = value.get("judgement")
        if judgement is None:
            ok = bool((value.get("correctness") or {}).get("ok"))
            judgement = {"verdict": (Verdict.CORRECT if ok else Verdict.INCORRECT).value,
                         "reason": None if ok else (value.get("correctness") or {}).get("reason")}
        correct = judgement["verdict"] == Verdict.CORRECT.value
        timing, energy = _candidate_timing(value.get("candidate_timing") if correct else None)
        work = {k: value.get(k) for k in ("job_s", "timed_loop_s", "judge_s", "phases_s")}
        return cls(candidate, sample, wall_s, "ok", judgement["verdict"], judgement.get("reason"),
                   judgement.get("defence"), correct, value.get("t_new_ms") if correct else None,
                   correctness=value.get("correctness"), judgement=judgement, timing=timing,
                   energy=energy, work=work)

    def with_replaced(self, replaced: Sequence[str]) -> CandidateResult:
        return dataclasses.replace(self, worker_replaced=tuple(replaced)) if replaced else self

    def scored(self, roofs: Mapping[str, Any], t_ref: float | None) -> CandidateResult:
        """Put on the task's roofs (the roof dicts of the result, by name): a correct candidate
        faster than any roof's floor becomes ``below_floor``, never scored on any roof (the count or
        a peak is wrong for the task, and a score would hide it)."""
        t_new = self.t_new_ms if self.correct else None
        per_roof = candidate_roofs(roofs, t_ref, t_new) if t_new else {name: None for name in roofs}
        below = tuple(name for name, r in per_roof.items() if r and r["below_floor"])
        for r in per_roof.values():
            if r:
                r["score"] = None if below else clip_score(r["score"])
        verdict, reason = self.verdict, self.reason
        if below and verdict == Verdict.CORRECT.value:
            verdict, reason = Verdict.BELOW_FLOOR.value, f"faster than the {', '.join(below)} floor"
        score = CandidateScore(t_ref / t_new if t_ref and t_new else None, per_roof, below)
        return dataclasses.replace(self, verdict=verdict, reason=reason, score=score)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"candidate": self.candidate, "sample": self.sample, "wall_s": self.wall_s}
        if self.status != "ok":
            d.update(status=self.status, error_kind=self.error_kind, error=self.error, correct=None,
                     t_new_ms=None, verdict=self.verdict, reason=self.reason, defence=None)
        else:
            d.update(status="ok", correct=self.correct, correctness=self.correctness, verdict=self.verdict,
                     reason=self.reason, defence=self.defence, judgement=self.judgement, t_new_ms=self.t_new_ms,
                     timing=self.timing.to_dict() if self.timing is not None else None, energy=self.energy,
                     **self.work)
        if self.worker_replaced:
            d["worker_replaced"] = list(self.worker_replaced)
        if self.score is not None:
            d.update(speedup=self.score.speedup,
                     roofs={k: (dict(v) if v else v) for k, v in self.score.roofs.items()},
                     below_floor=list(self.score.below_floor))
        return d


def _candidate_timing(raw: Any) -> tuple[TimingStats | None, Mapping[str, Any] | None]:
    """A candidate's ``candidate_timing``: its series, and its ``--energy`` measurement, which the
    result carries beside the timing (as the task's). Empty or None: no timing."""
    if not raw:
        return None, None
    if not isinstance(raw, Mapping):
        raise TimingReplyError(f"candidate_timing is {type(raw).__name__}, not an object")
    series = {k: v for k, v in raw.items() if k != "energy"}
    energy = raw.get("energy")
    return (TimingStats.from_dict(series, where="candidate_timing") if series else None), energy


# --- a counted task on the roofs --------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """A counted task put on one GPU's roofs: the floors (``roofline``, None when the task has no
    floor, ``no_roofline`` saying why), the roofs they were computed against (``roof_set``, what
    the charts draw), the times they were held to and the notes of the count and the placing."""

    counts: Counts
    gpu: GpuChoice
    regime: str
    strict_fp32: bool
    roof_dtype: str
    roofline: RooflineResult | None
    no_roofline: str | None
    roof_set: RoofSet
    t_ref_ms: float | None
    t_new_ms: float | None
    notes: tuple[str, ...]
    include_ops: bool = True
    per_op: bool = False

    def roof_dicts(self) -> dict[str, Any]:
        """Each roof's JSON dict (fresh), by name; every roof None where there is no floor."""
        return self.roofline.to_dict()["roofs"] if self.roofline is not None else dict(_NO_ROOFS)

    def to_dict(self, roofs: Mapping[str, Any], notes: list[str], final: RooflineResult | None) -> dict[str, Any]:
        """The task's JSON keys, with ``roofs`` (the roof dicts with what timing added), ``notes``
        and the ops of ``final`` (the floors with the profiled kernels, where there are some)."""
        c, r = self.counts, (self.roofline.to_dict() if self.roofline is not None else None)
        d: dict[str, Any] = {
            "task": c.task, "path": c.path, "status": "ok", "model": c.model, "has_model_new": c.has_model_new,
            "mode": c.mode,  # the mode the model was counted in (docs/counting.md)
            "flops": c.flops, "simt_flops": c.simt_flops, "total_flops": c.total_flops,
            "flops_flopcounter": c.flops_flopcounter, "bytes": c.bytes, "input_bytes": c.input_bytes,
            "param_bytes": c.param_bytes, "output_bytes": c.output_bytes, "dtype": c.dtype, "dtypes": c.dtypes,
            "compute_dtype": self.roof_dtype, "cast": c.cast, "arithmetic_intensity": c.arithmetic_intensity,
            "inputs": c.inputs, "outputs": c.outputs, "gpu": self.gpu.name, "gpu_source": self.gpu.source,
            "sku": self.gpu.sheet.name if self.gpu.sheet is not None else None, "regime": self.regime,
            "strict_fp32": self.strict_fp32,
            "t_min_ms": r["t_min_ms"] if r else None, "bound": r["bound"] if r else None,
            "primary_roof": r["primary_roof"] if r else None, "compute_unit": r["unit"] if r else None,
            "roofs": roofs, "t_ref_ms": self.t_ref_ms, "t_new_ms": self.t_new_ms,
            "ref_roofline_frac": r.get("ref_roofline_frac") if r else None,
            "roofline_frac": r.get("roofline_frac") if r else None,
            "impossible": bool(r and r["impossible"]), "count_seconds": c.seconds, "notes": notes,
        }
        if self.include_ops:
            d["by_op"] = c.by_op
        if self.per_op:
            ops = [o.to_dict() for o in final.ops] if final is not None and final.ops else None
            d["ops"] = ops or [dict(o.to_dict(), floors_ms={}, limiters={}) for o in c.ops or ()]
            d["unfused"] = {"read_bytes": c.unfused_read_bytes, "write_bytes": c.unfused_write_bytes,
                            "bytes": c.unfused_bytes, **((r or {}).get("unfused") or {})}
        return d


def place(counts: Counts, roofs: RoofSet, *, gpu: GpuChoice, regime: str | None = None,
          strict_fp32: bool = False, per_op: bool = False, include_ops: bool = True,
          t_ref_ms: float | None = None, t_new_ms: float | None = None) -> Placement:
    """Put ``counts`` on ``roofs`` (the GPU's roofs as the run resolved them once): the floors are
    computed from the very peaks the result carries, which the charts draw. Raises ``TaskError``
    for a forward that returns no tensor."""
    _require_output(counts)
    roof_dtype, dtype_note = _roof_dtype(counts)
    typed = roofline_result(
        counts.flops, counts.bytes, roof_dtype, gpu.sheet if gpu.sheet is not None else gpu.name,
        t_ref_ms, t_new_ms, simt_flops=counts.simt_flops, strict_fp32=strict_fp32,
        derived=roofs.derived_peaks, measured=roofs.measured_peaks,
        read_bytes=counts.input_bytes + counts.param_bytes, write_bytes=counts.output_bytes,
    )
    if typed is not None and per_op:
        typed = attach_ops(typed, counts.ops or ())
    notes = list(counts.notes)
    if dtype_note:
        notes.append(dtype_note)
    no_roofline = None if typed is not None else _no_roofline_reason(counts, gpu)
    if no_roofline:
        notes.append(f"no roofline: {no_roofline}")
    return Placement(counts, gpu, regime or roofs.regime, strict_fp32, roof_dtype, typed, no_roofline, roofs,
                     t_ref_ms, t_new_ms, tuple(notes), include_ops, per_op)


def _roof_dtype(counts: Counts) -> tuple[str, str | None]:
    """dtype for the compute roof, and a note when it is a stand-in."""
    if counts.compute_dtype is not None:
        note = None
        if counts.dtype == "mixed":
            note = (f"mixed dtypes {', '.join(counts.dtypes)}: the {counts.compute_dtype} roof "
                    "(the fastest present) is used, so the floor stays a floor")
        return counts.compute_dtype, note
    return "torch.float32", "no floating-point tensors: the float32 roof is used"


def _require_output(counts: Counts) -> None:
    """A forward that returns no tensor (None, a number, a string) writes nothing a floor could
    count: that is a broken task, not a floor of zero."""
    if counts.outputs:
        return
    also = "" if counts.inputs else "; get_inputs() gave no tensor either"
    raise TaskError(f"{counts.path}: Model.forward() returned no tensor{also}: a task's forward returns "
                    "its result tensor(s)", kind="forward", path=counts.path)


def _no_roofline_reason(counts: Counts, choice: GpuChoice) -> str:
    """Why a counted task has no floor, in words: no bytes, or no peaks for this GPU."""
    if not counts.bytes:
        return ("the task reads and writes 0 bytes (only empty tensors), so it has no floor "
                "on any GPU")
    return f"no datasheet, derived or measured peaks are known for {choice.name}"


# --- the task's result ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskResult:
    """A task's result: its placement on the roofs (or, for a task counted but with no floor to
    give, its error), and what timing and judging added. ``roofline`` is the floors as they end
    (with the profiled kernels on the ops); ``reference`` the timing worker's reply, typed
    (:class:`~roofline_ext.measure.timing_record.TimingReply`: the reference's series, its median,
    the compile's part; None: not timed); ``judged``: candidates judged without timing (no scores)."""

    placement: Placement | ErrorResult
    roofline: RooflineResult | None = None
    candidates: tuple[CandidateResult, ...] = ()
    reference: TimingReply | None = None
    energy: Mapping[str, Any] | None = None
    kernel_profile: Mapping[str, Any] | None = None
    judged: bool = False
    notes: tuple[str, ...] = ()  # the judge's and the timing's, after the placement's
    run: RunInfo = RunInfo()

    @property
    def status(self) -> str:
        return "ok" if isinstance(self.placement, Placement) else "error"

    @property
    def roof_set(self) -> RoofSet | None:
        """The roofs the floors were computed against (what a chart of the task draws)."""
        return self.placement.roof_set if isinstance(self.placement, Placement) else None

    @property
    def no_roofline(self) -> str | None:
        """Why the task has no floor, in words; None when it has one."""
        return self.placement.no_roofline if isinstance(self.placement, Placement) else None

    @property
    def single(self) -> CandidateResult | None:
        """The candidate, when there is exactly one: the top-level keys are its own."""
        return self.candidates[0] if len(self.candidates) == 1 else None

    def with_run(self, **facts: Any) -> TaskResult:
        """The same result with the runner's facts (:meth:`RunInfo.merged`)."""
        return dataclasses.replace(self, run=self.run.merged(**facts))

    def roof_dicts(self) -> dict[str, Any]:
        """The JSON's ``roofs``: each roof's floors, with the one candidate's ``score`` and
        ``new_below_floor`` and the compiled time's ``compile_fraction`` where timed."""
        if not isinstance(self.placement, Placement):
            return {}
        roofs = self.placement.roof_dicts()
        if self.reference is None:
            return roofs
        single, t_compile = self.single, self.reference.t_compile_ms
        mine = (single.score.roofs if single is not None and single.score is not None else {})
        for name, roof in roofs.items():
            if roof and single is not None:
                own = mine.get(name)
                roof["score"] = own["score"] if own else None
                roof["new_below_floor"] = bool(own and own["below_floor"])
            if roof and t_compile:
                roof["compile_fraction"] = _fraction(roof.get("t_min_ms"), t_compile)
        return roofs

    def roofline_dict(self) -> dict[str, Any] | None:
        """The floors as ``roofline()``'s dict (what ``describe`` reads), with the roofs of the
        JSON; None when the task has no floor."""
        if not isinstance(self.placement, Placement) or self.placement.roofline is None:
            return None
        return {**self.placement.roofline.to_dict(), "roofs": self.roof_dicts()}

    def to_dict(self) -> dict[str, Any]:
        """The task's JSON keys and values, in the order the outputs have always had them."""
        head = self.placement
        if isinstance(head, Placement):
            d = head.to_dict(self.roof_dicts(), [*head.notes, *self.notes], self.roofline)
        else:
            d = dataclasses.replace(head, run=RunInfo()).to_dict()
        if self.reference is not None:
            d["timing"] = self._timing_dict()
        if self.energy is not None:
            d["energy"] = _plain(self.energy)
        if self.kernel_profile is not None:
            d["kernel_profile"] = dict(self.kernel_profile)
        if self.reference is not None or self.judged:
            self._verdict_keys(d)
        if not isinstance(head, Placement) and (self.reference is not None or self.notes):
            d["notes"] = list(self.notes)
        return self.run.apply(d)

    def _timing_dict(self) -> dict[str, Any]:
        assert self.reference is not None
        timing = self.reference.without("energy")  # --energy: the task's ``energy``, beside its time
        if timing.kernel_profile is not None:  # --ops: the task's ``kernel_profile``, on its ops
            timing = timing.without("kernel_profile")
        rec = self.single
        if rec is not None:  # what the one-candidate text report and the first JSON layout read
            timing = timing.with_values(candidate=rec.candidate, correctness=rec.correctness,
                                        candidate_timing=rec.timing, t_new_ms=rec.t_new_ms,
                                        speedup=rec.score.speedup if rec.score else None)
        return timing.to_dict()

    def _verdict_keys(self, d: dict[str, Any]) -> None:
        single = self.single
        d["candidates"] = [c.to_dict() for c in self.candidates]
        d["correct"] = single.correct if single else None
        d["verdict"] = single.verdict if single else None
        if self.reference is None:  # judged, not timed
            return
        d["speedup"] = single.score.speedup if single and single.score else None
        ref = self.reference
        d["t_compile_ms"] = ref.t_compile_ms
        if ref.compile_asked:  # --compile
            d["compiled_correct"] = ref.compiled_correct
            d["compile_error"] = ref.compile_error
        if single is not None:
            primary = (single.score.roofs if single.score else {}).get(d.get("primary_roof") or "")
            d["score"] = primary["score"] if primary else None


def _fraction(t_min: float | None, t: float | None) -> float | None:
    return t_min / t if t_min and t else None


def _plain(energy: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in energy.items()}


# --- assess: the one place a result is assembled -------------------------------------------------

def assess(counts: Counts, roofs: RoofSet, timing: TimingReply | Mapping[str, Any] | None = None,
           candidates: Sequence[CandidateResult] = (), profile: Mapping[str, Any] | None = None, *,
           gpu: GpuChoice, regime: str | None = None, strict_fp32: bool = False, per_op: bool = False,
           include_ops: bool = True, t_ref_ms: float | None = None, t_new_ms: float | None = None,
           judged: bool = False, l2_tbps: float | None = None, energy_costs: Any = None) -> TaskResult:
    """A counted task's result: ``counts`` on ``roofs``, with the reference's ``timing`` (the
    timing worker's reply, :class:`TimingReply`; a dict made elsewhere is read through its
    ``from_dict``, ``t_ref_ms`` required; None: not timed), its ``candidates`` (scored when timed; with
    ``judged`` and no timing, judged only), the reference's kernel ``profile`` held to its ops'
    floors with the L2 figure ``l2_tbps``, and, with ``energy_costs``, each measured energy against
    the task's energy floor. Untimed, ``t_ref_ms``/``t_new_ms`` are times measured elsewhere.
    Raises ``TaskError`` for counts with no floor to give (a forward that returns no tensor)."""
    single = candidates[0] if len(candidates) == 1 else None
    timing = _reply(timing)
    if timing is not None:
        t_ref_ms = timing.t_ref_ms
        t_new_ms = single.t_new_ms if single is not None and single.correct else None
    placement = place(counts, roofs, gpu=gpu, regime=regime, strict_fp32=strict_fp32, per_op=per_op,
                      include_ops=include_ops, t_ref_ms=t_ref_ms, t_new_ms=t_new_ms)
    return _assemble(placement, timing, candidates, profile, judged=judged, l2_tbps=l2_tbps,
                     energy_costs=energy_costs)


def assess_failed(error: ErrorResult, timing: TimingReply | Mapping[str, Any] | None,
                  candidates: Sequence[CandidateResult] = (), profile: Mapping[str, Any] | None = None, *,
                  l2_tbps: float | None = None) -> TaskResult | ErrorResult:
    """A task counted but with no floor to give (:func:`assess` raised): timed, its error with the
    times and the candidates as a timed result has them; untimed, the error alone."""
    timing = _reply(timing)
    if timing is None:
        return error
    return _assemble(error, timing, candidates, profile, l2_tbps=l2_tbps)


def _reply(timing: TimingReply | Mapping[str, Any] | None) -> TimingReply | None:
    """The reply typed: the runner's already is; a dict (a test's, a caller's of the public
    functions) is validated as a reply, with only ``t_ref_ms`` required (the floor's fraction)."""
    if timing is None or isinstance(timing, TimingReply):
        return timing
    return TimingReply.from_dict(timing, required=("t_ref_ms",))


def _assemble(head: Placement | ErrorResult, timing: TimingReply | None, candidates: Sequence[CandidateResult],
              profile: Mapping[str, Any] | None, *, judged: bool = False, l2_tbps: float | None = None,
              energy_costs: Any = None) -> TaskResult:
    placed = head if isinstance(head, Placement) else None
    roofline = placed.roofline if placed is not None else None
    roofs = placed.roof_dicts() if placed is not None else {}
    if timing is not None:
        candidates = [c.scored(roofs, timing.t_ref_ms) for c in candidates]
    kernel_profile = None
    if profile is not None:
        roofline, kernel_profile = place_profile(roofline, profile, t_ref_ms=placed.t_ref_ms if placed else None,
                                                 l2_tbps=l2_tbps)
    energy = {"reference": plain(timing.energy)} if timing is not None and timing.has("energy") else None
    if energy is not None and roofline is not None and energy_costs is not None and placed is not None:
        energy, candidates = _energy_floor(energy, roofline, placed.counts, candidates, energy_costs)
    impossible = bool(roofline is not None and roofline.impossible_roofs) if placed is not None else False
    notes = _notes(candidates, roofs, timing.t_ref_ms if timing is not None else None, impossible,
                   timed=timing is not None) if timing is not None or judged else []
    return TaskResult(head, roofline, tuple(candidates), timing, energy, kernel_profile,
                      judged=judged and timing is None, notes=tuple(notes))


def _notes(candidates: Sequence[CandidateResult], roofs: Mapping[str, Any], t_ref: float | None,
           impossible: bool, timed: bool) -> list[str]:
    """What the judge's verdicts and the times say, one line each, after the placement's notes."""
    notes = []
    for rec in candidates:
        who = "the candidate" if len(candidates) == 1 else f"candidate {rec.candidate}"
        below = rec.score.below_floor if rec.score is not None else ()
        if rec.status != "ok":
            notes.append(f"{who} failed ({rec.error_kind}): {rec.error}")
        elif rec.verdict == Verdict.INVALID.value:
            notes.append(f"{who} is INVALID ({rec.defence}: {rec.reason}): no time, no score")
        elif rec.correct is False:
            notes.append(f"{who} is INCORRECT ({(rec.correctness or {}).get('reason') or rec.reason}): "
                         "no fraction, no score")
        elif below:
            notes.append(f"{who} is below the {', '.join(below)} floor: not scored on any roof; "
                         "the FLOP/byte count or the peaks are wrong for this task")
    if not timed:
        return notes
    beaten = reference_flags(roofs, t_ref)
    if beaten:
        notes.append(f"the reference is at or below the {', '.join(beaten)} floor: candidates cannot be "
                     "scored there; the FLOP/byte count or the peaks are wrong for this task")
    elif impossible:
        notes.append("a time is below a floor, the floor of the reference's operations: that code took an "
                     "algebraic or structural shortcut, or the FLOP/byte counts or the peaks are wrong "
                     "for this task")
    if not roofs.get("measured"):
        notes.append("no measured roof for this GPU: run `roofline-ext calibrate` once to add it")
    return notes


def _energy_floor(energy: dict[str, Any], roofline: RooflineResult, counts: Counts,
                  candidates: Sequence[CandidateResult],
                  costs: Any) -> tuple[dict[str, Any], list[CandidateResult]]:
    """``--energy`` with measured costs (``--energy-costs``): the task's energy floor per call
    (``energy.floor``, from the same counts and roof as the time floor) and each measured variant
    against it (``fraction_of_floor``, ``below_floor``: a call below its energy floor is flagged as
    a time below its time floor is). A cost the task needs that was not measured is
    ``energy.floor_error``, one line."""
    out = list(candidates)
    try:
        floor = energy_floor_for(roofline, costs, read_bytes=counts.input_bytes + counts.param_bytes,
                                 write_bytes=counts.output_bytes)
    except UserError as exc:
        return {**energy, "floor_error": str(exc)}, out

    def held(label: str, e: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if not e or e.get("error"):
            return e
        te = task_energy(floor, EnergyMeasurement.from_dict(e), label=label)
        return {**e, "fraction_of_floor": te.fraction, "fraction_of_floor_total": te.fraction_total,
                "below_floor": te.below_floor, "below_floor_beyond_uncertainty": te.below_floor_beyond_uncertainty}

    energy = {**energy, "floor": floor.to_dict()}
    energy["reference"] = held("reference", energy.get("reference"))
    for k, c in enumerate(out):
        if c.energy:
            out[k] = dataclasses.replace(c, energy=held(str(c.sample or c.candidate), c.energy))
    return energy, out
