"""Analysis of task files against a GPU's roofs: one task (:func:`assess_task`, typed;
:func:`analyze_task`, its dict) or a folder of them (:func:`assess_batch`, :func:`analyze_batch`),
without running anything on a GPU.

Here a task is counted where no worker counted it and its roofs are resolved; the result itself is
assembled by :func:`roofline_ext.model.assess.assess`, with the reference's timing and the
candidates when the caller has them (``--time``/``--new``), so every path gives one shape.

Task files are user code and run in this process when loaded (see :mod:`roofline_ext.tasks.loading`)
unless :func:`assess_task` is given counts made elsewhere: the CLI's batch runner
(:mod:`roofline_ext.runner.batch`) counts in worker processes and only puts the counts on the roofs
here; :func:`assess_batch` is the in-process loop that ``--isolation process`` keeps. Each task's
failure becomes a result with ``status: "error"`` and a one-line ``error``; the batch
goes on, and each result is written to the output files as soon as it exists (temp file +
``os.replace``), so an interrupted batch keeps every task finished before the interruption.
"""
from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from ..errors import UserError
from ..measure.timing_record import TimingReply
from ..model.assess import CandidateResult, ErrorResult, TaskResult, assess
from ..model.gpu import GpuChoice, resolve_gpu
from ..model.roofs import RoofSet
from ..peaks.cache import cached_peaks, find_cached
from ..peaks.measured import MeasuredPeaks
from ..tasks.counting import Counts, count_task, require_torch
from ..tasks.loading import load_task, task_names
from ..tasks.sandbox import task_sandbox

R = TypeVar("R")


class ResultSink(Protocol):
    """Where a batch hands each result as soon as it exists (a ``ResultsWriter``, or an adapter)."""

    def add(self, result: Mapping[str, Any]) -> None: ...


class ProgressBar(Protocol):
    """What a batch shows its tasks on, entered around the batch: the task in hand (``start``), one
    more done (``advance``), a line above the bar (``log``: what a task printed). The CLI passes
    ``report.progress.Progress``; the runner never imports the report for it (issue 25, step 4)."""

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...

    def start(self, name: str) -> None: ...

    def advance(self, name: str) -> None: ...

    def log(self, text: str) -> None: ...


#: The runner's progress callback: given the number of tasks, the bar to show them on. ``None``
#: (every runner function's default) shows none.
ProgressFactory = Callable[[int], ProgressBar]


class _NoBar:
    """The bar of a batch shown on none."""

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def start(self, name: str) -> None:
        return None

    def advance(self, name: str) -> None:
        return None

    def log(self, text: str) -> None:
        return None


__all__ = ["analyze_task", "assess_task", "assess_batch", "analyze_batch", "calibration_for", "error_result", "measured_peaks_for", "resolve_roofs",
           "ROOF_SET_KEY", "ProgressBar", "ProgressFactory"]

#: The private key (stripped by ``report.writers.public``, so never JSON) under which every result
#: carries the :class:`RoofSet` its floors were computed against: the charts draw that one.
ROOF_SET_KEY = "_roof_set"

REGIMES = ("burst", "sustained")


def measured_peaks_for(gpu_name: str, regime: str = "burst", uuid: str | None = None) -> Mapping[str, float] | None:
    """Calibrated peaks for ``gpu_name`` from the calibration cache, or None.

    The single hook between analysis and calibration: None when the calibration module is absent
    or nothing is cached for this GPU.
    """
    if uuid:
        # This very card's calibration when it has one (a host with several of one model).
        peaks = cached_peaks(uuid=uuid, regime=regime)
        if peaks is not None:
            return peaks
    return cached_peaks(gpu_name=gpu_name, regime=regime)


def calibration_for(gpu: GpuChoice) -> dict[str, Any] | None:
    """The cached calibration whose peaks :func:`measured_peaks_for` hands out for this GPU: this
    card's own (by UUID) when it has one, else the newest of the same part; None without one."""
    uuid = getattr(gpu.device, "uuid", None)
    cal = find_cached(uuid=uuid) if uuid else None
    return cal if cal is not None else find_cached(gpu_name=gpu.name)


