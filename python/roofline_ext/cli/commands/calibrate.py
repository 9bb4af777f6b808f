"""``roofline-ext calibrate``: measure this GPU's peaks (burst and sustained) and cache them.

Quick (``--quick``): HBM bandwidth and FP32/TF32/FP16/BF16 in seconds. Full (default): every
precision, HBM and L2, then each unit family (HBM, SIMT, tensor) run for ``--sustained`` seconds
until clocks settle, then each unit's energy per FLOP / per byte and the idle power over NVML's
energy counter (``--no-energy`` skips that part). A progress bar goes to stderr, a table to stdout at the end (``--json``: the
whole calibration instead). The result is cached per GPU UUID and used by every later roofline on
that GPU (``--no-cache`` to skip). ``--show`` prints what is cached and needs no GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ...device import listing, status
from ...errors import GpuUnavailableError, UserError
from ...peaks.cache import cache_dir, list_cached, load, save
from ...peaks.units import PEAK_KEYS, peak_label
from ...report.calibration_table import energy_notes, energy_rows, summary_rows, sustained_hbm_patterns
from ...report.charts import check_path, load_matplotlib, plot_calibration
from ...report.outputs import check_outputs
from ...report.writers import dumps


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` sub-command."""
    p = sub.add_parser(
        "calibrate",
        help="measure this GPU's peaks (burst and sustained) and cache them for every roofline",
        description="Measure HBM/L2 bandwidth and every precision's throughput on this GPU with "
        "NVML telemetry, report them against the datasheet and the clock-derived peaks, and cache "
        "them (one file per GPU UUID) so that 'roofline-ext analyze' shows the measured roofs. "
        "Exits 3 when there is no GPU to measure (--show needs none).",
    )
    p.add_argument("--device", default="0", metavar="N|all",
                   help="CUDA index of the GPU to calibrate, or 'all' for each in turn (default: 0)")
    p.add_argument("--quick", action="store_true",
                   help="HBM bandwidth and FP32/TF32/FP16/BF16 only, no sustained phase (about 3 s on an "
                   "H200; budget 5 s)")
    p.add_argument("--sustained", type=float, default=None, metavar="SECONDS",
                   help="seconds each unit (HBM, FP64, FP32, TF32, FP16, BF16, FP8, INT8) runs in the "
                   "sustained phase (default: 25, shortened if needed so that the whole calibration fits "
                   "in 5 minutes; an explicit value is run as given; 0 skips the phase)")
    p.add_argument("--no-energy", action="store_true",
                   help="do not measure energy in the sustained phase (by default a full calibration measures "
                   "J/FLOP of every precision, J/byte of HBM read, write and copy, and idle power: about a "
                   "minute; needs nvidia-ml-py, and is skipped with the reason without it)")
    p.add_argument("--energy-window", type=float, default=None, metavar="SECONDS",
                   help="the shortest energy-counter window per unit (default 1; the phase lengthens it to its "
                   "own rule, 1-3 s on an H200, where each figure's counter-reading bound is about 5%%): "
                   "a longer window narrows that bound at its cost, about SECONDS more per unit x 10 units")
    p.add_argument("--json", action="store_true", help="print the full calibration as JSON on stdout")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw the roofline chart (FILE.png or FILE.svg; with --device all, one "
                   "file per GPU, FILE-gpuN.png)")
    p.add_argument("--no-cache", action="store_true", help="do not write the result to the cache")
    p.add_argument("--show", action="store_true",
                   help="print the cached calibrations (no measurement, no GPU needed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


# --- helpers ------------------------------------------------------------------------------------

@contextlib.contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """Cache warnings (corrupt file, other schema) as one ``roofline-ext: warning:`` line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                print(f"roofline-ext: warning: {w.message}", file=sys.stderr)


def make_console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    console = Console(file=stream, highlight=False)
    if not console.is_terminal:
        # Piped into a file or a CI log: no colour codes, and wide enough that the table never wraps.
        console = Console(file=stream, highlight=False, width=160, color_system=None)
    return console


def _check_plot(plot: str | None) -> Path | None:
    """Validate ``--plot`` before anything is measured: a bad name, a path that is no regular file
    or a missing matplotlib must not be found out after minutes of calibration."""
    if plot is None:
        return None
    _check_outputs({"--plot": plot})
    base = check_path(plot)
    load_matplotlib()
    return base


def _check_outputs(outputs: Mapping[str, Any]) -> None:
    """Outputs by the rules of report/outputs.py; the cached calibrations are files this run
    reads, so a chart never lands on one."""
    cache = cache_dir()
    check_outputs(outputs, reads=sorted(cache.glob("calibration-*.json")) if cache.is_dir() else [])


def _plot_paths(base: Path | None, indices: Sequence[int]) -> dict[int, Path]:
    if base is None:
        return {}
    if len(indices) == 1:
        return {indices[0]: base}
    paths = {i: base.with_name(f"{base.stem}-gpu{i}{base.suffix}") for i in indices}
    _check_outputs({f"--plot (GPU {i})": p for i, p in paths.items()})
    return paths


def device_index(spec: str, flag: str = "--device") -> int:
    """A CUDA index as the user typed it (``0``, `` 1``), or a ``UserError`` (exit 2): said before
    any GPU is looked at, so a typo is never reported as "no GPU" (exit 3)."""
    text = str(spec).strip()
    if not (text.isascii() and text.isdigit()):
        raise UserError(f"{flag} must be a CUDA index (0, 1, ...) or 'all', not {spec!r}")
    return int(text)


def _device_indices(spec: str) -> list[int]:
    spec = str(spec).strip().lower()
    if spec == "all":
        status.require_measurement(0)  # raises GpuUnavailableError (exit 3) with the reason
        found = sorted(d.index for d in listing.devices() if d.index is not None and d.can_measure)
        if not found:
            raise GpuUnavailableError(status.availability())
        return found
    index = device_index(spec)
    status.require_measurement(index)
    return [index]


class _ProgressBar:
    """The ``progress(done, total, description)`` callback: a rich bar on a terminal, one line per
    step otherwise (CI logs), nothing with ``--no-progress``."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.console = make_console(stderr=True)
        self.live = enabled and self.console.is_terminal
        self.progress: Any = None  # a rich Progress once entered on a terminal
        self.task: Any = None
        self.seen: set[str] = set()

    def __enter__(self) -> "_ProgressBar":
        if self.live:
            from rich.progress import (BarColumn, Progress, SpinnerColumn, TaskProgressColumn,
                                       TextColumn, TimeElapsedColumn)

            self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                     TaskProgressColumn(), TimeElapsedColumn(), console=self.console,
                                     transient=True)
            self.progress.__enter__()
            self.task = self.progress.add_task("starting", total=1.0)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def __call__(self, done: float, total: float, description: str) -> None:
        if not self.enabled:
            return
        if self.progress is not None:
            from rich.markup import escape

            # Descriptions carry kernel configurations ("[...]"), which rich would read as markup.
            self.progress.update(self.task, completed=done, total=total, description=escape(description))
        elif description not in self.seen:
            # A log gets each step (and each measurement inside it) once, not every update.
            print(f"roofline-ext: {description}", file=sys.stderr, flush=True)
            self.seen.add(description)


