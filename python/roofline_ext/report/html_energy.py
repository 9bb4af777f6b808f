"""The energy roofline in the HTML report (``report/html.py``): the chart of ``report/energy_chart.py``
inline as SVG, a table of the costs it is drawn from, and the analysed tasks of the same GPU part
that carry an energy floor and a measured energy, each against its floor.

Costs come from two kinds of input:

- a calibration whose ``energy`` section measured costs (``EnergyCosts.from_calibration``: the tool's
  own kernels). A calibration without usable ones (cached before calibration measured energy, a
  quick run, no counter, nothing that counted) gets the one-line reason instead, and the rest of
  its block stands;
- the JSON of ``benchmarks/energy_roofline.py`` (``EnergyCosts.from_dict`` of its ``costs``: per unit
  the lowest any measured kernel reached, the tool's own or a library's).

A task's floor is the one its analysis recorded (``energy.floor``, built at analyze time from the
costs ``--energy-costs`` named), not one recomputed here: the page shows what the result said. Where
those costs are not the chart's, the row says "other costs", since the hollow marker is then a floor
of other costs drawn among these lines.

Every number printed carries ``data-src``/``data-value`` as in the rest of the page; energies are
printed in pJ or mJ with ``data-scale``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import UserError
from ..measure.energy import EnergyMeasurement
from ..model.energy import (BELOW_FLOOR_MESSAGE, COMPUTE_KEYS, LOWER_CLOCKS_NOTE, MEMORY_KEYS, EnergyCosts, EnergyFloor,
                            TaskEnergy, task_energy)
from .energy_chart import cost_label, measured_variants, plot_energy_roofline
from .html_parts import Source, json_pointer, render_svg, same_part, cell, esc, num, num_span, pct, table

__all__ = ["CostsInput", "EnergyPoint", "energy_points", "calibration_energy", "benchmark_energy_section"]

PJ, MJ = 1e12, 1e3  # J printed as pJ (per unit of work), as mJ (per call)


@dataclass(frozen=True)
class CostsInput:
    """Energy costs read from one document, and where each of their figures is in its file:
    ``docs`` the JSON object of each cost (``j_per_unit``, ``uncertainty``, ``j_total_per_unit``
    in it) and ``pointers`` its JSON pointer; ``idle`` the idle power's pointer and value."""

    costs: EnergyCosts
    src: str
    docs: Mapping[str, Mapping[str, Any]]
    pointers: Mapping[str, str]
    idle: tuple[str, Any] | None
    gpu: str | None
    subtitle: str


@dataclass(frozen=True)
class EnergyPoint:
    """One measured variant of an analysed task against its recorded floor: the typed figure the
    chart draws, where its numbers are (``measured``: the energy object, ``floor``: ``energy.floor``)
    and whether that floor was built on the chart's costs."""

    task: TaskEnergy
    src: str
    measured: str
    measured_doc: Mapping[str, Any]
    floor: str
    floor_doc: Mapping[str, Any]
    gpu: str
    on_these_costs: bool


def _calibration_costs(src: Source, base: str, cal: Mapping[str, Any]) -> CostsInput:
    """The costs of a calibration's energy section; ``UserError`` (the reason) when it has none.
    Each cost points at the figure it came from: the own kernel's entry, or the library peer's
    (``energy.peers.<key>.<i>``) where that one was lower."""
    costs = EnergyCosts.from_calibration(cal)
    energy = cal.get("energy") or {}
    entries, peers = energy.get("entries") or {}, energy.get("peers") or {}
    docs: dict[str, Any] = {}
    pointers: dict[str, str] = {}
    for k, c in costs.costs.items():
        where: tuple[Any, ...] = ("energy", "entries", k)
        doc = entries.get(k)
        if c.origin == "library":
            i = next((i for i, p in enumerate(peers.get(k) or ()) if p.get("j_per_unit") == c.j_per_unit), None)
            if i is not None:
                where, doc = ("energy", "peers", k, i), peers[k][i]
        docs[k], pointers[k] = doc or {}, base + json_pointer(*where)
    idle = (energy.get("idle") or {}).get("power_w")
    kernels = "own kernels and library peers" if peers else "own kernels"
    return CostsInput(costs=costs, src=src.label, docs=docs, pointers=pointers,
                      idle=(base + "/energy/idle/power_w", idle) if idle is not None else None,
                      gpu=(cal.get("gpu") or {}).get("name"),
                      subtitle=f"the calibration's {kernels}, the lowest of each unit ({cal.get('date') or 'undated'})")


