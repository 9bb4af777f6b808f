"""A check as table rows (strings): what ``roofline-ext check`` prints and the HTML report shows."""
from __future__ import annotations

from typing import Any, Mapping


def fmt_value(v: Any) -> str:
    """Four significant figures (4.612, 65.60, 946.0, 55.21): the precision a check can stand behind."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "-"
    return f"{v:.4g}"


def fmt_ratio(c: Mapping[str, Any] | None) -> str:
    if not c:
        return "-"
    return f"{c['ratio']:.1%} of {fmt_value(c['expected'])}"


def _comparison(metric: Mapping[str, Any], against: str) -> Mapping[str, Any] | None:
    return next((c for c in metric.get("comparisons") or [] if c.get("against") == against), None)


def metric_rows(device: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per metric: value, vs calibration, vs reference, verdict, reason."""
    rows = []
    for key, m in (device.get("metrics") or {}).items():
        cv = m.get("cv")
        rows.append({
            "key": key, "metric": f"{m.get('label', key)} ({m.get('unit', '')})",
            "value": fmt_value(m.get("value")) + (f" ±{cv:.1%}" if isinstance(cv, (int, float)) else ""),
            "calibration": fmt_ratio(_comparison(m, "calibration")),
            "reference": fmt_ratio(_comparison(m, "reference")),
            "verdict": str(m.get("verdict")), "reason": str(m.get("reason") or "")})
    for key, why in (device.get("skipped") or {}).items():
        rows.append({"key": key, "metric": key, "value": "-", "calibration": "-", "reference": "-",
                     "verdict": "skipped", "reason": f"cannot run here: {why}"})
    return rows


def state_rows(device: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"key": k, "verdict": str(s.get("verdict")), "reason": str(s.get("reason") or "")}
            for k, s in (device.get("state") or {}).items()]
