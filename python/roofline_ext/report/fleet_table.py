"""A fleet summary as table rows (strings): what ``roofline-ext fleet`` prints and the HTML report shows."""
from __future__ import annotations

from typing import Any, Mapping

from .check_table import fmt_value


def sku_rows(summary: Mapping[str, Any]) -> list[dict[str, str]]:
    """Per SKU and metric: GPUs, median, min, max, spread and how many are stragglers."""
    rows = []
    for sku, s in (summary.get("skus") or {}).items():
        slow: dict[str, int] = {}
        for st in s.get("stragglers") or []:
            slow[st["metric"]] = slow.get(st["metric"], 0) + 1
        for key, m in (s.get("metrics") or {}).items():
            rows.append({"sku": sku, "metric": f"{m.get('label', key)} ({m.get('unit') or ''})", "key": key,
                         "n": str(m["n"]), "median": fmt_value(m["median"]), "min": fmt_value(m["min"]),
                         "max": fmt_value(m["max"]), "spread": f"{m['spread']:.1%}",
                         "stragglers": str(slow.get(key, 0))})
    return rows


def gpu_rows(summary: Mapping[str, Any], metrics: tuple[str, ...] = ("hbm_read", "bf16", "h2d")) -> list[dict[str, str]]:
    """Per GPU: where it is, its verdict, a few figures, and the metrics it straggles on."""
    slow: dict[tuple, list[str]] = {}
    for s in (summary.get("skus") or {}).values():
        for st in s.get("stragglers") or []:
            slow.setdefault((st["uuid"], st["host"], st["index"]), []).append(
                f"{st['metric']} {st['fraction_of_median']:.1%}")
    rows = []
    for g in summary.get("gpus") or []:
        row = {"host": str(g["host"]), "index": "-" if g["index"] is None else str(g["index"]),
               "uuid": str(g.get("uuid") or "-"), "sku": str(g.get("sku") or g.get("name") or "no GPU"),
               "verdict": g["verdict"], "straggler": ", ".join(slow.get((g.get("uuid"), g["host"], g["index"]), [])),
               "reason": g.get("reason") or ""}
        for m in metrics:
            row[m] = fmt_value((g.get("values") or {}).get(m))
        rows.append(row)
    return rows
