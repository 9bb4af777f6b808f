"""Time a task's reference (``Model``) and candidate (``ModelNew``) on the GPU, KernelBench-style.

Both are built from the same ``get_init_inputs()`` under the same seed, run on the same inputs
(``--dtype`` casts model and floating inputs), checked against each other with KernelBench's
tolerances on several fresh input sets, then timed with the one event-timing loop
(:mod:`roofline_ext.measure.timing`).

Two ways in: the pool's timing worker runs :func:`time_reference`, :func:`time_compiled`
(``--compile``) and :func:`time_candidate` as separate jobs (a candidate or a compile that crashes
costs only its own job), and ``--isolation process`` runs
:func:`time_task`, reference and candidate together, in a fresh interpreter per task
(:mod:`roofline_ext.runner.isolation`).
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any, Callable

from ..device.status import require_measurement
from ..measure.timing import (DEFAULT_SEED, DEFAULT_TRIALS, DEFAULT_WARMUP, DEFAULT_WARMUP_S, L2Flush, Trials, lazy_torch,
                              fewest_trials, time_callable)
from ..peaks.units import TOLERANCES, task_dtype_name
from ..tasks.loading import TaskError, exec_source_module, load_task


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


def compare(ref, new, tol: float) -> dict[str, Any]:
    """KernelBench's check (same shapes, ``allclose(atol=tol, rtol=tol)`` on every output): the
    judge's ``kernelbench`` mode, for the compiled reference and the ``--isolation process`` path."""
    from ..judge.compare import compare_outputs

    return compare_outputs(ref, new, tol, mode="kernelbench").to_dict()


_candidates = itertools.count(1)


def _load_candidate(path: str | Path) -> tuple[type, Callable[[], None]]:
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


def _open(path: str | Path, dtype: str | None, device: int):
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


def _build(task, cls, init: list, dev, tdtype, seed: int, what: str):
    """``cls(*init)`` under ``seed``, its weights drawn on the CPU, moved to ``dev`` (and cast),
    in eval mode: how a candidate and the reference it is judged against are built."""
    return _build_where(task, cls, init, dev, tdtype, seed, what, "cpu")[0]


def _build_where(task, cls, init: list, dev, tdtype, seed: int, what: str, weights: str):
    """:func:`_build`, and where the initial weights were drawn (``"gpu"`` or ``"cpu"``).

    ``weights="gpu"`` runs the constructor with ``dev`` as torch's default device, so the initial
    weights are drawn there: the reference job of ``level3/2_ShallowWideMLP`` (8.6 GB of parameters)
    spent 22 s beyond its trials with the weights drawn on the CPU (H200 host, 2026-12-02;
    ``benchmarks/timing_phases.py`` splits a job into its phases). The values differ from a CPU
    draw under the same seed (another generator), so only jobs that compare the model with nothing
    built the other way use it (:func:`time_reference`, :func:`time_compiled`); a candidate and the
    reference it is judged against are both built on the CPU, as KernelBench builds them. A
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


def _tolerance(inputs: list, tdtype) -> tuple[Any, float]:
    torch = lazy_torch()
    run_dtype = next((t.dtype for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()),
                     tdtype or torch.float32)
    return run_dtype, TOLERANCES.get(str(run_dtype).replace("torch.", ""), 1e-4)


def check_correctness(task, model, candidate, dev, tdtype, seed: int, trials: int,
                      placement: str = "auto", first_inputs: list | None = None) -> dict[str, Any]:
    """Reference and candidate on ``trials`` fresh input sets (seeds ``seed``, ``seed + 1``, ...),
    compared with KernelBench's tolerance; stops at the first set that differs.

    ``first_inputs``: the set for ``seed`` when the caller made it already (the timed one).
    Returns :func:`compare`'s dict plus ``trials`` (sets run) and ``passed``.
    """
    passed, worst = 0, 0.0
    verdict: dict[str, Any] = {}
    for i in range(max(1, trials)):
        inputs = first_inputs if (i == 0 and first_inputs is not None) else \
            make_inputs(task, dev, tdtype, seed + i, placement)[0]
        ref_out = task.call(model, "Model.forward", "forward", *inputs)
        new_out = task.call(candidate, "ModelNew.forward", "forward", *inputs)
        verdict = compare(ref_out, new_out, _tolerance(inputs, tdtype)[1])
        del ref_out, new_out, inputs
        worst = max(worst, verdict.get("max_abs_diff") or 0.0)
        if not verdict["ok"]:
            verdict["reason"] = f"input set {i + 1} of {trials}: {verdict['reason']}"
            break
        passed += 1
    return {**verdict, "max_abs_diff": worst, "trials": passed + (0 if verdict["ok"] else 1), "passed": passed}


def _time(fn, device: int, trials: Trials, warmup: int, flush, warmup_s: float | None = None) -> dict[str, Any]:
    return time_callable(fn, device=device, trials=trials, warmup=warmup, flush=flush, warmup_s=warmup_s)


def _time_reference(fn, device: int, trials: Trials, warmup: int, flush) -> dict[str, Any]:
    """The reference's timing: its warm-up may stop early once warm (``timing.DEFAULT_WARMUP_S``);
    a candidate's makes all ``warmup`` calls, as the judge places its checked trials by count."""
    return _time(fn, device, trials, warmup, flush, DEFAULT_WARMUP_S)


