"""A check as table rows (strings): what ``roofline-ext check`` prints and the HTML report shows,
and the check's progress on the package's one progress bar (report/progress.py)."""
from __future__ import annotations

from typing import Any, Mapping

from .progress import Progress


class CheckProgressBar:
    """``check``'s progress (check.run.CheckProgress) on the progress bar, or nothing when disabled.

    The bar is made when the check says how many steps there are (``plan``), so its count is right
    for ``--device all`` too; nothing ever goes to stderr as a bare line.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.bar: Progress | None = None

    def __enter__(self) -> "CheckProgressBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
            self.bar = None

    def plan(self, total: int) -> None:
        if self.enabled and self.bar is None and total > 0:
            self.bar = Progress(total, enabled=True, label="check").__enter__()

    def start(self, name: str) -> None:
        if self.bar is not None:
            self.bar.start(name)

    def advance(self, name: str) -> None:
        if self.bar is not None:
            self.bar.advance(name)


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
        # A spread above its bound is marked where the value is, so nobody reads the median alone.
        noisy = " noisy" if m.get("noisy") else ""
        rows.append({
            "key": key, "metric": f"{m.get('label', key)} ({m.get('unit', '')})",
            "value": fmt_value(m.get("value")) + (f" ±{cv:.1%}{noisy}" if isinstance(cv, (int, float)) else ""),
            "calibration": fmt_ratio(_comparison(m, "calibration")),
            "reference": fmt_ratio(_comparison(m, "reference")),
            "verdict": str(m.get("verdict")) + (" (busy)" if m.get("shared") else ""),
            "reason": str(m.get("reason") or "")})
    for key, why in (device.get("skipped") or {}).items():
        rows.append({"key": key, "metric": key, "value": "-", "calibration": "-", "reference": "-",
                     "verdict": "skipped", "reason": f"cannot run here: {why}"})
    return rows


def situation_line(device: Mapping[str, Any]) -> str | None:
    """One line saying the GPU was shared, for the table's heading; None when it was not."""
    sit = device.get("situation") or {}
    if not sit.get("busy"):
        return None
    evidence = "; ".join(sit.get("evidence") or []) or "another process computes on it"
    if sit.get("strict"):
        return f"busy: {evidence}; the figures are judged as measured (--strict)"
    return f"busy: {evidence}; the figures are shared, and a low one is not held against the card"


def state_rows(device: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"key": k, "verdict": str(s.get("verdict")), "reason": str(s.get("reason") or "")}
            for k, s in (device.get("state") or {}).items()]
