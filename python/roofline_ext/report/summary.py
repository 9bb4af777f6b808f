"""The summary of a batch, in JSON, CSV and a table, and the writer that keeps a batch's files.

The summary: tasks ok/failed; candidates checked, correct, incorrect, failed and below a floor; the
geometric-mean speed-up of the correct candidates (and of each task's best one); per roof the
median fraction of the floor reached by the references and by the correct candidates, and the
median speed-of-light score (docs/scoring.md). Wall times: the sum and median per task. A timed
batch: the host-bound references, and the host's pace over the references' series. With
``--energy``, the batch's energy part too (``energy_summary.py``).
"""
from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..measure.timing_record import TimingReply, TimingStats
from ..model.floors import ROOF_NAMES
from .energy_summary import energy_summary, energy_summary_lines, energy_summary_rows
from .outputs import STDOUT
from .writers import CSV_COLUMNS, ResultsWriter, csv_row, summarize, write_atomic


def _median(values: Iterable[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return statistics.median(xs) if xs else None


def _geomean(values: Iterable[float | None]) -> float | None:
    xs = [v for v in values if v is not None and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in xs)) if xs else None


def _candidates(results: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [c for r in results if r.get("status") == "ok" for c in r.get("candidates") or ()]


def _roof(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return (obj.get("roofs") or {}).get(name) or {}


def batch_summary(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The batch's figures (keys below); None where there is nothing to take a figure of."""
    ok = [r for r in results if r.get("status") == "ok"]
    timed = [r for r in ok if r.get("t_ref_ms")]
    cands = _candidates(results)
    correct = [c for c in cands if c.get("correct")]
    best = [max((c["speedup"] for c in r.get("candidates") or () if c.get("correct") and c.get("speedup")),
                default=None) for r in timed]
    walls = [r.get("wall_s") for r in results]
    tasks = {"total": len(results), "ok": len(ok), "failed": len(results) - len(ok), "timed": len(timed)}
    if timed:
        # A timed batch: the references whose series was host-bound (measure/timing.py), whose time
        # is the host's launches and moves with the host's speed between runs (docs/runner.md).
        tasks["host_bound"] = sum(1 for r in timed if _host_bound(r))
    out: dict[str, Any] = {
        "tasks": tasks,
        "candidates": {"total": len(cands), "correct": len(correct),
                       "incorrect": sum(1 for c in cands if c.get("correct") is False
                                        and c.get("verdict") != "invalid"),
                       "invalid": sum(1 for c in cands if c.get("verdict") == "invalid"),
                       "failed": sum(1 for c in cands if c.get("status") != "ok"),
                       "below_floor": sum(1 for c in correct if c.get("below_floor"))},
        "speedup_geomean": _geomean(c.get("speedup") for c in correct),
        "speedup_geomean_best_per_task": _geomean(best),
        "roofs": {name: {
            "reference_fraction_median": _median(_roof(r, name).get("ref_fraction") for r in timed),
            "candidate_fraction_median": _median((_roof(c, name).get("fraction")) for c in correct),
            "score_median": _median(_roof(c, name).get("score") for c in correct),
            "scored": sum(1 for c in correct if _roof(c, name).get("score") is not None),
        } for name in ROOF_NAMES},
        "wall_s": {"sum": sum(w for w in walls if w is not None) if any(w is not None for w in walls) else None,
                   "median_per_task": _median(walls)},
    }
    paces = [p for r in timed for p in _host_paces(r)]
    if paces:
        # The host's speed over the batch (measure/task_timing.host_pace, read around every reference's
        # series): a host-bound reference's time follows it, so two runs on a host whose pace moved
        # between its two modes (1.7-2x apart on the cloud VMs measured, docs/runner.md) differ by
        # that much on those tasks whatever the trial count.
        out["host_pace_us"] = {"min": min(paces), "median": statistics.median(paces), "max": max(paces)}
    energy = energy_summary(results)
    if energy is not None:  # only a batch that measured energy has the key: others stay as they were
        out["energy"] = energy
    return out


def _reference(result: Mapping[str, Any]) -> TimingStats | None:
    timing = TimingReply.of_result(result)
    return timing.reference if timing is not None else None


def _host_bound(result: Mapping[str, Any]) -> bool:
    reference = _reference(result)
    return reference is not None and reference.host_bound is True


def _host_paces(result: Mapping[str, Any]) -> tuple[float, ...]:
    reference = _reference(result)
    return reference.host_paces_us if reference is not None else ()


# A batch whose host's pace spread this much (max/min) had a host that changed speed under it: said
# beside the host-bound count, whose times follow the pace (docs/runner.md, session 18: 20 of 23).
HOST_PACE_UNSTEADY = 1.25


# --- CSV and table ----------------------------------------------------------------------------------

def summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """``(figure, roof or "", value)`` rows: the CSV's lines and the table's cells."""
    t, c = summary["tasks"], summary["candidates"]
    rows: list[tuple[str, str, Any]] = [(f"tasks_{k}", "", v) for k, v in t.items()]
    rows += [(f"candidates_{k}", "", v) for k, v in c.items()]
    rows += [("speedup_geomean", "", summary["speedup_geomean"]),
             ("speedup_geomean_best_per_task", "", summary["speedup_geomean_best_per_task"])]
    for name, figures in summary["roofs"].items():
        rows += [(key, name, value) for key, value in figures.items()]
    rows += [(f"wall_s_{k}", "", v) for k, v in summary["wall_s"].items()]
    rows += [(f"host_pace_us_{k}", "", v) for k, v in (summary.get("host_pace_us") or {}).items()]
    if summary.get("energy"):
        rows += energy_summary_rows(summary["energy"])
    return rows


def summary_csv(summary: Mapping[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(("figure", "roof", "value"))
    for figure, roof, value in summary_rows(summary):
        w.writerow((figure, roof, "" if value is None else value))
    return buf.getvalue()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def summary_table(summary: Mapping[str, Any]) -> str:
    """The summary as lines of text (what ``analyze DIR`` prints at the end)."""
    t, c = summary["tasks"], summary["candidates"]
    lines = [f"tasks       {t['total']}: {t['ok']} ok, {t['failed']} failed, {t['timed']} timed"
             + (f" ({t['host_bound']} host-bound: their time is the host's launches)" if t.get("host_bound") else "")]
    if c["total"]:
        lines.append(f"candidates  {c['total']}: {c['correct']} correct, {c['incorrect']} incorrect, "
                     f"{c.get('invalid', 0)} invalid, "
                     f"{c['failed']} failed; {c['below_floor']} below a floor (not scored)")
    g, gb = summary["speedup_geomean"], summary["speedup_geomean_best_per_task"]
    if g is not None:
        lines.append(f"speed-up    geometric mean {g:.3g}x over the correct candidates"
                     + (f", {gb:.3g}x taking each task's best" if gb is not None else ""))
    roofs = [n for n in ROOF_NAMES if any(v is not None for k, v in summary["roofs"][n].items() if k != "scored")]
    if roofs:
        rows = [("median", *roofs),
                ("reference, fraction of floor", *(_pct(summary["roofs"][n]["reference_fraction_median"]) for n in roofs)),
                ("candidates, fraction of floor", *(_pct(summary["roofs"][n]["candidate_fraction_median"]) for n in roofs)),
                ("candidates, SOL score", *("-" if summary["roofs"][n]["score_median"] is None
                                            else f"{summary['roofs'][n]['score_median']:.3f}" for n in roofs))]
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            lines.append("  " + "  ".join([str(r[0]).ljust(widths[0])] +
                                          [str(x).rjust(w) for x, w in zip(r[1:], widths[1:])]))
    w = summary["wall_s"]
    if w["sum"] is not None:
        lines.append(f"wall        {w['sum']:.1f} s over all tasks, median {w['median_per_task']:.2f} s per task")
    pace = summary.get("host_pace_us")
    if pace:
        spread = pace["max"] / pace["min"] if pace["min"] > 0 else None
        lines.append(f"host        pace {pace['min']:.0f}-{pace['max']:.0f} us (a fixed Python loop, lower is faster)"
                     + (f": {spread:.1f}x apart, and host-bound times move with it"
                        if spread is not None and spread >= HOST_PACE_UNSTEADY and t.get("host_bound") else ""))
    if summary.get("energy"):
        lines += energy_summary_lines(summary["energy"])
    return "\n".join(lines)


# --- the batch's files ------------------------------------------------------------------------------

# How well each median is known (docs/runner.md, "How many trials"): trials run, the 95% interval's
# relative half-width, whether it met the target, whether the series was host-bound (its time the
# host's launches, measure/timing.py), for the reference (ref_) and the candidate (new_).
TRIAL_KEYS = ("trials", "ci_rel", "precision_reached", "host_bound")
TIMED_COLUMNS = ("wall_s", "t_ref_ms", "t_compile_ms", "candidate", "sample", "candidate_status", "correct",
                 "verdict", "verdict_reason", "t_new_ms", "speedup") + tuple(
    f"{roof}_{key}" for roof in ROOF_NAMES for key in ("ref_fraction", "new_fraction", "score", "below_floor")) + (
    "trials_mode",) + tuple(f"{who}_{key}" for who in ("ref", "new") for key in TRIAL_KEYS)


def _trial_cells(stats: TimingStats | None, who: str) -> dict[str, Any]:
    return {f"{who}_{key}": getattr(stats, key) if stats is not None else None for key in TRIAL_KEYS}


def _timed_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    base = csv_row(result)
    base.update(wall_s=result.get("wall_s"), t_ref_ms=result.get("t_ref_ms"), t_compile_ms=result.get("t_compile_ms"))
    for roof in ROOF_NAMES:
        base[f"{roof}_ref_fraction"] = _roof(result, roof).get("ref_fraction")
    timing = TimingReply.of_result(result)
    reference = timing.reference if timing is not None else None
    base.update(_trial_cells(reference, "ref"), trials_mode=reference.mode if reference is not None else None)
    rows = []
    for c in result.get("candidates") or [None]:
        row = dict(base)
        if c is not None:
            row.update(candidate=c.get("candidate"), sample=c.get("sample"), candidate_status=c.get("status"),
                       correct=c.get("correct"), verdict=c.get("verdict"), verdict_reason=c.get("reason"),
                       t_new_ms=c.get("t_new_ms"), speedup=c.get("speedup"),
                       **_trial_cells(TimingStats.read(c.get("timing")), "new"))
            for roof in ROOF_NAMES:
                mine = _roof(c, roof)
                row.update({f"{roof}_new_fraction": mine.get("fraction"), f"{roof}_score": mine.get("score"),
                            f"{roof}_below_floor": mine.get("below_floor")})
        rows.append({k: ("" if row.get(k) is None else row[k]) for k in CSV_COLUMNS + TIMED_COLUMNS})
    return rows


class BatchWriter(ResultsWriter):
    """:class:`ResultsWriter` for results that finish out of order: each comes with its task's
    index and the files list tasks in that order. The JSON summary adds :func:`batch_summary`; a
    timed batch's CSV has the timing columns and one row per candidate; ``summary_csv_path`` gets
    :func:`summary_csv`."""

    def __init__(self, json_path=None, csv_path=None, meta=None, summary_csv_path=None) -> None:
        super().__init__(json_path, csv_path, meta)
        self.summary_csv_path = Path(summary_csv_path) if summary_csv_path else None
        self._order: list[int] = []

    def add(self, result: Mapping[str, Any], index: int | None = None) -> None:
        index = len(self._order) if index is None else index
        at = sum(1 for i in self._order if i < index)
        self._order.insert(at, index)
        self._insert(at, result)
        if self.csv_to_stdout:  # stdout is not rewritten: rows as results come (any order)
            self._stream_csv(self.csv_columns(), self.csv_rows(result))
        self.flush(complete=False)

    def csv_columns(self) -> Sequence[str]:
        return CSV_COLUMNS + (TIMED_COLUMNS if self.meta.get("timed") else ())

    def csv_rows(self, result: Mapping[str, Any]) -> list[dict[str, Any]]:
        return _timed_rows(result) if self.meta.get("timed") else [csv_row(result)]

    def summary(self) -> dict[str, Any]:
        return {**summarize(self.results), **batch_summary(self.results)}

    def flush(self, complete: bool) -> None:
        super().flush(complete)
        if self.summary_csv_path and (complete or str(self.summary_csv_path) != STDOUT):
            write_atomic(self.summary_csv_path, summary_csv(batch_summary(self.results)))