# --- output -------------------------------------------------------------------------------------

def _cell(text: str | None) -> str:
    from rich.markup import escape

    return "-" if text in (None, "") else escape(str(text))


def print_calibration(cal: Mapping[str, Any], console=None) -> None:
    """The readable table of one calibration (also used by ``--show``)."""
    from rich.table import Table

    console = console or make_console()
    gpu = cal.get("gpu") or {}
    when = str(cal.get("date", "?"))[:16].replace("T", " ")
    wall = cal.get("wall_s")
    title = (f"{gpu.get('name', 'GPU')} [{gpu.get('uuid', '?')}], {cal.get('mode', '?')} calibration "
             f"of {when} UTC" + (f", {wall:.0f} s" if isinstance(wall, (int, float)) else ""))
    timing = cal.get("timing") or {}
    if isinstance(timing.get("total_s"), (int, float)):
        budget, burst_s, sus_s = timing.get("budget_s"), timing.get("burst_s"), timing.get("sustained_s")
        parts = ([f"burst {burst_s:.1f} s"] if isinstance(burst_s, (int, float)) else []) \
            + ([f"sustained phase {sus_s:.0f} s"] if sus_s else []) \
            + ([f"budget {budget:g} s"] if isinstance(budget, (int, float)) else [])
        title += f" ({', '.join(parts)})" if parts else ""
    rows = summary_rows(cal)
    sustained = any(r["sustained"] for r in rows)
    table = Table(title=_cell(title), title_justify="left", show_lines=False)
    table.add_column("unit")
    table.add_column("burst", justify="right")
    table.add_column("% datasheet", justify="right")
    table.add_column("% clock-derived", justify="right")
    table.add_column("at (clock, power)", justify="right")
    if sustained:
        table.add_column("sustained", justify="right")
        table.add_column("at (clock, power)", justify="right")
    table.add_column("path")
    for r in rows:
        cells = [r["label"], _cell(r["burst"]), _cell(r["fraction_of_datasheet"]),
                 _cell(r["fraction_of_clock_derived"]), _cell(r["burst_at"])]
        if sustained:
            cells += [_cell(r["sustained"]), _cell(r["sustained_at"])]
        cells.append(_cell(r["path"]))
        table.add_row(*cells)
    console.print(table)
    _print_energy(cal, console)
    notes = ["% clock-derived: of (per-clock rate x SMs x the SM clock NVML reported during the run); "
             "HBM: of 2 x memory clock x bus width / 8. Above 100% would be a measurement bug."]
    if any("(k " in (r["fraction_of_clock_derived"] or "") for r in rows):
        notes.append("k / kernel: at the SM clock the kernel itself counted (clock64 over %globaltimer); "
                     "under tensor-core load it runs below the clock NVML reports.")
    patterns = sustained_hbm_patterns(cal)
    if patterns:
        notes.insert(0, patterns)
    if cal.get("fixture"):
        notes.insert(0, f"NOTE: {cal['fixture']}")
    if cal.get("_path"):
        notes.append(f"cached in {cal['_path']}")
    for n in notes:
        console.print(_cell(n), style="dim")


