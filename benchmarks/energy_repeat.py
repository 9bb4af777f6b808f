#!/usr/bin/env python3
"""Issue 27's repeatability figure: the spread of each energy figure over several full calibrations.

    python3 benchmarks/energy_repeat.py OUT.json CAL1.json CAL2.json CAL3.json [--target 0.03]

Each CAL is the JSON of one `roofline-ext calibrate --json` (a full calibration with its energy
phase; `scripts/gpu-check energy` makes three, each a fresh process). Per unit (FP64 ... INT8 in J
per FLOP or OP, HBM read/write/copy in J per byte, above idle): every calibration's figure in pJ,
the median, the spread (max / min - 1), the largest distance from the median, each figure's own
counter-reading bound (`relative_uncertainty`), the temperature its window ran at, and whether the
spread is within the target. Also each calibration's sustained HBM pattern figures and idle power,
and the same statistics for the library peers each calibration measured beside its own kernels
(``peers``; not part of the exit status).
A unit a calibration did not measure is listed with its status and left out of the spread.

Exit status: 0 when every unit measured in all calibrations is within the target, 1 otherwise,
2 for unreadable input (one line). The 2026-12-02 result (energy-repeat-h200-2026-12-02.json) was
made by hand the same way, its third calibration read from its `calibrate --show` table because
its JSON did not come back from the device.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence


def _own(c: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return ((c.get("energy") or {}).get("entries") or {}).get(key) or {}


def _peer(c: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    # The first library peer of the key (calibration measures one per unit).
    return next(iter(((c.get("energy") or {}).get("peers") or {}).get(key) or []), None) or {}


def _unit(cals: Sequence[Mapping[str, Any]], key: str, target: float, entry: Any = _own) -> dict[str, Any]:
    entries = [entry(c, key) for c in cals]
    values = [e.get("j_per_unit") for e in entries]
    out: dict[str, Any] = {"status": [e.get("status", "missing") for e in entries],
                           "pj_per_unit": [None if v is None else v * 1e12 for v in values],
                           "counter_bound": [e.get("relative_uncertainty") for e in entries],
                           "temperature_c": [e.get("temperature_c") for e in entries]}
    got = [v for v in values if isinstance(v, (int, float)) and v > 0]
    if len(got) < 2:
        return {**out, "median_pj": None, "spread": None, "max_from_median": None, "within_target": None}
    median = statistics.median(got)
    spread = (max(got) - min(got)) / median
    return {**out, "median_pj": median * 1e12, "spread": spread,
            "max_from_median": max(abs(v - median) / median for v in got), "within_target": spread <= target}


def repeatability(cals: Sequence[Mapping[str, Any]], target: float = 0.03) -> dict[str, Any]:
    """The document this script writes, from calibration dicts (pure: the tests call it)."""
    keys: list[str] = []
    for c in cals:
        for k in ((c.get("energy") or {}).get("entries") or {}):
            if k not in keys:
                keys.append(k)
    units = {k: _unit(cals, k, target) for k in keys}
    # The library peers each calibration measured beside its own kernels, the same way.
    peer_keys = [k for k in keys if any(_peer(c, k) for c in cals)]
    peers = {k: {"source": next((_peer(c, k).get("source") for c in cals if _peer(c, k)), None),
                 **_unit(cals, k, target, _peer)} for k in peer_keys}

    def patterns(c: Mapping[str, Any]) -> dict[str, Any]:
        hbm = ((c.get("sustained") or {}).get("entries") or {}).get("hbm") or {}
        return {p: v.get("value") for p, v in (hbm.get("patterns") or {}).items()}
    return {
        "target_spread": target,
        "calibrations": [{"date": c.get("date"), "sustained_window_s": (c.get("timing") or {}).get("sustained_window_s"),
                          "idle_w": ((c.get("energy") or {}).get("idle") or {}).get("power_w"),
                          "sustained_hbm_tbps": patterns(c)} for c in cals],
        "units": units,
        "peers": peers,
        "within_target": [k for k, u in units.items() if u["within_target"]],
        "not_within_target": [k for k, u in units.items() if u["within_target"] is False],
        "not_measured_in_all": [k for k, u in units.items() if u["within_target"] is None],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="where to write the JSON")
    ap.add_argument("calibrations", nargs="+", help="calibration JSON files (two or more)")
    ap.add_argument("--target", type=float, default=0.03, help="the spread each unit should stay within (0.03)")
    args = ap.parse_args(argv)
    if len(args.calibrations) < 2:
        print("energy_repeat: error: give two or more calibration files", file=sys.stderr)
        return 2
    cals = []
    for path in args.calibrations:
        try:
            cals.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            print(f"energy_repeat: error: {path}: {exc}", file=sys.stderr)
            return 2
    doc = {**repeatability(cals, args.target), "files": [str(p) for p in args.calibrations]}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    for k, u in doc["units"].items():
        shown = "-" if u["spread"] is None else f"{u['spread']:.1%}"
        print(f"{k:10s} median {u['median_pj'] or float('nan'):.4g} pJ  spread {shown}")
    for k, u in doc["peers"].items():
        shown = "-" if u["spread"] is None else f"{u['spread']:.1%}"
        print(f"{k:10s} median {u['median_pj'] or float('nan'):.4g} pJ  spread {shown}  ({u['source']}, library)")
    return 0 if not doc["not_within_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
