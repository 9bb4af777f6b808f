"""The one verdict vocabulary for a candidate, in JSON, CSV and text (docs/scoring.md, "Verdicts").

A candidate ends in exactly one of these:

* ``correct``: every output of every check matched the reference, no defence fired; it is timed
  and scored;
* ``incorrect``: an output differs from the reference (``reason`` says which and how); not timed;
* ``invalid``: a defence fired (``defence`` names it, ``evidence`` carries what it saw): the
  judge's own functions changed, a thread or a process appeared, an output aliases an input the
  call did not write, the timed calls returned something other than the checked ones, or work ran
  where the timing events cannot see it. Never a note beside a score: no time, no score;
* ``below_floor``: correct, but faster than a physical floor: the FLOP/byte count or a peak is
  wrong for the task, so the time cannot be scored on any roof;
* ``error``: it could not be loaded, built or run (``reason``).

Pure: no torch here, so the report and the CPU-only tests read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping


class Verdict(str, Enum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    INVALID = "invalid"
    BELOW_FLOOR = "below_floor"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


# The defences, by the name results carry in ``defence`` (docs/scoring.md lists what each checks).
DEFENCES = (
    "identity",      # a function the judge or the timer uses was replaced or its code changed
    "harness",       # the reference model, its inputs or the judge's copies were changed
    "thread",        # a thread or a child process the candidate started is still running
    "inspection",    # the candidate walked the garbage collector or other threads' frames
    "alias",         # an output shares memory with an input the call did not write, or with the judge's
    "timed-output",  # an output of a timed call (fresh inputs, unpredictable trial) was wrong
    "all-streams",   # GPU work outside what the timing events saw (other streams, spins)
)

JUDGE_MODES = ("strict", "kernelbench")


@dataclass(frozen=True)
class Judgement:
    """What the judge decided about one candidate, with what it saw.

    ``checks``: the input sets compared (correctness sets and the checks inside the timed loop),
    ``seed``: the per-run seed the input sets were drawn from (``--judge-seed`` replays a run).
    """

    verdict: Verdict
    reason: str | None = None
    defence: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "strict"
    seed: int | None = None
    checks: int = 0
    timed_checks: int = 0

    @property
    def scored(self) -> bool:
        return self.verdict is Verdict.CORRECT

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "reason": self.reason, "defence": self.defence,
                "evidence": dict(self.evidence), "mode": self.mode, "seed": self.seed,
                "checks": self.checks, "timed_checks": self.timed_checks}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Judgement":
        return cls(verdict=Verdict(d["verdict"]), reason=d.get("reason"), defence=d.get("defence"),
                   evidence=dict(d.get("evidence") or {}), mode=d.get("mode") or "strict",
                   seed=d.get("seed"), checks=int(d.get("checks") or 0),
                   timed_checks=int(d.get("timed_checks") or 0))


def verdict_text(verdict: str | None, reason: str | None = None, defence: str | None = None) -> str:
    """How the text report says a verdict: ``INVALID (all-streams): ...``."""
    if not verdict:
        return "-"
    head = verdict.upper().replace("_", " ")
    if defence:
        head += f" ({defence})"
    return f"{head}: {reason}" if reason and verdict != Verdict.CORRECT.value else head


def clip_score(score: float | None) -> float | None:
    """The SOL score lies in [0, 1] by construction; clip so rounding can never leave that range."""
    if score is None:
        return None
    return min(1.0, max(0.0, score))
