"""``roofline-ext analyze TASK.py|DIR``: the roofline floor of KernelBench-style task files.

Counts FLOPs and compulsory bytes without running the task (fake tensors; no GPU needed) and puts
them on the roofs of ``--gpu NAME`` (default: this machine's GPU; with none, the H100 SXM datasheet,
with a note saying so). **Task files are Python code and run when loaded**: analyze only files you
would run yourself.

One file: the roofline sentence and a short table, or with ``--json`` one JSON object on stdout
(``--json OUT.json`` writes it to a file). A folder: every ``*.py`` task in it, a progress bar on
stderr, results to ``--json OUT.json`` / ``--csv OUT.csv`` (rewritten after each task, so nothing
finished is lost), a summary of failures, exit code 1 if any task failed.

Every task is counted in a worker process of its own (forked from a server that has torch
loaded), ``--jobs`` at a time, with a ``--timeout``; with ``--time`` the reference and each
candidate are timed by one reused worker per GPU (docs/runner.md). ``--new DIR`` scores a folder of
candidates (docs/scoring.md).

The per-task and batch logic lives in :mod:`roofline_ext.runner`; this module parses arguments
and prints.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...device import status
from ...errors import UserError
from ...measure.timing import DEFAULT_MAX_TIME_S, DEFAULT_PRECISION, HOST_BOUND_MAX_TIME_S
from ...measure.timing_record import TimingReply, TimingStats
from ...model.assess import TaskResult
from ...model.energy import EnergyCosts
from ...model.floors import ROOF_NAMES
from ...model.gpu import GpuChoice, resolve_gpu
from ...model.profiled import l2_figure
from ...model.verdict import JUDGE_MODES, Verdict, verdict_text
from ...peaks.cache import cache_dir
from ...peaks.units import TASK_DTYPES, UNIT, task_dtype_name
from ...report.charts import check_path, load_matplotlib, plot_task
from ...report.energy_chart import plot_energy_roofline, task_points
from ...report.ops_chart import plot_ops
from ...report.ops_table import ops_report
from ...report.outputs import check_outputs
from ...report.progress import Progress
from ...report.summary import BatchWriter, batch_summary, summary_table
from ...report.text import describe
from ...report.writers import dumps, public, summarize, write_atomic
from ...runner.analyze import REGIMES, calibration_for, measured_peaks_for
from ...runner.batch import (DEFAULT_COUNT_TIMEOUT_S, DEFAULT_TIME_TIMEOUT_S, ISOLATIONS, BatchOptions, TaskFailed,
                             TimingOptions, run_batch, run_tasks)
from ...runner.candidates import Candidate, match_candidates
from ...runner.pool import supported
from ...runner.server_start import discard_early, start_early
from ...tasks.counting import require_torch
from ...tasks.loading import find_task_files

DTYPES = tuple(TASK_DTYPES)


def _dtype(text: str) -> str:
    """``--dtype`` in any spelling ``task_dtype_name`` knows (``FP16``, ``half``) → its choice name."""
    try:
        attr = task_dtype_name(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return next(k for k, v in TASK_DTYPES.items() if v == attr)


def _measured_peaks_for(gpu: GpuChoice, regime: str) -> Mapping[str, float] | None:
    """The hook to calibration: cached measured peaks for this GPU and regime, or None."""
    return measured_peaks_for(gpu.name, regime, getattr(gpu.device, "uuid", None))


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``analyze`` sub-command."""
    p = sub.add_parser(
        "analyze",
        help="roofline floor of a task file (or a folder of them), no GPU needed",
        description="Count the FLOPs and compulsory bytes of KernelBench-style task files without "
        "running them, and give the roofline floor on a GPU's datasheet (and derived/measured) "
        "roofs. Task files are Python code and run when loaded: analyze only files you trust.",
    )
    p.add_argument("targets", nargs="*", metavar="TASK.py|DIR",
                   help="task files (class Model, get_inputs, get_init_inputs) or folders of them")
    p.add_argument("--gpu", metavar="NAME",
                   help="GPU to analyze for, e.g. 'H100', 'A100 PCIe 40GB', 'NVIDIA L40S' (default: this "
                   "machine's GPU, or H100 SXM without one; list: roofline-ext peaks)")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT.json",
                   help="JSON instead of text: on stdout, or written to OUT.json")
    p.add_argument("--csv", metavar="OUT.csv",
                   help="also write results as CSV, one row per task (timed: one per candidate)")
    p.add_argument("--dtype", type=_dtype, choices=DTYPES,
                   help="cast model and floating inputs first, as KernelBench's harness does")
    p.add_argument("--regime", choices=REGIMES, default="burst",
                   help="which calibrated (measured) peaks to use, when cached (default: burst)")
    p.add_argument("--strict-fp32", action="store_true",
                   help="float32 tasks against FP32 CUDA cores instead of TF32 tensor cores")
    p.add_argument("--no-progress", action="store_true", help="no progress bar for folders")
    p.add_argument("--plot", metavar="FILE", help="draw the task on the GPU's roofline (FILE.png or FILE.svg)")
    p.add_argument("--summary-csv", metavar="OUT.csv", help="also write the batch summary as CSV")
    p.add_argument("--ops", action="store_true",
                   help="also every op's own floor, the unfused bound and the fusion headroom (with --time: "
                   "each kernel of the reference, profiled, against its op's floor); JSON: an 'ops' list")
    r = p.add_argument_group("running tasks (each in a worker process; docs/runner.md)")
    r.add_argument("--jobs", type=int, metavar="N", help="tasks counted at once (default: all cores)")
    r.add_argument("--timeout", type=float, metavar="SECONDS",
                   help=f"per-task limit for counting and for each timing (default {DEFAULT_COUNT_TIMEOUT_S:g} s "
                   f"counting, {DEFAULT_TIME_TIMEOUT_S:g} s timing)")
    r.add_argument("--isolation", choices=ISOLATIONS, default="pool",
                   help="pool: a fresh counting worker per task and one timing worker per GPU, reused while its "
                   "fingerprint shows no change (default); fresh: "
                   "a new worker for every task; process: the first versions' path, counting here and timing "
                   "in a fresh interpreter per task, for comparison")
    r.add_argument("--verbose", action="store_true",
                   help="say on stderr where the run's time went: start-up, the fork server, each worker's "
                   "setup (a timing worker's CUDA context) and every job")
    t = p.add_argument_group("timing on the GPU (needs a GPU; one timing worker per GPU)")
    t.add_argument("--time", action="store_true",
                   help="time Model (and ModelNew) with CUDA events and report each floor's fraction")
    t.add_argument("--new", metavar="CANDIDATE.py|DIR",
                   help="a file defining ModelNew to judge against the task's Model, or a folder of candidates "
                   "matched to the tasks by file name or as level_L_problem_N_sample_S_kernel.py; with --time "
                   "also timed and scored, without it judged for correctness only (on the CPU, no GPU needed)")
    t.add_argument("--correct-trials", type=int, default=5, metavar="N",
                   help="fresh input sets a candidate must match the reference on (default 5, as KernelBench)")
    t.add_argument("--judge", choices=JUDGE_MODES, default="strict",
                   help="strict: exact type/dtype/shape, scale-aware error, degenerate outputs refused (default); "
                   "kernelbench: KernelBench's allclose only, for comparable numbers (docs/scoring.md)")
    t.add_argument("--judge-seed", type=int, metavar="N",
                   help="seed of the judge's input sets (default: drawn per run and reported, so a run can be replayed)")
    t.add_argument("--inputs", choices=("auto", "cpu"), default="auto",
                   help="auto: make get_inputs() tensors on the GPU where its factory calls allow (default); "
                   "cpu: make them on the CPU and copy, as the first versions did (a reference-only job's initial "
                   "weights follow the same choice)")
    t.add_argument("--compile", action="store_true", help="also time torch.compile(Model) (implies --time)")
    t.add_argument("--energy", action="store_true",
                   help="also measure each timed variant's energy per call over NVML's energy counter, a window "
                   "of >= 1 s after its timing (implies --time; needs nvidia-ml-py; docs/energy.md)")
    t.add_argument("--energy-costs", metavar="FILE", help="measured J per FLOP and per byte (a calibration's "
                   "JSON, or benchmarks/energy_roofline.py's): hold each task's --energy against its energy floor")
    t.add_argument("--energy-plot", metavar="FILE", help="with --energy-costs: the energy roofline of those costs, "
                   "each task's measured point over its energy floor (FILE.png or FILE.svg)")
    t.add_argument("--trials", type=int, metavar="N",
                   help="exactly N timed trials per variant, as KernelBench times (default: adaptive, until "
                   "--precision is reached or --max-time is spent)")
    t.add_argument("--precision", type=float, default=DEFAULT_PRECISION * 100, metavar="PCT",
                   help="adaptive trials go on until the 95%% confidence interval of the median is within "
                   f"±PCT%% (default {DEFAULT_PRECISION * 100:g}); with --trials N, the figure the report holds N to")
    t.add_argument("--max-time", type=float, metavar="S",
                   help=f"adaptive trials stop after S seconds of trials per variant (default {DEFAULT_MAX_TIME_S:g}; "
                   f"{HOST_BOUND_MAX_TIME_S:g} for a host-bound one) and say whether the precision was reached")
    t.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    p.set_defaults(func=run)


