"""A batch of tasks (or one) through the pool: every task counted, then the counted ones timed.

Counting runs first, ``jobs`` tasks at a time in reused counting workers (:mod:`.pool`); its
results are final for a batch without ``--time``. Timing starts when counting is done, so no counting
worker competes with a timing for the CPU that launches its kernels: the reference, with
``--compile`` ``torch.compile(Model)``, and each candidate are separate jobs for the GPU's one
timing worker (which warmed the compiler up once, :mod:`.compiling`), and a task's result is written when
its last job is in. A task whose count failed is not timed.

Each result goes to the writer as soon as it exists (in task order in the files), the progress bar
shows what is in hand, and what a task printed is shown on stderr. Ctrl-C stops the batch: the
pool kills its workers and every result finished before it stays written.

``isolation="fresh"`` gives every job a worker of its own (slower; no two tasks share a process).
``isolation="process"`` runs the first versions' path instead, for comparison: counting in this
process and timing in a fresh interpreter per task (:func:`.timed.assess_and_time`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..device import status
from ..errors import GpuUnavailableError, RooflineError
from ..measure.timing import DEFAULT_MAX_TIME_S, DEFAULT_PRECISION, DEFAULT_TRIALS, HOST_BOUND_MAX_TIME_S, TrialRule
from ..measure.timing_record import TimingReply, TimingReplyError
from ..model.assess import CandidateResult, ErrorResult, TaskResult, assess_failed
from ..model.gpu import GpuChoice
from ..tasks.counting import Counts
from ..tasks.loading import task_names
from ..timestamps import process_age_s
from .analyze import ProgressFactory, assess_batch, assess_task, resolve_roofs
from .candidates import Candidate
from .jobs import COUNT, GPU_BACKEND, TIME_CANDIDATE, TIME_REFERENCE
from .pool import Job, Outcome, Pool, capped_jobs, default_jobs, supported
from .stop_signals import stop_on_signals, stopped_line
from .timed import assess_and_time, candidate_record

Result = TaskResult | ErrorResult

ISOLATIONS = ("pool", "fresh", "process")
# What timing jobs run, by name, in the timing workers. Module-level so that tests can point them
# at CPU stand-ins (the workers import the names; nothing here is called in this process).
TIMING_BACKEND = GPU_BACKEND
TIME_REFERENCE_FN = TIME_REFERENCE
TIME_CANDIDATE_FN = TIME_CANDIDATE
# --compile: torch.compile(Model) is a job of its own after the reference's, and every timing
# worker warms the compiler up once before its snapshot (docs/runner.md, "torch.compile").
TIME_COMPILED_FN = "roofline_ext.runner.timing_jobs:time_compiled"
# --new without --time: the same judge, correctness only, in a counting worker (on the CPU).
JUDGE_CANDIDATE_FN = "roofline_ext.runner.timing_jobs:judge_candidate"
COMPILE_WARM_UP_FN = "roofline_ext.runner.compiling:warm_up"
#: --energy: each timing worker opens NVML and takes the idle probe before its snapshot.
ENERGY_WARM_UP_FN = "roofline_ext.measure.energy:warm_up"
DEFAULT_COUNT_TIMEOUT_S = 60.0
JUDGE_CORRECT_TRIALS = 5
DEFAULT_TIME_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class TimingOptions:
    """``--time``: trials per variant, ``compile``, the GPUs (one timing worker each), where inputs
    are made (``auto``: on the GPU when ``get_inputs()`` allows), correctness input sets, and the
    per-job time limit.

    ``trials`` None (the default) times each variant adaptively, until the 95% interval of its
    median is within ``±precision`` or ``max_time_s`` is spent (:mod:`roofline_ext.measure.timing`);
    N times exactly N trials, as KernelBench does (``--trials N``)."""

    trials: int | None = None
    precision: float = DEFAULT_PRECISION
    max_time_s: float = DEFAULT_MAX_TIME_S
    host_bound_max_time_s: float = HOST_BOUND_MAX_TIME_S  # a host-bound series' cap (measure/timing.py)
    warmup: int = 10
    compile: bool = False
    devices: tuple[int, ...] = (0,)
    inputs: str = "auto"
    correct_trials: int = 5
    timeout_s: float = DEFAULT_TIME_TIMEOUT_S
    # --energy: each timed variant's energy per call over an NVML counter window after its timing
    # (a second or two more per variant; docs/energy.md).
    energy: bool = False

    def __post_init__(self) -> None:
        self.rule()  # a bad count, precision or cap is a one-line error here, not in a worker

    def rule(self) -> TrialRule:
        return TrialRule(fixed=self.trials, precision=self.precision, max_time_s=self.max_time_s,
                         host_bound_max_time_s=self.host_bound_max_time_s)


@dataclass(frozen=True)
class BatchOptions:
    """What every task of a batch is analyzed with. ``measured``: calibrated peaks (already looked
    up) or None. ``candidates``: task -> its candidates (``--new``); None means each task's own
    ``ModelNew``, if it has one. ``timing`` None counts only."""

    dtype: str | None = None
    regime: str = "burst"
    strict_fp32: bool = False
    measured: Mapping[str, float] | None = None
    jobs: int | None = None
    count_timeout_s: float = DEFAULT_COUNT_TIMEOUT_S
    timing: TimingOptions | None = None
    candidates: Mapping[Path, Sequence[Candidate]] | None = None
    isolation: str = "pool"
    debug: bool = False
    backend: str | None = None  # the timing workers' setup/cleanup module; None: TIMING_BACKEND
    # --ops: every op's own floor and the unfused bound; with timing also each kernel of the reference
    # (one extra profiled run, tasks.opranges), held to its op's floor with this L2 figure.
    ops: bool = False
    l2_tbps: float | None = None
    # --energy-costs: measured J per FLOP and per byte (model.energy.EnergyCosts), so each task's
    # measured energy (--energy) is held against its energy floor.
    energy_costs: Any = None
    # The judge (docs/scoring.md): "strict" or KernelBench's "kernelbench" comparison, and the seed
    # of its input sets (None: drawn once per run from the OS's entropy, and reported).
    judge: str = "strict"
    judge_seed: int | None = None
    # --verbose: where the run's time went, on stderr at its end (the pool's timeline).
    verbose: bool = False


class TaskFailed(RooflineError):
    """The one task of a single-task run failed: its one-line reason and ``kind``."""

    def __init__(self, message: str, kind: str | None) -> None:
        super().__init__(message)
        self.kind = kind


def run_batch(paths: Sequence[str | os.PathLike], gpu: GpuChoice, opts: BatchOptions, *, writer=None,
              progress: ProgressFactory | None = None) -> list[dict[str, Any]]:
    """:func:`run_tasks`, each result as its JSON dict."""
    return [r.to_dict() for r in run_tasks(paths, gpu, opts, writer=writer, progress=progress)]


def run_tasks(paths: Sequence[str | os.PathLike], gpu: GpuChoice, opts: BatchOptions, *, writer=None,
              progress: ProgressFactory | None = None) -> list[Result]:
    """Analyze (and with ``opts.timing`` time) every task in ``paths``; one typed result per task
    (:class:`~roofline_ext.model.assess.TaskResult`, or :class:`~roofline_ext.model.assess.ErrorResult`
    for a task that failed), in order.

    ``writer``: gets ``add(result, index)`` for each result's JSON dict as it exists. ``progress``: given the
    number of tasks, the progress bar to show them on (the CLI passes ``report.progress.Progress``;
    None: no bar). Raises ``KeyboardInterrupt`` on Ctrl-C (results so far are with the
    writer) and ``GpuUnavailableError`` when no timing worker can use its GPU.
    """
    task_paths = [Path(p) for p in paths]
    if opts.isolation != "process" and not supported():
        print(f"roofline-ext: note: worker processes need Linux; on {sys.platform} each task is timed in a "
              "fresh interpreter and counted in this process (--isolation process)", file=sys.stderr)
        opts = dataclasses.replace(opts, isolation="process")
    if opts.isolation == "process":
        return _process_path(task_paths, gpu, opts, writer, progress)
    if opts.isolation not in ISOLATIONS:
        raise ValueError(f"isolation {opts.isolation!r}: choose one of {', '.join(ISOLATIONS)}")
    compiling = opts.timing is not None and opts.timing.compile
    # Counting overlaps timing: by default a core stays free for each timing worker, whose launch
    # rate a launch-bound task's time depends on.
    default = max(1, default_jobs() - len(opts.timing.devices)) if opts.timing is not None else None
    jobs, note = capped_jobs(opts.jobs, len(task_paths), default=default)  # never a worker with nothing to do
    if note:
        print(f"roofline-ext: note: {note}", file=sys.stderr)
    pool = Pool(jobs, backend=opts.backend or TIMING_BACKEND, fresh=opts.isolation == "fresh",
                warm_up=len(task_paths) > 1, compile_warm_up=COMPILE_WARM_UP_FN if compiling else None,
                energy_warm_up=ENERGY_WARM_UP_FN if opts.timing is not None and opts.timing.energy else None,
                one_job_timing=_one_timing_job(task_paths, opts))
    batch: _Batch | None = None
    age = process_age_s() if opts.verbose else None
    try:
        bar = progress(len(paths)) if progress is not None else contextlib.nullcontext(None)
        with stop_on_signals(), pool, bar as shown:
            batch = _Batch(task_paths, gpu, opts, writer, shown, pool)
            return batch.run()
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP: say what was kept, then stop as before
        done = 0 if batch is None else sum(r is not None for r in batch.results)
        print(stopped_line(exc, done, len(task_paths)), file=sys.stderr)
        exc.said = True  # type: ignore[attr-defined]  # the CLI need not say "interrupted" again
        raise
    finally:
        if opts.verbose:
            print(timeline_text(pool.timeline, age, pool.elapsed_s()), file=sys.stderr)


def _one_timing_job(paths: Sequence[Path], opts: BatchOptions) -> bool:
    """Whether the run's GPU has exactly one job: a lone task's reference, with no ``--compile``
    (its own job, and a per-worker warm-up), no ``--new`` and no ``ModelNew`` in the task's text.
    Then its timing worker takes no state snapshot (Pool.one_job_timing: 0.5 s of a lone task's
    start-up on the H200's host). A ``ModelNew`` the text does not name (made at run time) is still
    timed, in a worker of its own."""
    if opts.timing is None or len(paths) != 1 or opts.timing.compile or opts.candidates is not None:
        return False
    try:
        return "ModelNew" not in paths[0].read_text(encoding="utf-8", errors="replace")
    except OSError:  # the count says what is wrong with the file
        return False


def timeline_text(timeline: Sequence[tuple[float, str]], process_age: float | None, end_s: float) -> str:
    """``--verbose``'s account of the run: each event of the pool at its time since the command
    started (the interpreter and the imports before the pool included, where the OS says how old
    the process is), then the end (the workers and the server stopped; the report follows)."""
    base = process_age or 0.0
    events = [(base + t, what) for t, what in timeline]
    if process_age is not None:  # in time order: a fork server started early comes before it
        events.append((process_age, "Python started and roofline_ext imported; the pool is made"))
    events.sort(key=lambda e: e[0])
    events.append((base + end_s, "workers and fork server stopped; the report follows"))
    return "\n".join(["roofline-ext: where the time went (s since the command started):"]
                     + [f"  {t:7.2f}  {what}" for t, what in events])


class _Batch:
    def __init__(self, paths: list[Path], gpu: GpuChoice, opts: BatchOptions, writer, progress, pool: Pool):
        self.paths, self.gpu, self.opts = paths, gpu, opts
        self.names = task_names(paths)
        self.writer, self.progress, self.pool = writer, progress, pool
        self.results: list[Result | None] = [None] * len(paths)
        self.counts: dict[int, tuple[Counts, float]] = {}
        self.in_hand: list[str] = []
        self.judge_seed = opts.judge_seed if opts.judge_seed is not None else secrets.randbelow(2**31 - 1) + 1
        # The GPU's roofs, once for the batch: every task's floor and its chart use this one set.
        self.roofs = resolve_roofs(gpu, opts.measured, opts.regime)
        self.timed_ok = 0  # tasks whose reference was timed: after one, the GPU is known to work

    def run(self) -> list[Result]:
        if self.opts.timing is not None:
            self.pool.prestart(self.opts.timing.devices)  # CUDA starts while the tasks are counted
            self._count_and_time()
        else:
            self._count_all()
            if self.opts.candidates is not None and self.counts:
                self._judge_all()
            self.pool.release_cpu()
        if self.progress is not None:
            self.progress.start("done")
        for i, r in enumerate(self.results):
            if r is None:  # never silently short: every task given has its row (docs/runner.md)
                self._emit(i, _error(self.paths[i], "lost", f"{self.paths[i]}: no result came back for this task "
                                                            "(a job of it never reported)"))
        return [r for r in self.results if r is not None]

    # --- counting --------------------------------------------------------------------------------

    def _count_all(self) -> None:
        jobs = self._count_jobs()
        for out in self.pool.run(jobs, self._started):
            self._counted(out)

    def _count_jobs(self) -> list[Job]:
        return [Job(i, COUNT, {"path": str(p), "dtype": self.opts.dtype, "ops": self.opts.ops},
                    self.opts.count_timeout_s,
                    label=f"count {p.stem}") for i, p in enumerate(self.paths)]

    def _counted(self, out: Outcome) -> bool:
        """Take one count: its row now (untimed and unjudged, or failed), or kept for the jobs that
        follow it. True when the task goes on to those jobs."""
        self._finished(out)
        i = out.job.key
        if not out.ok:
            self._emit(i, _error(self.paths[i], out.kind, out.error, out.wall_s))
            return False
        counts = Counts(**out.value)
        counts.path = str(self.paths[i])  # as the user gave it, as counting in-process said it
        if self.opts.timing is None and not self._judged_untimed(i):
            result = self._assess(i, counts).with_run(wall_s=out.wall_s, worker_replaced=out.replaced)
            self._emit(i, result)
            return False
        self.counts[i] = (counts, out.wall_s)
        return True

    def _assess(self, i: int, counts: Counts, reference: TimingReply | None = None,
                cands: Sequence[CandidateResult] = (), judged: bool = False) -> Result:
        """The task's result, assembled once (:func:`roofline_ext.model.assess.assess`): its counts
        on the run's roofs, with the reference's timing, its profile and energy, and the candidates."""
        o = self.opts
        profile = reference.kernel_profile if reference is not None else None
        try:
            return assess_task(self.paths[i], self.gpu, o.dtype, regime=o.regime, strict_fp32=o.strict_fp32,
                               counts=counts, per_op=o.ops, roofs=self.roofs, timing=reference, candidates=cands,
                               profile=profile, l2_tbps=o.l2_tbps, energy_costs=o.energy_costs, judged=judged)
        except RooflineError as exc:  # counted, but no floor to give (a forward that returns nothing)
            return assess_failed(ErrorResult.from_exception(self.paths[i], exc), reference, cands, profile,
                                 l2_tbps=o.l2_tbps)

    # --- timing ----------------------------------------------------------------------------------

    def _timing(self) -> TimingOptions:
        """The timing options; only called on the timing path, where they are set."""
        assert self.opts.timing is not None
        return self.opts.timing

    def _count_and_time(self) -> None:
        """Counting and timing in one run of the pool: a task's timing jobs join its card's queue as
        soon as its count is in, so the GPU times the first tasks while the later ones are still
        counted (issue 28; before, it waited for the last count). A lone task's one reference job
        (Pool.one_job_timing) needs nothing from its count, so it starts with it: the count (about
        2 s, its first FakeTensorMode imports torch._dynamo) and the timing then overlap instead of
        adding up. The counting workers go once the last count is in: their memory is the timings'
        to use."""
        t = self._timing()
        counting = len(self.paths)
        waiting: dict[int, dict[str, Any]] = {}
        early: list[Job] = []
        if self.pool.one_job_timing:
            waiting[0] = self._waiting([])
            early = [self._reference_job(0, t.devices[0])]
        for out in self.pool.run(self._count_jobs() + early, self._started):
            if out.job.fn != COUNT:
                self._timing_part(out, waiting)
                continue
            counting -= 1
            i = out.job.key
            if self._counted(out):
                cands = self._candidates(i)
                if i in waiting:  # its reference started with the count: only the candidates are new
                    w = waiting[i]
                    w["left"] += len(cands)
                    w["cands"], w["specs"] = [None] * len(cands), cands
                    jobs = [self._candidate_job(i, k, c, t.devices[0]) for k, c in enumerate(cands)]
                else:
                    device = t.devices[len(waiting) % len(t.devices)]  # a task's jobs stay on one card
                    waiting[i] = self._waiting(cands)
                    jobs = self._timing_jobs(i, device, cands)
                for job in jobs:
                    self.pool.add(job)
                self._timing_part(None, waiting, i)  # a reference that came in first
            elif i in waiting:  # the count failed and said why: the early timing has nothing to add
                self.pool.cancel(functools.partial(_timing_job_of, i))
                del waiting[i]
            if counting == 0:
                self.pool.release_cpu()
        for i, w in waiting.items():
            if w["left"] > 0 and self.results[i] is None:
                self._emit(i, _error(self.paths[i], "lost", f"{self.paths[i]}: {w['left']} of its timing jobs never "
                                                            "reported"))

    def _waiting(self, cands: list[Candidate]) -> dict[str, Any]:
        """What a task's timing jobs have brought in so far, and how many are still to come."""
        return {"left": 1 + int(self._timing().compile) + len(cands), "ref": None, "compiled": None,
                "cands": [None] * len(cands), "specs": cands}

    def _timing_jobs(self, i: int, device: int, cands: list[Candidate]) -> list[Job]:
        jobs = [self._reference_job(i, device)]
        if self._timing().compile:
            jobs.append(self._compiled_job(i, device))
        return jobs + [self._candidate_job(i, k, c, device) for k, c in enumerate(cands)]

    def _timing_part(self, out: Outcome | None, waiting: dict[int, dict[str, Any]], i: int | None = None) -> None:
        """One timing job's outcome (``None``: none, task ``i``'s count just came in); the task's row
        once its count and all of its timing jobs are in."""
        if out is not None:
            self._finished(out)
            i, part = out.job.key
            w = waiting[i]
            if part == "ref":
                w["ref"] = out
            elif part == "compiled":
                w["compiled"] = out
            else:
                w["cands"][part] = out
            w["left"] -= 1
        assert i is not None
        if waiting[i]["left"] == 0 and i in self.counts and self.results[i] is None:
            self._emit(i, self._timed_result(i, waiting[i]))

    def _candidates(self, i: int) -> list[Candidate]:
        if self.opts.candidates is not None:
            return list(self.opts.candidates.get(self.paths[i], ()))
        counts, _ = self.counts[i]
        return [Candidate(None)] if counts.has_model_new else []

    def _common(self, i: int, device: int) -> dict[str, Any]:
        t = self._timing()
        return {"path": str(self.paths[i]), "dtype": self.opts.dtype, "trials": t.rule().to_dict(), "warmup": t.warmup,
                "device": device, "inputs": t.inputs}

    def _reference_job(self, i: int, device: int) -> Job:
        # Eager only: the compile is a job of its own, so that a compile that fails, crashes or
        # runs past its limit costs the compiled time and never the reference's.
        kwargs = {**self._common(i, device), "compile": False}
        if self.opts.ops:
            kwargs["profile"] = True
        if self._timing().energy:
            kwargs["energy"] = True
        return Job((i, "ref"), TIME_REFERENCE_FN, kwargs, self._timing().timeout_s, device=device,
                   label=f"time {self.paths[i].stem}", error_kind="error")

    def _compiled_job(self, i: int, device: int) -> Job:
        return Job((i, "compiled"), TIME_COMPILED_FN, self._common(i, device), self._timing().timeout_s,
                   device=device, label=f"compile {self.paths[i].stem}", error_kind="error")

    def _candidate_job(self, i: int, k: int, cand: Candidate, device: int) -> Job:
        kwargs = {**self._common(i, device), "new": str(cand.path) if cand.path else None,
                  "correct_trials": self._timing().correct_trials, "judge": self.opts.judge,
                  "judge_seed": self.judge_seed}
        if self._timing().energy:
            kwargs["energy"] = True
        return Job((i, k), TIME_CANDIDATE_FN, kwargs, self._timing().timeout_s, device=device,
                   label=f"time {self.paths[i].stem} ({cand.label})", error_kind="error")

    def _timed_result(self, i: int, w: dict[str, Any]) -> Result:
        ref: Outcome = w["ref"]
        counts, count_wall = self.counts[i]
        comp: Outcome | None = w["compiled"]
        walls = {"count": count_wall, "reference": ref.wall_s,
                 "candidates": sum(o.wall_s for o in w["cands"])}
        if comp is not None:
            walls["compile"] = comp.wall_s
        if not ref.ok:
            if ref.kind == "gpu-unavailable" and not self.timed_ok:
                # The first timing says the worker cannot use the GPU: so will every other, and one
                # line says it better than a row per task. Once a task was timed, it is this task's
                # failure (a replaced worker that met a busy or resetting card) and the batch goes
                # on: it never ends early with the tasks after this one missing from the results.
                # The worker's own reason: this process may well see a usable GPU.
                err = GpuUnavailableError(status.availability())
                err.args = (f"the timing worker cannot use the GPU: {ref.error}",)
                raise err
            return _error(self.paths[i], ref.kind, f"{self.paths[i]}: timing failed: {ref.error}",
                          sum(walls.values()), ref.replaced)
        self.timed_ok += 1
        cands = [self._candidate(spec, out) for spec, out in zip(w["specs"], w["cands"])]
        replaced = list(ref.replaced) + (list(comp.replaced) if comp is not None else [])
        reply = {**ref.value, **(_compiled_part(comp) if comp is not None else {})}
        try:  # the worker's reply, typed here once (a bad one is this task's failure, named)
            reference = TimingReply.from_dict(reply)
        except TimingReplyError as exc:
            return _error(self.paths[i], "error", f"{self.paths[i]}: timing failed: {exc}", sum(walls.values()),
                          replaced)
        return self._assess(i, counts, reference, cands).with_run(wall_s=sum(walls.values()), wall_parts_s=walls,
                                                                   worker_replaced=replaced)

    @staticmethod
    def _candidate(spec: Candidate, out: Outcome) -> CandidateResult:
        name = str(spec.path) if spec.path else "ModelNew in task"
        if not out.ok:
            rec = candidate_record(name, spec.sample, kind=out.kind, error=out.error, wall_s=out.wall_s)
        else:
            rec = candidate_record(name, spec.sample, out.value, wall_s=out.wall_s)
        return rec.with_replaced(out.replaced)

    # --- judging without timing (--new without --time) ------------------------------------------

    def _judged_untimed(self, i: int) -> bool:
        return self.opts.candidates is not None and bool(self.opts.candidates.get(self.paths[i]))

    def _judge_all(self) -> None:
        """Every candidate judged by the same judge as a timed run, correctness only, in CPU workers."""
        jobs: list[Job] = []
        waiting: dict[int, dict[str, Any]] = {}
        for i in sorted(self.counts):
            cands = self._candidates(i)
            for k, c in enumerate(cands):
                kwargs = {"path": str(self.paths[i]), "new": str(c.path) if c.path else None, "dtype": self.opts.dtype,
                          "correct_trials": JUDGE_CORRECT_TRIALS, "judge": self.opts.judge, "judge_seed": self.judge_seed}
                jobs.append(Job((i, k), JUDGE_CANDIDATE_FN, kwargs, self.opts.count_timeout_s * 5,
                                label=f"judge {self.paths[i].stem} ({c.label})", error_kind="error"))
            waiting[i] = {"left": len(cands), "cands": [None] * len(cands), "specs": cands}
        for out in self.pool.run(jobs, self._started):
            self._finished(out)
            i, k = out.job.key
            w = waiting[i]
            w["cands"][k] = out
            w["left"] -= 1
            if w["left"] == 0:
                counts, count_wall = self.counts[i]
                records = [self._candidate(spec, o) for spec, o in zip(w["specs"], w["cands"])]
                result = self._assess(i, counts, cands=records, judged=True)
                self._emit(i, result.with_run(wall_s=count_wall + sum(o.wall_s for o in w["cands"])))

    # --- results and progress --------------------------------------------------------------------

    def _started(self, job: Job) -> None:
        self.in_hand.append(job.label)
        self._show()

    def _finished(self, out: Outcome) -> None:
        """Show what the job left. (A task's own KeyboardInterrupt is that task's failure, kind
        ``interrupt``: it never stops the batch, docs/runner.md.)"""
        if out.job.label in self.in_hand:
            self.in_hand.remove(out.job.label)
        self._show()
        if out.output.strip():
            self._log(f"--- output of {out.job.label} ---\n{out.output.rstrip()}")
        if self.opts.debug and out.traceback:
            self._log(out.traceback.rstrip())

    def _show(self) -> None:
        if self.progress is not None:
            extra = f" (+{len(self.in_hand) - 1})" if len(self.in_hand) > 1 else ""
            self.progress.start(f"{self.in_hand[0]}{extra}" if self.in_hand else "")

    def _log(self, text: str) -> None:
        if self.progress is not None:
            self.progress.log(text)
        else:
            print(text, file=sys.stderr)

    def _emit(self, i: int, result: Result) -> None:
        if len(self.paths) > 1:
            result = result.with_run(task=self.names[i])  # a folder of folders: "level1/19_ReLU"
        self.results[i] = result
        if self.writer is not None:
            self.writer.add(result.to_dict(), i)
        if self.progress is not None:
            self.progress.advance(self.paths[i].name)


def _compiled_part(out: Outcome) -> dict[str, Any]:
    """What the compile job adds to the reference's timing dict: its time, statistics, correctness
    and compile time, or why there is no compiled time (``compile_error_kind``: timeout, crash,
    error)."""
    if out.ok:
        keys = ("t_compile_ms", "compiled", "compiled_correctness", "compile_s", "compile_cache_hit")
        return {k: out.value.get(k) for k in keys}
    return {"t_compile_ms": None, "compile_error_kind": out.kind or "internal",
            "compile_error": out.error or "failed without a message"}


def _error(path: Path, kind: str | None, error: str | None, wall_s: float | None = None,
           replaced: Sequence[str] = ()) -> ErrorResult:
    """A failed task's record (an :class:`~roofline_ext.model.assess.ErrorResult`)."""
    rec = ErrorResult(path.stem, str(path), kind or "internal", error or "failed without a message")
    return rec.with_run(wall_s=wall_s, worker_replaced=replaced)


# --- the first versions' path, for comparison -----------------------------------------------------

def _process_path(paths: list[Path], gpu: GpuChoice, opts: BatchOptions, writer,
                  progress: ProgressFactory | None) -> list[Result]:
    if opts.ops and opts.timing is not None:
        raise RooflineError("--ops with --time profiles the reference in the pool's timing worker: "
                            "leave out --isolation process")
    roofs = resolve_roofs(gpu, opts.measured, opts.regime)
    # Untimed, each task is put on the roofs resolved here once (timed, assess_and_time resolves its own).
    analyze: Any = functools.partial(assess_task, per_op=opts.ops, roofs=roofs)
    if opts.timing is not None:
        t = opts.timing
        new = _single_candidate_file(paths, opts)
        # The first versions' path times a fixed count (--trials, else their 100), as they did.
        fixed = t.trials if t.trials is not None else DEFAULT_TRIALS
        analyze = functools.partial(assess_and_time, new=new, trials=fixed, warmup=t.warmup, compile=t.compile,
                                    device=t.devices[0], timeout_s=t.timeout_s, inputs=t.inputs,
                                    correct_trials=t.correct_trials)

    def one(p: Path) -> Result:
        import time

        t0 = time.perf_counter()
        result = analyze(p, gpu, opts.dtype, regime=opts.regime, strict_fp32=opts.strict_fp32,
                         measured=roofs.measured_peaks)
        return result.with_run(wall_s=time.perf_counter() - t0)

    adder = _IndexedAdder(writer) if writer is not None else None
    return assess_batch(paths, one, writer=adder, progress=progress, debug=opts.debug)


def _single_candidate_file(paths: list[Path], opts: BatchOptions) -> str | None:
    if opts.candidates is None:
        return None
    cands = [c for p in paths for c in opts.candidates.get(p, ())]
    if len(paths) != 1 or len(cands) > 1:
        raise RooflineError("--isolation process times one candidate file for one task; "
                            "--new DIR needs the pool (--isolation pool)")
    return str(cands[0].path) if cands else None


class _IndexedAdder:
    """``assess_batch`` calls ``writer.add(result)`` in task order: give the index ourselves."""

    def __init__(self, writer) -> None:
        self.writer, self.n = writer, 0

    def add(self, result: Mapping[str, Any]) -> None:
        self.writer.add(result, self.n)
        self.n += 1


def _timing_job_of(i: int, job: Job) -> bool:
    """Whether ``job`` is one of task ``i``'s timing jobs (key ``(i, part)``; a count's key is ``i``)."""
    return job.fn != COUNT and job.key[0] == i
