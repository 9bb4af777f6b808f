"""``roofline-ext floors DIR... --gpu NAME|all [--calibration FILE] [--json OUT] [--csv OUT]``: the floor table.

One row per task and GPU (``report/floors_table.py``): FLOPs (tensor-core, SIMT), compulsory bytes,
arithmetic intensity and the floor with its bound on the datasheet, derived and, for a GPU a
``--calibration`` file is of, measured roofs. Every task is counted once, through the pool
(``runner.batch.run_batch``; ``--isolation process`` counts in this process instead), and the floors
of every GPU are computed from that one count. No GPU is needed. ``floors/README.md`` says how the committed KernelBench table was made.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..._version import __version__
from ...errors import UserError
from ...inputs import read_json
from ...model.gpu import GpuChoice
from ...peaks.cache import measured_peaks_of
from ...peaks.datasheet import all_skus, known_names, lookup
from ...peaks.derived import derived_peaks, derived_peaks_for_device
from ...report.floors_table import FloorGpu, floor_rows, table_document, to_csv, to_json
from ...report.outputs import check_outputs, write_text
from ...report.progress import Progress
from ...runner.batch import BatchOptions, run_batch
from ...tasks.counting import COUNTING_RULES
from .analyze import task_paths


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("floors", help="the floor table of task folders on every GPU of the datasheet (no GPU needed)",
                       description="Count every task once and write one row per task and GPU: FLOPs (tensor, "
                       "SIMT), compulsory bytes, arithmetic intensity, and the floor and its bound on the "
                       "datasheet, derived and (with --calibration) measured roofs.")
    p.add_argument("targets", nargs="+", metavar="DIR", help="task folders (searched recursively) or task files")
    p.add_argument("--gpu", default="all", metavar="NAME|all",
                   help="a datasheet SKU (as `roofline-ext peaks` names them), or all of them (default)")
    p.add_argument("--calibration", action="append", default=[], metavar="FILE.json",
                   help="a `calibrate --json` file: measured roofs for the SKU it was made on (repeatable)")
    p.add_argument("--regime", default="burst", choices=("burst", "sustained"),
                   help="which measured peaks of the calibration (default: burst)")
    p.add_argument("--dtype", default=None, help="cast every task first: fp32|fp16|bf16 (default: as written)")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="counting workers (default: the CPUs)")
    p.add_argument("--isolation", choices=("pool", "fresh", "process"), default="pool",
                   help="pool: each task counted in a fresh worker process (default); fresh: the same; process: "
                   "every task counted in this process, one after the other (as analyze --isolation process)")
    p.add_argument("--json", default=None, metavar="OUT", help="write the table as JSON ('-': stdout)")
    p.add_argument("--csv", default=None, metavar="OUT", help="write the table as CSV ('-': stdout; the default)")
    p.set_defaults(func=run)


def counter_version() -> str:
    """The package version and the counting rules' version: what a table names as its maker."""
    return f"{__version__}+rules.{COUNTING_RULES}"


def _gpus(name: str, calibrations: list[Any], regime: str) -> list[Any]:
    """The GPU columns: every SKU (``all``) or the one named; each calibration's measured (and its
    card's derived) peaks go onto the SKU it was made on."""
    if name.strip().lower() == "all":
        skus = list(all_skus())
    else:
        sheet = lookup(name)
        if sheet is None:
            raise UserError(f"unknown GPU {name!r}; known: all, {', '.join(known_names())}")
        skus = [sheet]
    measured: dict[str, tuple[Any, Any]] = {}
    for path, cal in calibrations:
        gpu = cal.get("gpu") or {}
        sheet = lookup(str(gpu.get("name") or ""))
        if sheet is None:
            raise UserError(f"{path}: a calibration of {gpu.get('name')!r}, which is no SKU of the datasheet")
        peaks = measured_peaks_of(cal, regime)
        if peaks is None:
            raise UserError(f"{path}: the calibration has no {regime} peaks")
        measured[sheet.name] = (peaks, _card_derived(gpu))
    out = []
    for s in skus:
        peaks, derived = measured.get(s.name, (None, None))
        out.append(FloorGpu(s.name, s, derived=derived if peaks is not None else _sheet_derived(s), measured=peaks))
    return out


def _card_derived(gpu: dict[str, Any]) -> Any | None:
    """Derived peaks of the calibrated card, from the attributes its calibration recorded."""
    cc = str(gpu.get("compute_capability") or "")
    if "." not in cc:
        return None
    major, minor = cc.split(".", 1)
    return derived_peaks_for_device({**gpu, "cc_major": int(major), "cc_minor": int(minor)})


def _sheet_derived(sheet: Any) -> Any | None:
    """Derived peaks of a SKU without a card: its SMs at the highest clock its datasheet gives (the
    per-clock rates of its architecture, GeForce halving where it applies); no memory clock, so the
    derived roof's bandwidth is the datasheet's."""
    clock = max(c for c in (sheet.boost_clock_mhz, sheet.simt_clock_mhz, 0) if c is not None)
    if not sheet.sm_count or not clock:
        return None
    peaks = derived_peaks(sheet.cc[0], sheet.cc[1], sheet.sm_count, clock,
                          consumer="geforce" in sheet.full_name.lower())
    return peaks if peaks.known_arch else None


def run(args: argparse.Namespace) -> int:
    paths, _ = task_paths(args.targets)
    calibrations = [(p, read_json(p)) for p in args.calibration]
    outputs = check_outputs({"--json": args.json, "--csv": args.csv if (args.csv or args.json) else "-"},
                            reads=[*paths, *args.calibration])
    gpus = _gpus(args.gpu, calibrations, args.regime)
    first = gpus[0].sheet
    results = run_batch(paths, GpuChoice(first.full_name, first, None, "flag"),
                        BatchOptions(dtype=args.dtype, regime=args.regime, jobs=args.jobs, measured=None,
                                     isolation=args.isolation),
                        progress=Progress if sys.stderr.isatty() else None)
    if len(paths) == 1:  # a batch of one keeps the file's stem as its name; so does the table
        results[0]["task"] = paths[0].stem
    version = counter_version()
    rows = floor_rows(results, gpus)
    measured_from = ", ".join(Path(p).name for p in args.calibration) or None
    for flag, path in outputs.items():
        if flag == "--json":
            doc = table_document(rows, counter_version=version, gpus=gpus, measured_from=measured_from,
                                 tasks_from=[Path(t).name for t in args.targets])
            write_text(path, to_json(doc))
        else:
            write_text(path, to_csv(rows, version))
    failed = sum(r["status"] == "error" for r in results)
    print(f"roofline-ext: {len(results)} tasks x {len(gpus)} GPUs = {len(rows)} rows (counter {version})"
          + (f"; {failed} tasks could not be counted (status=error rows)" if failed else ""), file=sys.stderr)
    return 0