def _fix_json_target(args: argparse.Namespace) -> None:
    # `analyze --json TASK.py` makes argparse read TASK.py as the JSON output: take it back. With
    # other targets given, only a task file that exists is taken back (JSON never goes onto one).
    if args.json not in (None, "-", ""):
        candidate = Path(args.json)
        if (candidate.is_file() and candidate.suffix == ".py") or (
                not args.targets and (candidate.is_dir() or candidate.suffix == ".py")):
            args.targets, args.json = [args.json, *args.targets], "-"
    if not args.targets:
        raise UserError("analyze needs a task file or a folder: roofline-ext analyze TASK.py [--gpu NAME]")


def task_paths(targets: list[str]) -> tuple[list[Path], bool]:
    """The task files the targets name (folders expanded, each file once) and whether this is a
    batch (a folder or several files); a one-line ``UserError`` for a target that is neither."""
    paths: list[Path] = []
    batch = False
    for t in targets:
        target = Path(t)
        if target.is_dir():
            found = find_task_files(target)
            if not found:
                raise UserError(f"{target}: no task files (*.py) in this folder")
            paths += found
            batch = True
        elif target.is_file():
            paths.append(target)
        elif target.exists():
            raise UserError(f"{target}: not a task file or a folder (a device, FIFO or socket)")
        else:
            raise UserError(f"{target}: no such file or folder")
    unique: dict[str, Path] = {}  # a file named twice (a.py and ./a.py, a folder and a file in it) runs once
    for p in paths:
        unique.setdefault(os.path.realpath(p), p)
    return list(unique.values()), batch or len(unique) > 1