def _benchmark_costs(src: Source, base: str, doc: Mapping[str, Any]) -> CostsInput:
    """The lowest-of-measured costs of an energy benchmark's JSON (checked when the file was read)."""
    section = doc["costs"]
    costs = EnergyCosts.from_dict(section)
    idle = section.get("idle_w")
    return CostsInput(costs=costs, src=src.label, docs={k: section["costs"][k] for k in costs.costs},
                      pointers={k: base + json_pointer("costs", "costs", k) for k in costs.costs},
                      idle=(base + "/costs/idle_w", idle) if idle is not None else None,
                      gpu=doc.get("gpu_name") or (doc.get("gpu") or {}).get("name"),
                      subtitle=f"energy benchmark of {doc.get('date') or 'an unknown date'}, lowest of own and "
                               "library kernels")


def _on_costs(floor: EnergyFloor, costs: EnergyCosts) -> bool:
    """Whether every term of ``floor`` is at the cost ``costs`` has for its key."""
    return all((c := costs.get(t.key)) is not None and math.isclose(c.j_per_unit, t.j_per_unit, rel_tol=1e-9)
               for t in floor.terms)


def _variants(base: str, t: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(chart label, pointer, energy object) of each measured variant (:func:`.energy_chart.measured_variants`)."""
    return [(label, base + ("/energy/reference" if i is None else json_pointer("candidates", i, "energy")), e)
            for label, i, e in measured_variants(t)]


def energy_points(sources: Sequence[Source], costs: CostsInput) -> tuple[list[EnergyPoint], list[str]]:
    """The analysed tasks of ``costs``' GPU part that carry a measured energy and an energy floor, as
    points; and, one line each, the tasks of that part with energy that cannot be placed, and why."""
    points: list[EnergyPoint] = []
    notes: list[str] = []
    seen: set[str] = set()
    for src in sources:
        for base, t in src.analyses:
            gpu = t.get("gpu") or t.get("sku")
            energy = t.get("energy")
            if not isinstance(energy, Mapping) or not costs.gpu or not same_part(gpu, costs.gpu):
                continue
            name = str(t.get("task") or "task")
            measured = [(label, p, e) for label, p, e in _variants(base, t) if isinstance(e, Mapping) and not e.get("error")]
            if not measured:
                errors = [str(e["error"]) for _, _, e in _variants(base, t) if isinstance(e, Mapping) and e.get("error")]
                notes.append(f"{name}: energy not measured ({'; '.join(errors) or 'no figure'})")
                continue
            if not isinstance(energy.get("floor"), Mapping):
                why = energy.get("floor_error") or "analyze --energy was given no --energy-costs"
                notes.append(f"{name}: energy measured, but no energy floor ({why})")
                continue
            try:
                floor = EnergyFloor.from_dict(energy["floor"])
                for label, pointer, e in measured:
                    if label in seen:  # one task in two files: the chart's marks need distinct names
                        label = f"{label} [{src.label}]"
                    seen.add(label)
                    te = task_energy(floor, EnergyMeasurement.from_dict(e), label=label)
                    points.append(EnergyPoint(task=te, src=src.label, measured=pointer, measured_doc=e,
                                              floor=base + "/energy/floor", floor_doc=energy["floor"], gpu=str(gpu),
                                              on_these_costs=_on_costs(floor, costs.costs)))
            except UserError as exc:
                notes.append(f"{name}: {exc}")
    return points, notes


def _cost_rows(ci: CostsInput) -> list[str]:
    rows = []
    for key in (*COMPUTE_KEYS, *MEMORY_KEYS):
        c = ci.costs.get(key)
        if c is None:
            continue
        d, p = ci.docs[key], ci.pointers[key]
        rows.append("".join([cell(cost_label(key)), cell(c.to_dict()["per"]),
                             num(ci.src, p + "/j_per_unit", d.get("j_per_unit"), scale=PJ),
                             num(ci.src, p + "/uncertainty", d.get("uncertainty"), scale=PJ),
                             num(ci.src, p + "/j_total_per_unit", d.get("j_total_per_unit"), scale=PJ),
                             cell(c.source), cell(c.origin)]))
    return rows


def _flag(te: TaskEnergy) -> str:
    if not te.below_floor:
        return "<td>no</td>"
    # Within the uncertainties it may be the counter's granularity; beyond them it is not.
    how = "" if te.below_floor_beyond_uncertainty else " (within the uncertainties)"
    return f'<td><span class="v FAIL" data-below-floor="true">BELOW</span>{esc(how)}</td>'


def _task_rows(points: Sequence[EnergyPoint]) -> list[str]:
    rows = []
    for pt in points:
        e, te = pt.measured_doc, pt.task
        frac = (num(pt.src, pt.measured + "/fraction_of_floor", e["fraction_of_floor"], pct(e["fraction_of_floor"]))
                if "fraction_of_floor" in e else f'<td class="n">{esc(pct(te.fraction))}</td>')
        rows.append("".join([cell(te.label), cell(pt.gpu),
                             num(pt.src, pt.measured + "/j_per_call_above_idle", e.get("j_per_call_above_idle"),
                                 scale=MJ),
                             num(pt.src, pt.measured + "/uncertainty_above_idle_j", e.get("uncertainty_above_idle_j"),
                                 scale=MJ),
                             num(pt.src, pt.floor + "/e_min_j", pt.floor_doc.get("e_min_j"), scale=MJ), frac, _flag(te),
                             cell("these" if pt.on_these_costs else "other costs (the analysis's --energy-costs)")]))
    return rows


def energy_block(sources: Sequence[Source], ci: CostsInput, no_charts: str | None, prefix: Callable[[], str]) -> str:
    """The chart (or why none), the costs table, and the tasks on it with their figures."""
    if not ci.costs.costs:
        return "<p class='muted'>No energy roofline: no energy cost in it counted.</p>"
    points, notes = energy_points(sources, ci)
    gpu = ci.gpu or "GPU not named"
    if no_charts:
        chart = f"<p class='muted'>No chart: {esc(no_charts)}</p>"
    else:
        def draw(path: Path) -> None:
            plot_energy_roofline(ci.costs, path, title=f"{gpu}: energy roofline", subtitle=ci.subtitle,
                                 tasks=[p.task for p in points])

        try:
            chart = f"<figure>{render_svg(draw, prefix())}</figure>"
        except UserError as exc:
            chart = f"<p class='muted'>No chart: {esc(exc)}</p>"
    idle = (f"idle {num_span(ci.src, ci.idle[0], ci.idle[1])} W, paid per second and not included"
            if ci.idle is not None else "idle power not measured")
    out = [chart, f"<p class='muted'>Energy per FLOP (per OP for INT8) or per byte moved, above idle ({idle}); "
                  f"{esc(LOWER_CLOCKS_NOTE)}.</p>",
           table(["unit", "per", "pJ above idle", "± pJ", "pJ whole board", "kernel", "origin"], _cost_rows(ci))]
    if points:
        out.append(table(["task", "GPU", "measured mJ/call above idle", "± mJ", "floor mJ/call", "floor of measured",
                          "below floor", "floor's costs"], _task_rows(points)))
        if any(p.task.below_floor for p in points):
            out.append(f"<p class='muted'>BELOW the energy floor: {esc(BELOW_FLOOR_MESSAGE)}.</p>")
    elif not ci.gpu:
        notes.append("the file names no GPU, so no analysed task is placed on it")
    if notes:
        out.append("<p class='muted'>Not on the chart:</p><ul class='muted'>"
                   + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return "".join(out)


def calibration_energy(sources: Sequence[Source], src: Source, base: str, cal: Mapping[str, Any],
                       no_charts: str | None, prefix: Callable[[], str]) -> str:
    """A calibration's energy roofline, or the one line that says why it has none."""
    try:
        ci = _calibration_costs(src, base, cal)
    except UserError as exc:
        return f"<p class='muted'>No energy roofline: {esc(exc)}</p>"
    return "<h4>Energy roofline</h4>" + energy_block(sources, ci, no_charts, prefix)


def benchmark_energy_section(sources: Sequence[Source], no_charts: str | None, prefix: Callable[[], str]) -> str:
    """One energy roofline per energy benchmark among the inputs ("" when there is none)."""
    out = []
    for src in sources:
        for base, doc in src.energies:
            ci = _benchmark_costs(src, base, doc)
            out.append(f"<h3>{esc(ci.gpu or 'GPU not named')}: energy benchmark "
                       f"<span class='muted'>{esc(doc.get('date'))}</span></h3>")
            out.append(energy_block(sources, ci, no_charts, prefix))
    return "<h2>Energy rooflines</h2>" + "".join(out) if out else ""
