"""Verdicts of a check: per comparison, per metric, per state item, per GPU and overall.

Pure functions and frozen records, no device. The order of severity is PASS < UNKNOWN < WARN < FAIL:
a GPU or a run takes the worst verdict of its parts, so PASS means that every metric was measured
*and* compared and every state item was fine, and UNKNOWN means that nothing was wrong but
something could not be judged. Exit codes (docs/check.md, README):

    0 PASS   4 WARN   5 FAIL   6 UNKNOWN   3 UNKNOWN because no GPU can be measured here   2 bad input
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping


class Verdict(str, enum.Enum):
    PASS = "PASS"
    UNKNOWN = "UNKNOWN"
    WARN = "WARN"
    FAIL = "FAIL"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {Verdict.PASS: 0, Verdict.UNKNOWN: 1, Verdict.WARN: 2, Verdict.FAIL: 3}

#: Exit code per overall verdict; EXIT_NO_GPU when the verdict is UNKNOWN because nothing can be measured.
EXIT_CODES = {Verdict.PASS: 0, Verdict.WARN: 4, Verdict.FAIL: 5, Verdict.UNKNOWN: 6}
EXIT_NO_GPU = 3


def worst(verdicts: Iterable[Verdict], default: Verdict = Verdict.UNKNOWN) -> Verdict:
    """The most severe verdict; ``default`` when there is none (nothing judged is not a PASS)."""
    vs = list(verdicts)
    return max(vs, key=lambda v: v.severity) if vs else default


@dataclass(frozen=True)
class Comparison:
    """A measured figure against one expectation (the card's calibration or the SKU's reference)."""

    against: str  # "calibration" | "reference"
    expected: float
    ratio: float  # measured / expected
    tolerance: float
    verdict: Verdict
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"against": self.against, "expected": self.expected, "ratio": self.ratio,
                "tolerance": self.tolerance, "verdict": self.verdict.value, "reason": self.reason}


def compare(label: str, value: float, expected: float, tolerance: float, against: str, unit: str) -> Comparison:
    """PASS within ``tolerance`` below the expectation, WARN down to twice that, FAIL below.

    Faster than the card's own calibration by more than twice the tolerance is a WARN too: the
    calibration was then taken on a slowed card and should be redone. Faster than the reference is
    a good card, never a warning.
    """
    ratio = value / expected
    shortfall = 1.0 - ratio
    what = f"{label} {value:.4g} {unit} is {ratio:.1%} of the {against} ({expected:.4g})"
    if shortfall > 2 * tolerance:
        return Comparison(against, expected, ratio, tolerance, Verdict.FAIL,
                          f"{what}: more than {2 * tolerance:.0%} below")
    if shortfall > tolerance:
        return Comparison(against, expected, ratio, tolerance, Verdict.WARN,
                          f"{what}: more than {tolerance:.0%} below")
    if against == "calibration" and -shortfall > 2 * tolerance:
        return Comparison(against, expected, ratio, tolerance, Verdict.WARN,
                          f"{what}: faster than its own calibration by more than {2 * tolerance:.0%}; "
                          "the calibration was taken on a slowed card, recalibrate")
    return Comparison(against, expected, ratio, tolerance, Verdict.PASS, f"{what}: within {tolerance:.0%}")


@dataclass(frozen=True)
class MetricCheck:
    """One quick measurement and its verdict."""

    key: str
    label: str
    unit: str
    value: float | None
    cv: float | None
    verdict: Verdict
    reason: str
    comparisons: tuple[Comparison, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)

    def comparison(self, against: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.against == against), None)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "unit": self.unit, "value": self.value, "cv": self.cv,
                "verdict": self.verdict.value, "reason": self.reason,
                "comparisons": [c.to_dict() for c in self.comparisons], "detail": dict(self.detail)}


def judge_metric(key: str, label: str, unit: str, value: float, cv: float | None,
                 expectations: Mapping[str, float | None], tolerance: float,
                 detail: Mapping[str, Any] | None = None, missing: str = "") -> MetricCheck:
    """A measured metric against every expectation there is; UNKNOWN when there is none."""
    comps = tuple(compare(label, value, exp, tolerance, against, unit)
                  for against, exp in expectations.items() if exp)
    if not comps:
        return MetricCheck(key, label, unit, value, cv, Verdict.UNKNOWN,
                           f"{label} {value:.4g} {unit}: nothing to compare with ({missing or 'no expectation'})",
                           (), dict(detail or {}))
    verdict = worst(c.verdict for c in comps)
    reason = "; ".join(c.reason for c in comps if c.verdict is verdict)
    return MetricCheck(key, label, unit, value, cv, verdict, reason, comps, dict(detail or {}))


def failed_metric(key: str, label: str, unit: str, verdict: Verdict, reason: str) -> MetricCheck:
    """A metric whose measurement could not produce a figure (wrong data, a CUDA error, a bug)."""
    return MetricCheck(key, label, unit, None, None, verdict, reason)


@dataclass(frozen=True)
class StateItem:
    """One piece of device state that can explain a slow or failing card."""

    key: str
    verdict: Verdict
    reason: str
    value: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "verdict": self.verdict.value, "reason": self.reason, "value": self.value}


def summary_reason(items: Iterable[Any], verdict: Verdict) -> str:
    """The reasons of the items that set ``verdict`` (all of them for a PASS: it is short)."""
    items = list(items)
    if verdict is Verdict.PASS:
        return "every metric within tolerance and no state item found"
    return "; ".join(f"{i.key}: {i.reason}" for i in items if i.verdict is verdict)
