"""A fleet's check results side by side: per-SKU medians, spread and stragglers (docs/fleet.md).

Pure functions over check JSON documents (``roofline-ext check --json``), however they were made: a
Dask run (runner/fleet.py), a Slurm job array, files copied by hand. A GPU is one UUID: when several
results name the same card the newest counts, so re-running a node does not weight it twice.

A *straggler* is a GPU whose figure of some metric is below ``straggler_fraction`` (default 0.95) of
its SKU's median for that metric: slower than its siblings even if within its own tolerance. A fleet
takes the worst verdict of its GPUs, a straggler counting at least as a WARN.

Result files are inputs like any other: read by the bounded reader (regular files only, size and
depth bounded, strict JSON) and checked against :data:`CHECK_SHAPE` before a key is opened. A file
that holds no check result is listed as ignored, with why; a check result with a wrong field (a
verdict that is none of PASS/WARN/FAIL/UNKNOWN, ``"devices": 3``) refuses the run, naming the file
and the key: a broken result must not drop a failing GPU from a health check without a word.
"""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import UserError
from ..inputs import read_json
from ..peaks.reference import CHECK_METRICS, METRIC_LABELS
from ..schema import NUMBER, OneOf, check
from .result import CHECK_KIND, CHECK_SCHEMA_VERSION
from .outcome import EXIT_CODES, Verdict, worst

DEFAULT_STRAGGLER_FRACTION = 0.95
FLEET_KIND = "roofline_ext.fleet"
FLEET_SCHEMA_VERSION = 1

VERDICT = OneOf(*(v.value for v in Verdict))
_COMPARISON = {"against": str, "expected": NUMBER, "ratio": NUMBER, "tolerance": NUMBER, "verdict": VERDICT,
               "reason": str}
_METRIC = {"key": str, "label": str, "unit": str, "value": NUMBER, "cv": NUMBER, "verdict": VERDICT, "reason": str,
           "comparisons": [_COMPARISON]}
#: What the fleet, the tables and the report open by key in a check document (``check --json``).
CHECK_SHAPE = {
    "schema_version": int, "kind": str, "host": str, "date": str, "verdict": VERDICT, "reason": str,
    "exit_code": int, "availability": {}, "wall_s": NUMBER,
    "devices": [{"index": int, "name": str, "uuid": str, "sku": str, "verdict": VERDICT, "reason": str,
                 "metrics": {"*": _METRIC}, "state": {"*": {"verdict": VERDICT, "reason": str}},
                 "skipped": {"*": str}, "calibration": {"date": str, "mode": str},
                 "reference": {"sku": str, "kind": str}, "tolerances": {}, "wall_s": NUMBER}],
}
_STRAGGLER = {"uuid": str, "host": str, "index": int, "metric": str, "value": NUMBER, "fraction_of_median": NUMBER}
#: The same for a fleet document (``fleet --json``); its results hold check documents.
FLEET_SHAPE = {
    "schema_version": int, "kind": str, "source": str, "date": str, "verdict": VERDICT, "exit_code": int,
    "wall_s": NUMBER, "critical_path_s": NUMBER, "overhead_s": NUMBER, "workers": int,
    "summary": {"verdict": VERDICT, "reason": str, "straggler_fraction": NUMBER,
                "gpus": [{"host": str, "index": int, "uuid": str, "name": str, "sku": str, "verdict": VERDICT,
                          "reason": str, "values": {"*": NUMBER}}],
                "skus": {"*": {"metrics": {"*": {"label": str, "unit": str, "n": int, "median": NUMBER,
                                                  "min": NUMBER, "max": NUMBER, "spread": NUMBER}},
                               "stragglers": [_STRAGGLER]}},
                "ignored": [str]},
    "results": [{"worker": str, "host": str, "check": CHECK_SHAPE}],
}


@dataclass(frozen=True)
class GpuRecord:
    """One GPU's check (or one host that had none to check), flattened for the fleet table."""

    host: str
    index: int | None
    uuid: str | None
    name: str | None
    sku: str | None
    verdict: Verdict
    reason: str
    values: Mapping[str, float]
    date: str
    source: str  # the file or Dask worker the result came from

    @property
    def group(self) -> str:
        return self.sku or self.name or "no GPU"

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "index": self.index, "uuid": self.uuid, "name": self.name, "sku": self.sku,
                "verdict": self.verdict.value, "reason": self.reason, "values": dict(self.values),
                "date": self.date, "source": self.source}


@dataclass(frozen=True)
class MetricSpread:
    metric: str
    n: int
    median: float
    min: float
    max: float
    spread: float  # (max - min) / median

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "label": METRIC_LABELS.get(self.metric, self.metric),
                "unit": CHECK_METRICS.get(self.metric), "n": self.n, "median": self.median, "min": self.min,
                "max": self.max, "spread": self.spread}


