"""``roofline-ext report``: one self-contained HTML file from result JSON files.

What goes in: calibrations (``calibrate --json``, a cached calibration file), checks (``check
--json``), fleets (``fleet --json``), analyses (``analyze --json``, one task or a batch) and energy
costs (the JSON of ``benchmarks/energy_roofline.py``), in any mix. What comes out: one file that
opens without a network (a Content-Security-Policy forbids every fetch), with inline CSS and inline
SVG charts (matplotlib, text kept as text):

- the check verdicts, per GPU: each metric against the calibration and the reference, and the state;
- per calibrated GPU, the roofline chart (measured burst/sustained and datasheet roofs, the analysed
  tasks of that GPU on it) and the calibration table with the clocks and power of each figure, and
  the host-link figures, and the energy roofline where the calibration measured energy
  (``report/html_energy.py``: its costs, and the analysed tasks that carry an energy floor);
- per energy benchmark, the same energy roofline from its lowest-of-measured costs;
- the fleet table: per-SKU medians, spread and stragglers, and every GPU;
- the analysed tasks: FLOPs, bytes, floor and the fraction of it reached.

Every number printed from an input carries ``data-src="FILE#/json/pointer"`` and ``data-value``
(the exact JSON value), so a test can check every figure on the page against the file it came from;
a figure shown in another unit than the file's (pJ for J) says so with ``data-scale``, the factor the
value was multiplied by before printing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .._version import __version__
from ..check.stragglers import CHECK_SHAPE, FLEET_SHAPE
from ..errors import UserError
from ..inputs import read_json
from ..model.energy import EnergyCosts
from ..model.roofs import RoofSet
from ..peaks.record import SHAPE as CALIBRATION_SHAPE, BurstEntry, CalibrationRecord, SustainedEntry
from ..peaks.units import ENTRY_KEYS, peak_label
from ..schema import NUMBER, problem
from ..timestamps import utc_now
from .charts import calibration_roofs, calibration_subtitle, load_matplotlib, plot_roofline, task_points as points_of
from .html_energy import benchmark_energy_section, calibration_energy
# The page's building blocks (html_parts.py); fmt and pct are also what callers import from here.
from .html_parts import (Source, json_pointer, render_svg, same_part, badge, cell, esc, fmt, num, num_span,  # noqa: F401
                         pct, table)
from .outputs import check_outputs, write_text

#: The page may fetch nothing: no network, no other file. Inline style and the one inline script only.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
MAX_BYTES = 2 * 1024 * 1024

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1200px;color:#1d1d1f;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}h4{font-size:14px;margin:14px 0 4px}.muted{color:#666;font-size:12px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px;vertical-align:top}
th{background:#f5f5f7;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.v{font-weight:600;padding:1px 7px;border-radius:4px;white-space:nowrap}
.PASS{background:#d8f5dd;color:#0b5d1e}.WARN{background:#fff1c2;color:#7a5200}.FAIL{background:#ffd9d6;color:#8a1208}
.UNKNOWN{background:#e8e8ed;color:#444}.skipped{background:#f0f0f0;color:#666}
figure{margin:8px 0 16px}figure svg{max-width:100%;height:auto}
"""
_SCRIPT = ("addEventListener('load',function(){document.documentElement.setAttribute('data-load-ms',"
           "String(Math.round(performance.now())))});")


# --- inputs ---------------------------------------------------------------------------------------


def _kind(doc: Any) -> str | None:
    if not isinstance(doc, Mapping):
        return None
    kind = doc.get("kind")
    if kind in ("roofline_ext.calibration", "roofline_ext.check", "roofline_ext.fleet"):
        return kind.split(".")[1]
    # benchmarks/energy_roofline.py (and an --energy-costs file): EnergyCosts.to_dict() under "costs"
    if isinstance(doc.get("costs"), Mapping) and isinstance(doc["costs"].get("costs"), Mapping):
        return "energy"
    if isinstance(doc.get("peaks"), Mapping) and isinstance(doc.get("gpu"), Mapping):
        return "calibration"
    if isinstance(doc.get("tasks"), list):
        return "batch"
    if "roofs" in doc and "flops" in doc:
        return "analysis"
    if isinstance(doc.get("devices"), list) and doc["devices"] and _kind(doc["devices"][0]) == "calibration":
        return "calibrations"
    return None


