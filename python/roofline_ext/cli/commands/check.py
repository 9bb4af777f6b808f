"""``roofline-ext check [--device N|all]``: is this card as fast as it should be, and if not, why.

A quick measurement (seconds) compared with the card's own cached calibration and with its SKU's
reference, plus the device state that explains a slow card; a verdict per metric and overall,
a short table (or ``--json``), and an exit code a Slurm prolog or a Kubernetes pre-flight job can act
on (docs/check.md): 0 PASS, 4 WARN, 5 FAIL, 6 UNKNOWN, 3 no GPU here (UNKNOWN), 2 bad input.
"""
from __future__ import annotations

import argparse
from typing import Any, Mapping, Literal

from ...check.tolerances import parse_tolerances
from ...report.check_table import CheckProgressBar, metric_rows, situation_line, state_rows
from ...report.outputs import check_outputs
from ...report.writers import emit_json
from .calibrate import device_index, make_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="quick health check of a GPU against its calibration and its SKU (verdict + exit code)",
        description="Measure HBM read/copy, FP32, BF16 and host-link bandwidth quickly, compare each with "
        "this card's cached calibration and with its SKU's reference, read the state that explains a "
        "slow card (clock-event reasons, ECC errors, retired/remapped memory, PCIe link, other processes, "
        "temperature) and give PASS / WARN / FAIL / UNKNOWN with the reason. Exit codes: 0 PASS, 4 WARN, "
        "5 FAIL, 6 UNKNOWN, 3 no GPU to check, 2 bad input (docs/check.md).")
    p.add_argument("--device", default="0", metavar="N|all", help="CUDA index to check, or 'all' (default: 0)")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=FRACTION",
                   help="allowed shortfall before WARN (twice it: FAIL), e.g. hbm=0.05 or bf16=7%%; metrics: "
                   "hbm_read, hbm_copy, fp32, bf16, h2d, d2h, or the groups hbm, compute, hostlink, all "
                   "(repeat or comma-separate)")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON instead of the table")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the JSON to FILE (a regular file)")
    p.add_argument("--quiet", action="store_true", help="print only the overall verdict line")
    p.add_argument("--strict", action="store_true",
                   help="judge a GPU another process is using on its figures as measured (normally such a GPU "
                   "is 'busy': its figures are shared and a low one is not held against it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def _print_device(d: Mapping[str, Any], console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    title = f"GPU {d.get('index')}: {d.get('name')} [{d.get('uuid')}]: {d.get('verdict')}"
    table = Table(title=escape(title), title_justify="left")
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("metric", "left"), ("value", "right"), ("vs calibration", "right"), ("vs reference", "right"),
        ("verdict", "left"))
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for r in metric_rows(d):
        table.add_row(escape(r["metric"]), r["value"], escape(r["calibration"]), escape(r["reference"]), r["verdict"])
    console.print(table)
    busy = situation_line(d)
    if busy:
        console.print(escape(f"  {busy}"))
    for r in state_rows(d):
        if r["verdict"] != "PASS" and not (busy and r["key"] == "compute_processes"):
            console.print(escape(f"  state {r['key']}: {r['verdict']}: {r['reason']}"))
    for r in metric_rows(d):
        if r["verdict"] not in ("PASS",):
            console.print(escape(f"  {r['key']}: {r['verdict']}: {r['reason']}"), style="dim")
    cal = d.get("calibration")
    ref = d.get("reference")
    console.print(escape(f"  compared with: {'calibration of ' + str(cal.get('date')) + ' (' + str(cal.get('mode')) + ')' if cal else 'no cached calibration'}"
                         f"; {'reference ' + ref['sku'] + ' (' + ref['kind'] + ')' if ref else 'no SKU reference'}"),
                  style="dim")


def _print(doc: Mapping[str, Any]) -> None:
    console = make_console()
    for d in doc.get("devices") or []:
        _print_device(d, console)
    _verdict_line(doc)


def _verdict_line(doc: Mapping[str, Any]) -> None:
    print(f"check: {doc['verdict']} (exit {doc['exit_code']}): {doc['reason']}")


def run(args: argparse.Namespace) -> int:
    # Lazy: what only this command runs stays out of --help and the other commands (LAZY_ALLOWED).
    from ...check.run import run_check_safely

    tolerances = parse_tolerances(args.tolerance)
    if str(args.device).strip().lower() != "all":
        device_index(args.device)  # a bad index is bad input (exit 2), said before any GPU is probed
    out = check_outputs({"-o": args.output}).get("-o")
    with CheckProgressBar(enabled=not (args.json or args.quiet or args.no_progress)) as progress:
        report = run_check_safely(args.device, tolerances=tolerances, progress=progress, strict=args.strict)
    doc = report.to_dict()
    emit_json(doc, out, to_stdout=args.json)
    if args.json:
        return report.exit_code
    if args.quiet:
        _verdict_line(doc)
    else:
        _print(doc)
    return report.exit_code

