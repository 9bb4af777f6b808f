"""Roofline charts (PNG or SVG, by the file's extension) from a calibration or an analysis.

Log-log: arithmetic intensity (FLOP per byte of HBM traffic) against throughput (TFLOP/s). Memory
roofs are slopes (HBM, and the L2 plateau where measured), compute roofs horizontal ceilings
(FP32, TF32, FP16/BF16, FP8 where the part has them). A calibration's chart is the *hierarchical*
roofline: HBM with its read:write envelope (a band between the slowest and fastest mix, and an inset
of the envelope against the read fraction), L2 as its near- and far-partition plateaus, shared
memory beside its clock-derived ceiling (SMs x 128 B/clock x clock), and every compute unit; there
the intensity of each memory slope is per byte moved at that level. The datasheet's roofs are dashed, the
measured ones solid (burst) and dotted (sustained), each unit in one colour, so the gap between
"what NVIDIA prints" and "what this card does" is what the eye sees first. Ridge points (where a
ceiling meets the HBM slope) are marked: left of a ridge a kernel of that precision is memory-bound.

matplotlib is optional (``pip install roofline-ext[plot]``) and imported only here, at the first
chart. The figure is drawn on an Agg canvas of its own, without pyplot, so drawing a chart never
changes the backend or the open figures of the program that asked for it (a notebook, a GUI).
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ..errors import UserError
from ..model.roofs import RoofSet, datasheet_roof
from ..peaks.mix import mix_bandwidth, parse_ratio, read_fraction
from ..peaks.record import CalibrationRecord
from .outputs import write_bytes

__all__ = ["plot_calibration", "plot_task", "plot_roofline", "calibration_roofs", "FORMATS", "ALL_CEILINGS",
           "check_path", "load_matplotlib", "literal_text", "datasheet_peaks_for", "task_points",
           "calibration_subtitle"]

#: File extensions a chart can be written as.
FORMATS = (".png", ".svg")

# (label, peak keys; the largest present value is the ceiling, colour). FP16 and BF16 run on the
# same tensor pipe at the same rate, so they share one ceiling; FP64 and INT8 are left out by
# default: FP64 sits on top of FP32 on Hopper and INT8 is not a FLOP rate. FP64 on the tensor cores
# is drawn only for the task whose floor used it (the calibration's chart keeps its one FP64 line).
_CEILINGS = (
    ("FP64", ("fp64",), "#7f7f7f"),
    ("FP64 tensor", ("fp64_tensor",), "#4d4d4d"),
    ("FP32", ("fp32",), "#2ca02c"),
    ("TF32", ("tf32",), "#ff7f0e"),
    ("FP16/BF16", ("fp16", "bf16"), "#d62728"),
    ("FP8", ("fp8",), "#9467bd"),
    ("INT8 (TOP/s)", ("int8",), "#8c564b"),
)
DEFAULT_CEILINGS = ("FP32", "TF32", "FP16/BF16", "FP8")
#: Every compute unit: the calibration's (hierarchical) chart.
ALL_CEILINGS = ("FP64", "FP32", "TF32", "FP16/BF16", "FP8", "INT8 (TOP/s)")
#: Colours of the levels above HBM (the hierarchical chart).
_LEVEL_COLOURS = {"l2_far": "#3fa7d6", "l2_near": "#7fc8e8", "smem": "#17becf"}
_HBM = ("HBM", "bandwidth_tbps", "#1f4e9c")
_L2 = ("L2", "l2_bandwidth_tbps", "#3fa7d6")
_TASK_MARKERS = {"reference": ("o", "#111111"), "candidate": ("*", "#e377c2")}


def load_matplotlib() -> tuple[Any, Any, Any, Any, Any]:
    """matplotlib's ``Figure``, ``FigureCanvasAgg``, ``Line2D``, ``FuncFormatter`` and
    ``LogLocator``, imported now; not installed, a one-line ``UserError`` saying how to install it."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.ticker import FuncFormatter, LogLocator
    except ImportError as exc:
        raise UserError(f"charts need matplotlib, which is not installed ({exc}); "
                        "install roofline-ext[plot] (or: pip install matplotlib)") from exc
    return Figure, FigureCanvasAgg, Line2D, FuncFormatter, LogLocator


