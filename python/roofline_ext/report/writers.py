"""The JSON and CSV files of ``analyze``: rewritten atomically after every result.

A reader (or a crash) sees the old file or the new one, never half of one; a batch interrupted
half-way leaves a file whose ``complete`` is false. A CSV to stdout (``--csv -``) cannot be
rewritten: its header and each result's rows are printed as the results come. Where an output may go and how it is written
(never over a device, a FIFO or an input; mode kept) is :mod:`roofline_ext.report.outputs`.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from .outputs import STDOUT, write_text


def public(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result without its private keys (``_roofline``): what goes into JSON."""
    return {k: v for k, v in result.items() if not k.startswith("_")}


CSV_COLUMNS = (
    "task", "path", "status", "error_kind", "error", "flops", "simt_flops", "total_flops",
    "flops_flopcounter", "bytes", "input_bytes",
    "param_bytes", "output_bytes", "dtype", "compute_dtype", "arithmetic_intensity", "gpu", "regime",
    "t_min_ms", "bound", "compute_unit", "limiter", "t_compute_ms", "t_simt_ms", "t_memory_ms",
    "datasheet_t_min_ms", "datasheet_bound", "datasheet_compute_tflops", "datasheet_bandwidth_tbps",
    "derived_t_min_ms", "derived_bound", "measured_t_min_ms", "measured_bound", "count_seconds",
)


def csv_row(result: Mapping[str, Any]) -> dict[str, Any]:
    row = {k: result.get(k) for k in CSV_COLUMNS if k in result}
    # the primary roof's unit (after any fallback), limiter and times
    primary = (result.get("roofs") or {}).get(result.get("primary_roof") or "") or {}
    for key in ("compute_unit", "limiter", "t_compute_ms", "t_simt_ms", "t_memory_ms"):
        row[key] = primary.get(key, row.get(key))
    for roof_name, roof in (result.get("roofs") or {}).items():
        if roof:
            for key in ("t_min_ms", "bound", "compute_tflops", "bandwidth_tbps"):
                col = f"{roof_name}_{key}"
                if col in CSV_COLUMNS:
                    row[col] = roof.get(key)
    return {k: ("" if row.get(k) is None else row[k]) for k in CSV_COLUMNS}


def write_atomic(path: Path, text: str) -> None:
    """Write one output file by the rules of :mod:`.outputs` (atomic, mode kept, regular files only)."""
    write_text(path, text)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """Strict JSON: NaN and infinities become null (Python would write tokens no other parser
    reads); anything else JSON has no type for (a torch dtype) becomes its string."""
    return json.dumps(_finite(obj), allow_nan=False, default=str, **kwargs)


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    failed = [r for r in results if r.get("status") != "ok"]
    return {
        "total": len(results),
        "ok": len(results) - len(failed),
        "failed": len(failed),
        "failures": [{"task": r["task"], "path": r["path"], "error_kind": r.get("error_kind"),
                      "error": r.get("error")} for r in failed],
    }


def _list_item(text: str) -> str:
    """A value's ``dumps(..., indent=1)`` text as it reads as an item of the document's ``tasks``
    list (two levels in: every line indented two more spaces). JSON text holds no raw newline
    inside a string, so each line is one line of structure."""
    return "\n".join("  " + line for line in text.split("\n"))


def _with_tasks(head: str, items: Sequence[str]) -> str:
    """``head`` (an object's ``dumps(..., indent=1)``, ``{...}``) with a last key ``tasks`` holding
    ``items``: the text ``dumps`` gives the object with that key added, byte for byte."""
    body = head[:-2]  # "\n}" off
    if not items:
        return body + ',\n "tasks": []\n}'
    return body + ',\n "tasks": [\n' + ",\n".join(items) + "\n ]\n}"


