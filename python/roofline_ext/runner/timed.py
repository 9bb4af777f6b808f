"""``analyze --time``: GPU times of the reference and the candidates, put on every roof and scored.

Both runner paths end in :func:`roofline_ext.model.assess.assess`. The pool
(:mod:`roofline_ext.runner.batch`) times the reference and each candidate as jobs of their own;
``--isolation process`` (:func:`assess_and_time`) times a task in a subprocess of its own
(:mod:`roofline_ext.runner.isolation`) and counts it in this process as the first versions did; each
turns its jobs' replies into typed records here (:func:`candidate_record`), so the two paths give
results of one shape.

An incorrect candidate gets no fraction and no score; a candidate below a floor is flagged on that
roof and not scored (:mod:`roofline_ext.model.scoring`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from ..device import status
from ..errors import GpuUnavailableError, RooflineError
from ..measure.timing_record import TimingReply, TimingReplyError
from ..model.assess import CandidateResult, TaskResult
from . import isolation
from .analyze import GpuChoice, assess_task

DEFAULT_TIMEOUT_S = 600.0


class TimingError(RooflineError):
    """Timing a task failed (its one-line reason and ``kind``: crash, timeout, error, ...)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


# --- a candidate's record from what its job returned ----------------------------------------------

def candidate_record(candidate: str, sample: int | None, value: Mapping[str, Any] | None = None, *,
                     kind: str | None = None, error: str | None = None,
                     wall_s: float | None = None) -> CandidateResult:
    """A candidate before scoring: ``value`` is what ``time_candidate`` (or ``judge_candidate``)
    returned, or ``kind``/``error`` say why it could not be judged or timed.

    ``verdict`` is the one vocabulary (:mod:`roofline_ext.model.verdict`): ``correct``,
    ``incorrect``, ``invalid`` or ``error`` here; scoring (:func:`roofline_ext.model.assess.assess`)
    turns a correct one that beats a floor into ``below_floor``."""
    if value is None:
        return CandidateResult.failed(candidate, sample, kind=kind, error=error, wall_s=wall_s)
    try:
        return CandidateResult.from_reply(candidate, sample, value, wall_s=wall_s)
    except TimingReplyError as exc:  # a reply that is not what the worker writes: this candidate's failure
        return CandidateResult.failed(candidate, sample, kind="error", error=f"the timing worker's reply: {exc}",
                                      wall_s=wall_s)


# --- the one-subprocess-per-task path (--isolation process) ----------------------------------------

def analyze_and_time(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`assess_and_time`'s result as its JSON dict (same arguments)."""
    return assess_and_time(*args, **kwargs).to_dict()


def assess_and_time(
    path: str | os.PathLike,
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    measured: Mapping[str, float] | None | bool = True,
    new: str | os.PathLike | None = None,
    trials: int = 100,
    warmup: int = 10,
    compile: bool = False,
    device: int = 0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    inputs: str = "cpu",
    correct_trials: int = 1,
) -> TaskResult:
    """Time ``path`` on CUDA device ``device`` in a fresh subprocess and analyze it with those times:
    the task counted here and assessed with its timing (:func:`roofline_ext.model.assess.assess`),
    as the pool's timed results are. Raises ``TimingError`` when the timing process failed,
    ``TaskError`` for a bad task file.
    """
    kwargs = {"path": str(Path(path).resolve()), "new": str(Path(new).resolve()) if new else None,
              "dtype": dtype, "trials": trials, "warmup": warmup, "compile": compile, "device": device,
              "inputs": inputs, "correct_trials": correct_trials}
    outcome = isolation.run_isolated(kwargs, timeout_s=timeout_s)
    if not outcome["ok"]:
        if outcome["kind"] == "gpu-unavailable":
            raise GpuUnavailableError(status.availability())
        raise TimingError(f"{path}: timing failed: {outcome['error']}", outcome["kind"])
    value = outcome["result"]
    try:  # the subprocess's reply, typed here once
        timing = TimingReply.from_dict(value)
    except TimingReplyError as exc:
        raise TimingError(f"{path}: timing failed: {exc}", "error") from exc
    candidates = []
    if value.get("candidate") or value.get("correctness"):
        candidates.append(candidate_record(value.get("candidate") or "ModelNew in task", None, value))
    return assess_task(path, gpu, dtype, regime=regime, strict_fp32=strict_fp32, measured=measured, timing=timing,
                       candidates=candidates)