@dataclass(frozen=True)
class Straggler:
    uuid: str | None
    host: str
    index: int | None
    metric: str
    value: float
    fraction_of_median: float

    def to_dict(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "host": self.host, "index": self.index, "metric": self.metric,
                "value": self.value, "fraction_of_median": self.fraction_of_median}


@dataclass(frozen=True)
class SkuSummary:
    sku: str
    gpus: int
    metrics: tuple[MetricSpread, ...]
    stragglers: tuple[Straggler, ...]
    verdicts: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"sku": self.sku, "gpus": self.gpus, "metrics": {m.metric: m.to_dict() for m in self.metrics},
                "stragglers": [s.to_dict() for s in self.stragglers], "verdicts": dict(self.verdicts)}


@dataclass(frozen=True)
class FleetSummary:
    verdict: Verdict
    reason: str
    straggler_fraction: float
    gpus: tuple[GpuRecord, ...]
    skus: tuple[SkuSummary, ...]
    duplicates: int = 0
    ignored: tuple[str, ...] = field(default_factory=tuple)  # files that held no check result, and why

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "reason": self.reason, "exit_code": self.exit_code,
                "straggler_fraction": self.straggler_fraction, "gpus": [g.to_dict() for g in self.gpus],
                "skus": {s.sku: s.to_dict() for s in self.skus}, "duplicates": self.duplicates,
                "ignored": list(self.ignored)}


# --- from check documents to records ---------------------------------------------------------------