def resolve_roofs(choice: GpuChoice, measured: Mapping[str, float] | None | bool = True,
                  regime: str = "burst") -> RoofSet:
    """Every roof of ``choice`` for one run, resolved once: ``measured`` True looks this GPU's
    calibration up for ``regime`` (:func:`measured_peaks_for`); a mapping is used as given (a
    ``MeasuredPeaks`` of the cache brings the calibration it came from, for the chart's L2 and
    subtitle); None or False: no measured roof."""
    if regime not in REGIMES:
        raise UserError(f"unknown regime {regime!r}; choose one of: {', '.join(REGIMES)}")
    why = "measured roofs left out by the caller" if measured is False else None
    if measured is True:
        measured = measured_peaks_for(choice.name, regime, getattr(choice.device, "uuid", None))
    peaks = None if isinstance(measured, bool) else measured
    return RoofSet.resolve(choice, regime, measured=peaks, calibration=_calibration_of(peaks), no_measured=why)


def _calibration_of(peaks: Mapping[str, float] | None) -> dict[str, Any] | None:
    """The cached calibration measured peaks were read from (same card, same date), or None: peaks
    given by a caller name no calibration, and a calibration since replaced is not theirs."""
    if not isinstance(peaks, MeasuredPeaks) or not peaks.uuid:
        return None
    cal = find_cached(uuid=peaks.uuid)
    return cal if cal is not None and cal.get("date") == peaks.date else None


# --- one task ---------------------------------------------------------------------------------------

def _count_here(path: str | os.PathLike, dtype: str | None, ops: bool = False) -> Counts:
    require_torch()  # before the task's own `import torch` fails with a less helpful message
    with task_sandbox():
        task = load_task(path)
        try:
            return count_task(task, dtype, ops=ops)
        finally:
            task.unload()


def analyze_task(
    path: str | os.PathLike,
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    t_ref_ms: float | None = None,
    t_new_ms: float | None = None,
    measured: Mapping[str, float] | None | bool = True,
    include_ops: bool = True,
    counts: Counts | None = None,
    per_op: bool = False,
    roofs: RoofSet | None = None,
) -> dict[str, Any]:
    """Count a task file and put it on the GPU's roofs. Returns a JSON-ready dict.

    ``gpu``: a :class:`GpuChoice`, a name (as ``--gpu``), or None for the default. ``dtype``:
    ``fp32|fp16|bf16`` casts model and inputs first. ``t_ref_ms``/``t_new_ms``: times measured
    elsewhere (the timing layer), giving ``ref_roofline_frac``/``roofline_frac``. ``measured``:
    True looks up the calibration cache for this GPU and ``regime``; a mapping is used as is;
    None/False means no measured roof. ``counts``: the task's counts made elsewhere (the runner
    counts in a worker process); the file is then not loaded here. ``roofs``: the GPU's roofs as
    the run resolved them once (:func:`resolve_roofs`); given, ``measured`` is not looked at.

    The dict view of :func:`assess_task`'s :class:`TaskResult`, for the callers of this public
    function: its JSON keys, and the typed result's attributes under private keys (never JSON):
    ``_result`` (the floors, :class:`RooflineResult`), ``_roofline`` (their dict, for
    ``describe``), ``_no_roofline`` (why there is none) and :data:`ROOF_SET_KEY` (the roofs).
    Raises ``TaskError`` for a bad task file.
    """
    result = assess_task(path, gpu, dtype, regime=regime, strict_fp32=strict_fp32, t_ref_ms=t_ref_ms,
                         t_new_ms=t_new_ms, measured=measured, include_ops=include_ops, counts=counts,
                         per_op=per_op, roofs=roofs)
    return {**result.to_dict(), "_result": result.roofline, "_roofline": result.roofline_dict(),
            "_no_roofline": result.no_roofline, ROOF_SET_KEY: result.roof_set}


def assess_task(
    path: str | os.PathLike,
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    measured: Mapping[str, float] | None | bool = True,
    counts: Counts | None = None,
    per_op: bool = False,
    roofs: RoofSet | None = None,
    timing: TimingReply | Mapping[str, Any] | None = None,
    candidates: Sequence[CandidateResult] = (),
    **assessing: Any,
) -> TaskResult:
    """:func:`analyze_task`'s work as a typed :class:`TaskResult` (:func:`roofline_ext.model.assess.assess`):
    the task counted here unless ``counts`` are given, on the roofs resolved here unless ``roofs``
    are given, with the reference's ``timing`` (the worker's reply, typed; a dict is read through
    ``TimingReply.from_dict``), the ``candidates`` and what else ``assess`` takes
    (``profile``, ``l2_tbps``, ``energy_costs``, ``judged``, ``t_ref_ms``/``t_new_ms``,
    ``include_ops``). Raises ``TaskError`` for a bad task file."""
    if regime not in REGIMES:
        raise UserError(f"unknown regime {regime!r}; choose one of: {', '.join(REGIMES)}")
    choice = gpu if isinstance(gpu, GpuChoice) else resolve_gpu(gpu)
    if counts is None:
        counts = _count_here(path, dtype, ops=per_op)
    if per_op and counts.ops is None:
        raise UserError(f"{path}: per-op results need counts made with ops=True")
    if roofs is None:
        roofs = resolve_roofs(choice, measured, regime)
    elif roofs.regime != regime:
        raise ValueError(f"the roofs were resolved for the {roofs.regime} regime, the task asks for {regime}")
    return assess(counts, roofs, timing, candidates, gpu=choice, regime=regime, strict_fp32=strict_fp32,
                  per_op=per_op, **assessing)


