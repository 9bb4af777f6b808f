"""``roofline-ext peaks [NAME] [--json]``: the datasheet table, or one SKU.

NAME is matched as ``datasheet.lookup`` matches device names ("NVIDIA H100 80GB HBM3", "A100 PCIe
40GB", "4090"); an unknown name is a one-line error listing the known SKUs (exit code 2).
"""
from __future__ import annotations

import argparse
import json

from ...peaks.datasheet import DatasheetPeaks, all_skus, known_names, lookup
from ...peaks.units import COMPUTE_UNITS, UNITS
from ...errors import UserError

_UNIT_HEADERS = {u.key: u.header for u in COMPUTE_UNITS}
_RATE_UNITS = {u.key: u.rate_unit for u in COMPUTE_UNITS}

_LEGEND = (
    "Dense peaks (no 2:4-sparse figures): TFLOP/s, INT8 in TOPS; bandwidth TB/s; memory GB.\n"
    "Tensor figures use FP32 accumulation (GeForce: half the advertised FP16-accumulate rate).\n"
    "MHz: clock the tensor figures assume / clock the FP32-FP64 figures assume. '-': no such unit."
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``peaks`` sub-command to the CLI's sub-parsers."""
    p = sub.add_parser(
        "peaks",
        help="print the datasheet peaks table, or one GPU's peaks",
        description="Dense datasheet peaks of every known GPU, or of the one NAME matches "
        "(a device name as nvidia-smi/torch print it, or a table name such as 'H100 SXM').",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="GPU to show (default: the whole table)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _clocks(sku: DatasheetPeaks) -> str:
    if sku.boost_clock_mhz is None and sku.simt_clock_mhz is None:
        return "-"
    tensor = sku.boost_clock_mhz or "-"
    simt = sku.simt_clock_mhz or "-"
    return str(tensor) if tensor == simt else f"{tensor}/{simt}"


def _table(skus: tuple[DatasheetPeaks, ...]) -> str:
    headers = ["SKU", "arch", "SMs", "MHz"] + [_UNIT_HEADERS[u] for u in UNITS] + ["TB/s", "GB"]
    rows = [
        [sku.name, sku.arch, str(sku.sm_count or "-"), _clocks(sku)]
        + [_num(sku.peak(u)) for u in UNITS]
        + [_num(sku.bandwidth_tbps), _num(sku.memory_gb)]
        for sku in skus
    ]
    widths = [max(len(row[i]) for row in [headers] + rows) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        # Names left-aligned, numbers right-aligned so their digits line up.
        out = [cells[0].ljust(widths[0]), cells[1].ljust(widths[1])]
        out += [c.rjust(w) for c, w in zip(cells[2:], widths[2:])]
        return "  ".join(out).rstrip()

    lines = [line(headers), line(["-" * w for w in widths])] + [line(row) for row in rows]
    return "\n".join(lines) + "\n\n" + _LEGEND


def _detail(sku: DatasheetPeaks, asked: str | None) -> str:
    title = sku.name if not asked or asked == sku.name else f"{asked} -> {sku.name}"
    lines = [
        title,
        f"  part               {sku.full_name}",
        f"  architecture       {sku.arch} (compute capability {sku.cc[0]}.{sku.cc[1]})",
        f"  SMs                {sku.sm_count if sku.sm_count is not None else 'unknown'}",
        f"  tensor clock       {sku.boost_clock_mhz or 'not published'}"
        + (" MHz" if sku.boost_clock_mhz else ""),
        f"  FP32/FP64 clock    {sku.simt_clock_mhz or 'not published'}"
        + (" MHz" if sku.simt_clock_mhz else ""),
    ]
    for unit in UNITS:
        value = sku.peak(unit)
        shown = f"{value:g} {_RATE_UNITS[unit]}" if value is not None else "- (no such unit)"
        lines.append(f"  {_UNIT_HEADERS[unit]:<18} {shown}")
    lines += [
        f"  bandwidth          {sku.bandwidth_tbps:g} TB/s",
        f"  memory             {sku.memory_gb:g} GB",
        f"  source             {sku.source}",
    ]
    if sku.notes:
        lines.append(f"  notes              {sku.notes}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the whole table or the SKU ``args.name`` matches; ``UserError`` for an unknown name."""
    if args.name is not None:
        sku = lookup(args.name)
        if sku is None:
            raise UserError(f"unknown GPU {args.name!r}; known: {', '.join(known_names())}")
        print(json.dumps(sku.as_dict(), indent=2, allow_nan=False) if args.json else _detail(sku, args.name))
        return 0
    skus = all_skus()
    if args.json:
        print(json.dumps([sku.as_dict() for sku in skus], indent=2, allow_nan=False))
    else:
        print(_table(skus))
    return 0
