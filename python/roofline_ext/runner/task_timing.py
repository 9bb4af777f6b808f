"""Time a task's reference (``Model``) and candidate (``ModelNew``) on the GPU, KernelBench-style.

Both are built from the same ``get_init_inputs()`` under the same seed, run on the same inputs
(``--dtype`` casts model and floating inputs), checked against each other with KernelBench's
tolerances, then timed with the one event-timing loop (:mod:`roofline_ext.measure.timing`).
Runs inside an isolated worker process (:mod:`roofline_ext.runner.isolation`).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..device.status import require_measurement
from ..measure.timing import DEFAULT_SEED, DEFAULT_TRIALS, DEFAULT_WARMUP, L2Flush, _torch, time_callable
from ..peaks.units import TOLERANCES, task_dtype_name
from ..tasks.loading import TaskError, load_task


def _cast(obj, device, dtype):
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        obj = obj.to(device)
        if dtype is not None and obj.is_floating_point():
            obj = obj.to(dtype)
        return obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(o, device, dtype) for o in obj)
    return obj


def _outputs(out) -> list:
    torch = _torch()
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _outputs(o)]
    return []


def compare(ref, new, tol: float) -> dict[str, Any]:
    """KernelBench's check: same shapes and ``allclose(atol=tol, rtol=tol)`` on every output tensor."""
    torch = _torch()
    r, n = _outputs(ref), _outputs(new)
    if len(r) != len(n):
        return {"ok": False, "tolerance": tol, "reason": f"{len(n)} outputs, reference has {len(r)}"}
    max_abs = 0.0
    for i, (a, b) in enumerate(zip(r, n)):
        if a.shape != b.shape:
            return {"ok": False, "tolerance": tol,
                    "reason": f"output {i} has shape {tuple(b.shape)}, reference {tuple(a.shape)}"}
        a64, b64 = a.detach().double(), b.detach().double()
        if not torch.isfinite(b64).all() and torch.isfinite(a64).all():
            return {"ok": False, "tolerance": tol, "reason": f"output {i} has NaN/Inf"}
        if a.numel():
            max_abs = max(max_abs, float((a64 - b64).abs().max()))
        if not torch.allclose(a64, b64, atol=tol, rtol=tol):
            return {"ok": False, "tolerance": tol, "max_abs_diff": max_abs,
                    "reason": f"output {i} differs beyond atol=rtol={tol:g} (max abs diff {max_abs:.3g})"}
    return {"ok": True, "tolerance": tol, "max_abs_diff": max_abs}


def _load_candidate(path: str | Path):
    """``ModelNew`` from a candidate file (which need not define Model/get_inputs)."""
    try:
        task = load_task(path)
        if task.model_new_cls is None:
            raise TaskError(f"{path}: defines no `ModelNew`", kind="no-model", path=path)
        return task.model_new_cls
    except TaskError as exc:
        if exc.kind not in ("no-model", "no-get-inputs") or "ModelNew" in str(exc):
            raise
    # A candidate-only file: import it plainly; errors become one line, like a task's.
    p = Path(path)
    spec = importlib.util.spec_from_file_location(f"_roofline_candidate_{p.stem}", str(p))
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = mod  # type: ignore[union-attr]
    try:
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise TaskError(f"{p}: loading failed: {type(exc).__name__}: {exc}", kind="import", path=p) from exc
    cls = getattr(mod, "ModelNew", None)
    if cls is None:
        raise TaskError(f"{p}: defines no `ModelNew`", kind="no-model", path=p)
    return cls


def time_task(path: str | Path, *, new: str | Path | None = None, dtype: str | None = None,
              trials: int = DEFAULT_TRIALS, warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED,
              compile: bool = False, device: int = 0) -> dict[str, Any]:
    """Time ``Model`` (and ``ModelNew`` from the task or ``new``) of a task file on CUDA device ``device``.

    Returns a JSON-able dict: ``t_ref_ms``, ``t_new_ms`` (or None), ``t_compile_ms`` (with
    ``compile``), per-variant timing stats, ``correctness`` of the candidate (and of the compiled
    reference), ``speedup``, the dtype and tolerance used. Raises ``GpuUnavailableError`` without a
    GPU and ``TaskError`` (one line) for a broken task.
    """
    tdtype = getattr(_torch(), task_dtype_name(dtype)) if dtype is not None else None
    # The task loads first: a file that is broken (or kills its process) is reported as such even on
    # a machine where the GPU check would fail next.
    task = load_task(path)
    try:
        require_measurement(device)
    except BaseException:
        task.unload()
        raise
    torch = _torch()
    dev = torch.device(f"cuda:{device}")
    try:
        new_cls = _load_candidate(new) if new is not None else task.model_new_cls
        torch.manual_seed(seed)
        init = task.init_inputs()
        torch.manual_seed(seed)
        model = task.build(init, "Model")
        def to_device(m):
            return m.to(dev) if tdtype is None else m.to(dev, tdtype)

        model = task.call(to_device, "Model.to(cuda)", "init", model).eval()
        candidate = None
        if new_cls is not None:
            torch.manual_seed(seed)
            candidate = task.call(new_cls, "ModelNew(*get_init_inputs())", "init", *init)
            candidate = task.call(to_device, "ModelNew.to(cuda)", "init", candidate).eval()
        torch.manual_seed(seed)
        inputs = _cast(task.inputs(), dev, tdtype)
        run_dtype = next((t.dtype for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()),
                         tdtype or torch.float32)
        tol = TOLERANCES.get(str(run_dtype).replace("torch.", ""), 1e-4)
        flush = L2Flush(device)
        result: dict[str, Any] = {"task": str(path), "candidate": str(new) if new else
                                  ("ModelNew in task" if candidate is not None else None),
                                  "device": torch.cuda.get_device_name(device), "dtype": str(run_dtype),
                                  "seed": seed}
        # no_grad, not inference_mode: inference tensors break some user code paths and FLOP counting.
        with torch.no_grad():
            ref_out = task.call(model, "Model.forward", "forward", *inputs)
            ref_t = time_callable(lambda: model(*inputs), device=device, trials=trials, warmup=warmup, flush=flush)
            result["reference"] = ref_t
            result["t_ref_ms"] = ref_t["median_ms"]
            result["t_new_ms"] = None
            if candidate is not None:
                new_out = task.call(candidate, "ModelNew.forward", "forward", *inputs)
                result["correctness"] = compare(ref_out, new_out, tol)
                new_t = time_callable(lambda: candidate(*inputs), device=device, trials=trials,
                                      warmup=warmup, flush=flush)
                result["candidate_timing"] = new_t
                result["t_new_ms"] = new_t["median_ms"]
                result["speedup"] = ref_t["median_ms"] / new_t["median_ms"] if new_t["median_ms"] > 0 else None
            if compile:
                compiled = torch.compile(model)
                comp_out = task.call(compiled, "torch.compile(Model).forward", "forward", *inputs)
                result["compiled_correctness"] = compare(ref_out, comp_out, tol)
                comp_t = time_callable(lambda: compiled(*inputs), device=device, trials=trials,
                                       warmup=max(warmup, 3), flush=flush)
                result["compiled"] = comp_t
                result["t_compile_ms"] = comp_t["median_ms"]
        return result
    finally:
        task.unload()
