"""A batch's energy at a glance (``analyze DIR --time --energy``): how many references had their
energy measured, how many of those were held against an energy floor (``--energy-costs``), which
fell below it (a measurement or counting problem, flagged as a time below its time floor is), and
the tasks furthest above it: the ones that waste the most energy for their work (issue 27's table).

Only batches that measured energy get this part: without ``--energy`` the summary is as before.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

#: Tasks listed as furthest above their energy floor.
FURTHEST = 10


def _reference(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    energy = result.get("energy")
    if result.get("status") != "ok" or not isinstance(energy, Mapping):
        return None
    ref = energy.get("reference")
    return ref if isinstance(ref, Mapping) else None


def energy_summary(results: Sequence[Mapping[str, Any]], furthest: int = FURTHEST) -> dict[str, Any] | None:
    """The batch's energy part, JSON-ready, or None when no task's energy was measured:
    ``measured`` (references with a figure), ``unmeasured`` (energy asked for, no figure: the
    counter's one-line reason is in each result), ``with_floor``, ``below_floor`` (task names),
    ``furthest_above`` (the ``furthest`` tasks with the smallest fraction of their floor: task, the
    fraction, mJ per call above idle and the floor's mJ)."""
    refs = [(r, _reference(r)) for r in results]
    asked = [(r, ref) for r, ref in refs if ref is not None]
    if not asked:
        return None
    measured = [(r, ref) for r, ref in asked if ref.get("j_per_call_above_idle") is not None]
    floored = [(r, ref) for r, ref in measured if ref.get("fraction_of_floor") is not None]
    ranked = sorted(floored, key=lambda pair: pair[1]["fraction_of_floor"])
    return {
        "measured": len(measured),
        "unmeasured": len(asked) - len(measured),
        "with_floor": len(floored),
        "below_floor": [str(r.get("task")) for r, ref in floored if ref.get("below_floor")],
        "furthest_above": [{
            "task": str(r.get("task")),
            "fraction_of_floor": ref["fraction_of_floor"],
            "mj_per_call_above_idle": ref["j_per_call_above_idle"] * 1e3,
            "floor_mj": (r["energy"].get("floor") or {}).get("e_min_j", 0.0) * 1e3,
        } for r, ref in ranked[:furthest]],
    }


def energy_summary_rows(energy: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """``(figure, "", value)`` rows of the summary CSV: the counts (the table lists the tasks)."""
    return [("energy_measured", "", energy["measured"]), ("energy_unmeasured", "", energy["unmeasured"]),
            ("energy_with_floor", "", energy["with_floor"]),
            ("energy_below_floor", "", len(energy["below_floor"]))]


def energy_summary_lines(energy: Mapping[str, Any]) -> list[str]:
    """The summary table's energy lines: the counts, the tasks below their floor, and the table of
    the tasks furthest above it."""
    lines = [f"energy      {energy['measured']} reference(s) measured"
             + (f", {energy['unmeasured']} not (see each task)" if energy["unmeasured"] else "")
             + (f"; {energy['with_floor']} held against an energy floor, {len(energy['below_floor'])} below it"
                if energy["with_floor"] else "; no energy floor (give --energy-costs FILE)")]
    if energy["below_floor"]:
        lines.append("  below their energy floor: " + ", ".join(energy["below_floor"]))
    if energy["furthest_above"]:
        lines.append("  furthest above their energy floor (fraction of it; mJ per call above idle; floor mJ):")
        width = max(len(t["task"]) for t in energy["furthest_above"])
        lines += [f"    {t['task'].ljust(width)}  {t['fraction_of_floor']:6.1%}  {t['mj_per_call_above_idle']:10.4g}"
                  f"  {t['floor_mj']:10.4g}" for t in energy["furthest_above"]]
    return lines
