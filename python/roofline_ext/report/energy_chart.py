"""The energy roofline chart (PNG or SVG, by the file's extension) of a card's energy costs.

Log-log: arithmetic intensity (FLOP per byte of HBM traffic) against energy per FLOP (pJ, above
idle). A kernel of intensity I spends at least

    E/FLOP(I) = e_flop + e_byte / I

per FLOP, so each precision's compute energy is a horizontal line (``e_flop``), the memory energy a
slope of -1 (``e_byte / I``; one line per measured HBM pattern, and L2 dotted where measured), and
their sum, drawn solid per precision, is that precision's energy roofline (the floor of a kernel at
that intensity, with the cheapest HBM pattern, as ``model/energy.memory_energy`` takes it without a
read:write split). The two terms are equal at the energy ridge ``I = e_byte / e_flop``: left of it
moving the data costs more than computing on it. A task is its measured point (filled) above its own
floor (hollow, from its exact terms), joined by a line; lower is better, and a point under its
hollow marker is below its floor.

Drawn like the other charts (``report/charts.py``): matplotlib imported at the first chart, an Agg
canvas of its own (no pyplot, so no backend or open figure of the caller changes), text drawn as
written (no mathtext), and the file written atomically through ``report/outputs.py``. Every line
has a ``gid``: ``energy:<key>:compute``, ``energy:<key>:combined``, ``energy:<pattern>:memory``,
``energy:task:<label>``. The legend stands right of the axes (a batch's points leave no corner free)
and the x ticks are powers of ten where the axis is too wide for powers of two; a named task's name
is cut when long, left of its point in the right half, and moved off the names before it.
"""
from __future__ import annotations

import io
import math
import os
import re
import textwrap
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import UserError
from ..measure.energy import EnergyMeasurement
from ..model.energy import COMPUTE_KEYS, HBM_KEYS, EnergyCosts, EnergyFloor, TaskEnergy, task_energy
from .charts import check_path, literal_text, load_matplotlib, log_log_axes
from .outputs import write_bytes

__all__ = ["plot_energy_roofline", "energy_figure", "cost_label", "measured_variants", "task_points"]

# The palette of charts.py's ceilings, so one precision has one colour across the charts.
_COLOURS = {"fp64": "#7f7f7f", "fp32": "#2ca02c", "tf32": "#ff7f0e", "fp16": "#d62728", "bf16": "#e377c2",
            "fp8": "#9467bd", "int8": "#8c564b"}
_LABELS = {"fp64": "FP64", "fp32": "FP32", "tf32": "TF32", "fp16": "FP16", "bf16": "BF16", "fp8": "FP8",
           "int8": "INT8 (per OP)"}
_MEMORY_STYLE = {"hbm_read": ("#1f4e9c", (0, (6, 2))), "hbm_write": ("#1f4e9c", (0, (2, 2))),
                 "hbm_copy": ("#1f4e9c", "-"), "l2": ("#3fa7d6", ":")}
_MEMORY_LABELS = {"hbm_read": "HBM read", "hbm_write": "HBM write", "hbm_copy": "HBM copy", "l2": "L2"}


def cost_label(key: str) -> str:
    """How the chart's legend names a cost's unit or level ("BF16", "HBM read"), for the tables
    beside it (the HTML report), so that a table and its chart say the same."""
    return _LABELS.get(key) or _MEMORY_LABELS.get(key) or key


def _pj(j: float) -> float:
    return j * 1e12


def _limits(e_flop: Sequence[float], e_byte: Sequence[float], tasks: Sequence[TaskEnergy]
            ) -> tuple[float, float, float, float]:
    """From well left of the lowest energy ridge to well right of the highest, and every task."""
    ridges = [b / f for f in e_flop for b in e_byte]
    xs = ridges + [x for t in tasks if math.isfinite(x := t.floor.arithmetic_intensity) and x > 0]
    if not xs:
        xs = [1.0, 256.0]
    x_lo = 2.0 ** math.floor(math.log2(min(xs) / 16))
    x_hi = 2.0 ** math.ceil(math.log2(max(xs) * 16))
    # The floor of the axis is the cheapest compute line: the memory lines go on falling to the
    # right, but below every compute line no kernel that computes anything can sit.
    ys = list(e_flop) or [b / x_hi for b in e_byte]
    ys += [y for t in tasks for y in (t.pj_per_flop, t.floor.pj_per_flop) if y is not None and y > 0]
    tops = [b / x_lo for b in e_byte] + [f * 4 for f in e_flop]
    tops += [y for t in tasks for y in (t.pj_per_flop, t.floor.pj_per_flop) if y is not None and y > 0]
    y_lo = 10 ** math.floor(math.log10(min(ys) / 4))
    y_hi = 10 ** math.ceil(math.log10(max(tops) * 1.5))
    return x_lo, x_hi, y_lo, y_hi