def _print_energy(cal: Mapping[str, Any], console: Any) -> None:
    """The calibration's energy part: a table of J per unit (report/calibration_table.py's rows) and
    its notes, or the one line that says why energy was not measured; nothing for a calibration
    made before calibration measured energy."""
    from rich.table import Table

    rows = energy_rows(cal)
    if rows:
        table = Table(title="Energy per unit of work (sustained phase, above idle)", title_justify="left")
        for name, justify in (("unit", "left"), ("above idle", "right"), ("whole board", "right"),
                              ("power", "right"), ("at (clock, temp, reasons)", "right"), ("window", "right"),
                              ("kernel", "left")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for r in rows:
            table.add_row(_cell(r["label"]), _cell(r["above_idle"]), _cell(r["total"]), _cell(r["power"]),
                          _cell(r["at"]), _cell(r["window"]), _cell(r["kernel"]))
        console.print(table)
    for line in energy_notes(cal):
        console.print(_cell(line), style="dim")


def _spread(cals: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per peak key: each GPU's burst figure, min, max and spread = (max - min) / max."""
    out: dict[str, dict[str, Any]] = {}
    for key in PEAK_KEYS:
        values = {str(c["gpu"].get("index")): c["peaks"]["burst"].get(key) for c in cals}
        present = [v for v in values.values() if isinstance(v, (int, float))]
        if not present:
            continue
        lo, hi = min(present), max(present)
        out[key] = {"values": values, "min": lo, "max": hi, "median": statistics.median(present),
                    "spread": (hi - lo) / hi if hi else None}
    return out


def print_spread(cals: Sequence[Mapping[str, Any]], console=None) -> None:
    from rich.table import Table

    console = console or make_console()
    spread = _spread(cals)
    table = Table(title=f"Burst peaks across {len(cals)} GPUs", title_justify="left")
    table.add_column("unit")
    for c in cals:
        table.add_column(f"GPU {c['gpu'].get('index')}", justify="right")
    for col in ("min", "max", "spread"):
        table.add_column(col, justify="right")
    for key in PEAK_KEYS:
        s = spread.get(key)
        if not s:
            continue
        cells = [peak_label(key)]
        for c in cals:
            v = s["values"].get(str(c["gpu"].get("index")))
            cells.append("-" if v is None else f"{v:.4g}")
        cells += [f"{s['min']:.4g}", f"{s['max']:.4g}",
                  "-" if s["spread"] is None else f"{s['spread']:.1%}"]
        table.add_row(*cells)
    console.print(table)


# --- the command --------------------------------------------------------------------------------

def _show(args: argparse.Namespace) -> int:
    base = _check_plot(args.plot)
    with _warnings_to_stderr():
        cals = list_cached()
    if args.json:
        print(dumps([{k: v for k, v in c.items() if k != "_path"} for c in cals], indent=1))
    elif not cals:
        print(f"No calibration cached in {cache_dir()}; run 'roofline-ext calibrate' on a GPU machine.")
    else:
        console = make_console()
        for i, cal in enumerate(cals):
            if i:
                console.print()
            print_calibration(cal, console)
    if base is not None:
        if not cals:
            raise UserError("--plot: no cached calibration to draw")
        path = plot_calibration(cals[0], base)
        print(f"roofline-ext: chart of the calibration of {cals[0]['gpu'].get('name')} written to {path}",
              file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.show:
        return _show(args)
    # Lazy: what only this command runs stays out of --help and the other commands (LAZY_ALLOWED).
    from ...calibration.pipeline import DEFAULT_SUSTAINED_S, FULL_BUDGET_S, calibrate

    sustained_s = DEFAULT_SUSTAINED_S if args.sustained is None else args.sustained
    if not (math.isfinite(sustained_s) and sustained_s >= 0):  # NaN and infinity too
        raise UserError(f"--sustained must be 0 (skip) or a finite number of seconds, not {args.sustained}")
    window = args.energy_window
    if window is not None and not (math.isfinite(window) and 1.0 <= window <= 600.0):
        raise UserError(f"--energy-window must be a number of seconds from 1 to 600, not {window}")
    if window is not None and (args.quick or args.no_energy):
        print("roofline-ext: note: no energy is measured (--quick or --no-energy); --energy-window is ignored",
              file=sys.stderr)
    if args.quick and args.sustained:
        print("roofline-ext: note: --quick has no sustained phase; --sustained is ignored", file=sys.stderr)
    plot_base = _check_plot(args.plot)
    indices = _device_indices(args.device)
    plots = _plot_paths(plot_base, indices)

    cals = []
    with _warnings_to_stderr():
        for index in indices:
            prefix = f"GPU {index}: " if len(indices) > 1 else ""
            with _ProgressBar(not args.no_progress) as bar:
                def progress(done: float, total: float, what: str, bar: _ProgressBar = bar,
                             prefix: str = prefix) -> None:
                    bar(done, total, prefix + what)

                # The default sustained window fits the 5-minute budget; an explicit one runs as asked.
                budget = FULL_BUDGET_S if (args.sustained is None and not args.quick) else None
                cal = calibrate(index, quick=args.quick, sustained_s=sustained_s, progress=progress,
                                budget_s=budget, energy=not args.no_energy, energy_window_s=window)
            cals.append(cal)
            for w in cal.get("warnings") or []:
                print(f"roofline-ext: warning: GPU {index}: {w}", file=sys.stderr)
            if not args.no_cache:
                # One file per GPU: the newest run wins. Say so when a quick run drops sustained
                # figures a full run had measured.
                old = load(cal["gpu"]["uuid"])
                path = save(cal)
                print(f"roofline-ext: cached in {path}", file=sys.stderr)
                if old and old.get("mode") == "full" and cal.get("mode") == "quick":
                    print(f"roofline-ext: note: this quick calibration replaces the full one of "
                          f"{old.get('date', '?')} (and its sustained figures)", file=sys.stderr)
            if index in plots:
                print(f"roofline-ext: chart written to {plot_calibration(cal, plots[index])}", file=sys.stderr)

    if args.json:
        doc: Any = cals[0] if len(cals) == 1 else {"devices": cals, "spread": _spread(cals)}
        print(dumps(doc, indent=1))
        return 0
    console = make_console()
    for i, cal in enumerate(cals):
        if i:
            console.print()
        print_calibration(cal, console)
    if len(cals) > 1:
        console.print()
        print_spread(cals, console)
    return 0
