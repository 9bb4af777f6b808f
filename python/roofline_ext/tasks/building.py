"""A task built on a device for timing and judging: its ``Model`` and ``ModelNew`` made from the
same ``get_init_inputs()`` under the same seed (``--dtype`` casts the model and the floating inputs),
its inputs, the tolerance their dtype is compared at, and the header a timing result carries.

The timing worker's jobs (``runner/timing_jobs.py``) build with these and time with
:mod:`roofline_ext.measure.task_timing`. (Building a model on fake or real tensors for *counting*
is ``counting.py`` and ``realbuild.py``.) Moved from ``runner/task_timing.py``, issue 25 step 4:
building a task is about the task, not about running processes.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any, Callable

from ..device.status import require_measurement
from ..measure.timing import lazy_torch
from ..peaks.units import TOLERANCES, task_dtype_name
from .loading import TaskError, exec_source_module, load_task

__all__ = ["INPUT_PLACEMENTS", "load_candidate", "open_task", "build", "build_where", "make_inputs",
           "tolerance", "header", "reference_setup", "weights_for"]


def _cast(obj, device, dtype):
    torch = lazy_torch()
    if isinstance(obj, torch.Tensor):
        obj = obj.to(device)
        if dtype is not None and obj.is_floating_point():
            obj = obj.to(dtype)
        return obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(o, device, dtype) for o in obj)
    return obj


_candidates = itertools.count(1)


def load_candidate(path: str | Path) -> tuple[type, Callable[[], None]]:
    """``ModelNew`` from a candidate file (which need not define Model/get_inputs), and a function
    that takes the file's module out of ``sys.modules`` again (a timing worker runs many files)."""
    try:
        task = load_task(path)
        if task.model_new_cls is None:
            task.unload()
            raise TaskError(f"{path}: defines no `ModelNew`", kind="no-model", path=path)
        return task.model_new_cls, task.unload
    except TaskError as exc:
        if exc.kind not in ("no-model", "no-get-inputs") or "ModelNew" in str(exc):
            raise
    # A candidate-only file: run it from its source (no bytecode read or written, as for tasks);
    # errors become one line, like a task's.
    p = Path(path)
    name = f"_roofline_candidate_{next(_candidates)}_{p.stem}"

    def unload() -> None:
        sys.modules.pop(name, None)

    try:
        mod = exec_source_module(p, name)
    except KeyboardInterrupt:
        unload()
        raise
    except BaseException as exc:
        unload()
        raise TaskError(f"{p}: loading failed: {type(exc).__name__}: {exc}", kind="import", path=p) from exc
    cls = getattr(mod, "ModelNew", None)
    if cls is None:
        unload()
        raise TaskError(f"{p}: defines no `ModelNew`", kind="no-model", path=p)
    return cls, unload


# --- the pieces both timing paths use -------------------------------------------------------------

INPUT_PLACEMENTS = ("auto", "cpu")


def open_task(path: str | Path, dtype: str | None, device: int):
    """The loaded task, its CUDA device and the ``--dtype`` cast (or None)."""
    tdtype = getattr(lazy_torch(), task_dtype_name(dtype)) if dtype is not None else None
    # The task loads first: a file that is broken (or kills its process) is reported as such even on
    # a machine where the GPU check would fail next.
    task = load_task(path)
    try:
        require_measurement(device)
    except BaseException:
        task.unload()
        raise
    return task, lazy_torch().device(f"cuda:{device}"), tdtype


def build(task, cls, init: list, dev, tdtype, seed: int, what: str):
    """``cls(*init)`` under ``seed``, its weights drawn on the CPU, moved to ``dev`` (and cast),
    in eval mode: how a candidate and the reference it is judged against are built."""
    return build_where(task, cls, init, dev, tdtype, seed, what, "cpu")[0]