def energy_figure(costs: EnergyCosts, *, title: str, subtitle: str = "", tasks: Iterable[TaskEnergy] = ()) -> Any:
    """The matplotlib Figure :func:`plot_energy_roofline` writes (same arguments, no path)."""
    mpl = load_matplotlib()
    points = list(tasks)
    compute = [(k, c) for k in COMPUTE_KEYS if (c := costs.get(k)) is not None]
    memory = [(k, c) for k in (*HBM_KEYS, "l2") if (c := costs.get(k)) is not None]
    hbm = [c for k, c in memory if k in HBM_KEYS]
    if not compute and not memory:
        raise UserError("no energy costs to draw: the calibration measured no energy per FLOP or per byte")
    e_byte = min((_pj(c.j_per_unit) for c in hbm), default=None)  # the floor's pattern without a split
    x_lo, x_hi, y_lo, y_hi = _limits([_pj(c.j_per_unit) for _, c in compute],
                                     [_pj(c.j_per_unit) for _, c in memory], points)

    fig, ax = log_log_axes(mpl, (x_lo, x_hi, y_lo, y_hi), lambda v, _p: f"{v:g}" if v > 0 else "")
    _intensity_ticks(mpl, ax, x_lo, x_hi)
    ax.set_axisbelow(True)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("energy per FLOP above idle (pJ)")
    fig.suptitle(title, x=0.08, y=0.975, ha="left", fontsize=13, fontweight="bold")
    idle = f"idle {costs.idle_w:.0f} W, not included; " if costs.idle_w is not None else ""
    sub = (f"{subtitle + '; ' if subtitle else ''}{idle}each cost is the lowest any measured kernel reached; "
           "a card held at lower clocks can be more frugal still")
    fig.text(0.08, 0.905, textwrap.fill(sub, 150), ha="left", va="bottom", fontsize=8.5, color="#555555")

    common = _common_suffix([c.source for _, c in (*memory, *compute)])
    grid = [x_lo * (x_hi / x_lo) ** (i / 240) for i in range(241)]
    for key, c in memory:
        colour, style = _MEMORY_STYLE[key]
        e = _pj(c.j_per_unit)
        ax.plot(grid, [e / x for x in grid], color=colour, linestyle=style, linewidth=1.1, alpha=0.8,
                gid=f"energy:{key}:memory", label=_entry(f"{_MEMORY_LABELS[key]} {e:.3g} pJ/byte", c.source, common))
    for key, c in compute:
        colour = _COLOURS[key]
        e = _pj(c.j_per_unit)
        ax.axhline(e, color=colour, linestyle=(0, (5, 3)), linewidth=0.9, alpha=0.7, gid=f"energy:{key}:compute")
        if e_byte is not None:
            ax.plot(grid, [e + e_byte / x for x in grid], color=colour, linewidth=1.8, gid=f"energy:{key}:combined",
                    label=_entry(f"{_LABELS[key]} {e:.3g} pJ/FLOP + HBM", c.source, common))
            ridge = e_byte / e
            if x_lo <= ridge <= x_hi:
                ax.plot([ridge], [2 * e], marker="o", color=colour, markersize=4, zorder=4)
        else:
            ax.plot([], [], color=colour, linestyle=(0, (5, 3)),
                    label=_entry(f"{_LABELS[key]} {e:.3g} pJ/FLOP", c.source, common))
    named = _named(points)
    anchors = []
    for t in points:
        at = _draw_task(ax, t)
        if at is not None and id(t) in named:
            anchors.append((t, at))
    _legend(fig, ax, _keys(ax, mpl[2], compute=bool(compute), ridge=e_byte is not None and bool(compute),
                           tasks=bool(points)), common)
    # Names last: where each fits is measured on the axes as they are saved, the legend's room taken.
    _name_tasks(fig, ax, anchors)
    return fig