class ResultsWriter:
    """Rewrites the JSON and/or CSV file after every result, atomically.

    The JSON file is one object: ``{"gpu", "regime", "dtype", "complete", "summary", "tasks": [...]}``;
    ``complete`` turns true only when the batch finished, so a file left by an interrupted batch
    says so. The CSV file has one row per task (:data:`CSV_COLUMNS`).

    Each result is encoded once, when it is added, and each rewrite joins the encoded parts: the
    document grows with the batch (600 KB for KernelBench L1-L3's counts), and encoding all of it
    after every result made the rewrites quadratic in the number of tasks (10 s of a 2-core count
    of the 250 tasks, 2026-12-02). The final file (``complete``) is encoded afresh from the results,
    so it holds them as they are at the end.
    """

    def __init__(self, json_path: str | os.PathLike | None = None, csv_path: str | os.PathLike | None = None,
                 meta: Mapping[str, Any] | None = None) -> None:
        self.json_path = Path(json_path) if json_path else None
        self.csv_path = Path(csv_path) if csv_path else None
        self.meta = dict(meta or {})
        self.results: list[dict[str, Any]] = []
        self._json_parts: list[str] = []  # each result's JSON list item, in the order of ``results``
        self._csv_parts: list[str] = []  # each result's CSV rows
        self._csv_header_out = False

    @property
    def csv_to_stdout(self) -> bool:
        return self.csv_path is not None and str(self.csv_path) == STDOUT

    def _stream_csv(self, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
        """The rows of one new result on stdout (the header before the first)."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
        if not self._csv_header_out:
            w.writeheader()
            self._csv_header_out = True
        for row in rows:
            w.writerow(row)
        write_text(STDOUT, buf.getvalue())

    # what a subclass changes: the CSV's columns and rows, and the summary
    def csv_columns(self) -> Sequence[str]:
        return CSV_COLUMNS

    def csv_rows(self, result: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [csv_row(result)]

    def summary(self) -> dict[str, Any]:
        return summarize(self.results)

    def _head(self, complete: bool) -> dict[str, Any]:
        return {**self.meta, "complete": complete, "summary": self.summary()}

    def document(self, complete: bool) -> dict[str, Any]:
        return {**self._head(complete), "tasks": [public(r) for r in self.results]}

    def json_text(self, complete: bool) -> str:
        """The JSON file's text (without the final newline), as ``dumps(document, indent=1)``."""
        if complete:
            return dumps(self.document(True), indent=1)
        return _with_tasks(dumps(self._head(False), indent=1), self._json_parts)

    def _rows_text(self, rows: Sequence[Mapping[str, Any]], header: bool = False) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(self.csv_columns()), lineterminator="\n")
        if header:
            w.writeheader()
        for row in rows:
            w.writerow(row)
        return buf.getvalue()

    def csv_text(self, complete: bool) -> str:
        if complete:
            return self._rows_text([row for r in self.results for row in self.csv_rows(r)], header=True)
        return self._rows_text([], header=True) + "".join(self._csv_parts)

    def _insert(self, at: int, result: Mapping[str, Any]) -> None:
        self.results.insert(at, dict(result))
        self._json_parts.insert(at, _list_item(dumps(public(result), indent=1)) if self.json_path else "")
        wants_csv = self.csv_path is not None and not self.csv_to_stdout
        self._csv_parts.insert(at, self._rows_text(self.csv_rows(result)) if wants_csv else "")

    def add(self, result: Mapping[str, Any]) -> None:
        self._insert(len(self.results), result)
        if self.csv_to_stdout:
            self._stream_csv(self.csv_columns(), self.csv_rows(result))
        self.flush(complete=False)

    def flush(self, complete: bool) -> None:
        if self.json_path:
            write_atomic(self.json_path, self.json_text(complete) + "\n")
        if self.csv_path and not self.csv_to_stdout:
            write_atomic(self.csv_path, self.csv_text(complete))


def emit_json(doc: Any, path: str | os.PathLike | None, to_stdout: bool) -> str:
    """A result document as strict JSON: to the (already checked) output file, and on stdout when
    asked; returns the text. What ``check`` and ``fleet`` do with their results."""
    text = dumps(doc, indent=1)
    if path is not None:
        write_atomic(Path(path), text + "\n")
    if to_stdout:
        print(text)
    return text