def _check_output_paths(args: argparse.Namespace, paths: list[Path]) -> None:
    """Every output path, before any work: never a device, FIFO or folder, never an input of this
    run (a task, the candidate, a cached calibration), never the same file twice."""
    cache = cache_dir()
    cached = sorted(cache.glob("calibration-*.json")) if cache.is_dir() else []
    json_file = args.json  # "-" is stdout: check_outputs refuses a second output there (--csv -)
    new = Path(args.new) if args.new else None
    candidates = sorted(new.glob("*.py")) if new is not None and new.is_dir() else ([new] if new else [])
    check_outputs({"--json": json_file, "--csv": args.csv, "--plot": args.plot, "--summary-csv": args.summary_csv,
                   "--energy-plot": args.energy_plot},
                  reads=[*paths, *candidates, *cached])


def run(args: argparse.Namespace) -> int:
    _fix_json_target(args)
    paths, batch = task_paths(args.targets)
    if args.compile or args.energy:
        args.time = True
    _check_run_options(args, paths, batch)
    _check_output_paths(args, paths)
    try:
        _start_pool_early(args, paths)
        gpu = resolve_gpu(args.gpu)
        if args.time:
            status.require_measurement(args.device)  # exit 3 with the reason, before any task runs
        _need_torch(args)
        if gpu.note:
            print(f"roofline-ext: note: {gpu.note}", file=sys.stderr)
        if batch:
            return _run_batch(args, paths, gpu)
        return _run_one(args, paths[0], gpu)
    finally:
        discard_early()  # a server started early that no pool took (the command ended first)


def _start_pool_early(args: argparse.Namespace, paths: list[Path]) -> None:
    """Start the pool's fork server now, so that its ``import torch`` (the longest step before the
    first job) overlaps the GPU check and the rest of this process's start (runner/server_start.py).
    Not for ``--isolation process`` (no pool), ``--compile`` (its compile caches must be set in the
    server's environment, which the pool makes) or where the pool cannot run."""
    import importlib.util

    if args.isolation == "process" or args.compile or not supported() or importlib.util.find_spec("torch") is None:
        return
    start_early(warm_up=len(paths) > 1)  # as run_batch's pool: a batch's server counts a warm-up task


def _need_torch(args: argparse.Namespace) -> None:
    """Without torch no task can be counted: say so once, up front. The pool's workers import it,
    so this process only checks that it is there."""
    import importlib.util

    if args.isolation == "process" or importlib.util.find_spec("torch") is None:
        require_torch()