#: Wider than this (x_hi / x_lo), the intensity axis is labelled at powers of ten: a batch with a
#: task of almost no FLOPs spans 30 powers of two, whose ticks read "3.63798e-12", "4.65661e-10".
WIDE_X = 2.0 ** 20


def _intensity_ticks(mpl: Any, ax: Any, x_lo: float, x_hi: float) -> None:
    """The x axis's ticks: powers of two labelled as plain numbers (0.125, 1, 16, 2048) on the
    usual few decades, where a kernel's intensity doubling is what a reader counts; on a wider axis
    powers of ten, every 1, 2 or 3 decades so that about seven are labelled (1e-09, 0.001, 1, 1000),
    the base a multiple of the step so that 1 is always one of them, and every decade a minor tick."""
    FuncFormatter, LogLocator = mpl[3], mpl[4]
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
    if x_hi / x_lo <= WIDE_X:
        ax.xaxis.set_major_formatter(FuncFormatter(_power_of_two))
        return
    decades = math.log10(x_hi / x_lo)
    step = max(1, math.ceil(decades / 7))
    ax.xaxis.set_major_locator(LogLocator(base=10.0 ** step, numticks=int(decades / step) + 4))
    ax.xaxis.set_minor_locator(LogLocator(base=10.0, subs=(1.0,), numticks=int(decades) + 4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}" if v > 0 else ""))


def _power_of_two(v: float, _pos: Any = None) -> str:
    """2048, 1, 0.125, 0.0078125 as written; one whose decimals ``g`` would round (2^-9 is
    0.001953125) as the fraction it is, "1/512", not a rounded number that is no tick's value."""
    if v <= 0:
        return ""
    if v >= 1:
        return f"{v:.0f}"
    short = f"{v:g}"
    return short if float(short) == v else f"1/{1 / v:.0f}"


# A trailing parenthesised part of a name: the calibration in a cost's source ("... (calibration
# 2026-12-02T19:02:26+00:00)"), the variant in a task's label ("... (yours)").
_TRAILING = re.compile(r"\s*\(([^()]*)\)\s*$")


def _common_suffix(sources: Sequence[str]) -> str | None:
    """The parenthesised part every source (two or more) ends with, if they all end with the same
    one (every cost of one calibration names it): said once, in the legend's title, not per entry."""
    ends = {m.group(1) if (m := _TRAILING.search(s)) else None for s in sources}
    return ends.pop() if len(sources) > 1 and len(ends) == 1 and None not in ends else None


def _entry(head: str, source: str, common: str | None) -> str:
    """A legend entry: the line's cost, and on a line of its own the kernel it was measured on (both
    on one line, the legend took a third of the chart's width), less the part all sources share."""
    if common is not None:
        source = _TRAILING.sub("", source) or source
    return f"{head}\n" + textwrap.fill(f"({source})", 40, subsequent_indent="  ")


def _keys(ax: Any, Line2D: Any, *, compute: bool, ridge: bool, tasks: bool) -> list[Any]:
    """The legend's handles: every labelled line, then keys for what is drawn unlabelled."""
    handles, _ = ax.get_legend_handles_labels()
    if compute:  # a calibration whose compute units all failed has memory lines only: no dashed key for them
        handles.append(Line2D([], [], color="#333333", linestyle=(0, (5, 3)), label="compute energy alone (dashed)"))
    if ridge:
        handles.append(Line2D([], [], color="#333333", marker="o", linestyle="none", markersize=4,
                              label="energy ridge (compute = memory)"))
    if tasks:
        handles.append(Line2D([], [], color="#111111", marker="o", linestyle="none", label="task, measured"))
        handles.append(Line2D([], [], color="#111111", marker="o", markerfacecolor="none", linestyle="none",
                              label="task, its energy floor"))
    return handles


#: Where the legend's right edge is (a fraction of the figure's width).
_LEGEND_RIGHT = 0.99


def _legend(fig: Any, ax: Any, handles: list[Any], common: str | None) -> None:
    """The legend beside the axes, right of them, the axes narrowed by its width: inside, a batch's
    points fill every corner (and the lines each corner of a calibration's chart) and it covered them."""
    title = textwrap.fill(f"every cost: {common}", 42) if common else None
    legend = ax.legend(handles=handles, loc="upper right", bbox_to_anchor=(_LEGEND_RIGHT, fig.subplotpars.top),
                       bbox_transform=fig.transFigure, borderaxespad=0.0, fontsize=7.5, title=title,
                       title_fontsize=7.5, frameon=True, framealpha=0.92)
    width = legend.get_window_extent(fig.canvas.get_renderer()).width / fig.bbox.width
    fig.subplots_adjust(right=_LEGEND_RIGHT - width - 0.015)


#: A batch's chart names this many tasks at most (the rest are unnamed points): half of them the
#: furthest above their floor, half the nearest to it, and every task below its floor.
MAX_NAMED = 12


def _named(points: Sequence[TaskEnergy]) -> set[int]:
    """Which points get a name beside them (by ``id``): all of them when few; otherwise every
    task below its floor and the :data:`MAX_NAMED` at the two ends of the fraction of the floor,
    where a reader looks (250 names on one chart cover each other)."""
    if len(points) <= MAX_NAMED:
        return {id(t) for t in points}
    ranked = sorted((t for t in points if t.fraction), key=lambda t: t.fraction or 0.0)
    half = MAX_NAMED // 2
    chosen = ranked[:half] + ranked[-half:] + [t for t in points if t.below_floor]
    return {id(t) for t in chosen}


#: A task's name longer than this is cut, its start (the level and number, "level2/96_", which
#: find the task) and a variant's "(yours)" at its end kept: KernelBench's longest name has 90
#: characters, and two such never fit side by side.
NAME_CHARS = 32


def _short(label: str) -> str:
    m = _TRAILING.search(label)
    tail = m.group(0) if m and m.start() > 0 else ""
    head = label[:len(label) - len(tail)]
    return label if len(head) <= NAME_CHARS else head[:NAME_CHARS - 1].rstrip() + "\u2026" + tail


def _draw_task(ax: Any, t: TaskEnergy) -> tuple[float, float] | None:
    """The task's floor (hollow), its measured point and the line between; where its name points
    (the measured point, else the floor), or None for a task with no place on these axes."""
    x = t.floor.arithmetic_intensity
    floor_y, y = t.floor.pj_per_flop, t.pj_per_flop
    if not (math.isfinite(x) and x > 0) or floor_y is None:
        return None  # no FLOPs or no bytes: no place on these axes
    colour = "#d62728" if t.below_floor else "#111111"
    ax.plot([x], [floor_y], marker="o", markerfacecolor="none", color=colour, markersize=8, linestyle="none",
            zorder=5, gid=f"energy:task:{t.label}:floor")
    if y is not None and y > 0:
        ax.plot([x, x], [floor_y, y], color=colour, linewidth=0.8, zorder=4)
        ax.plot([x], [y], marker="o", color=colour, markersize=6, linestyle="none", zorder=6,
                gid=f"energy:task:{t.label}")
        return x, y
    return x, floor_y


def _times(r: float) -> str:
    """Two significant figures, no exponent: 1.3, 60, 220 (``g`` wrote 220 as "2.2e+02")."""
    return f"{r:.2g}" if r < 10 else f"{float(f'{r:.2g}'):.0f}"


def _name(t: TaskEnergy) -> str:
    # Measured over floor (the inverse of the fraction): "2.0x its floor" reads at a glance.
    ratio = f"{_times(1 / t.fraction)}x its floor" if t.fraction else "nothing measured above idle"
    flag = ", BELOW it" if t.below_floor else ""
    return f"{_short(t.label)}: {ratio}{flag}"


_NAME_STYLE = {"textcoords": "offset points", "fontsize": 8, "zorder": 7,
               "bbox": {"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8}}


def _name_tasks(fig: Any, ax: Any, anchors: Sequence[tuple[TaskEnergy, tuple[float, float]]]) -> None:
    """Each named task's name beside its point, inside the axes and on no other name: left of a
    point in the right half (right of it the name ran off the chart), right of it elsewhere; moved
    up or down by whole rows, the nearest free one, where an earlier name (from the top down) holds
    its place, with a thin leader back to its point. Names crowd: half the twelve of KernelBench's
    batch on the H200 sit at one intensity. Measured in pixels on the figure as it is saved (the
    axes no longer move)."""
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    px = fig.dpi / 72  # pixels per point: the offsets are in points
    placed: list[Any] = []
    for t, (x, y) in sorted(anchors, key=lambda a: -a[1][1]):
        colour = "#d62728" if t.below_floor else "#111111"
        at_x, _ = ax.transData.transform((x, y))
        ha, dx = ("right", -7.0) if at_x > frame.x0 + frame.width / 2 else ("left", 7.0)
        probe = ax.annotate(_name(t), (x, y), xytext=(dx, 4.0), ha=ha, **_NAME_STYLE)
        box = probe.get_window_extent(renderer).padded(2 * px)  # the white box's pad, and a gap
        probe.remove()
        shift_x = max(0.0, frame.x0 - box.x0) - max(0.0, box.x1 - frame.x1)
        box = box.translated(shift_x, 0.0)
        shift_y = _free_row(box, placed, frame)
        placed.append(box.translated(0.0, shift_y))
        ax.annotate(_name(t), (x, y), xytext=(dx + shift_x / px, 4.0 + shift_y / px), ha=ha, color=colour,
                    **_NAME_STYLE)
        if abs(shift_y) > box.height / 2:  # away from its point: a leader to the end of the name nearest it
            end = placed[-1].x1 if ha == "right" else placed[-1].x0
            lx, ly = ax.transData.inverted().transform((end, (placed[-1].y0 + placed[-1].y1) / 2))
            ax.plot([x, lx], [y, ly], color=colour, linewidth=0.5, alpha=0.7, zorder=6.5)


def _free_row(box: Any, placed: Sequence[Any], frame: Any) -> float:
    """How far (pixels, up positive) to move ``box`` by whole rows to the nearest place inside
    ``frame`` that overlaps none of ``placed``, down before up; 0 when there is none."""
    rows = int(frame.height / box.height) + 1
    for k in sorted(range(-rows, rows + 1), key=lambda k: (abs(k), k > 0)):
        moved = box.translated(0.0, k * box.height)
        if moved.y0 >= frame.y0 and moved.y1 <= frame.y1 and not any(moved.overlaps(p) for p in placed):
            return k * box.height
    return 0.0


def plot_energy_roofline(costs: EnergyCosts, path: str | os.PathLike, *, title: str, subtitle: str = "",
                         tasks: Iterable[TaskEnergy] = ()) -> Path:
    """Draw the energy roofline of ``costs`` (and each task's measured point over its floor) and
    write it to ``path`` (.png or .svg); returns the path. Names are drawn as written."""
    path = check_path(path)
    with literal_text():
        fig = energy_figure(costs, title=title, subtitle=subtitle, tasks=tasks)
        buf = io.BytesIO()
        fig.savefig(buf, format=path.suffix.lower().lstrip("."))
    return write_bytes(path, buf.getvalue())


def measured_variants(t: Mapping[str, Any]) -> list[tuple[str, int | None, Any]]:
    """(label, candidate index or None for the reference, energy object) of an analysed task's
    reference and of each candidate with an energy, labelled as ``analyze`` labels them (one
    candidate is "yours"): the chart's and the HTML report's names for its points."""
    name = str(t.get("task") or "task")
    out: list[tuple[str, int | None, Any]] = [(name, None, (t.get("energy") or {}).get("reference"))]
    cands = t.get("candidates") or []
    for i, c in enumerate(cands):
        if isinstance(c, Mapping) and c.get("energy") is not None:
            who = "yours" if len(cands) == 1 else str(c.get("sample") or c.get("candidate") or f"candidate {i}")
            out.append((f"{name} ({who})", i, c["energy"]))
    return out


def task_points(results: Iterable[Mapping[str, Any]]) -> tuple[list[TaskEnergy], list[str]]:
    """The points ``analyze --energy --energy-plot`` draws: each analysed task's measured reference
    (and each candidate with an energy, :func:`measured_variants`) over its energy floor; and one
    line per task with energy that has no point, and why (not measured, or no floor)."""
    points: list[TaskEnergy] = []
    left_out: list[str] = []
    for r in results:
        energy = r.get("energy")
        if r.get("status") != "ok" or not isinstance(energy, Mapping):
            continue
        name = str(r.get("task") or "task")
        floor_doc = energy.get("floor")
        if not isinstance(floor_doc, Mapping):
            left_out.append(f"{name}: no energy floor ({energy.get('floor_error') or 'no --energy-costs'})")
            continue
        floor = EnergyFloor.from_dict(floor_doc)
        for label, _, measured in measured_variants(r):
            if not isinstance(measured, Mapping) or measured.get("error"):
                why = measured.get("error") if isinstance(measured, Mapping) else "no figure"
                left_out.append(f"{label}: energy not measured ({why})")
                continue
            points.append(task_energy(floor, EnergyMeasurement.from_dict(measured), label=label))
    return points, left_out