def check_path(path: str | os.PathLike) -> Path:
    """``path`` as a chart's file: a ``.png`` or ``.svg`` name in a folder that exists (else a
    one-line ``UserError``), checked before any work so that a typo fails at once."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise UserError(f"cannot write a chart as {p.name!r}: use a file name ending in "
                        f"{' or '.join(FORMATS)}")
    if p.parent and not p.parent.exists():
        raise UserError(f"cannot write a chart to {p}: the folder {p.parent} does not exist")
    return p


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) and x > 0 else None


def _ceiling(peaks: Mapping[str, Any] | None, keys: Sequence[str]) -> float | None:
    if not peaks:
        return None
    vals = [v for v in (_num(peaks.get(k)) for k in keys) if v is not None]
    return max(vals) if vals else None


def _fmt(v: float) -> str:
    """Three significant figures, no exponent: 0.512, 4.31, 66.9, 989, 1979."""
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _tick(v: float, _pos=None) -> str:
    if v <= 0:
        return ""
    if v >= 1:
        return f"{v:,.0f}"
    return f"{v:g}"


@dataclass(frozen=True)
class _Level:
    """A memory level above HBM in the hierarchical chart: its measured slope (solid) and, where one
    exists, a reference slope (dashed: shared memory's clock-derived ceiling; no datasheet prints
    an L2 or shared-memory bandwidth)."""

    key: str
    label: str
    measured: float
    reference: float | None = None
    reference_label: str | None = None


@dataclass(frozen=True)
class _Roofs:
    """The ceilings one chart draws: (measured, datasheet, sustained) per memory level, and per
    compute ceiling (label, colour, measured, datasheet, sustained); the hierarchical chart adds
    ``levels`` (drawn instead of the single L2 plateau) and the HBM read:write envelope ``mix``."""

    hbm: tuple[float | None, float | None, float | None]
    l2: tuple[float | None, float | None, float | None]
    units: list[tuple[str, str, float | None, float | None, float | None]]
    levels: tuple[_Level, ...] = ()
    mix: tuple[tuple[str, float, float], ...] = ()  # (label, read fraction, TB/s), by read fraction

    @property
    def tops(self) -> tuple[float | None, float | None, float | None]:
        """The highest compute ceiling of each kind (sustained falls back to measured)."""
        top_m = max([m for _, _, m, _, _ in self.units if m] or [0]) or None
        top_d = max([d for _, _, _, d, _ in self.units if d] or [0]) or None
        top_s = max([s for _, _, _, _, s in self.units if s] or [0]) or top_m
        return top_m, top_d, top_s


def _roofs(datasheet: Mapping[str, Any] | None, measured: Mapping[str, Any] | None,
           sustained: Mapping[str, Any] | None, ceilings: Sequence[str],
           levels: Sequence[Mapping[str, Any]] = (), mix: Mapping[str, Any] | None = None) -> _Roofs:
    def level(key: str) -> tuple[float | None, float | None, float | None]:
        return _ceiling(measured, (key,)), _ceiling(datasheet, (key,)), _ceiling(sustained, (key,))

    hbm, l2 = level("bandwidth_tbps"), level("l2_bandwidth_tbps")
    l2 = (l2[0], None, l2[2])  # no datasheet gives an L2 bandwidth
    extra = tuple(_Level(str(lv["key"]), str(lv["label"]), float(lv["measured"]), _num(lv.get("reference")),
                         lv.get("reference_label")) for lv in levels if _num(lv.get("measured")))
    if extra:
        l2 = (None, None, l2[2])  # the levels draw L2 as its plateaus instead
    envelope: tuple[tuple[str, float, float], ...] = ()
    if mix:
        points: Mapping[str, Any] = mix["points"] if isinstance(mix.get("points"), Mapping) else mix
        envelope = tuple(sorted(((str(k), read_fraction(*parse_ratio(k)), float(v)) for k, v in points.items()
                                 if _num(v)), key=lambda p: p[1]))
    if not (hbm[0] or hbm[1]):
        raise UserError("cannot draw a roofline without an HBM bandwidth (measured or datasheet)")
    units = []
    for label, keys, colour in _CEILINGS:
        if label not in ceilings:
            continue
        m, d, s = _ceiling(measured, keys), _ceiling(datasheet, keys), _ceiling(sustained, keys)
        if m or d:
            units.append((label, colour, m, d, s))
    if not units:
        raise UserError("cannot draw a roofline without a compute peak (measured or datasheet)")
    return _Roofs(hbm, l2, units, extra, envelope)


def _limits(roofs: _Roofs, tasks: Sequence[Mapping[str, Any]]) -> tuple[float, float, float, float]:
    """Axis ranges: from well left of the lowest ridge to well right of the highest, and every task."""
    bws = [b for b in (roofs.hbm[0], roofs.hbm[1], roofs.l2[0]) if b] + [lv.measured for lv in roofs.levels]
    tops = [v for _, _, m, d, s in roofs.units for v in (m, d, s) if v]
    ridges = [p / b for p in tops for b in bws]
    xs = ridges + [x for t in tasks if (x := _num(t.get("intensity")))]
    x_lo = 2.0 ** math.floor(math.log2(min(xs) / 8))
    x_hi = 2.0 ** math.ceil(math.log2(max(xs) * 8))
    y_hi = max(tops) * 2.5  # room for the ceiling labels above the top roof
    y_lo_candidates = [min(bws) * x_lo] + [y for t in tasks if (y := _num(t.get("tflops")))]
    y_lo = 10 ** math.floor(math.log10(min(y_lo_candidates) / 1.5))
    return x_lo, x_hi, y_lo, y_hi


def log_log_axes(mpl: Any, limits: tuple[float, float, float, float],
                 tick: Callable[[float, Any], str]) -> tuple[Any, Any]:
    """A roofline-shaped figure and its axes: log2 x, log10 y, ``limits`` (x_lo, x_hi, y_lo, y_hi),
    ``tick`` labelling both axes, the major grid; every chart of the package starts from it."""
    Figure, FigureCanvasAgg, _, FuncFormatter, LogLocator = mpl
    x_lo, x_hi, y_lo, y_hi = limits
    fig = Figure(figsize=(10.5, 6.8), dpi=150)
    FigureCanvasAgg(fig)
    # Fixed margins (not tight_layout) so the text angles computed later match the final layout.
    fig.subplots_adjust(left=0.08, right=0.975, bottom=0.09, top=0.885)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.xaxis.set_major_formatter(FuncFormatter(tick))
    ax.yaxis.set_major_formatter(FuncFormatter(tick))
    ax.yaxis.set_major_locator(LogLocator(base=10))
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    return fig, ax


def _axes(mpl: Any, limits: tuple[float, float, float, float], title: str, subtitle: str) -> tuple[Any, Any]:
    fig, ax = log_log_axes(mpl, limits, _tick)
    ax.grid(True, which="minor", axis="y", color="#f0f0f0", linewidth=0.4)
    ax.set_axisbelow(True)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("throughput (TFLOP/s)")
    fig.suptitle(title, x=0.08, y=0.975, ha="left", fontsize=13, fontweight="bold")
    if subtitle:
        fig.text(0.08, 0.905, textwrap.fill(subtitle, 150), ha="left", va="bottom", fontsize=8.5,
                 color="#555555", linespacing=1.3)
    return fig, ax


def _screen_angle(ax: Any, x: float, y: float) -> float:
    # A slope of 1 in log-log is not 45 degrees on screen: it depends on the decades per inch.
    (x0, y0), (x1, y1) = ax.transData.transform([(x, y), (x * 2, y * 2)])
    return math.degrees(math.atan2(y1 - y0, x1 - x0))


def _draw_memory(ax: Any, roofs: _Roofs, x_lo: float) -> None:
    """Memory slopes: L2 (measured only) and HBM; datasheet dashed, measured solid, sustained dotted."""
    top_m, top_d, top_s = roofs.tops

    def slope(bw: float | None, top: float | None, colour: str, style: Any, width: float, gid: str) -> None:
        if bw and top:
            ax.plot([x_lo, top / bw], [bw * x_lo, top], color=colour, linestyle=style, linewidth=width,
                    solid_capstyle="butt", gid=gid)

    _draw_levels(ax, roofs, x_lo, top_m or top_d)
    for name, (bw_m, bw_d, bw_s), colour in (("L2", roofs.l2, _L2[2]), ("HBM", roofs.hbm, _HBM[2])):
        key = name.lower()
        slope(bw_d, top_d, colour, (0, (5, 3)), 1.4, f"roof:{key}:datasheet")
        slope(bw_m, top_m, colour, "-", 2.2, f"roof:{key}:measured")
        slope(bw_s, top_s, colour, (0, (1, 1.6)), 1.6, f"roof:{key}:sustained")
        if name == "HBM" and roofs.mix and top_m:
            lo, hi = min(v for _, _, v in roofs.mix), max(v for _, _, v in roofs.mix)
            # The envelope as a band: every read:write mix's HBM roof lies between these two slopes.
            ax.fill_between([x_lo, top_m / lo], [lo * x_lo, top_m], [hi * x_lo, min(hi * top_m / lo, top_m)],
                            color=colour, alpha=0.13, linewidth=0, gid="roof:hbm_mix:band")
            ax.plot([x_lo, top_m / lo], [lo * x_lo, top_m], color=colour, linewidth=0.8, alpha=0.6,
                    gid="roof:hbm_mix:min")
            ax.plot([x_lo, top_m / hi], [hi * x_lo, top_m], color=colour, linewidth=0.8, alpha=0.6,
                    gid="roof:hbm_mix:max")
        ref = bw_m or bw_d
        if not ref:
            continue
        extra = ([f"datasheet {_fmt(bw_d)}"] if bw_m and bw_d else []) + ([f"sustained {_fmt(bw_s)}"] if bw_s else [])
        if name == "HBM" and roofs.mix:
            lo, hi = min(v for _, _, v in roofs.mix), max(v for _, _, v in roofs.mix)
            extra.append(f"read:write mix {_fmt(lo)}-{_fmt(hi)}")
        text = f"{name} {_fmt(ref)} TB/s {'measured' if bw_m else 'datasheet'}"
        if extra:
            text += f" ({', '.join(extra)})"
        # Along the line, a fixed distance off it on screen: L2 above its line, HBM below (the
        # dashed datasheet slope runs just above the measured HBM one).
        x_text = x_lo * 1.6
        angle = _screen_angle(ax, x_text, ref * x_text)
        side = 1 if name == "L2" else -1
        off = (-7 * side * math.sin(math.radians(angle)), 7 * side * math.cos(math.radians(angle)))
        ax.annotate(text, (x_text, ref * x_text), textcoords="offset points", xytext=off,
                    color=colour, fontsize=8.5, rotation=angle, rotation_mode="anchor",
                    ha="left", va="bottom" if side > 0 else "top")


def _draw_levels(ax: Any, roofs: _Roofs, x_lo: float, top: float | None) -> None:
    """The levels above HBM: measured slope solid, reference dashed, each labelled along its line
    (staggered along the axis so labels of neighbouring slopes do not collide)."""
    if not top:
        return
    for i, lv in enumerate(roofs.levels):
        colour = _LEVEL_COLOURS.get(lv.key, _L2[2])
        ax.plot([x_lo, top / lv.measured], [lv.measured * x_lo, top], color=colour, linestyle="-",
                linewidth=2.0, solid_capstyle="butt", gid=f"roof:{lv.key}:measured")
        if lv.reference:
            ax.plot([x_lo, top / lv.reference], [lv.reference * x_lo, top], color=colour,
                    linestyle=(0, (5, 3)), linewidth=1.2, gid=f"roof:{lv.key}:reference")
        text = f"{lv.label} {_fmt(lv.measured)} TB/s measured"
        if lv.reference:
            text += f" ({lv.reference_label or 'reference'} {_fmt(lv.reference)})"
        x_text = x_lo * (1.6 + 0.9 * i)
        angle = _screen_angle(ax, x_text, lv.measured * x_text)
        off = (-6 * math.sin(math.radians(angle)), 6 * math.cos(math.radians(angle)))
        ax.annotate(text, (x_text, lv.measured * x_text), textcoords="offset points", xytext=off, color=colour,
                    fontsize=7.5, rotation=angle, rotation_mode="anchor", ha="left", va="bottom")


def _draw_mix_inset(ax: Any, roofs: _Roofs) -> None:
    """The HBM read:write envelope against the read fraction, in the empty upper left: each
    measured point, the roof between them (linear in time per byte, as the model reads it) and
    the datasheet figure."""
    if len(roofs.mix) < 2:
        return
    colour = _HBM[2]
    # Lower right, left of the legend: below the HBM slope, where no roof runs.
    inset = ax.inset_axes([0.5, 0.085, 0.24, 0.27])
    env = {label: v for label, _, v in roofs.mix}
    fs = [i / 200 for i in range(201)]
    inset.plot(fs, [mix_bandwidth(env, f, 1 - f) for f in fs],
               color=colour, linewidth=1.2, gid="mix:curve")
    inset.plot([f for _, f, _ in roofs.mix], [v for _, _, v in roofs.mix], "o", color=colour, markersize=4,
               gid="mix:points")
    for label, f, v in roofs.mix:
        inset.annotate(f"{label}\n{_fmt(v)}", (f, v), textcoords="offset points", xytext=(0, -14),
                       fontsize=6, ha="center", va="top", color=colour)
    vals = [v for _, _, v in roofs.mix] + ([roofs.hbm[1]] if roofs.hbm[1] else [])
    if roofs.hbm[1]:
        inset.axhline(roofs.hbm[1], color=colour, linestyle=(0, (5, 3)), linewidth=1.0, gid="mix:datasheet")
    inset.set_ylim(min(vals) * 0.93, max(vals) * 1.02)
    inset.set_xlim(-0.05, 1.05)
    inset.set_xticks([0, 0.5, 1])
    inset.set_xticklabels(["write only", "1:1", "read only"], fontsize=6.5)
    inset.tick_params(axis="y", labelsize=6.5)
    inset.set_title("HBM TB/s by read:write mix (measured; dashed: datasheet)", fontsize=7, color=colour)
    inset.patch.set_alpha(0.9)


def _draw_compute(ax: Any, roofs: _Roofs, x_hi: float) -> None:
    """Compute ceilings, each from where it meets the fastest memory slope to the right edge, with
    ridge points against HBM (measured filled and labelled with its intensity, datasheet hollow)."""
    hbm_m, hbm_d, hbm_s = roofs.hbm
    fastest_m = max([b for b in (roofs.l2[0], hbm_m) if b] + [lv.measured for lv in roofs.levels] or [0]) or None
    placed: list[float] = []
    for label, colour, m, d, s in roofs.units:
        key = label.split(" (")[0].lower().replace(" ", "_")  # "fp32", "fp16/bf16", "fp64_tensor", "int8"
        if d and hbm_d:
            ax.plot([d / hbm_d, x_hi], [d, d], color=colour, linestyle=(0, (5, 3)), linewidth=1.4,
                    gid=f"roof:{key}:datasheet")
        if m and fastest_m:
            ax.plot([m / fastest_m, x_hi], [m, m], color=colour, linestyle="-", linewidth=2.2,
                    gid=f"roof:{key}:measured")
        if s and fastest_m:
            ax.plot([s / (roofs.l2[2] or hbm_s or fastest_m), x_hi], [s, s], color=colour,
                    linestyle=(0, (1, 1.6)), linewidth=1.6, gid=f"roof:{key}:sustained")
        parts = [f"{_fmt(v)} {what}" for v, what in ((m, "measured"), (s, "sustained"), (d, "datasheet")) if v]
        y_label = max(v for v in (m, d) if v)
        # Two ceilings within 30% of each other (FP8 and INT8 on Hopper): the second label goes
        # under its line, so neither hides the other.
        below = any(abs(math.log(y_label / y)) < math.log(1.3) for y in placed)
        placed.append(y_label)
        ax.text(x_hi / 1.12, min(v for v in (m, d, s) if v) / 1.07 if below else y_label * 1.07,
                f"{label}: " + ", ".join(parts), color=colour, fontsize=8.5, ha="right",
                va="top" if below else "bottom", fontweight="bold", zorder=6,
                # Over the ceilings' own lines (three per unit, close together), not under them.
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 0.8})
        if m and hbm_m:
            r = m / hbm_m
            ax.plot([r], [m], marker="o", markersize=6, color=colour, zorder=5)
            ax.annotate(f"{_fmt(r)}", (r, m), textcoords="offset points", xytext=(5, -11),
                        fontsize=7.5, color=colour)
        if d and hbm_d:
            ax.plot([d / hbm_d], [d], marker="o", markersize=6, markerfacecolor="white",
                    markeredgecolor=colour, markeredgewidth=1.3, zorder=5)


def _draw_task(ax: Any, t: Mapping[str, Any], x_lo: float, x_hi: float) -> None:
    """A task point with a thin vertical line up to its roof: the gap is the headroom. The label
    goes on the side with room, on a white backing so that it stays readable across a roof."""
    x = _num(t.get("intensity"))
    if x is None:
        return
    marker, colour = _TASK_MARKERS.get(t.get("kind", ""), ("D", "#111111"))
    y, roof = _num(t.get("tflops")), _num(t.get("roof_tflops"))
    label = str(t.get("label") or t.get("kind") or "task")
    right_part = math.log(x / x_lo) / math.log(x_hi / x_lo) > 0.55
    dx, ha = (-10, "right") if right_part else (10, "left")
    size = 13 if marker == "*" else 8
    roof_name = t.get("roof_label") or "roof"
    if y is not None:
        if roof and roof > y:
            ax.plot([x, x], [y, roof], color=colour, linewidth=0.9, linestyle=(0, (2, 2)))
        ax.plot([x], [y], marker=marker, markersize=size, color=colour, markeredgecolor="white",
                markeredgewidth=0.8, zorder=6, linestyle="none")
        text = f"{label}: {_fmt(y)} TFLOP/s" + (f", {y / roof:.0%} of the {roof_name}" if roof else "")
    elif roof is not None:
        y = roof
        ax.plot([x], [y], marker=marker, markersize=size, markerfacecolor="white",
                markeredgecolor=colour, markeredgewidth=1.4, zorder=6, linestyle="none")
        text = f"{label} (not timed): {_fmt(roof)} TFLOP/s at best, {_fmt(x)} FLOP/B"
    else:
        return
    backing = {"boxstyle": "round,pad=0.25", "fc": "white", "ec": "none", "alpha": 0.85}
    ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, -3), fontsize=8.5,
                color=colour, ha=ha, va="top", bbox=backing, zorder=7)


def _legend(ax: Any, Line2D: Any, measured: Any, sustained: Any, datasheet: Any, measured_label: str) -> None:
    handles = []
    if measured:
        handles.append(Line2D([], [], color="#333333", linewidth=2.2, label=measured_label))
    if sustained:
        handles.append(Line2D([], [], color="#333333", linewidth=1.6, linestyle=(0, (1, 1.6)),
                              label="measured (sustained)"))
    if datasheet:
        handles.append(Line2D([], [], color="#333333", linewidth=1.4, linestyle=(0, (5, 3)),
                              label="datasheet"))
    handles.append(Line2D([], [], color="#333333", marker="o", linestyle="none", markersize=6,
                          label="ridge point (FLOP/B), vs HBM"))
    ax.legend(handles=handles, loc="lower right", fontsize=8.5, frameon=True, framealpha=0.92)


def plot_roofline(
    path: str | os.PathLike,
    *,
    title: str,
    subtitle: str = "",
    datasheet: Mapping[str, Any] | None = None,
    measured: Mapping[str, Any] | None = None,
    sustained: Mapping[str, Any] | None = None,
    tasks: Iterable[Mapping[str, Any]] = (),
    ceilings: Sequence[str] = DEFAULT_CEILINGS,
    measured_label: str = "measured (burst)",
    levels: Sequence[Mapping[str, Any]] = (),
    mix: Mapping[str, Any] | None = None,
) -> Path:
    """Draw a roofline and write it to ``path`` (.png or .svg); returns the path.

    ``datasheet``/``measured``/``sustained`` are flat peak mappings (``bandwidth_tbps``,
    ``l2_bandwidth_tbps`` in TB/s; ``fp32``, ``tf32``, ``fp16``, ``bf16``, ``fp8``... in TFLOP/s);
    any may be None or partial. ``tasks`` are points: ``{"label", "intensity" (FLOP/byte),
    "tflops" (achieved, optional), "roof_tflops" (the attainable roof, optional), "kind"
    ("reference" | "candidate")}``. A task without an achieved rate is drawn hollow on its roof.
    ``levels`` (the hierarchical chart): memory levels above HBM, ``{"key", "label", "measured",
    "reference", "reference_label"}`` (TB/s), drawn instead of the single L2 plateau; ``mix``: the
    HBM read:write envelope ``{"R:W": TB/s}`` (or an entry with ``points``), drawn as a band and an
    inset. Every roof line carries a ``gid`` (``roof:<level or unit>:<measured|datasheet|...>``).
    """
    path = check_path(path)
    with literal_text():
        fig = roofline_figure(title=title, subtitle=subtitle, datasheet=datasheet, measured=measured,
                              sustained=sustained, tasks=tasks, ceilings=ceilings, measured_label=measured_label,
                              levels=levels, mix=mix)
        # Drawn in memory, then written as every output is (atomic; never over a device or a FIFO).
        buf = io.BytesIO()
        fig.savefig(buf, format=path.suffix.lower().lstrip("."))
    return write_bytes(path, buf.getvalue())


@contextlib.contextmanager
def literal_text() -> Iterator[None]:
    """Every text of a chart drawn as written: task, GPU and file names are anyone's text, and
    matplotlib reads ``$...$`` in any of them as mathtext (``$\\frac{a}{$`` ends the drawing in
    a parse error). No chart here uses mathtext on purpose, so it is off for all of them, labels
    made at draw time (ticks, legend) included; callers keep the figure's creation and its
    ``savefig`` inside."""
    load_matplotlib()  # not installed: the one-line error, not an ImportError
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        yield


def roofline_figure(*, title: str, subtitle: str = "", datasheet: Mapping[str, Any] | None = None,
                    measured: Mapping[str, Any] | None = None, sustained: Mapping[str, Any] | None = None,
                    tasks: Iterable[Mapping[str, Any]] = (), ceilings: Sequence[str] = DEFAULT_CEILINGS,
                    measured_label: str = "measured (burst)", levels: Sequence[Mapping[str, Any]] = (),
                    mix: Mapping[str, Any] | None = None) -> Any:
    """The matplotlib Figure :func:`plot_roofline` writes (same arguments, no path)."""
    mpl = load_matplotlib()
    points = [dict(t) for t in tasks]
    roofs = _roofs(datasheet, measured, sustained, ceilings, levels, mix)
    limits = _limits(roofs, points)
    fig, ax = _axes(mpl, limits, title, subtitle)
    if roofs.levels:
        ax.set_xlabel("arithmetic intensity (FLOP per byte moved at that level: HBM, L2, shared memory)")
    _draw_memory(ax, roofs, limits[0])
    _draw_compute(ax, roofs, limits[1])
    _draw_mix_inset(ax, roofs)
    for t in points:
        _draw_task(ax, t, limits[0], limits[1])
    _legend(ax, mpl[2], measured, sustained, datasheet, measured_label)
    return fig


# --------------------------------------------------------------------------------------------------
# From a calibration
# --------------------------------------------------------------------------------------------------

def datasheet_peaks_for(name: str | None) -> dict[str, float] | None:
    """The datasheet roof of the part ``name`` names, as the flat peaks a chart takes (every unit of
    the registry the SKU has, fp64_tensor included), or None for an unknown part. Only for input
    read back from disk (a calibration's or an analysis's JSON): a run's result carries its
    :class:`RoofSet`, whose roofs are drawn instead."""
    roof = datasheet_roof(name) if name else None
    return roof.flat() if roof is not None else None


def calibration_subtitle(cal: Mapping[str, Any]) -> str:
    """The line under a chart that says which calibration its measured roofs are: date and mode,
    the card's UUID, driver and package versions, and whether it is a test fixture."""
    gpu = cal.get("gpu") or {}
    bits = [f"calibrated {str(cal.get('date', '?'))[:16].replace('T', ' ')} ({cal.get('mode', '?')})"]
    if gpu.get("uuid"):
        bits.append(gpu["uuid"])
    if cal.get("driver_version"):
        bits.append(f"driver {cal['driver_version']}")
    if cal.get("package_version"):
        bits.append(f"roofline-ext {cal['package_version']}")
    if cal.get("fixture"):
        bits.append("TEST FIXTURE, not a measurement")
    return "  |  ".join(bits)


def _load_calibration(cal: Mapping[str, Any] | str | os.PathLike) -> Mapping[str, Any]:
    if isinstance(cal, Mapping):
        return cal
    import json

    try:
        return json.loads(Path(cal).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read calibration {cal}: {exc}") from exc


def _calibration_datasheet(cal: Mapping[str, Any]) -> Mapping[str, Any] | None:
    stored = cal.get("datasheet")
    if isinstance(stored, Mapping) and isinstance(stored.get("peaks"), Mapping):
        return stored["peaks"]  # what the calibration compared against when it ran
    if "datasheet" in cal and stored is None:
        return None  # the part is not in the table: no datasheet roofs to draw
    return datasheet_peaks_for((cal.get("gpu") or {}).get("name"))


def _levels_of(record: CalibrationRecord) -> list[dict[str, Any]]:
    """The levels above HBM a calibration measured: L2's far and near plateaus (else nothing: the
    single plateau stays the L2 slope) and shared memory beside its clock-derived ceiling."""
    levels: list[dict[str, Any]] = []
    l2, smem = record.burst_entry("l2"), record.burst_entry("smem")
    for plateau, key, label in (((l2.far_plateau if l2 else {}), "l2_far", "L2 far"),
                                ((l2.near_plateau if l2 else {}), "l2_near", "L2 near")):
        if _num(plateau.get("tbps")):
            levels.append({"key": key, "label": label, "measured": plateau["tbps"]})
    if smem is not None and _num(smem.value):
        levels.append({"key": "smem", "label": "shared memory", "measured": smem.value,
                       "reference": smem.clock_derived, "reference_label": "SMs x 128 B/clock"})
    if levels and not any(lv["key"].startswith("l2_") for lv in levels) and l2 is not None and _num(l2.value):
        levels.insert(0, {"key": "l2_far", "label": "L2", "measured": l2.value})
    return levels


def _peaks_or_none(record: CalibrationRecord, regime: str) -> dict[str, Any] | None:
    """``peaks.<regime>`` as the plot takes it: a plain dict, None when not measured."""
    mapping = record.peak_maps.get(regime)
    return dict(mapping) if mapping is not None else None


def calibration_roofs(cal: Mapping[str, Any], *, sustained: bool = True) -> dict[str, Any]:
    """What the hierarchical chart of a calibration draws, as :func:`plot_roofline`'s keyword
    arguments: the datasheet, burst and sustained peaks, every compute unit, the levels above HBM
    (L2 near/far plateaus, shared memory) and the HBM read:write envelope, straight from its JSON."""
    record = CalibrationRecord.read(cal)
    return {"datasheet": _calibration_datasheet(cal), "measured": _peaks_or_none(record, "burst"),
            "sustained": _peaks_or_none(record, "sustained") if sustained else None, "ceilings": ALL_CEILINGS,
            "levels": _levels_of(record), "mix": (dict(record.mix.points) or None) if record.mix else None}


def plot_calibration(cal: Mapping[str, Any] | str | os.PathLike, path: str | os.PathLike, *,
                     sustained: bool = True) -> Path:
    """The hierarchical chart of one calibration (a dict or a calibration JSON file): HBM with its
    read:write envelope, L2's plateaus, shared memory and every compute unit; datasheet roofs
    dashed, the burst roofs solid, the sustained ones dotted (``sustained=False`` leaves them out)."""
    cal = _load_calibration(cal)
    gpu = cal.get("gpu") or {}
    roofs = calibration_roofs(cal, sustained=sustained)
    return plot_roofline(
        path,
        title=f"{gpu.get('name', 'GPU')}: measured " + ("vs datasheet roofline" if roofs["datasheet"] else "roofline"),
        subtitle=calibration_subtitle(cal),
        **roofs,
    )


# --------------------------------------------------------------------------------------------------
# From an analysis (``roofline-ext analyze --json`` / ``analysis.analyze_task``)
# --------------------------------------------------------------------------------------------------

_UNIT_CEILING = {"fp64": "FP64", "fp64_tensor": "FP64 tensor", "fp32": "FP32", "tf32": "TF32",
                 "fp16": "FP16/BF16", "bf16": "FP16/BF16", "fp8": "FP8"}


def _analysis_roof(result: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any] | None]:
    """The roof the task is judged against in the chart: measured when there is one (it is what
    the chart draws solid), else the result's primary roof."""
    roofs = result.get("roofs") or {}
    for name in ("measured", result.get("primary_roof"), "datasheet", "derived"):
        if name and isinstance(roofs.get(name), Mapping):
            return name, roofs[name]
    return None, None


def task_points(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Reference and candidate as chart points: at the task's arithmetic intensity, at the rate each
    achieved (all FLOPs over its time), with the roof's attainable rate at that intensity."""
    flops = (_num(result.get("flops")) or 0.0) + (_num(result.get("simt_flops")) or 0.0)
    nbytes = _num(result.get("bytes"))
    intensity = _num(result.get("arithmetic_intensity")) or (flops / nbytes if flops and nbytes else None)
    if not intensity or not flops:
        return []
    roof_name, roof = _analysis_roof(result)
    t_min = _num((roof or {}).get("t_min_ms"))
    roof_tflops = flops / (t_min * 1e-3) / 1e12 if t_min else None
    task = str(result.get("task") or "task")
    points = []
    for kind, key in (("reference", "t_ref_ms"), ("candidate", "t_new_ms")):
        ms = _num(result.get(key))
        if ms:
            points.append({"kind": kind, "label": kind, "intensity": intensity,
                           "tflops": flops / (ms * 1e-3) / 1e12, "roof_tflops": roof_tflops,
                           "roof_label": f"{roof_name} roof"})
    if not points:
        points.append({"kind": "reference", "label": task, "intensity": intensity, "tflops": None,
                       "roof_tflops": roof_tflops, "roof_label": f"{roof_name} roof"})
    return points


def _roof_set_peaks(roof_set: RoofSet) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, str]:
    """(datasheet, measured, subtitle) from the roofs the run resolved and computed the floors with."""
    datasheet = roof_set.datasheet.flat() if roof_set.datasheet is not None else None
    if roof_set.measured is None:
        why = roof_set.missing.get("measured") or "no measured peaks"
        return datasheet, None, f"{why}: datasheet roofs only"
    if roof_set.calibration is not None:
        subtitle = calibration_subtitle(roof_set.calibration.to_dict())
    else:
        subtitle = roof_set.measured.source
    return datasheet, roof_set.measured.flat(), subtitle


def _looked_up_peaks(result: Mapping[str, Any], calibration: Mapping[str, Any] | None,
                     regime: str) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, str]:
    """(datasheet, measured, subtitle) for a result without its RoofSet, an analysis JSON read back
    from disk (its roofs do not travel in the JSON): ``calibration`` when given, else the two
    measured peaks the result records, and the datasheet looked up by the result's SKU or GPU."""
    gpu_name = result.get("gpu") if isinstance(result.get("gpu"), str) else None
    roofs = result.get("roofs") or {}
    measured = None
    subtitle = ""
    if calibration is not None:
        record = CalibrationRecord.read(calibration)
        measured = _peaks_or_none(record, regime)
        gpu_name = gpu_name or record.gpu.name
        subtitle = calibration_subtitle(calibration)
    elif isinstance(roofs.get("measured"), Mapping):
        # Measured peaks handed to analyze directly: draw the two it used.
        m = roofs["measured"]
        unit = m.get("compute_unit")
        measured = {k: v for k, v in (("bandwidth_tbps", m.get("bandwidth_tbps")),
                                      (unit, m.get("compute_tflops"))) if k and v}
        subtitle = "measured roofs as given to analyze"
    datasheet = datasheet_peaks_for(result.get("sku") or gpu_name)
    if not subtitle:
        subtitle = ("no calibration cached for this GPU: datasheet roofs only "
                    "(run 'roofline-ext calibrate' on it)")
    return datasheet, measured, subtitle