def _check_run_options(args: argparse.Namespace, paths: list[Path], batch: bool) -> None:
    new = Path(args.new) if args.new else None
    if new is not None and not new.exists():
        raise UserError(f"{args.new}: no such candidate file or folder")
    if new is not None and not new.is_dir() and not new.is_file():
        raise UserError(f"{args.new}: not a regular file or a folder")
    if new is not None and batch and not new.is_dir():
        raise UserError("--new takes one task file, or with a folder of tasks a folder of candidates")
    if args.new and Path(args.new).is_dir() and args.isolation == "process":
        raise UserError("--new DIR needs the pool (leave out --isolation process)")
    if args.energy and args.isolation == "process":
        raise UserError("--energy needs the pool's timing worker (leave out --isolation process)")
    if args.energy_costs and not args.energy:
        raise UserError("--energy-costs is for --energy (the costs a measured energy is held against)")
    if args.energy_plot is not None:
        if not args.energy_costs:
            raise UserError("--energy-plot needs --energy-costs FILE (the costs its lines are drawn from)")
        check_path(args.energy_plot)
        load_matplotlib()  # installed? Known now, not after the measuring
    for flag, value, least in (("--trials", args.trials, 1), ("--jobs", args.jobs, 1),
                               ("--correct-trials", args.correct_trials, 1)):
        if value is not None and value < least:
            raise UserError(f"{flag} must be at least {least}")
    if args.timeout is not None and not args.timeout > 0:
        raise UserError("--timeout must be more than 0 seconds")
    if not 0 < args.precision < 100:
        raise UserError("--precision must be more than 0 and less than 100 (percent)")
    if args.max_time is not None and not args.max_time > 0:
        raise UserError("--max-time must be more than 0 seconds")
    if args.max_time is not None and args.trials is not None:
        raise UserError("--max-time is for adaptive trials; --trials N times exactly N trials")
    if args.summary_csv and not batch:
        raise UserError("--summary-csv is for folders (a batch)")
    if args.plot is not None:
        if batch:
            raise UserError("--plot takes one task file, not a batch")
        check_path(args.plot)
        load_matplotlib()  # installed? Known now, not after the analysis


def _candidates(args: argparse.Namespace, paths: list[Path]):
    """task -> its candidates from ``--new``, or None (each task's own ModelNew)."""
    if not args.new:
        return None
    new = Path(args.new)
    if not new.is_dir():
        return {paths[0]: [Candidate(new)]}
    matched, unmatched = match_candidates(paths, new)
    if unmatched:
        shown = ", ".join(p.name for p in unmatched[:5]) + (" ..." if len(unmatched) > 5 else "")
        print(f"roofline-ext: note: {len(unmatched)} file(s) in {new} match no task: {shown}", file=sys.stderr)
    if not matched:
        raise UserError(f"{new}: no candidate file matches a task (same file name, or "
                        "level_L_problem_N_sample_S_kernel.py)")
    return matched


def _options(args: argparse.Namespace, gpu: GpuChoice, paths: list[Path]) -> BatchOptions:
    timing = None
    if args.time:
        timing = TimingOptions(trials=args.trials, precision=args.precision / 100,
                               max_time_s=args.max_time or DEFAULT_MAX_TIME_S,
                               # --max-time S is the cap of every series, a host-bound one's too.
                               host_bound_max_time_s=args.max_time or HOST_BOUND_MAX_TIME_S, compile=args.compile,
                               devices=(args.device,),
                               inputs=args.inputs, correct_trials=args.correct_trials,
                               timeout_s=args.timeout or DEFAULT_TIME_TIMEOUT_S, energy=args.energy)
    l2 = None
    if args.ops and args.time:
        l2 = l2_figure(calibration_for(gpu), args.regime)
    return BatchOptions(dtype=args.dtype, regime=args.regime, strict_fp32=args.strict_fp32,
                        measured=_measured_peaks_for(gpu, args.regime), jobs=args.jobs,
                        count_timeout_s=args.timeout or DEFAULT_COUNT_TIMEOUT_S, timing=timing,
                        candidates=_candidates(args, paths), isolation=args.isolation, debug=args.debug,
                        ops=args.ops, l2_tbps=l2, judge=args.judge, judge_seed=args.judge_seed,
                        verbose=args.verbose, energy_costs=_energy_costs(args.energy_costs))


