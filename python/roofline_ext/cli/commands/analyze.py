"""``roofline-ext analyze TASK.py|DIR``: the roofline floor of KernelBench-style task files.

Counts FLOPs and compulsory bytes without running the task (fake tensors; no GPU needed) and puts
them on the roofs of ``--gpu NAME`` (default: this machine's GPU; with none, the H100 SXM datasheet,
with a note saying so). **Task files are Python code and run when loaded**: analyze only files you
would run yourself.

One file: the roofline sentence and a short table, or with ``--json`` one JSON object on stdout
(``--json OUT.json`` writes it to a file). A folder: every ``*.py`` task in it, a progress bar on
stderr, results to ``--json OUT.json`` / ``--csv OUT.csv`` (rewritten after each task, so nothing
finished is lost), a summary of failures, exit code 1 if any task failed. Several targets (files,
folders, a shell glob) are one batch.

Every cheap check (targets, output paths, ``--plot``'s extension, the GPU name) runs before torch is
imported, and every output path is checked before any task runs (:mod:`roofline_ext.report.outputs`).

The per-task and batch logic lives in :mod:`roofline_ext.runner.analyze`; this module parses arguments
and prints.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from ...errors import UserError
from ...model.gpu import GpuChoice, resolve_gpu
from ...peaks.units import TASK_DTYPES, UNIT, task_dtype_name
from ...report.outputs import check_outputs
from ...report.writers import ResultsWriter, dumps, public, summarize, write_atomic
from ...runner.analyze import REGIMES, analyze_batch, analyze_task, calibration_for, measured_peaks_for

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
    p.add_argument("--csv", metavar="OUT.csv", help="also write results as CSV, one row per task")
    p.add_argument("--dtype", type=_dtype, choices=DTYPES,
                   help="cast model and floating inputs first, as KernelBench's harness does")
    p.add_argument("--regime", choices=REGIMES, default="burst",
                   help="which calibrated (measured) peaks to use, when cached (default: burst)")
    p.add_argument("--strict-fp32", action="store_true",
                   help="float32 tasks against FP32 CUDA cores instead of TF32 tensor cores")
    p.add_argument("--no-progress", action="store_true", help="no progress bar for folders")
    p.add_argument("--plot", metavar="FILE", help="draw the task on the GPU's roofline (FILE.png or FILE.svg)")
    t = p.add_argument_group("timing on the GPU (needs a GPU; each task runs in a subprocess of its own)")
    t.add_argument("--time", action="store_true",
                   help="time Model (and ModelNew) with CUDA events and report each floor's fraction")
    t.add_argument("--new", metavar="CANDIDATE.py",
                   help="a file defining ModelNew to time against the task's Model (implies --time)")
    t.add_argument("--compile", action="store_true", help="also time torch.compile(Model) (implies --time)")
    t.add_argument("--trials", type=int, default=100, help="timed trials per variant (default 100)")
    t.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    t.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="per-task time limit for timing (default 600)")
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


def _task_paths(targets: list[str]) -> tuple[list[Path], bool]:
    """The task files the targets name (folders expanded, each file once) and whether this is a
    batch (a folder or several files); a one-line ``UserError`` for a target that is neither."""
    from ...tasks.loading import find_task_files

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


def _check_args(args: argparse.Namespace, batch: bool) -> None:
    if args.new or args.compile:
        args.time = True
    if args.new and batch:
        raise UserError("--new takes one task file, not a batch (a folder's tasks may define ModelNew)")
    if args.new and not Path(args.new).is_file():
        what = "not a regular file" if Path(args.new).exists() else "no such candidate file"
        raise UserError(f"{args.new}: {what}")
    if args.trials < 1:
        raise UserError("--trials must be at least 1")
    if args.plot is not None:
        if batch:
            raise UserError("--plot takes one task file, not a batch")
        from ...report.charts import _check_path, _matplotlib

        _check_path(args.plot)
        _matplotlib()  # installed? Known now, not after the analysis


def _check_output_paths(args: argparse.Namespace, paths: list[Path]) -> None:
    """Every output path, before any work: never a device, FIFO or folder, never an input of this
    run (a task, the candidate, a cached calibration), never the same file twice."""
    from ...peaks.cache import cache_dir

    cache = cache_dir()
    cached = sorted(cache.glob("calibration-*.json")) if cache.is_dir() else []
    json_file = args.json if args.json != "-" else None
    check_outputs({"--json": json_file, "--csv": args.csv, "--plot": args.plot},
                  reads=[*paths, args.new, *cached])


def run(args: argparse.Namespace) -> int:
    _fix_json_target(args)
    paths, batch = _task_paths(args.targets)
    _check_args(args, batch)
    _check_output_paths(args, paths)
    gpu = resolve_gpu(args.gpu)
    if args.time:
        from ...device.status import require_measurement

        require_measurement(args.device)  # exit 3 with the reason, before any task runs
    from ...tasks.counting import require_torch

    require_torch()  # once, up front: without torch no task of a batch could be counted
    if gpu.note:
        print(f"roofline-ext: note: {gpu.note}", file=sys.stderr)
    if batch:
        return _run_batch(args, paths, gpu)
    return _run_one(args, paths[0], gpu)


# --- one task ---------------------------------------------------------------------------------------

def _analyze_fn(args: argparse.Namespace):
    """analyze_task, or with --time the timed variant bound to the timing options."""
    if not args.time:
        return analyze_task
    import functools

    from ...runner.timed import analyze_and_time

    return functools.partial(analyze_and_time, new=args.new, trials=args.trials, compile=args.compile,
                             device=args.device, timeout_s=args.timeout)


def _run_one(args: argparse.Namespace, target: Path, gpu: GpuChoice) -> int:
    measured = _measured_peaks_for(gpu, args.regime)
    result = _analyze_fn(args)(target, gpu, args.dtype, regime=args.regime, strict_fp32=args.strict_fp32,
                               measured=measured)
    if args.plot is not None:
        from ...report.charts import plot_task

        # The chart draws the roofs the analysis used: this card's calibration, found by UUID.
        cal = calibration_for(gpu) if (result.get("roofs") or {}).get("measured") else None
        print(f"roofline-ext: chart written to {plot_task(public(result), args.plot, cal)}", file=sys.stderr)
    if args.csv:
        ResultsWriter(csv_path=args.csv).add(result)
    if args.json is not None:
        text = dumps(public(result), indent=2)
        if args.json == "-":
            print(text)
        else:
            write_atomic(Path(args.json), text + "\n")
        return 0
    print(_text_report(result, gpu))
    return 0


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


def _text_report(result: Mapping[str, Any], gpu: GpuChoice) -> str:
    from ...report.text import describe

    lines = [describe(result.get("_roofline"), gpu.name, why_none=result.get("_no_roofline")), ""]
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
    timing = result.get("timing")
    if timing:
        ref = timing["reference"]
        rows.append(("PyTorch", f"{ref['median_ms']:.4g} ms median (best {ref['best_ms']:.4g}, CV "
                                f"{ref['cv']:.1%}, {ref['trials']} trials, L2 flushed) on {timing['device']}"))
        if timing.get("t_new_ms") is not None:
            c = timing["candidate_timing"]
            ok = timing["correctness"]
            verdict = (f"correct at atol=rtol={ok['tolerance']:g}" if ok["ok"]
                       else f"INCORRECT: {ok.get('reason')}")
            rows.append(("yours", f"{c['median_ms']:.4g} ms median (best {c['best_ms']:.4g}, CV {c['cv']:.1%}); "
                                  f"{verdict}; speed-up {timing['speedup']:.3g}x"))
        if timing.get("t_compile_ms") is not None:
            rows.append(("torch.compile", f"{timing['t_compile_ms']:.4g} ms median"))
    ops = [(name, v) for name, v in (result.get("by_op") or {}).items() if v["flops"] or v["simt_flops"]]
    if ops:
        rows.append(("top ops", ", ".join(f"{name} x{v['calls']}" for name, v in ops[:5])))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]

    header = ("roof", "compute TFLOP/s", "SIMT TFLOP/s", "TB/s", "compute ms", "SIMT ms", "memory ms",
              "floor ms", "bound")
    if timing:
        header = header[:-1] + ("PyTorch %", "yours %", "bound")
    table = [header]

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    for name in ("datasheet", "derived", "measured"):
        roof = (result.get("roofs") or {}).get(name)
        if not roof:
            table.append((name,) + ("-",) * (len(header) - 2) + ("not available",))
            continue
        row = (name, _peak(roof["compute_tflops"]), _peak(roof["simt_tflops"]), _peak(roof["bandwidth_tbps"]),
               _ms(roof["t_compute_ms"]), _ms(roof["t_simt_ms"]), _ms(roof["t_memory_ms"]), _ms(roof["t_min_ms"]))
        if timing:
            row += (pct(roof.get("ref_fraction")), pct(roof.get("new_fraction")))
        table.append(row + (roof["bound"],))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    lines.append("")
    for row in table:
        cells = [str(row[0]).ljust(widths[0])] + [str(c).rjust(w) for c, w in zip(row[1:-1], widths[1:-1])]
        lines.append("  " + "  ".join(cells + [str(row[-1])]).rstrip())
    for note in result.get("notes") or []:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


# --- a folder ---------------------------------------------------------------------------------------

def _run_batch(args: argparse.Namespace, paths: list[Path], gpu: GpuChoice) -> int:
    json_file = args.json if args.json not in (None, "-") else None
    meta = {"gpu": gpu.name, "gpu_source": gpu.source, "regime": args.regime, "dtype": args.dtype,
            "strict_fp32": args.strict_fp32, "folder": str(Path(args.targets[0])) if len(args.targets) == 1 else None,
            "targets": list(args.targets), "timed": bool(args.time)}
    writer = ResultsWriter(json_file, args.csv, meta=meta)
    results = analyze_batch(paths, gpu, args.dtype, regime=args.regime, strict_fp32=args.strict_fp32,
                            writer=writer, progress=not args.no_progress, debug=args.debug,
                            measured=_measured_peaks_for(gpu, args.regime), analyze=_analyze_fn(args))
    writer.flush(complete=True)
    if args.json == "-":
        print(dumps(writer.document(complete=True), indent=1))
    elif not json_file and not args.csv:
        print(_batch_table(results))
    summary = summarize(results)
    _print_summary(summary, json_file, args.csv)
    return 1 if summary["failed"] else 0


def _batch_table(results: list[dict[str, Any]]) -> str:
    timed = any(r.get("timing") for r in results)
    header = ("task", "GFLOP", "SIMT GFLOP", "MB", "dtype", "floor ms", "bound")
    if timed:
        header += ("PyTorch ms", "% datasheet", "% measured")
    rows = [header]

    def frac(r: Mapping[str, Any], roof: str) -> str:
        x = ((r.get("roofs") or {}).get(roof) or {}).get("ref_fraction")
        return "-" if x is None else f"{x:.0%}"

    for r in results:
        if r["status"] != "ok":
            rows.append((r["task"],) + ("-",) * (len(header) - 2) + ("error",))
            continue
        row = (r["task"], f"{r['flops'] / 1e9:.4g}", f"{r['simt_flops'] / 1e9:.4g}", f"{r['bytes'] / 1e6:.4g}",
               str(r["compute_dtype"]).replace("torch.", ""), _ms(r["t_min_ms"]), r["bound"] or "-")
        if timed:
            row += (_ms(r.get("t_ref_ms")), frac(r, "datasheet"), frac(r, "measured"))
        rows.append(row)
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    out = []
    for row in rows:
        cells = [str(row[0]).ljust(widths[0])] + [str(c).rjust(w) for c, w in zip(row[1:-1], widths[1:-1])]
        out.append("  ".join(cells + [str(row[-1])]).rstrip())
    return "\n".join(out)


def _print_summary(summary: Mapping[str, Any], json_file: str | None, csv_file: str | None) -> None:
    err = sys.stderr
    written = [f for f in (json_file, csv_file) if f]
    where = f"; results in {' and '.join(written)}" if written else ""
    print(f"roofline-ext: analyzed {summary['total']} task(s): {summary['ok']} ok, "
          f"{summary['failed']} failed{where}", file=err)
    for f in summary["failures"]:
        print(f"  FAILED {f['task']}: {f['error']}", file=err)
