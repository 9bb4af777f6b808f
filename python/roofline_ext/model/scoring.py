"""How close a candidate comes to a floor: the fraction of the floor and the speed-of-light score.

The score is the one NVIDIA's SOL-ExecBench ranks kernels by (docs/scoring.md has the formula, its
source and where ours differs): with the reference time ``t_ref``, the floor ``t_floor`` of a roof
and the candidate's time ``t_new``,

    S = 1 / (1 + (t_new - t_floor) / (t_ref - t_floor))

so S = 1/2 for a candidate as fast as the reference, S -> 1 as it approaches the floor, S -> 0 as
it gets slower. A candidate *below* the floor (or a reference at or below it) gets no score but a
flag: the count or the peak is wrong for that task, and a number would hide it.
"""
from __future__ import annotations

from typing import Any, Mapping

# Times within this fraction of the floor count as on it (timer resolution), as floors.py does.
_EPS = 1e-6


def sol_score(t_new: float | None, t_ref: float | None, t_floor: float | None) -> float | None:
    """SOL-ExecBench's score of ``t_new`` between ``t_ref`` (S = 0.5) and ``t_floor`` (S = 1).

    None when it is undefined: a time missing, the reference not above the floor (no gap to
    close), or the candidate below the floor (see :func:`below_floor`).
    """
    if not (t_new and t_ref and t_floor) or t_ref <= t_floor or below_floor(t_new, t_floor):
        return None
    return 1.0 / (1.0 + (max(t_new, t_floor) - t_floor) / (t_ref - t_floor))


def below_floor(t: float | None, t_floor: float | None) -> bool:
    return bool(t and t_floor and t < t_floor * (1 - _EPS))


def candidate_roofs(roofs: Mapping[str, Any] | None, t_ref: float | None, t_new: float | None) -> dict[str, Any]:
    """Per roof: the candidate's ``fraction`` of the floor, its ``score`` and ``below_floor``."""
    out: dict[str, Any] = {}
    for name, roof in (roofs or {}).items():
        if not roof:
            out[name] = None
            continue
        t_floor = roof.get("t_min_ms")
        out[name] = {"fraction": t_floor / t_new if t_floor and t_new else None,
                     "score": sol_score(t_new, t_ref, t_floor),
                     "below_floor": below_floor(t_new, t_floor)}
    return out


def reference_flags(roofs: Mapping[str, Any] | None, t_ref: float | None) -> list[str]:
    """Roofs whose floor the reference itself beats: no candidate can be scored on them."""
    return [name for name, roof in (roofs or {}).items()
            if roof and t_ref and roof.get("t_min_ms") and t_ref <= roof["t_min_ms"]]
