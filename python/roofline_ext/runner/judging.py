"""``judge_kernel``: the judge for code that imports this package (an agent scoring generated kernels).

The candidate runs in a worker process of the pool, never in the caller's: a cheating candidate
can patch, spawn or crash only its worker, which is replaced after it. The result is the
candidate's record with its verdict (docs/scoring.md), the same as ``analyze --new [--time] --json``
gives under ``candidates[]``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..device import status
from ..errors import UserError
from ..model.gpu import resolve_gpu
from ..model.verdict import JUDGE_MODES
from .batch import BatchOptions, TimingOptions, run_batch
from .candidates import Candidate


def judge_kernel(task: str | os.PathLike, candidate: str | os.PathLike, *, time: bool = False,
                 gpu: str | None = None, mode: str = "strict", seed: int | None = None,
                 correct_trials: int = 5, trials: int | None = None, device: int = 0) -> dict[str, Any]:
    """Judge ``candidate`` (a file defining ``ModelNew``) against ``task``; with ``time`` also time
    and score it on GPU ``device``. Returns the candidate's record: ``verdict`` (``correct``,
    ``incorrect``, ``invalid``, ``below_floor``, ``error``), ``reason``, ``defence``, ``judgement``
    (with the seed that replays the run) and, when timed and correct, ``t_new_ms``, ``speedup`` and
    per roof ``roofs.<roof>.score``. Raises :class:`~roofline_ext.errors.UserError` for bad
    arguments and :class:`~roofline_ext.errors.GpuUnavailableError` for ``time`` without a GPU.
    ``trials`` None times adaptively, as ``analyze --time`` does by default (the 95% interval of the
    median within +-0.5%, capped at 1 s per variant); N times exactly N trials, as KernelBench does."""
    task_path, cand_path = Path(task), Path(candidate)
    for what, p in (("task", task_path), ("candidate", cand_path)):
        if not p.is_file():
            raise UserError(f"{p}: the {what} must be a regular file")
    if mode not in JUDGE_MODES:
        raise UserError(f"judge mode {mode!r}: choose one of {', '.join(JUDGE_MODES)}")
    if correct_trials < 1 or (trials is not None and trials < 1):
        raise UserError("correct_trials and trials must be at least 1")
    timing = None
    if time:
        status.require_measurement(device)
        timing = TimingOptions(trials=trials, devices=(device,), correct_trials=correct_trials)
    opts = BatchOptions(timing=timing, candidates={task_path: [Candidate(cand_path)]}, judge=mode, judge_seed=seed)
    result = run_batch([task_path], resolve_gpu(gpu), opts)[0]
    if result.get("status") != "ok":
        raise UserError(result.get("error") or f"{task_path}: the task failed")
    return dict(result["candidates"][0])
