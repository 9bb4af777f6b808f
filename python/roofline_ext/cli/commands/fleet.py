"""``roofline-ext fleet``: the check on every GPU of a Dask cluster, or over result files, side by side.

``--scheduler ADDRESS``: one check per GPU of every Dask worker (one worker per GPU, as dask-cuda
lays them out; docs/fleet.md). ``--from DIR``: the check results (``check --json``) in DIR's .json
files, produced any other way (a Slurm job array). Either way: per-SKU medians, spread and stragglers
(below ``--straggler-fraction`` of the SKU median), a table (or ``--json``), ``-o FILE`` for the JSON,
and the exit code of the worst GPU (0 PASS, 4 WARN or a straggler, 5 FAIL, 6 UNKNOWN).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Mapping

from ...check.tolerances import parse_tolerances
from ...errors import UserError
from ...report.fleet_table import gpu_rows, sku_rows
from ...report.outputs import check_outputs
from ...report.writers import emit_json
from .calibrate import make_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help="check every GPU of a Dask cluster (or result files): medians, spread, stragglers",
                       description="Run 'roofline-ext check' on every GPU of every Dask worker (--scheduler), or read "
                       "check results from a folder (--from), and report per-SKU medians, spread and stragglers. "
                       "Exit code: the worst GPU's (0 PASS, 4 WARN or straggler, 5 FAIL, 6 UNKNOWN); 2 bad input.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address, e.g. tcp://head:8786")
    src.add_argument("--from", dest="from_dir", metavar="DIR", help="folder of check results (*.json, searched recursively)")
    p.add_argument("--straggler-fraction", type=float, default=None, metavar="F",
                   help="a GPU below F x its SKU's median of a metric is a straggler (default 0.95)")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=FRACTION",
                   help="passed to every check (see 'roofline-ext check --help')")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds one GPU's check may take (default 120)")
    p.add_argument("--json", action="store_true", help="print the whole fleet result as JSON")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON to FILE (a regular file)")
    p.set_defaults(func=run)


def _print(doc: Mapping[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = make_console()
    summary = doc["summary"]
    # Host names, SKUs and file names are the results' text: printed as written, never read as markup.
    table = Table(title=escape(f"Fleet: {len(summary['gpus'])} result(s) from {doc['source']}"), title_justify="left")
    for col in ("sku", "metric", "n", "median", "min", "max", "spread", "stragglers"):
        table.add_column(col, justify="left" if col in ("sku", "metric") else "right")
    for r in sku_rows(summary):
        table.add_row(*(escape(r[c]) for c in ("sku", "metric", "n", "median", "min", "max", "spread", "stragglers")))
    console.print(table)
    gpus = Table(title=f"GPUs (stragglers: below {summary['straggler_fraction']:.0%} of the SKU median)",
                 title_justify="left")
    cols = ("host", "index", "sku", "verdict", "hbm_read", "bf16", "h2d", "straggler")
    for col in cols:
        gpus.add_column(col)
    for r in gpu_rows(summary):
        gpus.add_row(*(escape(r[c]) for c in cols))
    console.print(gpus)
    for line in summary.get("ignored") or []:
        console.print(escape(f"ignored: {line}"), style="dim")
    if doc.get("overhead_s") is not None:
        print(f"fleet: {doc['wall_s']:.1f} s wall, {doc['critical_path_s']:.1f} s the longest chain of checks, "
              f"{doc['overhead_s']:.1f} s added by the fleet")
    print(f"fleet: {doc['verdict']} (exit {doc['exit_code']}): {summary['reason']}")


def run(args: argparse.Namespace) -> int:
    # Lazy: what only this command runs stays out of --help and the other commands (LAZY_ALLOWED).
    from ...check.stragglers import DEFAULT_STRAGGLER_FRACTION
    from ...runner.fleet import DEFAULT_TASK_TIMEOUT_S, check_address, fleet_from_dir, run_fleet

    parse_tolerances(args.tolerance)  # refuse a bad one here, not on every worker
    fraction = DEFAULT_STRAGGLER_FRACTION if args.straggler_fraction is None else args.straggler_fraction
    if not 0 < fraction <= 1:  # NaN fails this too
        raise UserError(f"--straggler-fraction must be in (0, 1], not {fraction}")
    timeout = DEFAULT_TASK_TIMEOUT_S if args.timeout is None else args.timeout
    if not (math.isfinite(timeout) and timeout > 0):
        raise UserError(f"--timeout must be a finite positive number of seconds, not {args.timeout}")
    if args.scheduler is not None:
        check_address(args.scheduler)  # before the output, before Dask is imported
    # With --from, the result files (searched recursively, as they are read) are what this run
    # reads: the output may not be one of them.
    reads = sorted(Path(args.from_dir).rglob("*.json")) if args.from_dir and Path(args.from_dir).is_dir() else []
    out = check_outputs({"-o": args.output}, reads=reads).get("-o")
    if args.scheduler:
        report = run_fleet(args.scheduler, tolerances=args.tolerance, straggler_fraction=fraction,
                           task_timeout_s=timeout)
    else:
        report = fleet_from_dir(args.from_dir, straggler_fraction=fraction)
    doc = report.to_dict()
    emit_json(doc, out, to_stdout=args.json)
    if not args.json:
        _print(doc)
    return report.exit_code
