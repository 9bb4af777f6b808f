"""Calibration: the measured peaks of one GPU, burst and sustained, and their cache.

A calibration is one JSON-able dict (``calibrate()`` makes it, ``save()`` caches it) holding

- who: the GPU's name, UUID, bus id, compute capability, SMs, clocks, power limit, MIG and ECC
  state; the driver, the CUDA versions, the package version, the date and ``schema_version``;
- ``burst``: HBM bandwidth, the L2 plateau and every precision, each as an *entry* (value, best,
  CV, path, the telemetry it was reached at, the datasheet and clock-derived figures and the
  fractions of both), measured on a card at boost clocks; full calibrations add ``hbm_mix`` (the
  read:write envelope, ``points`` = {"R:W": TB/s}, read by ``peaks.mix.mix_bandwidth``) and ``smem``
  (shared-memory bandwidth against SMs x 128 B/clock x the kernel's clock), and the ``l2`` entry
  carries the curve and its near- and far-partition plateaus; every bandwidth entry says how many
  timed repetitions ran throttled (``throttle``);
- ``sustained`` (full calibrations only): each unit family (HBM, the SIMT pipes, the tensor cores)
  run back to back for ``sustained_s`` seconds, the figure taken once clocks settled, with the SM
  clock, memory clock, power and temperature it was reached at;
- ``energy``: the sustained phase's energy part (``energy_phase.py``): J per FLOP of every precision
  and J per byte of HBM read, write and copy from the tool's own kernels, and the idle power, each
  with the power, clocks and reasons seen, the counter's resolution and interval, and an
  uncertainty; or ``{"status": "skipped", "reason": ...}`` (a quick calibration, ``energy=False``,
  no sustained phase, no energy counter);
- ``peaks``: ``{"burst": {...}, "sustained": {...}}``, the flat mapping ``roofline(measured=...)``
  takes (``bandwidth_tbps``, ``l2_bandwidth_tbps`` in TB/s; ``fp32`` ... ``int8`` in TFLOP/s or TOPS);
- ``warnings``: every reason the figures may not be trusted (other processes, clocks not at boost,
  slowdown reasons, MIG, ECC), one sentence each.

The cache holds one file per GPU UUID in the user cache directory, so that every later roofline on
that card (``analyze``, the Python API) shows the measured roofs next to the datasheet's. Files are
written atomically (temporary file in the same directory, fsync, ``os.replace``) under an exclusive
lock, so two calibrations finishing together leave one complete file, never a mix. A file that
does not parse, or that an older/newer schema wrote, is ignored with a warning naming it: a stale
cache must never silently change a floor.

The measured figures come from ``bandwidth.py`` and ``compute.py`` (the same verified kernels for
burst and sustained); this module only plans the runs, reads telemetry and decides what to keep.
"""
from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from .._version import __version__
from ..measure.energy import MIN_WINDOW_S
from ..peaks.datasheet import lookup
from ..peaks.derived import clock_derived_bandwidth, clock_derived_peak
from ..peaks.record import SCHEMA_VERSION
from ..peaks.units import ENTRY_KEYS, UNITS, peak_key, short_label
from ..timestamps import utc_now
from .backend import Backend, NativeBackend
from .energy_phase import energy_phase, estimated_s, skipped
from .sustained import median_of, sustain, sustain_rotating
from .trust import entry_warnings, start_warnings

__all__ = ["calibrate", "DEFAULT_SUSTAINED_S", "SUSTAINED_FAMILIES", "QUICK_PRECISIONS", "FULL_PRECISIONS"]

