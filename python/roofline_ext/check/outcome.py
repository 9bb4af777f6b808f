"""Verdicts of a check: per comparison, per metric, per state item, per GPU and overall.

Pure functions and frozen records, no device. The order of severity is PASS < UNKNOWN < WARN < FAIL:
a GPU or a run takes the worst verdict of its parts, so PASS means that every metric was measured
*and* compared and every state item was fine, and UNKNOWN means that nothing was wrong but
something could not be judged. Exit codes (docs/check.md, README):

    0 PASS   4 WARN   5 FAIL   6 UNKNOWN   3 UNKNOWN because no GPU can be measured here   2 bad input

A measured figure is judged in three steps (``judge_metric``), so that the verdict is about the card
and not about its situation:

1. its comparisons (``compare``) give the *measured* verdict;
2. **noisy**: a spread (CV over the timed launches) above the metric's bound means the median is not
   known well enough for a verdict: never PASS (UNKNOWN), and a shortfall is a WARN, not a FAIL;
3. **busy**: when another process computes on the GPU (``Situation``) the figures are shared, and a
   shortfall says nothing about the card: UNKNOWN, naming the processes, unless ``strict``.

Wrong data and CUDA errors never reach these steps (``failed_metric``): they FAIL whatever the load,
since no other process can write into this one's memory.
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
class Situation:
    """Who else used the GPU while it was checked, and whether the verdict judges the figures anyway.

    ``busy``: another process computed on the GPU (NVML's compute processes, at the start or the end
    of the check) or it was busy before the check touched it (NVML utilisation); ``evidence`` says
    which, in words, naming the processes. ``strict`` (``check --strict``) judges the figures as
    measured even so.
    """

    busy: bool = False
    evidence: tuple[str, ...] = ()
    processes: tuple[Mapping[str, Any], ...] = ()
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    strict: bool = False

    @property
    def shared(self) -> bool:
        """The figures are shared and a shortfall is not held against the card."""
        return self.busy and not self.strict

    def who(self) -> str:
        return "; ".join(self.evidence) if self.evidence else "no other process seen"

    def to_dict(self) -> dict[str, Any]:
        return {"busy": self.busy, "shared": self.shared, "strict": self.strict, "evidence": list(self.evidence),
                "processes": [dict(p) for p in self.processes], "utilization_gpu_pct": self.utilization_gpu_pct,
                "utilization_memory_pct": self.utilization_memory_pct}


#: A GPU nobody else was seen on.
IDLE = Situation()


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
    #: The largest CV (spread over the timed launches) a verdict may rest on; None: not judged.
    spread_bound: float | None = None
    #: The spread exceeded ``spread_bound``.
    noisy: bool = False
    #: Another process shared the GPU and a shortfall was not held against the card.
    shared: bool = False
    #: What the comparisons alone said, before the noise and sharing rules (None: no comparison).
    measured_verdict: Verdict | None = None

    def comparison(self, against: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.against == against), None)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "unit": self.unit, "value": self.value, "cv": self.cv,
                "verdict": self.verdict.value, "reason": self.reason,
                "comparisons": [c.to_dict() for c in self.comparisons], "detail": dict(self.detail),
                "spread_bound": self.spread_bound, "noisy": self.noisy, "shared": self.shared,
                "measured_verdict": None if self.measured_verdict is None else self.measured_verdict.value}


def settle(measured: Verdict, noisy: bool, shared: bool) -> Verdict:
    """The verdict of a measured figure from its comparisons' verdict, its noise and its sharing.

    | measured   | clean | noisy   | shared (busy, not strict) |
    |------------|-------|---------|---------------------------|
    | PASS       | PASS  | UNKNOWN | PASS (UNKNOWN if noisy)   |
    | WARN, FAIL | as is | WARN    | UNKNOWN                   |

    A PASS while shared stands: the card reached its figure even with company.
    """
    if measured is Verdict.PASS:
        return Verdict.UNKNOWN if noisy else Verdict.PASS
    if shared:
        return Verdict.UNKNOWN
    if noisy:
        return Verdict.WARN
    return measured


def judge_metric(key: str, label: str, unit: str, value: float, cv: float | None,
                 expectations: Mapping[str, float | None], tolerance: float,
                 detail: Mapping[str, Any] | None = None, missing: str = "", *,
                 spread_bound: float | None = None, situation: Situation = IDLE) -> MetricCheck:
    """A measured metric against every expectation there is (UNKNOWN when there is none), then the
    noise and sharing rules (``settle``): a CV above ``spread_bound`` is noisy; ``situation`` says
    whether the figures were shared with another process."""
    comps = tuple(compare(label, value, exp, tolerance, against, unit)
                  for against, exp in expectations.items() if exp)
    noisy = cv is not None and spread_bound is not None and cv > spread_bound
    spread = f"±{cv:.1%} spread over its launches, above the ±{spread_bound:.1%} a verdict needs" if noisy else ""
    if not comps:
        reason = f"{label} {value:.4g} {unit}: nothing to compare with ({missing or 'no expectation'})"
        return MetricCheck(key, label, unit, value, cv, Verdict.UNKNOWN, reason + (f"; noisy: {spread}" if noisy else ""),
                           (), dict(detail or {}), spread_bound, noisy, situation.shared, None)
    measured = worst(c.verdict for c in comps)
    verdict = settle(measured, noisy, situation.shared)
    said = "; ".join(c.reason for c in comps if c.verdict is measured)
    if verdict is measured:
        reason = said
    elif measured is not Verdict.PASS and situation.shared:
        reason = (f"busy: {said}; the figures are shared with another process, so not a finding about the card "
                  "(--strict judges it as measured)" + (f"; also noisy: {spread}" if noisy else ""))
    else:
        reason = f"noisy: {spread}, so it is not judged {measured.value}: {said}"
    return MetricCheck(key, label, unit, value, cv, verdict, reason, comps, dict(detail or {}), spread_bound, noisy,
                       situation.shared and measured is not Verdict.PASS, measured)


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


def summary_reason(items: Iterable[Any], verdict: Verdict, situation: Situation = IDLE) -> str:
    """The reasons of the items that set ``verdict`` (all of them for a PASS: it is short), led by
    the sharing when the GPU was busy, so nobody reads a shared card's figures as a slow card."""
    items = list(items)
    if verdict is Verdict.PASS:
        text = "every metric within tolerance and no state item found"
        return text + (f" (while shared: {situation.who()})" if situation.busy else "")
    parts: list[str] = [f"{i.key}: {i.reason}" for i in items if i.verdict is verdict]
    if situation.shared:
        lead = f"busy: the figures are shared with another user of this GPU ({situation.who()})"
        shared = [f"{i.key}" for i in items if getattr(i, "shared", False)]
        if shared:
            lead += f"; {', '.join(shared)} below expectation but not judged (--strict judges them)"
        # The shared metrics are named in the lead; their own reasons stay in their rows.
        quiet = {"compute_processes"} | set(shared)
        rest = [f"{i.key}: {i.reason}" for i in items if i.verdict is verdict and i.key not in quiet]
        if not shared and not rest:
            lead += "; every figure within tolerance even so"
        parts = [lead] + rest
    return "; ".join(parts)