def error_result(path: str | os.PathLike, exc: BaseException) -> dict[str, Any]:
    """The record of a task that failed: its one-line reason and the step that failed
    (:meth:`ErrorResult.from_exception`'s keys)."""
    return ErrorResult.from_exception(path, exc).to_dict()


# --- a batch ----------------------------------------------------------------------------------------

def analyze_batch(
    paths: Iterable[str | os.PathLike],
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    writer: ResultSink | None = None,
    progress: ProgressFactory | None = None,
    debug: bool = False,
    measured: Mapping[str, float] | None | bool = True,
    analyze: Callable[..., dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Analyze every task file in ``paths``; a failing task becomes an error result, never a stop.

    Each result goes to ``writer`` (if given) as soon as it exists; ``progress`` (if given) makes the
    bar the tasks are shown on (:data:`ProgressFactory`). ``debug`` prints each failure's
    traceback on stderr (the batch still goes on). ``measured`` as for :func:`analyze_task`, looked
    up once for the whole batch. ``analyze`` replaces :func:`analyze_task` (same
    signature), for callers that add timing. Ctrl-C stops the batch; results so far are kept.
    """
    choice = gpu if isinstance(gpu, GpuChoice) else resolve_gpu(gpu)
    # The roofs are per GPU, not per task: resolve them once. A caller's own ``analyze`` (timing)
    # gets the measured peaks they hold; analyze_task gets the roof set itself.
    roofs = resolve_roofs(choice, measured, regime)
    analyze = analyze or functools.partial(analyze_task, roofs=roofs)

    def named(result: dict[str, Any], name: str) -> dict[str, Any]:
        result["task"] = name
        if writer is not None:
            writer.add(result)
        return result

    def one(p: Path) -> dict[str, Any]:
        assert analyze is not None
        return analyze(p, choice, dtype, regime=regime, strict_fp32=strict_fp32, measured=roofs.measured_peaks)

    return _each_task(paths, one, error_result, named, progress=progress, debug=debug)


def assess_batch(paths: Iterable[str | os.PathLike], assess_one: Callable[[Path], TaskResult | ErrorResult], *,
                 writer: ResultSink | None = None, progress: ProgressFactory | None = None,
                 debug: bool = False) -> list[TaskResult | ErrorResult]:
    """:func:`analyze_batch` with typed results: ``assess_one(path)`` is the task's
    :class:`TaskResult`; a failing task becomes an :class:`ErrorResult`. ``writer`` gets each
    result's JSON dict as soon as it exists."""
    def named(result: TaskResult | ErrorResult, name: str) -> TaskResult | ErrorResult:
        result = result.with_run(task=name)
        if writer is not None:
            writer.add(result.to_dict())
        return result

    return _each_task(paths, assess_one, ErrorResult.from_exception, named, progress=progress, debug=debug)


def _each_task(paths: Iterable[str | os.PathLike], analyze: Callable[[Path], R],
               failed: Callable[[Path, BaseException], R], named: Callable[[R, str], R], *,
               progress: ProgressFactory | None, debug: bool) -> list[R]:
    """The in-process loop: each task analyzed, a failure its error result, each result named
    (``named``: its name in the batch, and handed on) as soon as it exists."""
    if isinstance(progress, bool):  # the runner took a flag until issue 25 and built the bar itself
        if progress:
            raise TypeError("progress takes a factory (e.g. roofline_ext.report.progress.Progress) or None, "
                            "not True: the runner no longer imports the report to build a bar itself")
        progress = None
    task_paths = [Path(p) for p in paths]
    results: list[R] = []
    names = task_names(task_paths)  # a folder of folders: "level1/19_ReLU"
    with (progress(len(task_paths)) if progress is not None else _NoBar()) as bar:
        for p, name in zip(task_paths, names):
            bar.start(p.name)
            try:
                result = analyze(p)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # SystemExit from a task too; only Ctrl-C ends a batch
                if debug:
                    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
                result = failed(p, exc)
            results.append(named(result, name))
            bar.advance(p.name)
    return results