#: What a quick calibration measures: HBM and the precisions most kernels are bound by.
QUICK_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
#: What a full calibration measures in its burst phase.
FULL_PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
#: What the sustained phase runs, in this order: HBM, then every unit of the burst phase. Each unit
#: settles at its own clock and power (an H200 holds ~1935 MHz on FP32 but ~1470 MHz on BF16 at
#: 700 W), so one unit cannot stand for its family; a unit the card lacks is skipped with the reason.
SUSTAINED_FAMILIES = ("hbm", "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
#: Seconds each unit runs back to back (``--sustained``): the last third (~8 s, 4 calls of ~2 s) is
#: the figure, the middle third the settling check.
DEFAULT_SUSTAINED_S = 25.0
#: Wall-clock budgets (issue 17): a full calibration (burst + sustained for every unit) in 5
#: minutes, a quick one in 5 seconds, on an H200. With ``budget_s`` set, the sustained window
#: shrinks (never below MIN_SUSTAINED_S) so that the whole run fits; the JSON records each phase.
FULL_BUDGET_S = 300.0
QUICK_BUDGET_S = 5.0
MIN_SUSTAINED_S = 10.0
# What one sustained unit costs beyond its window: its last call overshoots the window by up to
# one call (~2 s), and the first call sets up the buffers; plus what follows the phase.
_SUSTAIN_OVERHEAD_S = 3.0
_END_MARGIN_S = 10.0
#: Entries beside the roofs of ENTRY_KEYS: measured and cached, but not (yet) peaks the model reads.
EXTRA_ENTRY_KEYS = ("hbm_mix", "smem")


class _Steps:
    """Drives the caller's ``progress(done, total, description)`` from planned step weights.

    Weights are rough seconds, so the bar moves at about the speed of the wall clock; a step may
    report partial progress (the sustained phase does, once per call).
    """

    def __init__(self, progress: Callable[[float, float, str], None] | None, total: float, prefix: str):
        self.progress = progress
        self.total = max(total, 1e-9)
        self.done = 0.0
        self.prefix = prefix

    def report(self, description: str, partial: float = 0.0) -> None:
        if self.progress is not None:
            self.progress(min(self.done + partial, self.total), self.total, f"{self.prefix}{description}")

    @contextlib.contextmanager
    def step(self, description: str, weight: float) -> Iterator[Callable[..., None]]:
        """Yields ``update(fraction, detail=None)`` for progress within the step."""
        self.report(description)

        def update(fraction: float, detail: str | None = None) -> None:
            text = f"{description}: {detail}" if detail else description
            self.report(text, weight * min(max(fraction, 0.0), 1.0))

        yield update
        self.done += weight
        self.report(description)


@contextlib.contextmanager
def _timed(phases: dict[str, float], key: str) -> Iterator[None]:
    """Adds the block's wall seconds to ``phases[key]`` (the calibration's ``timing.phases_s``)."""
    t0 = time.monotonic()
    try:
        yield
    finally:
        phases[key] = round(phases.get(key, 0.0) + time.monotonic() - t0, 3)


def _state(backend: Backend, dev: Any) -> dict[str, Any]:
    nv = backend.nvml_state(dev)

    def pick(nv_key: str, attr: str, scale: float = 1.0):
        v = nv.get(nv_key)
        if v is not None:
            return v * scale if scale != 1.0 else v
        return getattr(dev, attr, None)

    procs = nv.get("compute_processes", getattr(dev, "compute_processes", None))
    return {
        "sm_clock_mhz": pick("sm_clock_mhz", "sm_clock_mhz"),
        "mem_clock_mhz": pick("mem_clock_mhz", "mem_clock_mhz"),
        "temperature_c": pick("temperature_c", "temperature_c"),
        "power_draw_w": pick("power_draw_mw", "power_draw_w", 1e-3),
        "clock_event_reasons": nv.get("clock_event_reason_names", getattr(dev, "clock_event_reasons", None)),
        # This process holds a CUDA context on the device by now (device identification creates
        # one), and NVML counts it: everyone else is the count minus one.
        "other_compute_processes": None if procs is None else max(0, int(procs) - 1),
        "ecc_pending": None if nv.get("ecc_pending") is None else ("enabled" if nv["ecc_pending"] else "disabled"),
    }


def _identity(dev: Any) -> dict[str, Any]:
    return {
        "index": dev.index,
        "name": dev.name,
        "uuid": dev.uuid,
        "pci_bus_id": dev.pci_bus_id,
        "compute_capability": f"{dev.cc_major}.{dev.cc_minor}",
        "architecture": dev.architecture,
        "sm_count": dev.sm_count,
        "l2_bytes": dev.l2_bytes,
        "memory_total_bytes": dev.memory_total_bytes,
        "memory_bus_width_bits": dev.memory_bus_width_bits,
        "max_sm_clock_mhz": dev.max_sm_clock_mhz,
        "max_mem_clock_mhz": dev.max_mem_clock_mhz,
        "power_limit_w": dev.power_limit_w,
        "mig_mode": dev.mig_mode,
        "ecc_mode": dev.ecc_mode,
    }


# --- adapters to the measurement modules ----------------------------------------------------------
# Burst figures are exactly what bandwidth.py / compute.py report (same functions, same policy), so
# a calibration and a standalone measurement agree; only how often and how long they run differs.

def _telemetry_fields(tel: Mapping[str, Any] | None) -> dict[str, Any]:
    tel = tel or {}
    return {"sm_clock_mhz": median_of(tel.get("sm_clock_mhz")),
            "mem_clock_mhz": median_of(tel.get("mem_clock_mhz")),
            "power_w": median_of(tel.get("power_w")),
            "telemetry": tel or None}


def _config_text(cfg: Mapping[str, Any]) -> str:
    bits = [f"{cfg.get('threads')} threads x unroll {cfg.get('unroll')}"]
    if cfg.get("blocks_per_sm"):
        bits.append(f"persistent grid ({cfg.get('blocks_per_sm')}/SM requested)")
    if cfg.get("load"):
        bits.append(f"{cfg['load']} loads")
    if cfg.get("store") and cfg.get("store") != "plain":
        bits.append(f"{cfg['store']} stores")
    if cfg.get("bulk_bytes"):
        bits.append(f"bulk {cfg['bulk_bytes']} B")
    return ", ".join(bits)


def _bandwidth_entries(bw: Any, dev: Any, sheet: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    peak = bw.peak
    fields = _telemetry_fields(peak.telemetry)
    mem = fields["mem_clock_mhz"] or dev.max_mem_clock_mhz
    derived = clock_derived_bandwidth(mem, dev.memory_bus_width_bits)
    ds = sheet.bandwidth_tbps if sheet is not None else None
    out["hbm"] = {
        "label": "HBM", "unit": "TB/s",
        "value": peak.tbps_median, "best": peak.tbps_best, "cv": peak.cv,
        "path": peak.pattern,
        "detail": f"{peak.pattern}, {peak.buffer_bytes / 2**30:.2f} GiB per buffer, {_config_text(peak.config)}",
        "config": dict(peak.config), "reps": peak.reps, "bytes_per_launch": peak.bytes_per_launch,
        "buffer_bytes": peak.buffer_bytes,
        "datasheet": ds, "fraction_of_datasheet": peak.tbps_median / ds if ds else None,
        "clock_derived": derived, "fraction_of_clock_derived": peak.tbps_median / derived if derived else None,
        "patterns": {name: {"tbps": r.tbps_median, "cv": r.cv, "config": dict(r.config),
                            "buffer_bytes": r.buffer_bytes} for name, r in bw.patterns.items()},
        "throttle": getattr(peak, "throttle", None),
        **fields,
    }
    if bw.l2 is not None:
        out["l2"] = _l2_entry(bw.l2)
    if getattr(bw, "mix", None) is not None:
        out["hbm_mix"] = _mix_entry(bw.mix, derived)
    return out


def _l2_entry(l2: Any) -> dict[str, Any]:
    plateau = l2.plateau
    return {
        "label": "L2", "unit": "TB/s",
        "value": plateau.tbps_median, "best": plateau.tbps_best, "cv": plateau.cv,
        "path": "l2_read",
        "detail": f"reads of a {plateau.working_set_bytes / 2**20:.0f} MiB working set "
                  f"(L2 {l2.l2_bytes / 2**20:.0f} MiB), {_config_text(plateau.config)}",
        "config": dict(plateau.config), "reps": plateau.reps,
        "working_set_bytes": plateau.working_set_bytes,
        # The curve's plateaus: small sets also held in the near partition, large ones read
        # half across the crossbar (measure/bandwidth.py, l2_plateaus).
        "near_plateau": l2.near.to_dict() if getattr(l2, "near", None) else None,
        "far_plateau": l2.far.to_dict() if getattr(l2, "far", None) else None,
        "curve_mib_tbps": l2.curve() if hasattr(l2, "curve") else None,
        "throttle": getattr(plateau, "throttle", None),
        # Neither NVIDIA nor the device attributes give an L2 bandwidth to compare with.
        "datasheet": None, "fraction_of_datasheet": None,
        "clock_derived": None, "fraction_of_clock_derived": None,
        **_telemetry_fields(l2.telemetry),
    }


def _mix_entry(mix: Any, clock_derived: float | None) -> dict[str, Any]:
    """The read:write envelope: ``points`` is what ``peaks.mix.mix_bandwidth`` reads; ``value`` is
    the 1:1 point (what a copy-like, element-wise kernel can reach)."""
    points = mix.envelope()
    return {
        "label": "HBM read:write mix", "unit": "TB/s", "value": points.get("1:1"), "value_ratio": "1:1",
        "points": points,
        "sources": {p.label: p.source for p in mix.points},
        "configs": {p.label: dict(p.config) for p in mix.points},
        "throttle": {p.label: p.throttle for p in mix.points},
        "buffer_bytes": mix.buffer_bytes,
        "clock_derived": clock_derived,
        "fractions_of_clock_derived": {k: v / clock_derived for k, v in points.items()} if clock_derived else None,
        "telemetry": None,
    }


def _smem_entry(r: Any) -> dict[str, Any]:
    cfg, launch = r.config, r.launch
    return {
        "label": "Shared memory", "unit": "TB/s",
        "value": r.tbps_median, "best": r.tbps_best, "cv": r.cv,
        "path": f"ld.shared {cfg.get('width')} B",
        "detail": f"ld.shared {cfg.get('width')} B, {cfg.get('threads')} threads x {cfg.get('vectors')} loads, "
                  f"{launch.get('blocks_per_sm')} blocks/SM",
        "config": dict(cfg), "launch": dict(launch), "reps": r.reps,
        "datasheet": None, "fraction_of_datasheet": None,
        # SMs x bytes per clock x the clock the kernel counted: the ceiling of this very run.
        "clock_derived": r.ceiling_tbps, "fraction_of_clock_derived": r.fraction_of_ceiling,
        "bytes_per_clock_per_sm": r.bytes_per_clock_per_sm, "kernel_clock_mhz": r.kernel_clock_mhz,
        "clock_derived_at_nvml_clock": r.ceiling_at_nvml_clock_tbps,
        "throttle": r.throttle,
        **_telemetry_fields(r.telemetry),
    }


def _compute_entries(comp: Any, dev: Any, sheet: Any) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    entries: dict[str, dict[str, Any]] = {}
    unsupported: dict[str, str] = {}
    for prec, r in comp.precisions.items():
        best = r.best
        if r.status != "ok" or best is None:
            unsupported[prec] = str(r.reason or "unsupported")
            continue
        tel = best.telemetry or {}
        others = {}
        for path, pr in r.paths.items():
            if path != best.path:
                others[path] = pr.tflops_median if pr.ok else f"unsupported: {pr.reason}"
        # compute.py looks the datasheet up by the device name too; fill in if it could not.
        datasheet = best.datasheet or (sheet.peak(prec) if sheet is not None else None)
        detail = best.instruction or best.path
        if best.config:
            detail += " (" + ", ".join(f"{k}={v}" for k, v in best.config.items()) + ")"
        entries[prec] = {
            "label": short_label(prec), "unit": best.unit,
            "value": best.tflops_median, "best": best.tflops_best, "cv": best.cv,
            "path": best.path, "detail": detail, "instruction": best.instruction,
            "config": dict(best.config), "launch": dict(best.launch), "reps": best.reps,
            "datasheet": datasheet, "fraction_of_datasheet": best.tflops_median / datasheet if datasheet else None,
            "clock_derived": best.clock_derived_peak,
            "fraction_of_clock_derived": best.fraction_of_clock_derived,
            "kernel_clock_mhz": best.kernel_clock_mhz,
            "fraction_of_clock_derived_at_kernel_clock": best.fraction_of_clock_derived_at_kernel_clock,
            "other_paths": others,
            **_telemetry_fields(tel),
        }
        # compute.py reads the SM clock the same way; keep its figure if telemetry had none.
        entries[prec]["sm_clock_mhz"] = entries[prec]["sm_clock_mhz"] or best.sm_clock_mhz
    return entries, unsupported


#: The HBM patterns the sustained phase runs, in turn in one window (``sustain_rotating``): the
#: sustained HBM roof is the burst winner's pattern sustained, so ``--regime sustained`` holds a
#: task to the same pattern as the burst regime does, and every pattern keeps its own
#: sustained/burst ratio (issue 27). Copy (1 read : 1 write) and triad (2 : 1) are the mix points
#: the measurement has kernels for. Until 2026-12-02 only copy ran, because read's host checksum
#: was recomputed on every call (seconds in which the card idled); the core now remembers it.
SUSTAINED_HBM_PATTERNS = ("read", "write", "copy", "triad")


def _hbm_patterns_to_sustain(hbm: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """One entry per pattern to sustain, shaped as the burst winner's (path, value, config, buffer),
    each with that pattern's own burst figure so its sustained/burst ratio compares like with like.
    The winner is always among them, even when it is a pattern not in the list."""
    patterns = hbm.get("patterns") or {}
    out: dict[str, dict[str, Any]] = {}
    for name in SUSTAINED_HBM_PATTERNS:
        p = patterns.get(name)
        if name == hbm.get("path"):
            out[name] = dict(hbm)
        elif p and p.get("config") and p.get("buffer_bytes") and p.get("tbps"):
            out[name] = dict(hbm, path=name, value=p["tbps"], config=p["config"], buffer_bytes=p["buffer_bytes"])
    out.setdefault(str(hbm["path"]), dict(hbm))
    return out


def _pattern_summary(s: Mapping[str, Any], burst: Mapping[str, Any]) -> dict[str, Any]:
    """One sustained HBM pattern as the ``patterns`` map of the sustained HBM entry shows it."""
    return {"value": s["value"], "burst": burst.get("value"),
            "ratio_to_burst": s["value"] / burst["value"] if burst.get("value") else None,
            "settled": s["settled"], "iterations": s["iterations"], "window_s": s["window_s"],
            "buffer_bytes": burst.get("buffer_bytes"), "config": burst.get("config"), "throttle": s["throttle"]}


@dataclass
class _Run:
    """What one calibration carries from phase to phase."""

    backend: Backend
    device: int
    dev: Any
    sheet: Any
    quick: bool
    steps: _Steps
    weights: dict[str, float]
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=lambda: {"bandwidth": None, "compute": {}})
    trust: list[str] = field(default_factory=list)
    hostlink: dict[str, Any] | None = None
    # Wall seconds per phase (``timing.phases_s``).
    phases: dict[str, float] = field(default_factory=dict)


def calibrate(device: int = 0, *, quick: bool = False, sustained_s: float = DEFAULT_SUSTAINED_S,
              progress: Callable[[float, float, str], None] | None = None,
              families: Sequence[str] = SUSTAINED_FAMILIES,
              precisions: Sequence[str] | None = None, backend: Backend | None = None,
              budget_s: float | None = None, clock: Callable[[], float] = time.monotonic,
              energy: bool = True, energy_window_s: float | None = None) -> dict[str, Any]:
    """Measure GPU ``device`` (CUDA index) and return the calibration as a JSON-ready dict.

    ``quick``: HBM bandwidth and FP32/TF32/FP16/BF16 only, no L2, no sustained phase (seconds).
    Otherwise every precision, HBM and L2, then each of ``families`` ("hbm", "fp32", "bf16", or any
    measured precision) run for ``sustained_s`` seconds (0 skips the phase). ``progress`` is called
    as ``progress(done, total, description)`` with rough seconds as units. ``precisions`` overrides
    the list of precisions measured. ``backend`` does the measuring (default: the native core;
    tests pass a fake). ``budget_s``: the wall seconds the whole calibration should fit in
    (``FULL_BUDGET_S`` is the CLI's default); the sustained window then shrinks, if the burst phase
    left too little time, to fit (never below ``MIN_SUSTAINED_S``); None runs ``sustained_s`` as
    asked. ``timing`` in the result records each phase's wall seconds, the totals and the budget.
    ``energy``: measure each unit's energy per FLOP / per byte and the idle power after the
    sustained units (``energy_phase.py``; about a minute on an H200, taken off the sustained window
    when a budget is set); False records it as skipped on request. Quick calibrations and a skipped
    sustained phase measure no energy either, and say so in the ``energy`` section.
    ``energy_window_s``: the shortest counter window per unit (default ``MIN_WINDOW_S``, 1 s; the
    phase lengthens it to its lag rule, ~1-3 s on an H200). Each figure's counter-reading bound
    falls as the window grows (about ±5% at 3 s on an H200, 2026-12-02), at the window's cost.
    Raises ``GpuUnavailableError`` when the device cannot be measured, ``UserError`` for a bad
    index. Nothing is cached here: ``peaks.cache.save()`` does that.
    """
    backend = backend or NativeBackend()
    t_start = clock()
    avail = backend.require(device)
    dev = backend.device(device)
    state = _state(backend, dev)
    precs = tuple(precisions) if precisions else (QUICK_PRECISIONS if quick else FULL_PRECISIONS)
    families = tuple(families) if (not quick and sustained_s and sustained_s > 0) else ()
    measure_energy = bool(families) and energy
    # Rough seconds per step, only for the progress bar (and, for energy, the budget).
    weights = {"bw": 3.0 if quick else 14.0, "prec": 1.5 if quick else 3.0, "sus": float(sustained_s) + 2.0,
               "smem": 0.0 if quick else 1.0,
               "energy": estimated_s(window_s=energy_window_s or MIN_WINDOW_S,
                                     peers=hasattr(backend, "energy_peer_workload")) if measure_energy else 0.0}
    weights["link"] = 1.0 if hasattr(backend, "measure_hostlink") else 0.0
    total = (weights["bw"] + weights["smem"] + weights["link"] + weights["prec"] * len(precs)
             + weights["sus"] * len(families) + weights["energy"])
    run = _Run(backend, device, dev, lookup(dev.name), quick,
               _Steps(progress, total, prefix=f"{'quick' if quick else 'full'} calibration: "), weights)
    run.trust = start_warnings(dev, state)
    run.phases["setup"] = round(clock() - t_start, 3)
    t_burst = clock()
    _burst(run, precs)
    burst_s = clock() - t_burst
    window = float(sustained_s)
    if families and budget_s is not None:
        # The energy part follows the units in the same budget: its time comes off their window.
        window = _fit_window(window, budget_s - (clock() - t_start) - weights["energy"], len(families))
    t_sus = clock()
    sustained = _sustained_phase(run, families, window) if families else None
    sustained_wall = clock() - t_sus if families else 0.0
    if sustained is not None:
        sustained["requested_s"] = float(sustained_s)
    t_energy = clock()
    energy_section = _energy(run, bool(families), energy, energy_window_s)
    energy_wall = clock() - t_energy
    end_state = _state(backend, dev)
    run.trust += _end_warnings(run, state, end_state, sustained, window)
    cal = _document(run, avail, state, end_state, sustained, energy_section)
    total = clock() - t_start
    cal["wall_s"] = round(total, 2)
    limit = budget_s if budget_s is not None else (QUICK_BUDGET_S if quick else None)
    cal["timing"] = {"phases_s": dict(run.phases), "burst_s": round(burst_s, 3),
                     "sustained_s": round(sustained_wall, 3), "sustained_window_s": window if families else None,
                     "energy_s": round(energy_wall, 3),
                     "total_s": round(total, 3), "budget_s": limit,
                     "within_budget": None if limit is None else total <= limit}
    if limit is not None and total > limit:
        cal["warnings"].append(f"the {cal['mode']} calibration took {total:.1f} s, over its {limit:g} s budget")
    # Round-trip through JSON now, so that what calibrate() returns is exactly what save() writes;
    # a stray NaN/inf deep in a raw result becomes null instead of failing minutes of measuring.
    return _finite(json.loads(json.dumps(cal, default=_json_default)))


def _fit_window(requested: float, left_s: float, units: int) -> float:
    """The sustained window per unit that fits ``units`` units into ``left_s`` seconds, each costing
    its window plus ``_SUSTAIN_OVERHEAD_S``, with ``_END_MARGIN_S`` to spare; never more than asked,
    never below ``MIN_SUSTAINED_S`` (a shorter window cannot tell settled from still falling)."""
    fits = (left_s - _END_MARGIN_S) / max(units, 1) - _SUSTAIN_OVERHEAD_S
    return round(max(min(requested, fits), min(requested, MIN_SUSTAINED_S)), 1)


def _burst(run: _Run, precs: Sequence[str]) -> None:
    """HBM (and L2) bandwidth, then every precision: each entry is what the measurement layer reports."""
    what = "HBM bandwidth" + ("" if run.quick else ", L2 curve and read:write mix")
    with run.steps.step(what, run.weights["bw"]) as update, _timed(run.phases, "bandwidth"):
        bw = run.backend.measure_bandwidth(run.device, quick=run.quick,
                                           progress=lambda done, of, what: update(done / of if of else 0.0, what))
    run.raw["bandwidth"] = bw
    run.entries.update(_bandwidth_entries(bw, run.dev, run.sheet))
    if not run.quick:
        _smem(run)
    _hostlink(run)
    for prec in precs:
        with run.steps.step(f"{short_label(prec)} throughput", run.weights["prec"]) as update, \
                _timed(run.phases, prec):
            # update is bound as a default: a closure would see the next precision's step (B023).
            def on_line(line: str, update: Callable[..., None] = update) -> None:
                update(0.0, line)

            comp = run.backend.measure_compute(run.device, prec, quick=run.quick, progress=on_line)
        run.raw["compute"][prec] = comp
        found, missing = _compute_entries(comp, run.dev, run.sheet)
        run.entries.update(found)
        run.unsupported.update(missing)


def _smem(run: _Run) -> None:
    """Shared-memory bandwidth (full calibrations); a backend without it (an older fake) skips it."""
    measure = getattr(run.backend, "measure_smem", None)
    if measure is None:
        return
    with run.steps.step("shared-memory bandwidth", run.weights["smem"]), _timed(run.phases, "smem"):
        r = measure(run.device, quick=run.quick)
    run.raw["smem"] = r
    run.entries["smem"] = _smem_entry(r)


def hostlink_entries(link: Any) -> dict[str, Any]:
    """The calibration's ``hostlink`` section from a ``measure.hostlink.HostLinkResult``: one entry per
    direction (value in GB/s, best, CV, the link's theoretical rate and the fraction of it) and the link."""
    out: dict[str, Any] = {"link": link.link.to_dict(), "warnings": list(link.warnings)}
    for name, label in (("h2d", "host to device"), ("d2h", "device to host")):
        d = link.direction(name)
        out[name] = {"label": label, "unit": "GB/s", "value": d.gbps_median, "best": d.gbps_best, "cv": d.cv,
                     "bytes": d.bytes, "reps": d.reps, "pinned": True, "verification": d.verification,
                     "theoretical": d.theoretical_gbps, "fraction_of_theoretical": d.fraction_of_theoretical}
    return out


def _hostlink(run: _Run) -> None:
    """Pinned host<->device copy bandwidth, when the backend measures it (test fakes may not)."""
    measure = getattr(run.backend, "measure_hostlink", None)
    if measure is None:
        return
    with run.steps.step("host-link bandwidth", run.weights["link"]), _timed(run.phases, "hostlink"):
        link = measure(run.device, quick=run.quick)
    run.hostlink = hostlink_entries(link)
    run.trust += [f"host link: {w}" for w in link.warnings]


def _sustained_phase(run: _Run, families: Sequence[str], seconds: float) -> dict[str, Any]:
    """Each family's burst winner run back to back for ``seconds``, its figure once clocks settle."""
    sustained: dict[str, Any] = {"duration_s": seconds, "entries": {}}
    for fam in families:
        burst = run.entries.get(fam)
        if burst is None:
            run.trust.append(f"sustained {short_label(fam)} skipped: "
                             f"{run.unsupported.get(fam, 'no burst figure to sustain')}")
            continue
        names_of = getattr(run.backend, "reason_names", None)
        with run.steps.step(f"sustained {short_label(fam)} for {seconds:g} s", run.weights["sus"]) as part, \
                _timed(run.phases, f"sustained_{fam}"):
            if fam == "hbm":
                patterns = _hbm_patterns_to_sustain(burst)
                runners = {name: run.backend.sustained_runner(run.device, fam, b, run.dev)
                           for name, b in patterns.items()}
                parts = sustain_rotating(runners, seconds, run.backend.sampling(run.device), part,
                                         names_of=names_of)
                s = dict(parts[str(burst["path"])])
                s["patterns"] = {name: _pattern_summary(parts[name], patterns[name]) for name in parts}
            else:
                run_once = run.backend.sustained_runner(run.device, fam, burst, run.dev)
                s = sustain(run_once, seconds, run.backend.sampling(run.device), part, names_of=names_of)
        s.update(_sustained_fractions(fam, s, burst, run.dev))
        sustained["entries"][fam] = s
    return sustained


def _energy(run: _Run, sustained_ran: bool, wanted: bool, window_s: float | None = None) -> dict[str, Any]:
    """The sustained phase's energy part (``energy_phase.py``), or the reason it was skipped."""
    if run.quick:
        return skipped("a quick calibration measures no energy (a full one does)")
    if not sustained_ran:
        return skipped("the sustained phase did not run (--sustained 0), and energy is measured in it")
    if not wanted:
        return skipped("skipped on request (--no-energy)")
    with run.steps.step("energy per FLOP and per byte", run.weights["energy"]) as update, \
            _timed(run.phases, "energy"):
        section, warnings = energy_phase(run.backend, run.device, run.dev, run.entries, run.unsupported,
                                         progress=lambda fraction, what: update(fraction, what),
                                         window_s=window_s or MIN_WINDOW_S)
    run.trust += warnings
    return section


def _end_warnings(run: _Run, state: Mapping[str, Any], end_state: Mapping[str, Any],
                  sustained: Mapping[str, Any] | None, seconds: float) -> list[str]:
    out = []
    before, after = state.get("other_compute_processes"), end_state.get("other_compute_processes")
    if after and (before or 0) < after:
        out.append(f"{after - (before or 0)} other process(es) started using the GPU during the "
                   "calibration: the figures may be low; calibrate an idle card")
    for key, e in run.entries.items():
        out.extend(entry_warnings(key, e, run.dev, "burst"))
    for key, e in ((sustained or {}).get("entries") or {}).items():
        out.extend(entry_warnings(key, e, run.dev, "sustained"))
        if e.get("settled") is False:
            out.append(f"sustained {short_label(key)}: clocks or figure still moving at the end of "
                       f"the {seconds:g} s window; run a longer --sustained")
    return out


def _document(run: _Run, avail: Any, state: dict[str, Any], end_state: dict[str, Any],
              sustained: dict[str, Any] | None, energy: dict[str, Any]) -> dict[str, Any]:
    """The calibration as the JSON the cache keeps (``raw`` goes to a file of its own there)."""
    dev, sheet = run.dev, run.sheet
    runtime = run.backend.build_info().get("cuda_runtime_version")
    cal: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "roofline_ext.calibration",
        "mode": "quick" if run.quick else "full",
        "date": utc_now(),
        "package_version": __version__,
        "driver_version": dev.driver_version,
        "cuda_driver_version": dev.cuda_driver_version,
        "cuda_runtime_version": f"{runtime // 1000}.{(runtime % 1000) // 10}" if runtime else None,
        "wall_s": None,
        "gpu": _identity(dev),
        "state_at_start": state,
        "state_at_end": end_state,
        "availability": avail.to_dict(),
        "datasheet": None if sheet is None else {"sku": sheet.name, "peaks": _datasheet_mapping(sheet)},
        "burst": {"entries": {k: run.entries[k] for k in ENTRY_KEYS + EXTRA_ENTRY_KEYS if k in run.entries},
                  "unsupported": run.unsupported},
        "sustained": sustained,
        # Energy per unit of work (J/FLOP, J/byte) and idle power, or why not measured; not a peak.
        "energy": energy,
        # Not a roof of the roofline (no kernel's floor uses it), so not in ``peaks``: its own section.
        "hostlink": run.hostlink,
        "peaks": {"burst": _peak_mapping(run.entries)},
        "warnings": _dedupe(run.trust),
        "raw": run.raw,
    }
    sustained_peaks = _peak_mapping((sustained or {}).get("entries") or {})
    if sustained_peaks:
        cal["peaks"]["sustained"] = sustained_peaks
    return cal


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for i in items:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def _datasheet_mapping(sheet: Any) -> dict[str, float]:
    out = {"bandwidth_tbps": sheet.bandwidth_tbps}
    out.update({u: sheet.peak(u) for u in UNITS if sheet.peak(u) is not None})
    return out


def _peak_mapping(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    out = {}
    for key, e in entries.items():
        if key not in ENTRY_KEYS:  # hbm_mix, smem: cached beside the roofs, not peaks the model reads
            continue
        v = e.get("value") if isinstance(e, Mapping) else None
        if isinstance(v, (int, float)) and v > 0 and math.isfinite(v):
            out[peak_key(key)] = float(v)
    return out


def _sustained_fractions(fam: str, s: Mapping[str, Any], burst: Mapping[str, Any], dev: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"label": burst.get("label"), "unit": burst.get("unit"), "path": burst.get("path"),
                           "burst": burst.get("value")}
    out["ratio_to_burst"] = s["value"] / burst["value"] if burst.get("value") else None
    if fam == "hbm":
        cd = clock_derived_bandwidth(s.get("mem_clock_mhz"), dev.memory_bus_width_bits)
    elif fam == "l2":
        cd = None
    else:
        cd = clock_derived_peak(fam, (dev.cc_major, dev.cc_minor), dev.sm_count or 0,
                                s.get("sm_clock_mhz") or 0, consumer="geforce" in str(dev.name).lower())
    out["clock_derived"] = cd
    out["fraction_of_clock_derived"] = s["value"] / cd if cd else None
    if fam not in ("hbm", "l2") and s.get("kernel_clock_mhz"):
        at_kernel = clock_derived_peak(fam, (dev.cc_major, dev.cc_minor), dev.sm_count or 0,
                                       s["kernel_clock_mhz"], consumer="geforce" in str(dev.name).lower())
        out["fraction_of_clock_derived_at_kernel_clock"] = s["value"] / at_kernel if at_kernel else None
    return out