def _documents(doc: Any, pointer: str = "") -> list[tuple[str, str, Mapping[str, Any]]]:
    """(kind, pointer, document) for every document in ``doc``: itself, or the items of a list or of
    a multi-GPU calibration, or a batch's tasks."""
    if isinstance(doc, list):
        return [x for i, d in enumerate(doc) for x in _documents(d, f"{pointer}/{i}")]
    kind = _kind(doc)
    if kind == "calibrations":
        return [x for i, d in enumerate(doc["devices"]) for x in _documents(d, f"{pointer}/devices/{i}")]
    if kind == "batch":
        return [("analysis", f"{pointer}/tasks/{i}", t) for i, t in enumerate(doc["tasks"])
                if isinstance(t, Mapping) and t.get("status", "ok") == "ok"]
    return [(kind, pointer, doc)] if kind else []


#: An energy figure of an analysis (``energy.reference``, a candidate's ``energy``): measured, or
#: ``{"error": why}``; the keys the energy section opens, the rest read by ``EnergyMeasurement``.
_ENERGY_MEASURED = {"error": str, "j_per_call_above_idle": NUMBER, "uncertainty_above_idle_j": NUMBER,
                    "fraction_of_floor": NUMBER, "below_floor": bool}
_ENERGY_TERM = {"key": str, "count": NUMBER, "j_per_unit": NUMBER, "uncertainty_j": NUMBER, "source": str}
_ENERGY_FLOOR = {"flops": NUMBER, "simt_flops": NUMBER, "nbytes": NUMBER, "e_min_j": NUMBER,
                 "uncertainty_j": NUMBER, "terms": [_ENERGY_TERM], "t_min_s": NUMBER, "idle_w": NUMBER,
                 "e_min_total_j": NUMBER, "compute_unit": str, "simt_unit": str, "memory_rule": str}
_ROOF = {"t_min_ms": NUMBER, "bound": str, "compute_tflops": NUMBER, "bandwidth_tbps": NUMBER,
         "compute_unit": str}
#: What the page opens by key in an analysis (one task of ``analyze --json``).
ANALYSIS_SHAPE = {"task": str, "path": str, "gpu": str, "sku": str, "status": str, "dtype": str,
                  "compute_dtype": str, "flops": NUMBER, "simt_flops": NUMBER, "bytes": NUMBER,
                  "arithmetic_intensity": NUMBER, "t_min_ms": NUMBER, "bound": str, "t_ref_ms": NUMBER,
                  "ref_roofline_frac": NUMBER, "t_new_ms": NUMBER, "primary_roof": str,
                  # named, so that null (a roof not available) is accepted; any other roof must be one
                  "roofs": {"datasheet": _ROOF, "derived": _ROOF, "measured": _ROOF, "*": _ROOF},
                  "energy": {"reference": _ENERGY_MEASURED, "floor": _ENERGY_FLOOR, "floor_error": str},
                  "candidates": [{"candidate": str, "sample": str, "energy": _ENERGY_MEASURED}]}
_ENERGY_COST = {"key": str, "j_per_unit": NUMBER, "uncertainty": NUMBER, "j_total_per_unit": NUMBER,
                "source": str, "origin": str}
#: What the page opens by key in an energy benchmark's JSON; ``EnergyCosts.from_dict`` checks the rest.
ENERGY_SHAPE = {"date": str, "gpu_name": str, "gpu": {"name": str},
                "costs": {"idle_w": NUMBER, "costs": {"*": _ENERGY_COST}, "considered": {"*": [_ENERGY_COST]}}}


def _shape_problem(kind: str, doc: Mapping[str, Any]) -> str | None:
    """Where a document departs from the shape its section reads (None when it does not)."""
    spec = {"calibration": CALIBRATION_SHAPE, "check": CHECK_SHAPE, "fleet": FLEET_SHAPE,
            "analysis": ANALYSIS_SHAPE, "energy": ENERGY_SHAPE}[kind]
    why = problem(doc, spec)
    if why is None and kind == "energy":
        # The costs are what the section draws: one that EnergyCosts refuses (a cost of zero, a
        # missing field) refuses the file here, as a shape problem does, not the page half-drawn.
        try:
            EnergyCosts.from_dict(doc["costs"])
        except UserError as exc:
            return f"/costs: {exc}"
    return why