def build_where(task, cls, init: list, dev, tdtype, seed: int, what: str, weights: str):
    """:func:`build`, and where the initial weights were drawn (``"gpu"`` or ``"cpu"``).

    ``weights="gpu"`` runs the constructor with ``dev`` as torch's default device, so the initial
    weights are drawn there: the reference job of ``level3/2_ShallowWideMLP`` (8.6 GB of parameters)
    spent 22 s beyond its trials with the weights drawn on the CPU (H200 host, 2026-12-02;
    ``benchmarks/timing_phases.py`` splits a job into its phases). The values differ from a CPU
    draw under the same seed (another generator), so only jobs that compare the model with nothing
    built the other way use it (the reference's and the compiled model's jobs,
    ``runner/timing_jobs.py``); a candidate and the reference it is judged against are both built
    on the CPU, as KernelBench builds them. A
    constructor that fails that way is run again on the CPU.
    """
    torch = lazy_torch()

    def construct():
        torch.manual_seed(seed)
        return task.call(cls, f"{what}(*get_init_inputs())", "init", *init)

    model, where = None, "cpu"
    if weights == "gpu" and dev.type != "cpu":
        try:
            with torch.device(dev):
                model, where = construct(), "gpu"
        except TaskError:
            pass
    if model is None:
        model = construct()

    def to_device(m):
        return m.to(dev) if tdtype is None else m.to(dev, tdtype)

    model = task.call(to_device, f"{what}.to(cuda)", "init", model)
    # The mode the task was counted in (docs/counting.md, "Mode"): eval unless it sets TRAINING = True.
    model = model.train() if vars(task.module).get("TRAINING") is True else model.eval()
    return model, where


def make_inputs(task, dev, tdtype, seed: int, placement: str = "auto") -> tuple[list, str]:
    """``get_inputs()`` under ``seed`` on ``dev``, and where they were made (``"gpu"`` or ``"cpu"``).

    ``placement="auto"`` runs ``get_inputs()`` with ``dev`` as torch's default device, so the
    task's factory calls (``torch.randn(...)``) fill the tensors on the GPU instead of filling
    them on the CPU and copying; a ``get_inputs()`` that fails that way (it calls ``.numpy()``,
    say) is run again on the CPU. ``"cpu"`` always makes them on the CPU, as the first versions
    did. Either way the values depend only on the task, the seed and the placement, so a reference
    and a candidate timed apart see the same inputs. Tensors still on the CPU are copied to ``dev``.
    """
    torch = lazy_torch()
    if placement not in INPUT_PLACEMENTS:
        raise ValueError(f"input placement {placement!r}: choose one of {', '.join(INPUT_PLACEMENTS)}")
    made = "cpu"
    raw = None
    if placement == "auto" and dev.type != "cpu":
        torch.manual_seed(seed)
        try:
            with torch.device(dev):
                raw = task.inputs()
            made = "gpu" if all(t.device == dev for t in _tensors(raw)) else "cpu"
        except TaskError:
            raw = None
    if raw is None:
        torch.manual_seed(seed)
        raw = task.inputs()
    return _cast(raw, dev, tdtype), made


def _tensors(obj) -> list:
    torch = lazy_torch()
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    return []


def tolerance(inputs: list, tdtype) -> tuple[Any, float]:
    torch = lazy_torch()
    run_dtype = next((t.dtype for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()),
                     tdtype or torch.float32)
    return run_dtype, TOLERANCES.get(str(run_dtype).replace("torch.", ""), 1e-4)


def header(path, dev, run_dtype, seed: int, made: str) -> dict[str, Any]:
    torch = lazy_torch()
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return {"task": str(path), "device": name, "dtype": str(run_dtype),
            "seed": seed, "inputs": made}


def reference_setup(task, path, dev, tdtype, seed: int, inputs: str, weights: str = "cpu"):
    """The reference ``Model``, its inputs, the tolerance, the result header and the constructor
    arguments, made the one way that the reference's and the compiled model's jobs and the judge
    (``runner/timing_jobs.py``) share (same seed, same placement), so the compiled model is checked against the very eager
    output the reference's timing ran and a candidate is built from the same arguments."""
    torch = lazy_torch()
    torch.manual_seed(seed)
    init = task.init_inputs()
    model, built = build_where(task, task.model_cls, init, dev, tdtype, seed, "Model", weights)
    args, made = make_inputs(task, dev, tdtype, seed, inputs)
    run_dtype, tol = tolerance(args, tdtype)
    return model, args, tol, {**header(path, dev, run_dtype, seed, made), "weights": built}, init


def weights_for(inputs: str) -> str:
    """Where a reference-only job draws the initial weights: on the GPU with the inputs
    (``--inputs auto``), on the CPU with ``--inputs cpu`` (the first versions' way, throughout)."""
    return "gpu" if inputs == "auto" else "cpu"
