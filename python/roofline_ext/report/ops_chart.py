"""``analyze TASK --ops --plot FILE``: the task and each of its ops on the GPU's roofline.

Same axes as :mod:`.charts` (FLOP per byte against TFLOP/s, log-log): HBM and L2 slopes and the
task's compute ceiling, datasheet dashed and measured solid. The task is the black circle; each op
that computes anything is a small circle at its own intensity (its FLOPs over its own bytes), sized
by its share of the unfused bound. Untimed, an op sits hollow on its attainable rate (FLOPs over
its floor); timed (``--time``), filled at the rate its kernels achieved, with a line up to that
rate, so the ops far below their roof stand out. The ops with the largest floors (timed: that lose
most) are labelled. Ops that only move data (no FLOPs) have no place on these axes and are counted
in the subtitle.
"""
from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import Any, Mapping

from ..model.roofs import RoofSet
from ..peaks.record import CalibrationRecord
from ..peaks.units import UNIT, short_label
from .charts import check_path, datasheet_peaks_for, literal_text, load_matplotlib
from .outputs import write_bytes

__all__ = ["plot_ops", "LABELLED"]

#: How many ops get a label.
LABELLED = 8

def _pos(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) and x > 0 else None


def _roof_name(result: Mapping[str, Any]) -> str:
    roofs = result.get("roofs") or {}
    return "measured" if roofs.get("measured") else str(result.get("primary_roof") or "datasheet")


def _points(result: Mapping[str, Any], roof: str) -> tuple[list[dict[str, Any]], int]:
    ops = result.get("ops") or []
    total = sum((o.get("floors_ms") or {}).get(roof) or 0.0 for o in ops) or 1.0
    points, data_only = [], 0
    for o in ops:
        work = (o.get("flops") or 0) + (o.get("simt_flops") or 0)
        nbytes = (o.get("read_bytes") or 0) + (o.get("write_bytes") or 0)
        f = _pos((o.get("floors_ms") or {}).get(roof))
        if not work or not nbytes or f is None:
            data_only += 1
            continue
        k = _pos(o.get("kernel_ms"))
        kf = _pos((o.get("kernel_floors_ms") or {}).get(roof))
        points.append({"x": work / nbytes, "roof": work / (f * 1e-3) / 1e12,
                       "achieved": work / (k * 1e-3) / 1e12 if k else None,
                       "share": f / total, "label": f"#{o['index']} {o['op']} {o.get('module') or '(model)'}",
                       "lost": (k - (kf or 0.0)) if k else None, "floor": f})
    return points, data_only


def plot_ops(result: Mapping[str, Any], path: str | os.PathLike, calibration: Mapping[str, Any] | None = None,
             *, regime: str | None = None, roofs: RoofSet | None = None) -> Path:
    """Draw an analysed task with ``ops`` (``analyze_task(..., per_op=True)`` or ``--json``) and write
    it to ``path`` (.png or .svg); returns the path. ``roofs``: the :class:`RoofSet` the run computed
    the floors with, drawn as it is; without it (an analysis read back from JSON), ``calibration``:
    this card's, for the measured roofs (the L2 slope among them), and the datasheet looked up by
    the result's SKU. Op and task names are drawn as written (no mathtext)."""
    with literal_text():
        return _plot_ops(result, path, _chart_peaks(result, calibration, regime, roofs))