def load_source(index: int, path: str | os.PathLike) -> Source:
    """One input: read by the bounded reader (a regular file, size and depth bounded, strict JSON,
    numbers bounded), then every document in it checked against the shape its section reads, so a
    wrong one is refused naming the file and the key instead of ending the page in a traceback."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{p}: a folder, not a results file (give the .json files)")
    doc = read_json(p)
    found = _documents(doc)
    if not found:
        raise UserError(f"{p}: not a roofline-ext result (calibrate, check, fleet or analyze --json, or an energy "
                        "benchmark's JSON)")
    groups: dict[str, list] = {"calibration": [], "check": [], "fleet": [], "analysis": [], "energy": []}
    for kind, pointer, d in found:
        why = _shape_problem(kind, d)
        if why is not None:
            raise UserError(f"{p}: {pointer}{why}")
        groups[kind].append((pointer, d))
    return Source(f"{index}:{p.name}", str(p),
                  *(tuple(groups[k]) for k in ("calibration", "check", "fleet", "analysis", "energy")))


# --- sections -------------------------------------------------------------------------------------

def check_section(src: Source) -> str:
    out = []
    for base, doc in src.checks:
        out.append(f"<h3>Check on {esc(doc.get('host'))}, {esc(doc.get('date'))}: {badge(doc.get('verdict'))} "
                   f"<span class='muted'>exit {esc(doc.get('exit_code'))}</span></h3>")
        out.append(f"<p>{esc(doc.get('reason'))}</p>")
        for i, d in enumerate(doc.get("devices") or []):
            out.append(_check_device(src.label, base + json_pointer("devices", i), d))
    return "".join(out)


def _check_device(label: str, base: str, d: Mapping[str, Any]) -> str:
    rows = []
    for key, m in (d.get("metrics") or {}).items():
        comps = {c.get("against"): (j, c) for j, c in enumerate(m.get("comparisons") or [])}
        r = [cell(f"{m.get('label')} ({m.get('unit')})"), num(label, base + json_pointer("metrics", key, "value"), m.get("value"))]
        for against in ("calibration", "reference"):
            if against in comps:
                j, c = comps[against]
                r.append(num(label, base + json_pointer("metrics", key, "comparisons", j, "expected"), c.get("expected")))
                r.append(num(label, base + json_pointer("metrics", key, "comparisons", j, "ratio"), c.get("ratio"),
                             pct(c.get("ratio"))))
            else:
                r += ['<td class="n">-</td>'] * 2
        r += [f"<td>{badge(m.get('verdict'))}</td>", cell(m.get("reason"))]
        rows.append("".join(r))
    for key, why in (d.get("skipped") or {}).items():
        rows.append(cell(key) + '<td class="n">-</td>' * 5 + f"<td>{badge('skipped')}</td>" + cell(why))
    state = [cell(k) + f"<td>{badge(s.get('verdict'))}</td>" + cell(s.get("reason"))
             for k, s in (d.get("state") or {}).items()]
    return (f"<h3>GPU {esc(d.get('index'))}: {esc(d.get('name'))} <span class='muted'>{esc(d.get('uuid'))}</span> "
            f"{badge(d.get('verdict'))}</h3><p>{esc(d.get('reason'))}</p>"
            + table(["metric", "measured", "calibration", "of calibration", "reference", "of reference", "verdict",
                     "reason"], rows)
            + table(["state", "verdict", "reason"], state))


_CAL_HEADERS = ["unit", "burst", "CV", "% datasheet", "% clock-derived", "SM clock MHz", "mem clock MHz", "power W",
                "sustained", "sust. SM clock MHz", "sust. power W", "path"]


def _cal_rows(label: str, base: str, cal: Mapping[str, Any]) -> list[str]:
    record = CalibrationRecord.read(cal)
    rows = []
    for key in ENTRY_KEYS:
        found_b, found_s = record.burst_entry(key), record.sustained_entry(key)
        # An entry stored as {} is no figure: a unit with neither gets no row.
        b = found_b if found_b is not None and found_b.doc else BurstEntry(key)
        s = found_s if found_s is not None and found_s.doc else SustainedEntry(key)
        if not b.doc and not s.doc:
            continue
        bp, sp = base + json_pointer("burst", "entries", key), base + json_pointer("sustained", "entries", key)
        rows.append("".join([
            cell(peak_label(key)), num(label, bp + "/value", b.value),
            num(label, bp + "/cv", b.cv, pct(b.cv)),
            num(label, bp + "/fraction_of_datasheet", b.fraction_of_datasheet, pct(b.fraction_of_datasheet)),
            num(label, bp + "/fraction_of_clock_derived", b.fraction_of_clock_derived,
                pct(b.fraction_of_clock_derived)),
            num(label, bp + "/sm_clock_mhz", b.sm_clock_mhz), num(label, bp + "/mem_clock_mhz", b.mem_clock_mhz),
            num(label, bp + "/power_w", b.power_w), num(label, sp + "/value", s.value),
            num(label, sp + "/sm_clock_mhz", s.sm_clock_mhz), num(label, sp + "/power_w", s.power_w),
            cell(b.path or s.path)]))
    link = record.hostlink
    for key in ("h2d", "d2h"):
        e = link.direction(key) if link is not None else None
        if e is not None and link is not None:
            p = base + json_pointer("hostlink", key)
            rows.append("".join([cell(f"{e.label or key} (GB/s)"), num(label, p + "/value", e.value),
                                 num(label, p + "/cv", e.cv, pct(e.cv)), '<td class="n">-</td>',
                                 num(label, p + "/fraction_of_theoretical", e.fraction_of_theoretical,
                                     pct(e.fraction_of_theoretical)),
                                 '<td class="n">-</td>' * 6,
                                 cell(link.link.get("formula") or "pinned copies")]))
    return rows


def calibration_block(src: Source, base: str, cal: Mapping[str, Any], chart: str, energy: str = "") -> str:
    gpu = cal.get("gpu") or {}
    facts = [("GPU", gpu.get("name")), ("UUID", gpu.get("uuid")), ("mode", cal.get("mode")), ("date", cal.get("date")),
             ("driver", cal.get("driver_version")), ("CUDA", cal.get("cuda_runtime_version"))]
    nums = [("max SM clock MHz", "max_sm_clock_mhz"), ("max memory clock MHz", "max_mem_clock_mhz"),
            ("power limit W", "power_limit_w"), ("SMs", "sm_count")]
    head = "".join(f"<tr><th>{esc(k)}</th>{cell(v)}</tr>" for k, v in facts)
    head += "".join(f"<tr><th>{esc(k)}</th>{num(src.label, base + json_pointer('gpu', f), gpu.get(f))}</tr>" for k, f in nums)
    note = f"<p class='muted'>NOTE: {esc(cal['fixture'])}</p>" if cal.get("fixture") else ""
    warn = "".join(f"<li>{esc(w)}</li>" for w in cal.get("warnings") or [])
    return (f"<h3>{esc(gpu.get('name'))} <span class='muted'>{esc(gpu.get('uuid'))}</span></h3>{note}"
            f"<table>{head}</table>{chart}"
            + table(_CAL_HEADERS, _cal_rows(src.label, base, cal)) + energy
            + (f"<p>Warnings:</p><ul>{warn}</ul>" if warn else ""))


def fleet_section(src: Source) -> str:
    out = []
    for base, doc in src.fleets:
        summary = doc.get("summary") or {}
        sp = base + "/summary"
        out.append(f"<h3>Fleet from {esc(doc.get('source'))}, {esc(doc.get('date'))}: {badge(doc.get('verdict'))}</h3>"
                   f"<p>{esc(summary.get('reason'))}</p>")
        rows = []
        for sku, s in (summary.get("skus") or {}).items():
            nslow: dict[str, int] = {}
            for st in s.get("stragglers") or []:
                nslow[str(st.get("metric"))] = nslow.get(str(st.get("metric")), 0) + 1
            for key, m in (s.get("metrics") or {}).items():
                p = sp + json_pointer("skus", sku, "metrics", key)
                rows.append("".join([cell(sku), cell(f"{m.get('label')} ({m.get('unit')})"), num(src.label, p + "/n", m.get("n")),
                                     num(src.label, p + "/median", m.get("median")), num(src.label, p + "/min", m.get("min")),
                                     num(src.label, p + "/max", m.get("max")),
                                     num(src.label, p + "/spread", m.get("spread"), pct(m.get("spread"))),
                                     cell(nslow.get(key, 0))]))
        out.append(table(["SKU", "metric", "GPUs", "median", "min", "max", "spread", "stragglers"], rows))
        out.append(_fleet_gpus(src.label, sp, summary))
    return "".join(out)


def _fleet_gpus(label: str, sp: str, summary: Mapping[str, Any]) -> str:
    slow: dict[tuple, list[str]] = {}
    for s in (summary.get("skus") or {}).values():
        for st in s.get("stragglers") or []:
            slow.setdefault((st.get("uuid"), st.get("host"), st.get("index")), []).append(
                f"{st.get('metric')} {pct(st.get('fraction_of_median'))} of median")
    rows = []
    for i, g in enumerate(summary.get("gpus") or []):
        vals = g.get("values") or {}
        p = sp + json_pointer("gpus", i, "values")
        rows.append("".join([cell(g.get("host")), cell("-" if g.get("index") is None else g["index"]),
                             cell(g.get("sku") or g.get("name") or "no GPU"), f"<td>{badge(g.get('verdict'))}</td>"]
                            + [num(label, p + json_pointer(m), vals.get(m)) for m in ("hbm_read", "hbm_copy", "bf16", "h2d")]
                            + [cell(", ".join(slow.get((g.get("uuid"), g.get("host"), g.get("index")), []))),
                               cell(g.get("reason"))]))
    frac = summary.get("straggler_fraction")
    return (f"<p class='muted'>A straggler is below {pct(frac)} of its SKU's median of a metric.</p>"
            + table(["host", "GPU", "SKU", "verdict", "HBM read TB/s", "HBM copy TB/s", "BF16 TFLOP/s", "h2d GB/s",
                     "straggler", "reason"], rows))


def tasks_section(sources: Sequence[Source]) -> str:
    rows = []
    for src in sources:
        for base, t in src.analyses:
            rows.append("".join([cell(t.get("task")), cell(t.get("gpu")), cell(str(t.get("compute_dtype") or t.get("dtype") or "")),
                                 num(src.label, base + "/flops", t.get("flops")), num(src.label, base + "/bytes", t.get("bytes")),
                                 num(src.label, base + "/arithmetic_intensity", t.get("arithmetic_intensity")),
                                 num(src.label, base + "/t_min_ms", t.get("t_min_ms")), cell(t.get("bound")),
                                 num(src.label, base + "/t_ref_ms", t.get("t_ref_ms")),
                                 num(src.label, base + "/ref_roofline_frac", t.get("ref_roofline_frac"),
                                     pct(t.get("ref_roofline_frac"))),
                                 num(src.label, base + "/t_new_ms", t.get("t_new_ms"))]))
    if not rows:
        return ""
    return ("<h2>Tasks</h2>" + table(["task", "GPU", "dtype", "FLOPs", "bytes", "FLOP/byte", "floor ms", "bound",
                                      "PyTorch ms", "of floor", "yours ms"], rows))


# --- charts ---------------------------------------------------------------------------------------

def _task_points(analyses: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in analyses:
        for p in points_of(t):
            p["label"] = f"{t.get('task')}" + ("" if p.get("kind") == "reference" else " (yours)")
            out.append(p)
    return out


def calibration_chart(cal: Mapping[str, Any], analyses: Sequence[Mapping[str, Any]], prefix: str) -> str:
    """The calibration's hierarchical roofline (HBM with its read:write envelope, L2 plateaus,
    shared memory, every compute unit) with the analysed tasks of the same part on it."""
    gpu = cal.get("gpu") or {}
    tasks = _task_points(a for a in analyses if same_part(a.get("gpu") or a.get("sku"), gpu.get("name")))
    roofs = calibration_roofs(cal)

    def draw(path: Path) -> None:
        plot_roofline(path, title=f"{gpu.get('name', 'GPU')}: measured vs datasheet roofline",
                      subtitle=calibration_subtitle(cal), tasks=tasks, **roofs)

    return f"<figure>{render_svg(draw, prefix)}</figure>"


def datasheet_chart(gpu_name: str, analyses: Sequence[Mapping[str, Any]], prefix: str,
                    roofs: RoofSet | None = None) -> str:
    """The tasks of a GPU nobody calibrated, on its datasheet roofs: those of ``roofs`` (the
    RoofSet a run resolved) when the caller has it."""
    if roofs is None:
        # The report reads analyses back from JSON files, and a result's RoofSet does not travel in
        # its JSON: the datasheet roof is resolved again, from the part name the analyses record.
        roofs = RoofSet.for_name(gpu_name)
    datasheet = roofs.datasheet.flat() if roofs.datasheet is not None else None
    if datasheet is None:
        return f"<p class='muted'>No datasheet roofs for {esc(gpu_name)}: no chart.</p>"

    def draw(path: Path) -> None:
        plot_roofline(path, title=f"Tasks on {gpu_name} (datasheet roofs)",
                      subtitle="no calibration of this GPU among the inputs: datasheet roofs only",
                      datasheet=datasheet, tasks=_task_points(analyses))

    return f"<figure>{render_svg(draw, prefix)}</figure>"


def _charts_available() -> str | None:
    try:
        load_matplotlib()
    except UserError as exc:
        return str(exc)
    return None


# --- the page -------------------------------------------------------------------------------------

@dataclass
class _Page:
    sources: Sequence[Source]
    parts: list[str] = field(default_factory=list)
    charts: int = 0

    def prefix(self) -> str:
        self.charts += 1
        return f"c{self.charts}-"


def _roofline_sections(page: _Page, no_charts: str | None) -> None:
    analyses = [t for s in page.sources for _, t in s.analyses]
    cals = [(s, base, c) for s in page.sources for base, c in s.calibrations]
    if cals:
        page.parts.append("<h2>Calibrations and rooflines</h2>")
    for src, base, cal in cals:
        chart = (f"<p class='muted'>No chart: {esc(no_charts)}</p>" if no_charts
                 else calibration_chart(cal, analyses, page.prefix()))
        energy = calibration_energy(page.sources, src, base, cal, no_charts, page.prefix)
        page.parts.append(calibration_block(src, base, cal, chart, energy))
    calibrated = [(c.get("gpu") or {}).get("name") for _, _, c in cals]
    orphans: dict[str, list] = {}
    for t in analyses:
        name = t.get("gpu") or t.get("sku")
        if name and not any(same_part(name, c) for c in calibrated):
            orphans.setdefault(str(name), []).append(t)
    for name, ts in orphans.items():
        page.parts.append(f"<h3>{esc(name)} (not calibrated)</h3>")
        page.parts.append(f"<p class='muted'>No chart: {esc(no_charts)}</p>" if no_charts
                          else datasheet_chart(name, ts, page.prefix()))


def render(sources: Sequence[Source], *, title: str = "roofline-ext report") -> str:
    """The whole page as one string."""
    page = _Page(sources)
    checks = "".join(check_section(s) for s in sources)
    if checks:
        page.parts.append("<h2>Check verdicts</h2>" + checks)
    no_charts = _charts_available()
    _roofline_sections(page, no_charts)
    page.parts.append(benchmark_energy_section(page.sources, no_charts, page.prefix))
    fleets = "".join(fleet_section(s) for s in sources)
    if fleets:
        page.parts.append("<h2>Fleet</h2>" + fleets)
    page.parts.append(tasks_section(sources))
    now = utc_now()
    inputs = "".join(f"<li><code>{esc(s.label)}</code>: {esc(s.path)}</li>" for s in sources)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{_CSS}</style><script>{_SCRIPT}</script></head><body>"
            f"<h1>{esc(title)}</h1><p class='muted'>made by roofline-ext {esc(__version__)} on {esc(now)} from:</p>"
            f"<ul class='muted'>{inputs}</ul>" + "".join(page.parts) + "</body></html>\n")


def build_report(paths: Sequence[str | os.PathLike], output: str | os.PathLike) -> tuple[Path, int]:
    """Read ``paths``, write the page to ``output`` (a regular file); returns (path, bytes)."""
    if not paths:
        raise UserError("report needs at least one results file (calibrate, check, fleet or analyze --json, or an "
                        "energy benchmark's JSON)")
    out = check_outputs({"-o": output}, reads=paths)["-o"]
    sources = [load_source(i, p) for i, p in enumerate(paths)]
    text = render(sources)
    write_text(out, text)
    return out, len(text.encode("utf-8"))