def _energy_costs(path: str | None) -> Any:
    """``--energy-costs FILE``: the measured costs, from the energy benchmark's JSON (its ``costs``)
    or a bare ``EnergyCosts`` document; a file that is not one is a one-line error, before any work."""
    if path is None:
        return None
    import json

    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise UserError(f"{path}: cannot read the energy costs: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not JSON: {exc}") from None
    inner = doc.get("costs") if isinstance(doc, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("costs"), dict):
        doc = inner  # the benchmark's document: its costs are one level down
    try:
        return EnergyCosts.from_dict(doc)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None


def _energy_plot(args: argparse.Namespace, results: Sequence[Mapping[str, Any]], gpu: GpuChoice) -> None:
    """``--energy-plot FILE``: the energy roofline of ``--energy-costs`` with every measured task on
    it; the tasks that could not be placed are said on stderr, one line each."""
    if args.energy_plot is None:
        return
    points, left_out = task_points(results)
    for line in left_out:
        print(f"roofline-ext: note: not on the energy chart: {line}", file=sys.stderr)
    written = plot_energy_roofline(_energy_costs(args.energy_costs), args.energy_plot,
                                   title=f"{gpu.name}: energy roofline",
                                   subtitle=f"costs from {Path(args.energy_costs).name}; {len(points)} task point(s)",
                                   tasks=points)
    print(f"roofline-ext: energy chart written to {written}", file=sys.stderr)


# --- one task ---------------------------------------------------------------------------------------

def _run_one(args: argparse.Namespace, target: Path, gpu: GpuChoice) -> int:
    typed = run_tasks([target], gpu, _options(args, gpu, [target]))[0]
    result = typed.to_dict()
    if not isinstance(typed, TaskResult) or result["status"] != "ok":
        raise TaskFailed(result["error"], result.get("error_kind"))
    if args.plot:
        # The chart draws the roofs the analysis used: the RoofSet the run resolved once and
        # computed the floors with, carried on the result (the chart looks no peaks up).
        roofs = typed.roof_set
        if args.ops:
            written = plot_ops(public(result), args.plot, roofs=roofs)
        else:
            written = plot_task(public(result), args.plot, roofs=roofs)
        print(f"roofline-ext: chart written to {written}", file=sys.stderr)
    if args.csv:
        BatchWriter(csv_path=args.csv, meta={"timed": bool(args.time)}).add(result)
    _energy_plot(args, [result], gpu)
    failed = _failed_candidates([result])
    if args.json is not None:
        text = dumps(public(result), indent=2)
        if args.json == "-":
            print(text)
            return 1 if failed else 0
        write_atomic(Path(args.json), text + "\n")
    # JSON to a file still prints the report: stdout is free, and the person still wants to read it
    # (unless the CSV went there: `--csv -` is for a pipe).
    if args.csv != "-":
        print(_text_report(result, gpu, typed))
    if args.ops:
        print("\n" + ops_report(public(result)))
    return 1 if failed else 0


def _failed_candidates(results: list[dict[str, Any]]) -> int:
    """Candidates that failed, or that the judge refused (incorrect, invalid): exit 1, so that a
    kernel repository's CI fails on them. ``below_floor`` is the count's or the peak's fault."""
    refused = (Verdict.INCORRECT.value, Verdict.INVALID.value, Verdict.ERROR.value)
    return sum(1 for r in results for c in r.get("candidates") or ()
               if c.get("status") != "ok" or c.get("verdict") in refused)


def _candidate_line(c: Mapping[str, Any]) -> str:
    if c.get("status") != "ok":
        return f"FAILED ({c.get('error_kind')}): {c.get('error')}"
    ok = c.get("correctness") or {}
    if not c.get("correct"):
        return verdict_text(c.get("verdict") or "incorrect", c.get("reason") or ok.get("reason"), c.get("defence"))
    t = TimingStats.read(c.get("timing") or None)
    if t is None:  # judged without timing
        return (f"CORRECT on {ok.get('passed')} input set(s) ({ok.get('mode', 'strict')} judge, tolerance "
                f"{ok.get('tolerance', 0):g}, judge seed {(c.get('judgement') or {}).get('seed')})")
    speedup = f"; speed-up {c['speedup']:.3g}x" if c.get("speedup") else ""
    return (f"{t.median_ms or 0:.4g} ms median (best {t.best_ms or 0:.4g}, CV {t.cv or 0:.1%}"
            f"{_trials_text(t, ', ')}); "
            f"correct on {ok.get('passed')} input set(s) at atol=rtol={ok.get('tolerance', 0):g}{speedup}")