def _header(path, dev, run_dtype, seed: int, made: str) -> dict[str, Any]:
    torch = lazy_torch()
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return {"task": str(path), "device": name, "dtype": str(run_dtype),
            "seed": seed, "inputs": made}


# --- the timing worker's two jobs -----------------------------------------------------------------

def _reference_setup(task, path, dev, tdtype, seed: int, inputs: str, weights: str = "cpu"):
    """The reference ``Model``, its inputs, the tolerance, the result header and the constructor
    arguments, made the one way that :func:`time_reference`, :func:`time_compiled` and the judge
    share (same seed, same placement), so the compiled model is checked against the very eager
    output the reference's timing ran and a candidate is built from the same arguments."""
    torch = lazy_torch()
    torch.manual_seed(seed)
    init = task.init_inputs()
    model, built = _build_where(task, task.model_cls, init, dev, tdtype, seed, "Model", weights)
    args, made = make_inputs(task, dev, tdtype, seed, inputs)
    run_dtype, tol = _tolerance(args, tdtype)
    return model, args, tol, {**_header(path, dev, run_dtype, seed, made), "weights": built}, init


def _weights_for(inputs: str) -> str:
    """Where a reference-only job draws the initial weights: on the GPU with the inputs
    (``--inputs auto``), on the CPU with ``--inputs cpu`` (the first versions' way, throughout)."""
    return "gpu" if inputs == "auto" else "cpu"


def time_reference(path: str | Path, *, dtype: str | None = None, trials: Trials = DEFAULT_TRIALS,
                   warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED, compile: bool = False,
                   device: int = 0, inputs: str = "auto", profile: bool = False,
                   energy: bool = False) -> dict[str, Any]:
    """Time the task's ``Model`` (and ``torch.compile(Model)`` with ``compile``) on ``device``.
    ``profile`` (``--ops``): then one more run under the profiler, each kernel mapped to its op
    (``kernel_profile``, :mod:`.kernel_profile`). ``energy`` (``--energy``): then its energy per
    call over an NVML counter window (``energy``, :func:`~roofline_ext.measure.energy.measure_call_energy`).

    Returns ``t_ref_ms``, ``reference`` (the timing statistics), the device, dtype, seed and where
    the inputs were made; with ``compile`` also ``t_compile_ms``, ``compiled`` and
    ``compiled_correctness``. Raises ``TaskError`` (one line) and ``GpuUnavailableError``.
    """
    torch = lazy_torch()
    task, dev, tdtype = _open(path, dtype, device)
    try:
        model, args, tol, result, _ = _reference_setup(task, path, dev, tdtype, seed, inputs, _weights_for(inputs))
        flush = L2Flush(device)
        with torch.no_grad():
            ref_out = task.call(model, "Model.forward", "forward", *args)
            result["reference"] = _time_reference(lambda: model(*args), device, trials, warmup, flush)
            result["t_ref_ms"] = result["reference"]["median_ms"]
            if profile:
                from .kernel_profile import profile_reference

                result["kernel_profile"] = profile_reference(lambda: model(*args), model, device, flush)
            if energy:
                from ..measure.energy import measure_call_energy

                result["energy"] = measure_call_energy(lambda: model(*args), device=device,
                                                       call_ms=result["t_ref_ms"], flush=flush)
            if compile:
                result.update(_time_compiled(task, model, args, ref_out, tol, device, trials, warmup, flush))
        return result
    finally:
        task.unload()


