"""Analysis of task files against a GPU's roofs: one task (:func:`analyze_task`) or a folder of them
(:func:`analyze_batch`), without running anything on a GPU.

Kept apart from the CLI so that timing (``--time``/``--new``) can add ``t_ref_ms``/``t_new_ms`` to
:func:`analyze_task` and reuse the batch loop unchanged.

Task files are user code and run in this process when loaded (see :mod:`roofline_ext.tasks.loading`)
unless :func:`analyze_task` is given counts made elsewhere: the CLI's batch runner
(:mod:`roofline_ext.runner.batch`) counts in worker processes and only puts the counts on the roofs
here; :func:`analyze_batch` is the in-process loop that ``--isolation process`` keeps. Each task's failure becomes a result with ``status: "error"`` and a one-line ``error``; the batch
goes on, and each result is written to the output files as soon as it exists (temp file +
``os.replace``), so an interrupted batch keeps every task finished before the interruption.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol

from ..errors import RooflineError, UserError
from ..model.floors import roofline_result
from ..model.ops import attach_ops
from ..model.gpu import GpuChoice, resolve_gpu
from ..model.roofs import RoofSet
from ..peaks.cache import cached_peaks, find_cached
from ..peaks.measured import MeasuredPeaks
from ..report.progress import Progress
from ..tasks.counting import Counts, count_task, require_torch
from ..tasks.loading import TaskError, load_task, task_names

class ResultSink(Protocol):
    """Where a batch hands each result as soon as it exists (a ``ResultsWriter``, or an adapter)."""

    def add(self, result: Mapping[str, Any]) -> None: ...


__all__ = ["analyze_task", "analyze_batch", "calibration_for", "error_result", "measured_peaks_for", "resolve_roofs",
           "ROOF_SET_KEY"]

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

@contextlib.contextmanager
def task_sandbox():
    """What a task may change and we put back: stdout (task prints must not corrupt JSON on stdout;
    they go to stderr), warnings and torch's logs (torch's chatter about the task is not ours to
    show), torch's default dtype (a task that calls torch.set_default_dtype must not change the
    next one)."""
    torch = sys.modules.get("torch")
    default_dtype = torch.get_default_dtype() if torch is not None else None
    with _fd1_to_stderr(), contextlib.redirect_stdout(sys.stderr), _quiet_torch_logs(), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_default_dtype(default_dtype or torch.float32)


@contextlib.contextmanager
def _fd1_to_stderr():
    """File descriptor 1 points at stderr while task code runs: ``os.write(1, ...)``,
    ``sys.__stdout__`` and child processes write the descriptor, not ``sys.stdout``."""
    for stream in (sys.stdout, sys.__stdout__):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = _redirect_fd(2, 1)
    try:
        yield
    finally:
        # What the task left in sys.__stdout__'s buffer was written while fd 1 was stderr: it goes
        # there too, before fd 1 is ours again.
        with contextlib.suppress(Exception):
            sys.__stdout__.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _redirect_fd(src: int, dst: int) -> int | None:
    """Point ``dst`` at ``src``; returns a copy of the old ``dst``, or None when there is no such
    descriptor (a daemon without stdout has nothing to protect)."""
    try:
        saved = os.dup(dst)
    except OSError:
        return None
    try:
        os.dup2(src, dst)
    except OSError:
        os.close(saved)
        return None
    return saved


#: The ``torch`` logger's level while a task runs (:func:`_quiet_torch_logs`): nothing it logs shows.
QUIET_TORCH_LOGS = logging.CRITICAL + 1


@contextlib.contextmanager
def _quiet_torch_logs():
    """torch logs a failed shape function as a 19-line ERROR traceback before the failure reaches
    us as one line; shown only when the ``roofline_ext`` logger is at DEBUG (``--debug``)."""
    if logging.getLogger("roofline_ext").isEnabledFor(logging.DEBUG):
        yield
        return
    log = logging.getLogger("torch")
    level = log.level
    if level == QUIET_TORCH_LOGS:
        # Quiet already (a counting worker: its fork server quieted torch's logs before it forked,
        # worker.quiet_torch_logs): setLevel would clear the cache of every logger (~220 with dynamo
        # loaded), which in a fresh fork writes ~330 pages that the server shares (1 ms and as many
        # page faults per task), to change nothing.
        yield
        return
    log.setLevel(QUIET_TORCH_LOGS)
    try:
        yield
    finally:
        log.setLevel(level)


def _roof_dtype(counts) -> tuple[str, str | None]:
    """dtype for the compute roof, and a note when it is a stand-in."""
    if counts.compute_dtype is not None:
        note = None
        if counts.dtype == "mixed":
            note = (f"mixed dtypes {', '.join(counts.dtypes)}: the {counts.compute_dtype} roof "
                    "(the fastest present) is used, so the floor stays a floor")
        return counts.compute_dtype, note
    return "torch.float32", "no floating-point tensors: the float32 roof is used"


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
    the run resolved them once (:func:`resolve_roofs`); given, ``measured`` is not looked at. The
    result carries them under :data:`ROOF_SET_KEY`. Raises ``TaskError`` for a bad task file.
    """
    if regime not in REGIMES:
        raise UserError(f"unknown regime {regime!r}; choose one of: {', '.join(REGIMES)}")
    choice = gpu if isinstance(gpu, GpuChoice) else resolve_gpu(gpu)
    if counts is None:
        counts = _count_here(path, dtype, ops=per_op)
    if per_op and counts.ops is None:
        raise UserError(f"{path}: per-op results need counts made with ops=True")
    _require_output(counts)

    if roofs is None:
        roofs = resolve_roofs(choice, measured, regime)
    elif roofs.regime != regime:
        raise ValueError(f"the roofs were resolved for the {roofs.regime} regime, the task asks for {regime}")
    roof_dtype, dtype_note = _roof_dtype(counts)
    # The floors are computed from the very peaks the result carries (roofs), which the charts draw.
    typed = roofline_result(
        counts.flops, counts.bytes, roof_dtype, choice.sheet if choice.sheet is not None else choice.name,
        t_ref_ms, t_new_ms, simt_flops=counts.simt_flops, strict_fp32=strict_fp32,
        derived=roofs.derived_peaks, measured=roofs.measured_peaks,
        read_bytes=counts.input_bytes + counts.param_bytes, write_bytes=counts.output_bytes,
    )
    if typed is not None and per_op:
        typed = attach_ops(typed, counts.ops or ())
    r = typed.to_dict() if typed is not None else None
    notes = list(counts.notes)
    if dtype_note:
        notes.append(dtype_note)
    no_roofline = None if r is not None else _no_roofline_reason(counts, choice)
    if no_roofline:
        notes.append(f"no roofline: {no_roofline}")

    result = _result_dict(counts, choice, regime, strict_fp32, roof_dtype, r, t_ref_ms, t_new_ms, notes)
    if include_ops:
        result["by_op"] = counts.by_op
    if per_op:
        result["ops"] = (r or {}).get("ops") or [dict(o.to_dict(), floors_ms={}, limiters={})
                                                 for o in counts.ops or ()]
        result["unfused"] = {"read_bytes": counts.unfused_read_bytes, "write_bytes": counts.unfused_write_bytes,
                             "bytes": counts.unfused_bytes, **((r or {}).get("unfused") or {})}
    # The typed result (RooflineResult, with ops), for callers that want it: not JSON output.
    result["_result"] = typed
    # The roofline() dict itself, for describe(); not JSON output (it repeats the fields above).
    result["_roofline"] = r
    result["_no_roofline"] = no_roofline
    result[ROOF_SET_KEY] = roofs
    return result