def _trials_text(series: TimingStats | Mapping[str, Any] | None, sep: str) -> str:
    """How many trials and how well they know the median: ``240 trials (adaptive), median ±0.31%
    (95% CI)``, and when the target was missed, what it was and why the trials stopped."""
    t = TimingStats.read(series)
    if t is None or t.trials is None:
        return ""
    text = f"{sep}{t.trials} trials"
    if not t.has_interval:  # a result of the first layout
        return text
    text += f" ({t.mode})"
    rel = t.ci_rel
    text += ", no 95% CI (under 6 trials)" if rel is None else f", median ±{rel:.2%} (95% CI)"
    if not t.precision_reached and t.precision is not None:
        why = {"max-time": "time cap", "max-trials": "trial cap", "fixed": "fixed count",
               "resolution": "timer's step",
               "host-bound": "host-bound: its time is the host's launches, capped sooner"}.get(str(t.stopped), "")
        text += f", NOT within ±{t.precision:.2%}" + (f" ({why})" if why else "")
    return text


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}"


def _peak(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _text_report(result: Mapping[str, Any], gpu: GpuChoice, typed: TaskResult) -> str:
    lines = [describe(typed.roofline_dict(), gpu.name, why_none=typed.no_roofline), ""]
    model_note = " (also defines ModelNew; the floor is the reference Model's)" if result["has_model_new"] else ""

    def joined(shapes: list[str]) -> str:
        if not shapes:
            return "none"
        text = ", ".join(shapes[:4])
        return text + (f", … ({len(shapes)} in all)" if len(shapes) > 4 else "")

    def plain(name: str) -> str:
        return name.replace("torch.", "")

    dtype = plain(result["dtype"]) if result["dtype"] else "none (no floating-point tensors)"
    if result["dtype"] == "mixed":
        dtype = "mixed: " + ", ".join(plain(d) for d in result["dtypes"])
    cu = result.get("compute_unit")
    unit = UNIT[cu].roof_words if cu in UNIT else cu
    rows = [
        ("task", f"{result['task']} ({result['path']}){model_note}"),
        ("inputs", joined(result["inputs"])),
        ("outputs", joined(result["outputs"])),
        ("dtype", dtype + (f" (cast to {plain(result['cast'])})" if result["cast"] else "")
         + (f" -> {unit} roof" if unit else "")),
        ("FLOPs", f"{_si(result['flops'], 'FLOP')} on tensor cores, {_si(result['simt_flops'], 'FLOP')} other"),
        ("bytes", f"{_si(result['bytes'], 'B')} = inputs {_si(result['input_bytes'], 'B')} + parameters "
                  f"{_si(result['param_bytes'], 'B')} + outputs {_si(result['output_bytes'], 'B')}"),
        ("intensity", "-" if result["arithmetic_intensity"] is None
         else f"{result['arithmetic_intensity']:.4g} FLOP/byte"),
    ]
    timing = typed.reference  # the timing worker's reply, typed
    if timing is not None and timing.reference is not None:
        ref = timing.reference
        rows.append(("PyTorch", f"{ref.median_ms:.4g} ms median (best {ref.best_ms or 0:.4g}, CV "
                                f"{ref.cv or 0:.1%}{_trials_text(ref, ', ')}, L2 flushed) on {timing.device}"))
    for c in result.get("candidates") or ():
        rows.append(("yours" if len(result["candidates"]) == 1 else str(c.get("sample") or c["candidate"]),
                     _candidate_line(c)))
    if timing is not None:
        if timing.t_compile_ms is not None:
            rows.append(("torch.compile", f"{timing.t_compile_ms:.4g} ms median"))
        rows += _energy_rows(result)
    ops = [(name, v) for name, v in (result.get("by_op") or {}).items() if v["flops"] or v["simt_flops"]]
    if ops:
        rows.append(("top ops", ", ".join(f"{name} x{v['calls']}" for name, v in ops[:5])))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]

    lines += [""] + _roofs_table(result, timing is not None)
    for note in result.get("notes") or []:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _energy_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``--energy``: the reference's (and each correct candidate's) energy per call, or why not."""
    rows = []
    ref = (result.get("energy") or {}).get("reference")
    named = [("energy", ref)] if ref is not None else []
    cands = result.get("candidates") or ()
    named += [(f"energy ({'yours' if len(cands) == 1 else c.get('sample') or c['candidate']})", c["energy"])
              for c in cands if c.get("energy") is not None]
    for label, e in named:
        rows.append((label, energy_text(e)))
    energy = result.get("energy") or {}
    if energy.get("floor"):
        f = energy["floor"]
        rows.append(("energy floor", f"{f['e_min_j'] * 1e3:.4g} mJ per call above idle (±{f['uncertainty_j'] * 1e3:.2g}; "
                                     f"{f['compute_unit']} FLOPs, HBM bytes {f['memory_rule']})"))
    elif energy.get("floor_error"):
        rows.append(("energy floor", f"not given: {energy['floor_error']}"))
    return rows


def energy_text(e: Mapping[str, Any]) -> str:
    """One energy figure in words: J per call above idle and in all, the power, the window."""
    if e.get("error"):
        return f"not measured: {e['error']}"
    rel = e.get("relative_uncertainty")
    unc = f" ±{rel:.0%}" if rel is not None else f" (±{e['uncertainty_above_idle_j'] * 1e3:.3g} mJ: too small to read)"
    flush = ", L2 flush included" if e.get("includes_flush") else ""
    floor = ""
    if e.get("fraction_of_floor") is not None:
        floor = f"; floor {e['fraction_of_floor']:.0%} of it" + (" (BELOW the energy floor)" if e.get("below_floor") else "")
    return (f"{e['j_per_call_above_idle'] * 1e3:.4g} mJ per call above idle{unc} ({e['j_per_call_total'] * 1e3:.4g} mJ "
            f"in all; {e['power_w']:.0f} W, idle {e['idle_w']:.0f} W; {e['calls']} calls in {e['window_s']:.2f} s{flush}"
            f"{floor})")


def _roofs_table(result: Mapping[str, Any], timing: bool) -> list[str]:
    """The report's table: one row per roof (datasheet, derived, measured), its peaks and times;
    with ``timing`` also how close PyTorch and the candidate come, and the score."""
    header: tuple[str, ...] = ("roof", "compute TFLOP/s", "SIMT TFLOP/s", "TB/s", "compute ms", "SIMT ms",
                               "memory ms", "floor ms", "bound")
    if timing:
        header = header[:-1] + ("PyTorch %", "yours %", "score", "bound")
    table: list[tuple[str, ...]] = [header]

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    for name in ROOF_NAMES:
        roof = (result.get("roofs") or {}).get(name)
        if not roof:
            table.append((name,) + ("-",) * (len(header) - 2) + ("not available",))
            continue
        row: tuple[str, ...] = (name, _peak(roof["compute_tflops"]), _peak(roof["simt_tflops"]),
                                _peak(roof["bandwidth_tbps"]),
               _ms(roof["t_compute_ms"]), _ms(roof["t_simt_ms"]), _ms(roof["t_memory_ms"]), _ms(roof["t_min_ms"]))
        if timing:
            score = roof.get("score")
            row += (pct(roof.get("ref_fraction")), pct(roof.get("new_fraction")),
                    "below floor" if roof.get("new_below_floor") else ("-" if score is None else f"{score:.3f}"))
        table.append(row + (roof["bound"],))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    out = []
    for row in table:
        cells = [str(row[0]).ljust(widths[0])] + [str(c).rjust(w) for c, w in zip(row[1:-1], widths[1:-1])]
        out.append("  " + "  ".join(cells + [str(row[-1])]).rstrip())
    return out


# --- a folder ---------------------------------------------------------------------------------------

def _run_batch(args: argparse.Namespace, paths: list[Path], gpu: GpuChoice) -> int:
    json_file = args.json if args.json not in (None, "-") else None
    meta = {"gpu": gpu.name, "gpu_source": gpu.source, "regime": args.regime, "dtype": args.dtype,
            "strict_fp32": args.strict_fp32,
            "folder": str(Path(args.targets[0])) if len(args.targets) == 1 else None,
            "targets": list(args.targets), "timed": bool(args.time), "isolation": args.isolation}
    writer = BatchWriter(json_file, args.csv, meta=meta, summary_csv_path=args.summary_csv)
    try:
        # The bar is the report's; the runner only calls it (runner/ never imports the report).
        progress = None if args.no_progress else Progress
        results = run_batch(paths, gpu, _options(args, gpu, paths), writer=writer, progress=progress)
    except KeyboardInterrupt:
        if args.json == "-":  # what finished is kept, on stdout as in the files
            print(dumps(writer.document(complete=False), indent=1))
        raise
    writer.flush(complete=True)
    _energy_plot(args, results, gpu)
    if args.json == "-":
        print(dumps(writer.document(complete=True), indent=1))
    elif not json_file and not args.csv:
        print(_batch_table(results))
    summary = summarize(results)
    _print_summary(summary, json_file, args.csv, results)
    return 1 if summary["failed"] or _failed_candidates(results) else 0


def _best(r: Mapping[str, Any]) -> tuple[str, str, str]:
    """A task's candidates in the batch table: correct of all, best speed-up, its score."""
    cands = r.get("candidates") or []
    if not cands:
        return "-", "-", "-"
    correct = [c for c in cands if c.get("correct") and c.get("speedup")]
    best = max(correct, key=lambda c: c["speedup"], default=None)
    roof = ((best or {}).get("roofs") or {}).get(r.get("primary_roof") or "") or {}
    score = "below floor" if roof.get("below_floor") else ("-" if roof.get("score") is None else f"{roof['score']:.3f}")
    return (f"{sum(1 for c in cands if c.get('correct'))}/{len(cands)}",
            f"{best['speedup']:.3g}x" if best else "-", score)


