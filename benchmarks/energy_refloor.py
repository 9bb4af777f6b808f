#!/usr/bin/env python3
"""A recorded ``analyze --energy`` batch held against another calibration's energy costs.

  python3 benchmarks/energy_refloor.py BATCH.json[.gz] CALIBRATION.json OUT.json [--top 10] [--plot CHART.png]

The measured energies stay as they were recorded; only the floor is rebuilt, with the package's
own rule (``model/energy.py``: ``EnergyCosts.from_calibration``, ``energy_floor``, ``task_energy``)
from each task's recorded counts (FLOPs, SIMT FLOPs, bytes and their read/write split, unit, time
floor), as ``runner/timed.py`` builds it during the run. So one device run of L1-L3 with
``--energy`` can be weighed against a later calibration of the same card, for example one that
measured library peers the first did not. Rebuilt against the batch's own calibration, every floor
comes out as recorded (the test holds it to that).

Writes per task the floor (mJ above idle), the measured energy, the fraction of the floor, and
whether it is below the floor (and beyond the uncertainties); then the counts and the tasks
furthest above their floor. ``--plot``: the energy roofline (``report/energy_chart.py``) at those
costs with every task's point over its rebuilt floor. Exit status 0; 2 for unreadable input (one
line).
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

try:  # the installed package; a source checkout's python/ only when none is installed
    import roofline_ext  # noqa: F401
except ImportError:
    sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))

from roofline_ext.errors import UserError
from roofline_ext.measure.energy import EnergyMeasurement
from roofline_ext.model.energy import EnergyCosts, TaskEnergy, energy_floor, task_energy


def _read(path: str) -> Any:
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)


def task_point(task: Mapping[str, Any], costs: EnergyCosts) -> TaskEnergy | None:
    """One task's measured reference over its floor rebuilt at ``costs``; None for a task with no
    measured energy or no recorded floor."""
    energy = task.get("energy") or {}
    measured, recorded = energy.get("reference"), energy.get("floor")
    if not measured or measured.get("error") or not recorded:
        return None
    unit = str(recorded["compute_unit"])
    floor = energy_floor(costs, flops=recorded["flops"], simt_flops=recorded["simt_flops"], nbytes=recorded["nbytes"],
                         dtype=unit, strict_fp32=unit == "fp32",
                         read_bytes=(task.get("input_bytes") or 0) + (task.get("param_bytes") or 0),
                         write_bytes=task.get("output_bytes"), t_min_s=recorded.get("t_min_s"))
    return task_energy(floor, EnergyMeasurement.from_dict(measured), label=str(task.get("task") or "task"))


def refloor_task(task: Mapping[str, Any], costs: EnergyCosts) -> dict[str, Any] | None:
    """One task's row: its reference against ``costs``; None where :func:`task_point` has none."""
    te = task_point(task, costs)
    if te is None:
        return None
    measured, recorded, floor = task["energy"]["reference"], task["energy"]["floor"], te.floor
    return {"task": task.get("task"), "measured_mj": measured["j_per_call_above_idle"] * 1e3,
            "measured_relative_uncertainty": measured.get("relative_uncertainty"),
            "floor_mj": floor.e_min_j * 1e3, "recorded_floor_mj": recorded["e_min_j"] * 1e3,
            "memory_rule": floor.memory_rule, "terms": [t.to_dict() for t in floor.terms],
            "fraction_of_floor": te.fraction, "below_floor": te.below_floor,
            "below_floor_beyond_uncertainty": te.below_floor_beyond_uncertainty}


def refloor(batch: Mapping[str, Any], calibration: Mapping[str, Any], top: int = 10) -> dict[str, Any]:
    """The document this script writes (pure: the tests call it)."""
    costs = EnergyCosts.from_calibration(calibration)
    rows = [r for t in batch.get("tasks") or () if (r := refloor_task(t, costs)) is not None]
    ranked = sorted(rows, key=lambda r: r["fraction_of_floor"])
    return {
        "calibration": calibration.get("date"),
        "costs": {k: {"pj_per_unit": c.j_per_unit * 1e12, "origin": c.origin, "source": c.source}
                  for k, c in costs.costs.items()},
        "tasks_measured": len(rows),
        "below_floor": [r["task"] for r in rows if r["below_floor"]],
        "below_floor_beyond_uncertainty": [r["task"] for r in rows if r["below_floor_beyond_uncertainty"]],
        "highest_fraction": [{"task": r["task"], "fraction_of_floor": r["fraction_of_floor"]} for r in ranked[-top:][::-1]],
        "furthest_above": [{"task": r["task"], "fraction_of_floor": r["fraction_of_floor"],
                            "measured_mj": r["measured_mj"], "floor_mj": r["floor_mj"]} for r in ranked[:top]],
        "tasks": rows,
    }


def _plot(batch: Mapping[str, Any], calibration: Mapping[str, Any], path: str) -> None:
    from roofline_ext.report.energy_chart import plot_energy_roofline

    costs = EnergyCosts.from_calibration(calibration)
    points = [p for t in batch.get("tasks") or () if (p := task_point(t, costs)) is not None]
    plot_energy_roofline(costs, path, title=f"{len(points)} references against their energy floors",
                         subtitle=f"costs of the calibration of {calibration.get('date')}, lowest of own and library",
                         tasks=points)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("batch", help="the JSON of one 'roofline-ext analyze ... --energy' (.gz read as gzip)")
    ap.add_argument("calibration", help="a calibration JSON with an energy section")
    ap.add_argument("out", help="where to write the JSON")
    ap.add_argument("--top", type=int, default=10, help="how many tasks to list at each end (10)")
    ap.add_argument("--plot", metavar="CHART", help="also draw the energy roofline with every task (.png or .svg)")
    args = ap.parse_args(argv)
    try:
        batch, calibration = _read(args.batch), _read(args.calibration)
        doc = refloor(batch, calibration, args.top)
        if args.plot:
            _plot(batch, calibration, args.plot)
    except (OSError, ValueError, KeyError, UserError) as exc:
        print(f"energy_refloor: error: {exc}", file=sys.stderr)
        return 2
    Path(args.out).write_text(json.dumps({**doc, "batch": args.batch, "calibration_file": args.calibration},
                                         indent=1) + "\n")
    for k, c in doc["costs"].items():
        print(f"cost {k:10s} {c['pj_per_unit']:8.4g} pJ  {c['origin']:7s} {c['source']}")
    print(f"{doc['tasks_measured']} tasks; below floor: {len(doc['below_floor'])} "
          f"({len(doc['below_floor_beyond_uncertainty'])} beyond the uncertainties)")
    for r in doc["highest_fraction"]:
        print(f"  highest  {r['fraction_of_floor']:6.1%}  {r['task']}")
    for r in doc["furthest_above"]:
        print(f"  furthest {r['fraction_of_floor']:6.1%}  {r['task']}  {r['measured_mj']:.4g} mJ, floor {r['floor_mj']:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