def _result_dict(counts: Counts, choice: GpuChoice, regime: str, strict_fp32: bool, roof_dtype: str | None,
                 r: dict[str, Any] | None, t_ref_ms: float | None, t_new_ms: float | None,
                 notes: list[str]) -> dict[str, Any]:
    """The task's JSON keys, from its counts and its roofline dict ``r`` (None: no roofline)."""
    return {
        "task": counts.task,
        "path": counts.path,
        "status": "ok",
        "model": counts.model,
        "has_model_new": counts.has_model_new,
        "mode": counts.mode,  # the mode the model was counted in (docs/counting.md)
        "flops": counts.flops,
        "simt_flops": counts.simt_flops,
        "total_flops": counts.total_flops,
        "flops_flopcounter": counts.flops_flopcounter,
        "bytes": counts.bytes,
        "input_bytes": counts.input_bytes,
        "param_bytes": counts.param_bytes,
        "output_bytes": counts.output_bytes,
        "dtype": counts.dtype,
        "dtypes": counts.dtypes,
        "compute_dtype": roof_dtype,
        "cast": counts.cast,
        "arithmetic_intensity": counts.arithmetic_intensity,
        "inputs": counts.inputs,
        "outputs": counts.outputs,
        "gpu": choice.name,
        "gpu_source": choice.source,
        "sku": choice.sheet.name if choice.sheet is not None else None,
        "regime": regime,
        "strict_fp32": strict_fp32,
        "t_min_ms": r["t_min_ms"] if r else None,
        "bound": r["bound"] if r else None,
        "primary_roof": r["primary_roof"] if r else None,
        "compute_unit": r["unit"] if r else None,
        "roofs": r["roofs"] if r else {"datasheet": None, "derived": None, "measured": None},
        "t_ref_ms": t_ref_ms,
        "t_new_ms": t_new_ms,
        "ref_roofline_frac": r.get("ref_roofline_frac") if r else None,
        "roofline_frac": r.get("roofline_frac") if r else None,
        "impossible": bool(r and r["impossible"]),
        "count_seconds": counts.seconds,
        "notes": notes,
    }


