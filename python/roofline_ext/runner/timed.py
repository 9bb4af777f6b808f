"""``analyze --time``: GPU times of the reference and the candidate, put on every roof.

Timing runs in a subprocess per task (:mod:`roofline_ext.runner.isolation`), so an illegal memory access,
an out-of-memory or a hang is recorded for that task and the batch goes on; counting runs here, as
for plain ``analyze``, and the two meet in :func:`roofline_ext.runner.analyze.analyze_task`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from .analyze import GpuChoice, analyze_task
from ..errors import RooflineError

DEFAULT_TIMEOUT_S = 600.0


class TimingError(RooflineError):
    """Timing a task failed (its one-line reason and ``kind``: crash, timeout, error, ...)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _fraction(t_min: float | None, t: float | None) -> float | None:
    return t_min / t if t_min and t else None


def analyze_and_time(
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
) -> dict[str, Any]:
    """Time ``path`` on CUDA device ``device`` (isolated) and analyze it with those times.

    The result is :func:`analyze_task`'s plus ``timing`` (per-variant statistics, correctness,
    speed-up) and, per roof, the compiled reference's fraction when ``compile``. Raises
    ``TimingError`` when the timing process failed, ``TaskError`` for a bad task file.
    """
    from .isolation import run_isolated

    kwargs = {"path": str(Path(path).resolve()), "new": str(Path(new).resolve()) if new else None,
              "dtype": dtype, "trials": trials, "warmup": warmup, "compile": compile, "device": device}
    outcome = run_isolated(kwargs, timeout_s=timeout_s)
    if not outcome["ok"]:
        if outcome["kind"] == "gpu-unavailable":
            from ..device.status import availability
            from ..errors import GpuUnavailableError

            raise GpuUnavailableError(availability())
        raise TimingError(f"{path}: timing failed: {outcome['error']}", outcome["kind"])
    timing = outcome["result"]
    correct = (timing.get("correctness") or {}).get("ok")
    result = analyze_task(path, gpu, dtype, regime=regime, strict_fp32=strict_fp32,
                          t_ref_ms=timing["t_ref_ms"], t_new_ms=timing.get("t_new_ms"), measured=measured)
    result["timing"] = timing
    result["correct"] = correct
    result["speedup"] = timing.get("speedup")
    result["t_compile_ms"] = timing.get("t_compile_ms")
    for roof in (result.get("roofs") or {}).values():
        if roof and timing.get("t_compile_ms"):
            roof["compile_fraction"] = _fraction(roof.get("t_min_ms"), timing["t_compile_ms"])
    notes = result.setdefault("notes", [])
    if correct is False:
        notes.append(f"the candidate is INCORRECT ({timing['correctness'].get('reason')}); its time is "
                     "reported but means nothing")
    if result.get("impossible"):
        notes.append("a time is below a floor, the floor of the reference's operations: that code took an "
                     "algebraic or structural shortcut, or the FLOP/byte counts or the peaks are wrong "
                     "for this task")
    if not (result.get("roofs") or {}).get("measured"):
        notes.append("no measured roof for this GPU: run `roofline-ext calibrate` once to add it")
    return result
