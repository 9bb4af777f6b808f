"""The published floor table: one row per task and GPU, written as CSV and JSON (``roofline-ext floors``).

A row is what a leaderboard or a paper cites for a task on a GPU: the counted work (tensor-core and
SIMT FLOPs), the compulsory bytes, the arithmetic intensity, and the floor on each roof the GPU has
(datasheet; derived from SMs x clock x per-clock rate; measured, where a calibration is given),
with what bounds it there. The counts come from the batch's results (``runner.batch.run_batch``,
counted once); the floors of every GPU are computed here from those counts (``model.floors``), so
one count serves every SKU of the datasheet.

The table must regenerate byte for byte (the committed ``floors/`` table is checked in CI): no
times, dates or paths that depend on the run go into it, rows come in task then GPU order, and
every figure is written with 6 significant digits (the counts are integers, written exactly).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..model.floors import ROOF_NAMES, roofline_result
from ..peaks.datasheet import DatasheetPeaks
from .writers import dumps

__all__ = ["FloorGpu", "COLUMNS", "SCHEMA_VERSION", "floor_rows", "table_document", "to_csv", "to_json",
           "mode_of"]

SCHEMA_VERSION = 1

#: The CSV columns, in order; the JSON rows have the same keys.
COLUMNS = (
    "task", "gpu", "status", "mode", "dtype", "compute_unit", "flops", "simt_flops", "bytes", "read_bytes",
    "write_bytes", "arithmetic_intensity",
    "floor_datasheet_ms", "bound_datasheet", "floor_derived_ms", "bound_derived", "floor_measured_ms",
    "bound_measured", "count_is_estimate", "error",
)

# The note the counter adds to a task counted in training mode (tasks/counting.py, "Mode").
_TRAINING_NOTE = "counted in training mode"
# Notes that mark a count as partly a guess (the floor still counts only what it can know): a mask
# whose values cannot be known, so attention counts every pair (docs/counting.md).
_GUESS_MARKERS = ("cannot be known", "unknown values", "full square")


@dataclass(frozen=True)
class FloorGpu:
    """One GPU column set of the table: its datasheet entry, and the derived and measured peaks
    where it has them. ``label`` names it in the rows (the SKU's table name)."""

    label: str
    sheet: DatasheetPeaks
    derived: Any | None = None
    measured: Any | None = None


def _g(value: float | None) -> float | None:
    """6 significant digits: stable across platforms and runs, and more than any peak is worth."""
    return None if value is None else float(f"{value:.6g}")


def mode_of(result: Mapping[str, Any]) -> str:
    """``"train"`` for a task the counter counted in training mode (its note says so), else ``"eval"``."""
    return "train" if any(str(n).startswith(_TRAINING_NOTE) for n in result.get("notes") or ()) else "eval"


def _estimate(result: Mapping[str, Any]) -> bool:
    return any(m in str(n) for n in result.get("notes") or () for m in _GUESS_MARKERS)


def _row(result: Mapping[str, Any], gpu: FloorGpu) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(task=result.get("task"), gpu=gpu.label)
    if result.get("status") != "ok":
        # the task's path as this run was given it would make the table depend on the folder it
        # was run from: the error names the task instead
        error = " ".join(str(result.get("error") or "failed").split())
        if result.get("path"):
            error = error.replace(str(result["path"]), f"{result.get('task')}.py")
        row.update(status="error", error=error)
        return row
    reads = int(result["input_bytes"]) + int(result["param_bytes"])
    writes = int(result["output_bytes"])
    row.update(status="ok", mode=mode_of(result), dtype=result.get("compute_dtype"), flops=int(result["flops"]),
               simt_flops=int(result["simt_flops"]), bytes=int(result["bytes"]), read_bytes=reads,
               write_bytes=writes, count_is_estimate=_estimate(result))
    r = roofline_result(result["flops"], result["bytes"], result.get("compute_dtype") or "float32", gpu.sheet,
                        None, simt_flops=result["simt_flops"], derived=gpu.derived, measured=gpu.measured,
                        read_bytes=reads, write_bytes=writes)
    if r is None:  # no bytes: no floor on any GPU
        row.update(status="no-floor", error="the task reads and writes 0 bytes")
        return row
    row.update(compute_unit=r.unit, arithmetic_intensity=_g(r.arithmetic_intensity))
    for name in ROOF_NAMES:
        roof = r.roofs.get(name)
        if roof is not None:
            row[f"floor_{name}_ms"] = _g(roof.t_min_ms)
            row[f"bound_{name}"] = roof.bound
    return row


def floor_rows(results: Sequence[Mapping[str, Any]], gpus: Sequence[FloorGpu]) -> list[dict[str, Any]]:
    """One row per (task, GPU): tasks in the order given, GPUs in the order given."""
    return [_row(res, gpu) for res in results for gpu in gpus]


def table_document(rows: Sequence[Mapping[str, Any]], *, counter_version: str, gpus: Sequence[FloorGpu],
                   measured_from: str | None, tasks_from: Sequence[str]) -> dict[str, Any]:
    """The JSON document: what made the table, the GPUs' peaks, then the rows."""
    def peaks(g: FloorGpu) -> dict[str, Any]:
        return {"gpu": g.label, "full_name": g.sheet.full_name, "datasheet_source": g.sheet.source,
                "derived": g.derived is not None, "measured": g.measured is not None}

    return {"kind": "floors", "schema_version": SCHEMA_VERSION, "counter_version": counter_version,
            "tasks_from": list(tasks_from), "measured_from": measured_from,
            "gpus": [peaks(g) for g in gpus], "columns": list(COLUMNS), "rows": [dict(r) for r in rows]}


def to_json(document: Mapping[str, Any]) -> str:
    """The document with one row per line: small, and a change of one task is a change of its lines."""
    head = {k: v for k, v in document.items() if k != "rows"}
    rows = ",\n".join(dumps(r) for r in document.get("rows") or ())
    return dumps(head, indent=1)[:-2] + ',\n "rows": [\n' + rows + "\n ]\n}\n"


def to_csv(rows: Sequence[Mapping[str, Any]], counter_version: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*COLUMNS, "counter_version"])
    for r in rows:
        w.writerow(["" if r.get(c) is None else r[c] for c in COLUMNS] + [counter_version])
    return buf.getvalue()