def _require_output(counts) -> None:
    """A forward that returns no tensor (None, a number, a string) writes nothing a floor could
    count: that is a broken task, not a floor of zero."""
    if counts.outputs:
        return
    also = "" if counts.inputs else "; get_inputs() gave no tensor either"
    raise TaskError(f"{counts.path}: Model.forward() returned no tensor{also}: a task's forward returns "
                    "its result tensor(s)", kind="forward", path=counts.path)


def _no_roofline_reason(counts, choice: GpuChoice) -> str:
    """Why a counted task has no floor, in words: no bytes, or no peaks for this GPU."""
    if not counts.bytes:
        return ("the task reads and writes 0 bytes (only empty tensors), so it has no floor "
                "on any GPU")
    return f"no datasheet, derived or measured peaks are known for {choice.name}"


def error_result(path: str | os.PathLike, exc: BaseException) -> dict[str, Any]:
    """The record of a task that failed: its one-line reason and the step that failed."""
    kind = getattr(exc, "kind", None)
    if kind is None:
        kind = "error" if isinstance(exc, RooflineError) else "internal"
    message = " ".join(str(exc).split()) or type(exc).__name__
    if kind == "internal":
        message = f"{type(exc).__name__}: {message}"
    return {"task": Path(path).stem, "path": str(path), "status": "error", "error_kind": kind,
            "error": message}


# --- a batch ----------------------------------------------------------------------------------------

def analyze_batch(
    paths: Iterable[str | os.PathLike],
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    writer: ResultSink | None = None,
    progress: bool = True,
    debug: bool = False,
    measured: Mapping[str, float] | None | bool = True,
    analyze: Callable[..., dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Analyze every task file in ``paths``; a failing task becomes an error result, never a stop.

    Each result goes to ``writer`` (if given) as soon as it exists. ``debug`` prints each failure's
    traceback on stderr (the batch still goes on). ``measured`` as for :func:`analyze_task`, looked
    up once for the whole batch. ``analyze`` replaces :func:`analyze_task` (same
    signature), for callers that add timing. Ctrl-C stops the batch; results so far are kept.
    """
    task_paths = [Path(p) for p in paths]
    choice = gpu if isinstance(gpu, GpuChoice) else resolve_gpu(gpu)
    # The roofs are per GPU, not per task: resolve them once. A caller's own ``analyze`` (timing)
    # gets the measured peaks they hold; analyze_task gets the roof set itself.
    roofs = resolve_roofs(choice, measured, regime)
    measured = roofs.measured_peaks
    analyze = analyze or functools.partial(analyze_task, roofs=roofs)
    results: list[dict[str, Any]] = []
    names = task_names(task_paths)  # a folder of folders: "level1/19_ReLU"
    with Progress(len(task_paths), enabled=progress) as bar:
        for p, name in zip(task_paths, names):
            bar.start(p.name)
            try:
                result = analyze(p, choice, dtype, regime=regime, strict_fp32=strict_fp32, measured=measured)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # SystemExit from a task too; only Ctrl-C ends a batch
                if debug:
                    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
                result = error_result(p, exc)
            result["task"] = name
            results.append(result)
            if writer is not None:
                writer.add(result)
            bar.advance(p.name)
    return results
