"""``roofline-ext report RESULTS.json... -o report.html``: one self-contained HTML file.

The roofline chart with the measured and datasheet roofs and the analysed tasks on it, the
calibration table with clocks and power, the check verdicts and the fleet table, from any mix of
``calibrate``, ``check``, ``fleet`` and ``analyze`` JSON. No network: inline CSS and SVG. Writes only
the regular file ``-o`` names.
"""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="one self-contained HTML page from calibrate/check/fleet/analyze JSON",
                       description="Make one HTML file (no network: inline CSS and SVG charts) from result JSON "
                       "files: roofline charts with measured and datasheet roofs and the tasks on them, the "
                       "calibration tables with clocks and power, the energy roofline (from a calibration's "
                       "energy section or benchmarks/energy_roofline.py's JSON, with the tasks that measured "
                       "energy on it), check verdicts and the fleet table.")
    p.add_argument("inputs", nargs="+", metavar="RESULTS.json",
                   help="calibrate/check/fleet/analyze --json files, and energy_roofline.py's JSON")
    p.add_argument("-o", "--output", required=True, metavar="FILE.html", help="the HTML file to write")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Lazy: what only this command runs stays out of --help and the other commands (LAZY_ALLOWED).
    from ...report.html import MAX_BYTES, build_report

    path, size = build_report(args.inputs, args.output)
    print(f"roofline-ext: report written to {path} ({size / 1024:.0f} KiB)", file=sys.stderr)
    if size > MAX_BYTES:
        print(f"roofline-ext: warning: the report is {size / 2**20:.1f} MiB, above {MAX_BYTES / 2**20:.0f} MiB: "
              "it may open slowly", file=sys.stderr)
    return 0