def _values(device: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key, m in (device.get("metrics") or {}).items():
        v = m.get("value") if isinstance(m, Mapping) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            out[key] = float(v)
    return out


def records_of(doc: Mapping[str, Any], source: str) -> list[GpuRecord]:
    """The GPU records of one check document; a host with no GPU to check is one record too."""
    host, date = str(doc.get("host") or "?"), str(doc.get("date") or "")
    devices = doc.get("devices") or []
    if not devices:
        return [GpuRecord(host, None, None, None, None, Verdict(doc.get("verdict") or "UNKNOWN"),
                          str(doc.get("reason") or ""), {}, date, source)]
    # A verdict left out (or null) is UNKNOWN: the shape check refused any other value already.
    return [GpuRecord(host, d.get("index"), d.get("uuid"), d.get("name"), d.get("sku"),
                      Verdict(d.get("verdict") or "UNKNOWN"), str(d.get("reason") or ""), _values(d), date, source)
            for d in devices if isinstance(d, Mapping)]


def check_documents(doc: Any, source: str) -> list[tuple[Mapping[str, Any], str]]:
    """The check documents inside ``doc``: itself, a list of them, or a fleet document's results.
    A check or fleet document of the wrong shape is a ``UserError`` naming ``source`` and the key."""
    if isinstance(doc, list):
        return [x for i, d in enumerate(doc) for x in check_documents(d, f"{source}[{i}]")]
    if not isinstance(doc, Mapping):
        return []
    if doc.get("kind") == FLEET_KIND:
        check(doc, FLEET_SHAPE, source)
        return [(r["check"], str(r.get("worker") or source)) for r in doc.get("results") or []
                if isinstance(r, Mapping) and isinstance(r.get("check"), Mapping)
                and r["check"].get("kind") == CHECK_KIND]
    if doc.get("kind") == CHECK_KIND and doc.get("schema_version") == CHECK_SCHEMA_VERSION:
        check(doc, CHECK_SHAPE, source)
        return [(doc, source)]
    return []


def load_dir(directory: str | os.PathLike) -> tuple[list[tuple[Mapping[str, Any], str]], list[str]]:
    """Every check document in the ``*.json`` files under ``directory``, and the files ignored (why)."""
    root = Path(directory)
    if not root.is_dir():
        raise UserError(f"--from {directory}: not a folder")
    docs, ignored = [], []
    for path in sorted(root.rglob("*.json")):
        try:
            # Bounded: a FIFO named *.json is not opened, a huge or deeply nested file not parsed.
            doc = read_json(path)
        except UserError as exc:
            ignored.append(f"{exc}")
            continue
        found = check_documents(doc, str(path))
        if found:
            docs.extend(found)
        else:
            ignored.append(f"{path}: no roofline-ext check result in it")
    if not docs:
        raise UserError(f"--from {directory}: no check results (roofline-ext check --json) in its .json files"
                        + (f"; {len(ignored)} ignored" if ignored else ""))
    return docs, ignored


def newest_per_gpu(records: Iterable[GpuRecord]) -> tuple[list[GpuRecord], int]:
    """One record per UUID (the newest); hosts without a GPU all kept. Returns (records, dropped)."""
    by_uuid: dict[str, GpuRecord] = {}
    keep: list[GpuRecord] = []
    dropped = 0
    for r in records:
        if not r.uuid:
            keep.append(r)
        elif r.uuid in by_uuid:
            dropped += 1
            if r.date > by_uuid[r.uuid].date:
                by_uuid[r.uuid] = r
        else:
            by_uuid[r.uuid] = r
    return keep + list(by_uuid.values()), dropped


# --- the summary -------------------------------------------------------------------------------------

def spread_of(metric: str, values: Sequence[float]) -> MetricSpread:
    med = statistics.median(values)
    return MetricSpread(metric, len(values), med, min(values), max(values), (max(values) - min(values)) / med)


def sku_summary(sku: str, gpus: Sequence[GpuRecord], fraction: float) -> SkuSummary:
    metrics, stragglers = [], []
    for metric in CHECK_METRICS:
        have = [g for g in gpus if metric in g.values]
        if not have:
            continue
        s = spread_of(metric, [g.values[metric] for g in have])
        metrics.append(s)
        stragglers += [Straggler(g.uuid, g.host, g.index, metric, g.values[metric], g.values[metric] / s.median)
                       for g in have if g.values[metric] < fraction * s.median]
    counts: dict[str, int] = {}
    for g in gpus:
        counts[g.verdict.value] = counts.get(g.verdict.value, 0) + 1
    return SkuSummary(sku, len(gpus), tuple(metrics), tuple(stragglers), counts)


def _fleet_verdict(gpus: Sequence[GpuRecord], skus: Sequence[SkuSummary]) -> tuple[Verdict, str]:
    slow = {(s.uuid, s.host, s.index) for sku in skus for s in sku.stragglers}
    verdicts = [max(g.verdict, Verdict.WARN, key=lambda v: v.severity) if (g.uuid, g.host, g.index) in slow
                else g.verdict for g in gpus]
    verdict = worst(verdicts)
    if verdict is Verdict.PASS:
        return verdict, f"all {len(gpus)} GPU(s) passed and none is a straggler"
    bad = [(f"{g.host} GPU {g.index}" if g.uuid else f"{g.source} (no GPU)") + f": {v.value}"
           for g, v in zip(gpus, verdicts) if v is verdict]
    lead = f"{len(bad)} of {len(gpus)} GPU(s) {verdict.value}"
    if slow and verdict is Verdict.WARN:
        lead += f" ({len(slow)} straggler(s))"
    return verdict, lead + ": " + ", ".join(bad[:8]) + (" ..." if len(bad) > 8 else "")


def summarize_fleet(docs: Iterable[tuple[Mapping[str, Any], str]], *,
                    straggler_fraction: float = DEFAULT_STRAGGLER_FRACTION,
                    ignored: Sequence[str] = ()) -> FleetSummary:
    """Per-SKU medians, spread and stragglers of check documents given as (document, source) pairs."""
    if not 0 < straggler_fraction <= 1:
        raise UserError(f"the straggler fraction must be in (0, 1], not {straggler_fraction}")
    records = [r for doc, src in docs for r in records_of(doc, src)]
    gpus, dropped = newest_per_gpu(records)
    gpus.sort(key=lambda g: (g.group, g.host, g.index if g.index is not None else -1))
    groups: dict[str, list[GpuRecord]] = {}
    for g in gpus:
        if g.uuid:
            groups.setdefault(g.group, []).append(g)
    skus = tuple(sku_summary(k, v, straggler_fraction) for k, v in sorted(groups.items()))
    verdict, reason = _fleet_verdict(gpus, skus)
    return FleetSummary(verdict, reason, straggler_fraction, tuple(gpus), skus, dropped, tuple(ignored))


@dataclass(frozen=True)
class FleetReport:
    """What ``roofline-ext fleet`` prints as JSON: where the results came from, each one, the summary."""

    source: str  # "dask://ADDRESS" or the --from folder
    date: str
    summary: FleetSummary
    results: tuple[Mapping[str, Any], ...]  # {"worker", "host", "device", "wall_s", "check": {...}}
    wall_s: float | None = None
    workers: int | None = None

    @property
    def exit_code(self) -> int:
        return self.summary.exit_code

    @property
    def critical_path_s(self) -> float | None:
        """The longest chain of checks: the checks of one physical GPU (same UUID) take turns, so
        they add up; different GPUs run side by side. What no scheduler could make shorter."""
        chains: dict[Any, float] = {}
        for i, r in enumerate(self.results):
            if r.get("wall_s") is None:
                continue
            key = r.get("uuid") or ("task", i)
            chains[key] = chains.get(key, 0.0) + float(r["wall_s"])
        return round(max(chains.values()), 3) if chains else None

    @property
    def overhead_s(self) -> float | None:
        """What the fleet added beyond its critical path: connecting, the inventory, scheduling, gathering."""
        cp = self.critical_path_s
        return None if self.wall_s is None or cp is None else round(self.wall_s - cp, 3)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": FLEET_SCHEMA_VERSION, "kind": FLEET_KIND, "source": self.source, "date": self.date,
                "wall_s": self.wall_s, "critical_path_s": self.critical_path_s, "overhead_s": self.overhead_s,
                "workers": self.workers, "verdict": self.summary.verdict.value,
                "exit_code": self.exit_code, "summary": self.summary.to_dict(), "results": [dict(r) for r in self.results]}