def _time_compiled(task, model, args, ref_out, tol, device, trials, warmup, flush) -> dict[str, Any]:
    """``torch.compile(model)``: its first call (the compile, in ``compile_s``), its correctness
    against ``ref_out`` on the same inputs, and its timing. The timing is kept when the compiled
    model is incorrect too (``compiled_correctness`` says so): it is the reference's operations,
    fused, and a floor check must see it."""
    import time

    torch = lazy_torch()
    from torch._dynamo.utils import counters

    hits = counters["inductor"]["fxgraph_cache_hit"]
    compiled = torch.compile(model)
    t0 = time.perf_counter()
    comp_out = task.call(compiled, "torch.compile(Model).forward", "forward", *args)
    torch.cuda.synchronize(device)
    compile_s = time.perf_counter() - t0
    # Whether inductor's FX-graph cache served the compile (the run's own cache, docs/runner.md).
    cache_hit = counters["inductor"]["fxgraph_cache_hit"] > hits
    correctness = compare(ref_out, comp_out, tol)
    del comp_out
    timing = _time(lambda: compiled(*args), device, trials, max(warmup, 3), flush)
    return {"compiled_correctness": correctness, "compiled": timing, "t_compile_ms": timing["median_ms"],
            "compile_s": compile_s, "compile_cache_hit": cache_hit}


def time_compiled(path: str | Path, *, dtype: str | None = None, trials: Trials = DEFAULT_TRIALS,
                  warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED, device: int = 0,
                  inputs: str = "auto") -> dict[str, Any]:
    """Time ``torch.compile(Model)`` on ``device``: the pool's job for ``--compile``, apart from the
    reference's (:func:`time_reference`), so that a compile that fails or runs past its time limit
    costs the compiled time only. The model, its inputs and the eager output it is checked against
    are made as :func:`time_reference` makes them (same seed, same placement).

    Returns ``t_compile_ms``, ``compiled`` (the timing statistics), ``compiled_correctness``,
    ``compile_s`` (the first call: tracing, compiling, running) and the header. What it compiled is
    forgotten by the worker after the job (:func:`roofline_ext.runner.compiling.reset`).
    """
    torch = lazy_torch()
    task, dev, tdtype = _open(path, dtype, device)
    try:
        model, args, tol, result, _ = _reference_setup(task, path, dev, tdtype, seed, inputs, _weights_for(inputs))
        with torch.no_grad():
            ref_out = task.call(model, "Model.forward", "forward", *args)
            result.update(_time_compiled(task, model, args, ref_out, tol, device, trials, warmup, L2Flush(device)))
        return result
    finally:
        task.unload()


def time_candidate(path: str | Path, *, new: str | Path | None = None, dtype: str | None = None,
                   trials: Trials = DEFAULT_TRIALS, warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED,
                   device: int = 0, inputs: str = "auto", correct_trials: int = 5, judge: str = "strict",
                   judge_seed: int | None = None, energy: bool = False) -> dict[str, Any]:
    """Judge a candidate (``ModelNew`` of ``new``, or of the task file) against the task's ``Model``
    and time it when it is correct (:mod:`roofline_ext.judge.protocol`: correctness sets, checks
    inside the timed loop, the all-stream measure, the fingerprint around it all).

    Returns ``judgement`` (the verdict, :class:`~roofline_ext.model.verdict.Judgement`),
    ``correctness`` (the sets run and passed, tolerance, largest difference), ``t_new_ms`` and
    ``candidate_timing`` (None unless the verdict is ``correct``: any other time would mean nothing),
    the device, dtype, seed and input placement. A candidate that is not correct asks for its worker
    to be replaced (``_retire``), so that nothing it did can reach the next task.
    """
    import time

    task, dev, tdtype = _open(path, dtype, device)
    flush = L2Flush(device)
    loop_s = [0.0]

    def time_fn(fn, before):
        t0 = time.perf_counter()
        try:
            return _time(fn, device, trials, warmup, before)
        finally:
            loop_s[0] += time.perf_counter() - t0

    t0 = time.perf_counter()
    try:
        result = _judged(task, path, new, dev, tdtype, seed, inputs, correct_trials, judge, judge_seed,
                         lambda j, cand, args: _timed_and_seen(j, cand, args, time_fn, trials, warmup, flush, device,
                                                               energy))
        # Where the job's time went: the timed loop (what any harness spends) and the rest
        # (loading, building, the judge: its input sets, references, fingerprints and checks).
        result["job_s"], result["timed_loop_s"] = time.perf_counter() - t0, loop_s[0]
        return result
    finally:
        task.unload()


