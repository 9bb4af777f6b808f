"""The batch files written from each result's parts, encoded once (report/writers.py): every
rewrite must be, byte for byte, what encoding the whole document would give."""
from __future__ import annotations

import csv
import gzip
import io
import json
import math
import random
from pathlib import Path

import pytest

from roofline_ext.report.summary import BatchWriter
from roofline_ext.report.writers import ResultsWriter, dumps

RECORDED = Path(__file__).resolve().parent.parent / "benchmarks/results/levels-time-h200-2026-12-02-runA.json.gz"


def _results() -> list[dict]:
    """Real results: 40 timed KernelBench tasks of the H200 run, plus one with what JSON lacks."""
    doc = json.loads(gzip.decompress(RECORDED.read_bytes()))
    tasks = doc["tasks"][::6][:40]
    odd = dict(tasks[0], task="odd", t_ref_ms=math.nan, notes=["a\nb", "ü"], _private={"x": 1})
    return tasks + [odd]


def _whole_csv(w) -> str:
    buf = io.StringIO()
    out = csv.DictWriter(buf, fieldnames=list(w.csv_columns()), lineterminator="\n")
    out.writeheader()
    for r in w.results:
        for row in w.csv_rows(r):
            out.writerow(row)
    return buf.getvalue()


@pytest.mark.parametrize("timed", [True, False])
def test_every_rewrite_is_the_whole_document_encoded(tmp_path, timed):
    results = _results()
    order = list(range(len(results)))
    random.Random(5).shuffle(order)  # results finish out of order in a batch
    w = BatchWriter(tmp_path / "a.json", tmp_path / "a.csv", meta={"gpu": "H200", "timed": timed})
    assert json.loads(dumps(w.document(False), indent=1))["tasks"] == []
    for n, i in enumerate(order):
        w.add(results[i], i)
        if n % 7 == 0 or n == len(order) - 1:
            assert (tmp_path / "a.json").read_text() == dumps(w.document(False), indent=1) + "\n"
            assert (tmp_path / "a.csv").read_text() == _whole_csv(w)
    w.flush(complete=True)
    text = (tmp_path / "a.json").read_text()
    assert text == dumps(w.document(True), indent=1) + "\n"
    got = json.loads(text)
    assert [t["task"] for t in got["tasks"]] == [r["task"] for r in results] and got["complete"] is True
    assert "_private" not in got["tasks"][-1] and got["tasks"][-1]["t_ref_ms"] is None


def test_the_plain_writer_too(tmp_path):
    w = ResultsWriter(tmp_path / "b.json", tmp_path / "b.csv", meta={"gpu": "H100"})
    w.flush(complete=False)
    assert (tmp_path / "b.json").read_text() == dumps(w.document(False), indent=1) + "\n"
    for r in _results()[:5]:
        w.add(r)
        assert (tmp_path / "b.json").read_text() == dumps(w.document(False), indent=1) + "\n"
        assert (tmp_path / "b.csv").read_text() == _whole_csv(w)