def plot_task(result: Mapping[str, Any], path: str | os.PathLike,
              calibration: Mapping[str, Any] | None = None, *, regime: str | None = None,
              roofs: RoofSet | None = None) -> Path:
    """Chart of one analysed task on its GPU's roofline (``analyze --plot FILE``).

    ``result`` is what ``analyze`` produces (``runner.analyze.analyze_task`` or its ``--json``).
    ``roofs``: the :class:`RoofSet` the run computed the floors with (a run's result carries it),
    drawn as it is: the chart then looks nothing up. Without it (an analysis read back from JSON)
    the measured roofs come from ``calibration`` when given (the caller looks it up, by the card's
    UUID: a chart never guesses which card's roofs to draw); else, when the analysis was handed
    measured peaks, the two it used; else only the datasheet roofs are drawn. The task
    sits at its arithmetic intensity and at the rate the reference (●) and the candidate (★)
    achieved, with a dotted line up to the roof; an untimed task is drawn hollow on its roof.
    """
    if roofs is not None:
        regime = roofs.regime
        datasheet, measured, subtitle = _roof_set_peaks(roofs)
    else:
        regime = regime or str(result.get("regime") or "burst")
        datasheet, measured, subtitle = _looked_up_peaks(result, calibration, regime)
    gpu_name = result.get("gpu") if isinstance(result.get("gpu"), str) else None
    if gpu_name is None:
        gpu_name = roofs.gpu if roofs is not None else (CalibrationRecord.read(calibration).gpu.name
                                                        if calibration is not None else None)
    dtype = str(result.get("compute_dtype") or result.get("dtype") or "").replace("torch.", "")
    bound = result.get("bound")
    if dtype or bound:
        subtitle = f"{dtype}{', ' if dtype and bound else ''}{bound + '-bound' if bound else ''}  |  " + subtitle
    # Only the ceilings that bind this task: its dtype's unit and FP32 (its non-tensor FLOPs run on
    # the CUDA cores). The calibration chart shows them all; here they would crowd the task's labels.
    unit_ceiling = _UNIT_CEILING.get(str(result.get("compute_unit")))
    ceilings = ["FP32"] + ([unit_ceiling] if unit_ceiling and unit_ceiling != "FP32" else [])
    if not unit_ceiling:
        ceilings = list(DEFAULT_CEILINGS)
    task = str(result.get("task") or Path(str(result.get("path") or "task")).stem)
    return plot_roofline(
        path,
        title=f"{task} on {gpu_name or 'GPU'}",
        subtitle=subtitle,
        datasheet=datasheet,
        measured=measured,
        tasks=task_points(result),
        ceilings=ceilings,
        measured_label=f"measured ({regime})",
    )