def judge_candidate(path: str | Path, *, new: str | Path | None = None, dtype: str | None = None,
                    seed: int = DEFAULT_SEED, correct_trials: int = 5, judge: str = "strict",
                    judge_seed: int | None = None, device: str = "cpu") -> dict[str, Any]:
    """The same judge without timing, on the CPU by default: ``analyze TASK --new CAND`` without
    ``--time``, so a kernel repository's CI (or this project's CPU tests) can use it anywhere."""
    task = load_task(path)
    try:
        dev = lazy_torch().device(device)
        tdtype = getattr(lazy_torch(), task_dtype_name(dtype)) if dtype is not None else None
        return _judged(task, path, new, dev, tdtype, seed, "cpu" if dev.type == "cpu" else "auto",
                       correct_trials, judge, judge_seed, None)
    finally:
        task.unload()


def _judged(task, path, new, dev, tdtype, seed: int, inputs: str, correct_trials: int, mode: str,
            judge_seed: int | None, timed) -> dict[str, Any]:
    from ..judge.clock import PhaseClock
    from ..judge.guard import candidate_code
    from ..judge.protocol import Judge

    clock = PhaseClock()
    with clock("setup"):
        model, args, tol, result, init = _reference_setup(task, path, dev, tdtype, seed, inputs)
    judge = Judge.before_import(model, lambda s: make_inputs(task, dev, tdtype, s, inputs)[0], task.call, tol,
                                mode=mode, seed=judge_seed, device=dev,
                                namespaces=[("the task module", vars(task.module))], clock=clock)
    unload_candidate = None
    try:
        with clock("load"), candidate_code():
            if new is not None:
                new_cls, unload_candidate = _load_candidate(new)
            elif task.model_new_cls is not None:
                new_cls = task.model_new_cls
            else:
                raise TaskError(f"{path}: defines no `ModelNew` and no candidate file was given",
                                kind="no-model", path=path)
            candidate = _build(task, new_cls, init, dev, tdtype, seed, "ModelNew")
        result["candidate"] = str(new) if new is not None else "ModelNew in task"
        result["t_new_ms"] = result["candidate_timing"] = None
        ok = judge.correctness(candidate, args, correct_trials)
        if ok and timed is not None:
            timing = timed(judge, candidate, args)
            if timing is not None and judge.judgement().scored:
                result["candidate_timing"], result["t_new_ms"] = timing, timing["median_ms"]
        verdict = judge.judgement()
        result["judgement"] = verdict.to_dict()
        # Where the time went, phase by phase, and the judge's own share (docs/scoring.md, "Cost").
        result["phases_s"], result["judge_s"] = clock.to_dict(), clock.judge_s()
        result["correctness"] = _correctness(verdict, tol, correct_trials)
        if not verdict.scored:
            result["_retire"] = f"the candidate was judged {verdict.verdict.value}"
        return result
    finally:
        if unload_candidate is not None:
            unload_candidate()


