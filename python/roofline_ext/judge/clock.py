"""Where a judged candidate's time goes: exclusive wall seconds per phase.

The judge's cost is a promise (docs/scoring.md: it adds at most a tenth to a batch's wall), so
every candidate carries its own account: loading, the reference's setup, the candidate's and the
reference's calls, the input sets, the judge's copies and digests, its fingerprint checks, its
comparisons, the timed loop and the passes after it. Phases nest (a fingerprint check inside a
comparison step); time is charged to the innermost open phase only, so the phases add up to the
wall of the job and none is counted twice.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

# The phases a harness without the judge spends too (KernelBench's own: import and build the
# candidate, make input sets, run the candidate and the reference on each, time the loop), and
# what the user asked to measure beyond the time ("measured": --energy's window). The others are
# the judge's: what it adds.
HARNESS_PHASES = ("load", "setup", "inputs", "candidate", "reference", "timed_loop", "measured")


class PhaseClock:
    """Exclusive time per named phase (``with clock("guard"): ...``)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._stack: list[str] = []
        self._mark = clock()
        self.totals: dict[str, float] = {}

    def _charge(self, now: float) -> None:
        if self._stack:
            name = self._stack[-1]
            self.totals[name] = self.totals.get(name, 0.0) + (now - self._mark)
        self._mark = now

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self._charge(self._clock())
        self._stack.append(name)
        try:
            yield
        finally:
            self._charge(self._clock())
            self._stack.pop()

    def judge_s(self) -> float:
        """Seconds of the phases only the judge spends (everything outside ``HARNESS_PHASES``)."""
        return sum(v for k, v in self.totals.items() if k not in HARNESS_PHASES)

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 6) for k, v in sorted(self.totals.items())}