def _ci_cells(series: TimingStats | Mapping[str, Any] | None) -> tuple[str, str]:
    """The batch table's trial count and the median's 95% interval (``0.21%``; ``1.3% (missed)``
    when the target was not reached, ``0.64% (timer)`` when one timer step is all it can be,
    ``1.8% (host)`` when a host-bound series stopped at its shorter cap)."""
    t = TimingStats.read(series)
    if t is None:
        return "-", "-"
    count = str(t.trials) if t.trials is not None else "-"
    if t.ci_rel is None:
        return count, "-"
    if t.precision_reached or not t.has("precision_reached"):
        return count, f"{t.ci_rel:.2%}"
    # A series the timer's step stopped: narrower than this no trial count could make it. A host-bound
    # one: its time is the host's, which more trials would pin down no better between runs.
    mark = {"resolution": " (timer)", "host-bound": " (host)"}.get(str(t.stopped), " (missed)")
    return count, f"{t.ci_rel:.2%}" + mark


def _batch_table(results: list[dict[str, Any]]) -> str:
    timed = any(r.get("timing") for r in results)
    scored = any(r.get("candidates") for r in results)
    header: tuple[str, ...] = ("task", "GFLOP", "SIMT GFLOP", "MB", "dtype", "floor ms", "bound")
    if timed:
        header += ("PyTorch ms", "trials", "±95% CI", "% datasheet", "% measured")
    if scored:
        header += ("correct", "best speed-up", "score")
    rows: list[tuple[str, ...]] = [header]

    def frac(r: Mapping[str, Any], roof: str) -> str:
        x = ((r.get("roofs") or {}).get(roof) or {}).get("ref_fraction")
        return "-" if x is None else f"{x:.0%}"

    for r in results:
        if r["status"] != "ok":
            rows.append((r["task"],) + ("-",) * (len(header) - 2) + ("error",))
            continue
        row: tuple[str, ...] = (r["task"], f"{r['flops'] / 1e9:.4g}", f"{r['simt_flops'] / 1e9:.4g}", f"{r['bytes'] / 1e6:.4g}",
               str(r["compute_dtype"]).replace("torch.", ""), _ms(r["t_min_ms"]), r["bound"] or "-")
        if timed:
            timing = TimingReply.of_result(r)
            row += (_ms(r.get("t_ref_ms")), *_ci_cells(timing.reference if timing is not None else None),
                    frac(r, "datasheet"), frac(r, "measured"))
        if scored:
            row += _best(r)
        rows.append(row)
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    out = []
    for row in rows:
        cells = [str(row[0]).ljust(widths[0])] + [str(c).rjust(w) for c, w in zip(row[1:-1], widths[1:-1])]
        out.append("  ".join(cells + [str(row[-1])]).rstrip())
    return "\n".join(out)


def _print_summary(summary: Mapping[str, Any], json_file: str | None, csv_file: str | None,
                   results: list[dict[str, Any]]) -> None:
    err = sys.stderr
    written = [f for f in (json_file, csv_file) if f and f != "-"]  # "-": on stdout, not a file
    where = f"; results in {' and '.join(written)}" if written else ""
    print(f"roofline-ext: analyzed {summary['total']} task(s): {summary['ok']} ok, "
          f"{summary['failed']} failed{where}", file=err)
    for f in summary["failures"]:
        print(f"  FAILED {f['task']}: {f['error']}", file=err)
    for r in results:
        for c in r.get("candidates") or ():
            if c.get("status") != "ok":
                print(f"  FAILED {r['task']} candidate {c['candidate']}: {c.get('error')}", file=err)
    if any(r.get("timing") for r in results):
        print(summary_table(batch_summary(results)), file=err)