def _timed_and_seen(judge, candidate, args, time_fn, trials: Trials, warmup: int, flush, device: int,
                    energy: bool = False):
    """The timed loop with its checked trials, then the all-stream measure of the same calls. The
    judge picks its checked trials among the fewest an adaptive run makes (``fewest_trials``), so a
    run that stops early never skips a check. ``energy``: a candidate still correct after all that
    has its energy per call measured as the reference's is (its calls in candidate code)."""
    timing = judge.timed(candidate, args, time_fn, trials=fewest_trials(trials), warmup=warmup, flush=flush)
    if timing is not None and judge.new_values(candidate, args, timing["median_ms"], flush):
        judge.all_streams(candidate, args, timing["median_ms"], device)
    if energy and timing is not None and judge.judgement().scored:
        from ..measure.energy import measure_call_energy

        measured = judge.guarded_call("the energy window", lambda: measure_call_energy(
            lambda: candidate(*args), device=device, call_ms=timing["median_ms"], flush=flush))
        if measured is not None:
            timing = {**timing, "energy": measured}
    return timing


def _correctness(verdict, tol: float, sets: int) -> dict[str, Any]:
    """The ``correctness`` record results carried before the verdict (kept: its keys are read)."""
    from ..model.verdict import Verdict

    ok = verdict.verdict is Verdict.CORRECT
    failed_set = verdict.verdict is Verdict.INCORRECT
    out: dict[str, Any] = {"ok": ok, "tolerance": tol, "max_abs_diff": verdict.evidence.get("max_abs_diff", 0.0),
                           "rel_l2": verdict.evidence.get("rel_l2", 0.0), "mode": verdict.mode,
                           "trials": verdict.checks, "passed": verdict.checks - int(failed_set)}
    if not ok:
        out["reason"] = verdict.reason
    return out


# --- the one-process-per-task path (--isolation process) ------------------------------------------

def time_task(path: str | Path, *, new: str | Path | None = None, dtype: str | None = None,
              trials: Trials = DEFAULT_TRIALS, warmup: int = DEFAULT_WARMUP, seed: int = DEFAULT_SEED,
              compile: bool = False, device: int = 0, inputs: str = "cpu",
              correct_trials: int = 1) -> dict[str, Any]:
    """Time ``Model`` (and ``ModelNew`` from the task or ``new``) of a task file on CUDA device ``device``,
    all in one process: what ``--isolation process`` runs in a fresh interpreter per task.

    Returns a JSON-able dict: ``t_ref_ms``, ``t_new_ms`` (or None), ``t_compile_ms`` (with
    ``compile``), per-variant timing stats, ``correctness`` of the candidate (and of the compiled
    reference), ``speedup``, the dtype and tolerance used. The candidate is timed even when it is
    incorrect (as the first versions did). Raises ``GpuUnavailableError`` without a GPU and
    ``TaskError`` (one line) for a broken task.
    """
    torch = lazy_torch()
    task, dev, tdtype = _open(path, dtype, device)
    unload_candidate = None
    try:
        new_cls = task.model_new_cls
        if new is not None:
            new_cls, unload_candidate = _load_candidate(new)
        torch.manual_seed(seed)
        init = task.init_inputs()
        model = _build(task, task.model_cls, init, dev, tdtype, seed, "Model")
        candidate = _build(task, new_cls, init, dev, tdtype, seed, "ModelNew") if new_cls is not None else None
        args, made = make_inputs(task, dev, tdtype, seed, inputs)
        run_dtype, tol = _tolerance(args, tdtype)
        flush = L2Flush(device)
        result = _header(path, dev, run_dtype, seed, made)
        result["candidate"] = str(new) if new else ("ModelNew in task" if candidate is not None else None)
        # no_grad, not inference_mode: inference tensors break some user code paths and FLOP counting.
        with torch.no_grad():
            ref_out = task.call(model, "Model.forward", "forward", *args)
            result["reference"] = _time_reference(lambda: model(*args), device, trials, warmup, flush)
            result["t_ref_ms"] = result["reference"]["median_ms"]
            result["t_new_ms"] = None
            if candidate is not None:
                result["correctness"] = check_correctness(task, model, candidate, dev, tdtype, seed,
                                                          correct_trials, inputs, args)
                new_t = _time(lambda: candidate(*args), device, trials, warmup, flush)
                result["candidate_timing"], result["t_new_ms"] = new_t, new_t["median_ms"]
                result["speedup"] = result["t_ref_ms"] / new_t["median_ms"] if new_t["median_ms"] > 0 else None
            if compile:
                result.update(_time_compiled(task, model, args, ref_out, tol, device, trials, warmup, flush))
        return result
    finally:
        task.unload()
        if unload_candidate is not None:
            unload_candidate()