def _chart_peaks(result: Mapping[str, Any], calibration: Mapping[str, Any] | None, regime: str | None,
                 roofs: RoofSet | None) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(datasheet, measured) flat peaks: the run's RoofSet when given; else, for a result read back
    from disk (which does not carry it), looked up: the datasheet by SKU, the measured peaks from
    ``calibration`` or the two the result records."""
    if roofs is not None:
        return ((roofs.datasheet.flat() if roofs.datasheet is not None else {}),
                (roofs.measured.flat() if roofs.measured is not None else {}))
    regime = regime or str(result.get("regime") or "burst")
    gpu = result.get("gpu") if isinstance(result.get("gpu"), str) else None
    datasheet = datasheet_peaks_for(result.get("sku") or gpu) or {}
    measured = dict(CalibrationRecord.read(calibration).peaks(regime)) if calibration else {}
    m = (result.get("roofs") or {}).get("measured") or {}
    if not measured and m:
        measured = {"bandwidth_tbps": m.get("bandwidth_tbps"), str(m.get("compute_unit")): m.get("compute_tflops")}
    return datasheet, measured


def _plot_ops(result: Mapping[str, Any], path: str | os.PathLike,
              peaks: tuple[Mapping[str, Any], Mapping[str, Any]]) -> Path:
    Figure, FigureCanvasAgg, Line2D, FuncFormatter, _ = load_matplotlib()
    path = check_path(path)
    roof = _roof_name(result)
    points, data_only = _points(result, roof)
    gpu = result.get("gpu") if isinstance(result.get("gpu"), str) else None
    datasheet, measured = peaks
    l2 = _pos(((result.get("kernel_profile") or {}).get("l2_tbps"))) or _pos(measured.get("l2_bandwidth_tbps"))
    # The unit the task's floor used (fp64_tensor included), by the registry; FP32 when unknown.
    unit = str(result.get("compute_unit")) if str(result.get("compute_unit")) in UNIT else "fp32"

    fig = Figure(figsize=(10, 6.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [p["x"] for p in points] + [_pos(result.get("arithmetic_intensity")) or 1.0]
    ceilings = [c for c in (_pos(datasheet.get(unit)), _pos(measured.get(unit)), _pos(datasheet.get("fp32")),
                            _pos(measured.get("fp32"))) if c]
    x_lo, x_hi = min(xs) / 10, max(max(xs) * 10, 1e3)
    y_hi = max(ceilings or [100.0]) * 2
    ys = [p["roof"] for p in points] + [p["achieved"] for p in points if p["achieved"]]
    y_lo = max(min(ys or [1e-3]) / 5, y_hi / 1e7)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]

    def slope(bw: float | None, top: float | None, colour: str, style: Any, label: str) -> None:
        if bw:
            cap = top or y_hi
            ax.plot(grid, [min(x * bw, cap) for x in grid], color=colour, linestyle=style, linewidth=1.6, label=label)

    top_m = _pos(measured.get(unit)) or _pos(measured.get("fp32"))
    top_d = _pos(datasheet.get(unit)) or _pos(datasheet.get("fp32"))
    slope(_pos(measured.get("bandwidth_tbps")), top_m, "#1f4e9c", "-", "HBM, measured")
    slope(_pos(datasheet.get("bandwidth_tbps")), top_d, "#1f4e9c", (0, (5, 3)), "HBM, datasheet")
    slope(l2, top_m or top_d, "#3fa7d6", "-", "L2, measured")
    for value, style, what in ((_pos(measured.get(unit)), "-", "measured"), (_pos(datasheet.get(unit)), (0, (5, 3)),
                                                                             "datasheet")):
        if value:
            ax.axhline(value, color="#ff7f0e", linestyle=style, linewidth=1.2, label=f"{short_label(unit)} {what}")
    for value, style, what in ((_pos(measured.get("fp32")), "-", "measured"), (_pos(datasheet.get("fp32")),
                                                                               (0, (5, 3)), "datasheet")):
        if value and unit != "fp32":
            ax.axhline(value, color="#2ca02c", linestyle=style, linewidth=1.0, label=f"FP32 SIMT {what}")

    timed = any(p["achieved"] for p in points)
    for p in points:
        size = 12 + 260 * p["share"]
        if p["achieved"]:
            ax.plot([p["x"], p["x"]], [p["achieved"], p["roof"]], color="#d62728", linewidth=0.6, alpha=0.6)
            ax.scatter([p["x"]], [p["achieved"]], s=size, color="#d62728", alpha=0.75, edgecolors="white", zorder=5)
        ax.scatter([p["x"]], [p["roof"]], s=size, facecolors="none", edgecolors="#555555", linewidths=0.8, zorder=4)
    ranked = sorted(points, key=lambda p: -(p["lost"] if timed and p["lost"] is not None else p["floor"]))
    for rank, p in enumerate(ranked[:LABELLED]):
        y = p["achieved"] or p["roof"]
        # staggered, so that ops at one intensity (a repeated block) do not print over each other
        ax.annotate(p["label"], (p["x"], y), textcoords="offset points", xytext=(6, -3 - 10 * (rank % 4)), fontsize=7,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8}, zorder=7)
    _task_point(ax, result, roof)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of each op's own traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.grid(True, which="major", alpha=0.25)
    task = str(result.get("task") or "task")
    ax.set_title(f"{task} on {gpu or 'GPU'}: {len(points)} ops on the roofline ({roof} floors)", fontsize=11)
    sub = (f"hollow: each op's attainable rate; {'filled: what its kernels achieved; ' if timed else ''}"
           f"size: share of the unfused bound; {data_only} op(s) only move data (not drawn)")
    fig.text(0.5, 0.005, sub, ha="center", fontsize=8, color="#444444")
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], marker="o", color="#111111", linestyle="none", label="task (fused floor)"))
    ax.legend(handles=handles, loc="lower right", fontsize=7.5, framealpha=0.9)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lower().lstrip("."))
    return write_bytes(path, buf.getvalue())


def _task_point(ax: Any, result: Mapping[str, Any], roof: str) -> None:
    work = (result.get("flops") or 0) + (result.get("simt_flops") or 0)
    x = _pos(result.get("arithmetic_intensity"))
    t_min = _pos(((result.get("roofs") or {}).get(roof) or {}).get("t_min_ms"))
    if not work or x is None or t_min is None:
        return
    y = work / (t_min * 1e-3) / 1e12
    ax.scatter([x], [y], s=90, facecolors="none", edgecolors="#111111", linewidths=1.6, zorder=6)
    t_ref = _pos(result.get("t_ref_ms"))
    if t_ref:
        ax.scatter([x], [work / (t_ref * 1e-3) / 1e12], s=90, color="#111111", zorder=6)
        ax.plot([x, x], [work / (t_ref * 1e-3) / 1e12, y], color="#111111", linewidth=0.9, linestyle=(0, (2, 2)))
