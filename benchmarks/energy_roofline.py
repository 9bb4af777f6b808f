#!/usr/bin/env python3
"""The energy roofline of one GPU in one run: J per FLOP of every unit and J per byte of HBM read,
write and copy, from the tool's own kernels, beside the same-run energy of library products.

  python benchmarks/energy_roofline.py OUT.json [--plot OUT.png] [--repeats 3] [--device 0]

Every figure is ``measure/energy.py``'s ``measure_energy`` around a callable (NVML's total-energy
counter, an idle probe just before each window, the window aligned to counter steps), carried as
``model/energy.py``'s ``EnergyKernel`` / ``EnergyCost``; docs/energy.md says what the figures mean.

Ours: for each precision (fp64, fp32, tf32, fp16, bf16, fp8, int8) the native core's sustained
kernel on its roof path (wgmma where the build and GPU have it, else mma.sync; simt for fp32/fp64),
one ``_core.compute_run`` per call with the loop trips fixed after a sizing call, as calibration's
sustained phase runs it; the HBM read, write and copy patterns, one ``_core.bandwidth_run`` per call
with the first (fastest on an H200) configuration of ``measure.bandwidth.DEFAULT_CONFIGS``. Each
call verifies its output (the core raises ``VerificationError``) and its work is read off its own
result: ``flop_per_launch`` (or ``bytes_per_launch``) x the launches it ran.

Library peers, measured the same way in the same run: ``torch.matmul`` BF16, FP16 and TF32 at
8192^3 (2·M·N·K FLOPs), ``copy_`` (2x the buffer), ``sum`` (1x) and ``fill_`` (1x) on 4 GiB
float32 buffers; each one's output checked (a sampled block against float64 for a GEMM, exact for
copy and fill, a float64 sum for sum) before its window and again after it: a peer that fails is
reported failed and its energy is not counted.

``--repeats N`` measures the whole set N times; per figure the JSON holds every repeat (its
EnergyMeasurement, uncertainty, telemetry) and the median, min, max and spread (max/min - 1, the
issue's 3% test). ``--plot`` draws ``report/energy_chart.py``'s chart from ``lowest_costs`` of the
median repeats. Exit status: 0 done, 1 some figure failed its check or could not be measured, 2 no
GPU or no energy counter (one line says why).

The measuring is the package's, shared with calibration's energy phase
(``calibration/energy_phase.py``): the workload loop and window rule in
``measure/energy_workload.py``, the own kernels as workloads in ``measure/energy_kernels.py``.
This script adds the library peers, the repeats and their statistics, the lowest-of-measured costs
and the chart. The orchestration (:func:`measure_item`, :func:`run_all`, :func:`document`) takes
the counter, the clock and the callables as arguments, so tests/test_bench_energy_roofline.py runs
it on a fake counter with fake kernels.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Mapping, Sequence

try:  # the installed package; a source checkout's python/ only when none is installed
    import roofline_ext  # noqa: F401
except ImportError:
    sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))

from roofline_ext.errors import UserError
from roofline_ext.measure.energy import MIN_WINDOW_S, EnergyCounterError, EnergyMeasurement, EnergyReader
# The measuring itself is the package's (calibration's energy phase runs the same code): the
# workload loop, the window rule, and the own kernels as workloads. Re-exported under the names
# this script and its tests have always used.
from roofline_ext.measure.energy_kernels import (  # noqa: F401
    DUTY,
    HBM_PATTERNS,
    MAX_CALL_S,
    MIN_KERNEL_S,
    SEED,
    TARGET_MS,
    compute_workload,
    hbm_workload,
    own_buffer_bytes,
    reps_for,
)
from roofline_ext.measure.energy_peers import GEMM_KEYS, MEMORY_OPS, gemm_workload, memory_workload, peer_names
from roofline_ext.measure.energy_workload import (  # noqa: F401
    LAG_TARGET,
    CheckFailed,
    EnergyWorkload,
    Unsupported,
    measure_workload,
    window_for,
)
from roofline_ext.model.energy import COMPUTE_KEYS, MEMORY_KEYS, EnergyCost, EnergyKernel, lowest_costs

#: The issue's repeatability test: max/min - 1 of a figure over the repeats.
TARGET_SPREAD = 0.03
#: Paths in the order a precision's own kernel is chosen: the roof path first.
PATH_ORDER = ("wgmma", "mma.sync", "simt")

#: One item set up to be measured (the package's workload; the name this script has always used).
Prepared = EnergyWorkload


@dataclass
class Item:
    """One figure to measure: its energy key, kernel name, origin ("own" or "library") and how to
    set it up (raising :class:`Unsupported` or :class:`CheckFailed`)."""

    key: str
    name: str
    origin: str
    setup: Callable[[], Prepared]


@dataclass
class Run:
    """One item measured once: ``status`` is "ok", "unsupported", "failed" (a wrong output),
    "unresolved" (no energy above idle the counter could see) or "error" (anything else)."""

    item: Item
    repeat: int
    status: str
    reason: str | None = None
    kernel: EnergyKernel | None = None
    cost: EnergyCost | None = None
    duty: float | None = None
    window_rule_s: float | None = None
    telemetry: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def measurement(self) -> EnergyMeasurement | None:
        return self.kernel.measurement if self.kernel is not None else None


def per_word(key: str) -> str:
    """What one unit of work is for ``key`` (the model's own words)."""
    return "byte" if key in MEMORY_KEYS else ("OP" if key == "int8" else "FLOP")


# --------------------------------------------------------------------------------------------------
# Pure rules
# --------------------------------------------------------------------------------------------------

def spread_stats(values: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and spread (max/min - 1) of one figure over the repeats."""
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "spread": None, "repeatable": None}
    lo, hi = min(values), max(values)
    spread = hi / lo - 1 if lo > 0 else None
    return {"n": len(values), "median": statistics.median(values), "min": lo, "max": hi, "spread": spread,
            "repeatable": (spread <= TARGET_SPREAD) if spread is not None and len(values) > 1 else None}


# --------------------------------------------------------------------------------------------------
# Measuring one item, and the whole set
# --------------------------------------------------------------------------------------------------

def measure_item(item: Item, repeat: int, *, reader: EnergyReader, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep, window_s: float = MIN_WINDOW_S,
                 lag_target: float = LAG_TARGET, idle_s: float = MIN_WINDOW_S,
                 telemetry: Callable[[], ContextManager[Any]] | None = None) -> Run:
    """Set ``item`` up, probe the idle counter, and measure its calls over one window
    (``measure_workload``, as calibration's energy phase does); J per unit is the energy above
    idle per call over the work per call (``EnergyKernel.cost``). A peer's output is checked again
    after the window, and a failure then also drops the figure."""
    w = measure_workload(item.setup, reader=reader, name=item.name, clock=clock, sleep=sleep, window_s=window_s,
                         lag_target=lag_target, idle_s=idle_s, telemetry=telemetry)
    run = Run(item, repeat, w.status, w.reason, duty=w.duty, window_rule_s=w.window_rule_s, telemetry=w.telemetry,
              info=w.info)
    if w.measurement is None or w.work_per_call is None:
        return run
    run.kernel = EnergyKernel(item.key, item.name, w.work_per_call, w.measurement, item.origin,
                              hbm_bytes_per_call=float(w.info.get("hbm_bytes_per_call") or 0.0))
    if w.status == "ok":
        try:
            run.cost = run.kernel.cost()
        except UserError as exc:  # the model's own rule for a cost it cannot take
            run.status, run.reason = "unresolved", str(exc)
    return run


def run_all(items: Sequence[Item], repeats: int, *, report: Callable[[Run, int], None] | None = None,
            **measure: Any) -> list[Run]:
    """Every item measured ``repeats`` times, the whole set once per repeat (so the repeats are
    apart in time, as calibrations are); ``measure`` goes to :func:`measure_item`."""
    if repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {repeats}")
    runs = []
    for r in range(repeats):
        for item in items:
            run = measure_item(item, r, **measure)
            runs.append(run)
            if report is not None:
                report(run, repeats)
    return runs


# --------------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------------

def _run_dict(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {"repeat": run.repeat, "status": run.status, "reason": run.reason,
                           "counted": run.status == "ok" and run.cost is not None, "info": run.info}
    k = run.kernel
    if k is None:
        return out
    m = k.measurement
    word = per_word(k.key)
    out.update({
        "work_per_call": k.work_per_call, "j_per_call_total": m.j_per_call_total,
        "j_per_call_above_idle": m.j_per_call_above_idle, "uncertainty_total_j": m.uncertainty_total_j,
        "uncertainty_above_idle_j": m.uncertainty_above_idle_j,
        "j_per_unit": m.j_per_call_above_idle / k.work_per_call,
        "j_total_per_unit": m.j_per_call_total / k.work_per_call,
        "uncertainty_j_per_unit": m.uncertainty_above_idle_j / k.work_per_call,
        "unit": f"J/{word}", "pj_per_unit": m.j_per_call_above_idle / k.work_per_call * 1e12,
        "pj_total_per_unit": m.j_per_call_total / k.work_per_call * 1e12,
        "relative_uncertainty": m.relative_uncertainty, "power_w": m.power_w, "idle_w": m.idle_w,
        "window_s": m.window_s, "window_rule_s": run.window_rule_s, "calls": m.calls,
        "kernel_duty": run.duty, "telemetry": run.telemetry, "measurement": m.to_dict(),
        "cost": run.cost.to_dict() if run.cost is not None else None,
    })
    return out


def _figure(runs: Sequence[Run]) -> dict[str, Any]:
    """One figure over its repeats: every repeat, and the statistics of those that counted."""
    item = runs[0].item
    word = per_word(item.key)
    ok = [r for r in runs if r.status == "ok" and r.cost is not None]
    above = [r.cost.j_per_unit * 1e12 for r in ok if r.cost is not None]
    total = [r.cost.j_total_per_unit * 1e12 for r in ok if r.cost is not None and r.cost.j_total_per_unit]
    works = [r.kernel.work_per_call for r in ok if r.kernel is not None]
    rel = [m.relative_uncertainty for r in ok if (m := r.measurement) and m.relative_uncertainty is not None]
    statuses = sorted({r.status for r in runs})
    return {
        "key": item.key, "name": item.name, "origin": item.origin,
        "kernel": "ours" if item.origin == "own" else "library",
        "unit": f"J/{word}", "per": word,
        "status": statuses[0] if len(statuses) == 1 else "mixed: " + ", ".join(statuses),
        "reasons": sorted({r.reason for r in runs if r.reason}),
        "work_per_call": statistics.median(works) if works else None,
        "pj_per_unit": spread_stats(above), "pj_total_per_unit": spread_stats(total),
        "relative_uncertainty_median": statistics.median(rel) if rel else None,
        "repeats": [_run_dict(r) for r in runs],
    }


def median_kernels(runs: Iterable[Run]) -> list[EnergyKernel]:
    """Per figure, the kernel of its median repeat (the lower middle for an even count): what the
    chart and the lowest-of-measured costs are built from. Runs that did not count are left out."""
    by_figure: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        if r.status == "ok" and r.cost is not None and r.kernel is not None:
            by_figure.setdefault((r.item.key, r.item.name), []).append(r)
    out = []
    for group in by_figure.values():
        group.sort(key=lambda r: r.cost.j_per_unit if r.cost is not None else math.inf)
        kernel = group[(len(group) - 1) // 2].kernel
        assert kernel is not None
        out.append(kernel)
    return out


def document(runs: Sequence[Run], gpu: Mapping[str, Any], settings: Mapping[str, Any],
             date: str | None = None) -> dict[str, Any]:
    """The JSON of a run: when, which GPU, the settings, every figure, and the lowest costs."""
    figures: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        figures.setdefault((r.item.key, r.item.name), []).append(r)
    kernels = median_kernels(runs)
    idle = [m.idle_w for r in runs if (m := r.measurement) is not None]
    costs = lowest_costs(kernels, idle_w=statistics.median(idle) if idle else None)
    out = [_figure(g) for g in figures.values()]
    return {
        "date": date or dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "gpu": dict(gpu), "gpu_name": gpu.get("name"), "driver_version": gpu.get("driver_version"),
        "settings": dict(settings), "target_spread": TARGET_SPREAD,
        "figures": out,
        "not_repeatable": [f"{f['key']} {f['name']}" for f in out if f["pj_per_unit"]["repeatable"] is False],
        "costs": costs.to_dict(),
    }


def chart(runs: Sequence[Run], path: str | Path, *, title: str, subtitle: str = "") -> Path:
    """``report/energy_chart.py``'s chart of the lowest costs of the median repeats."""
    from roofline_ext.report.energy_chart import plot_energy_roofline

    kernels = median_kernels(runs)
    idle = [m.idle_w for r in runs if (m := r.measurement) is not None]
    costs = lowest_costs(kernels, idle_w=statistics.median(idle) if idle else None)
    return plot_energy_roofline(costs, path, title=title, subtitle=subtitle)


# --------------------------------------------------------------------------------------------------
# Own kernels, through the native core (any object with the core's compute_* / bandwidth_run)
# --------------------------------------------------------------------------------------------------

def own_compute_setup(core: Any, device: int, precision: str, path: str, *, clock: Callable[[], float] = time.perf_counter,
                      duty: float = DUTY) -> Prepared:
    """The core's verified kernel of (precision, path) on its first default configuration
    (``measure.energy_kernels.compute_workload``, what calibration's energy phase runs)."""
    return compute_workload(core, device, precision, path, clock=clock, duty=duty)


def own_hbm_setup(core: Any, device: int, pattern: str, buffer_bytes: int, *,
                  clock: Callable[[], float] = time.perf_counter, duty: float = DUTY) -> Prepared:
    """The core's verified HBM pattern kernel, its first default configuration
    (``measure.energy_kernels.hbm_workload``, what calibration's energy phase runs)."""
    return hbm_workload(core, device, pattern, buffer_bytes, clock=clock, duty=duty)


def _refuse(reason: str) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        raise Unsupported(reason)
    return setup


def own_items(core: Any, device: int, *, unusable: str | None, buffer_bytes: int,
              clock: Callable[[], float] = time.perf_counter, duty: float = DUTY) -> dict[str, Item]:
    """One own item per compute key (its roof path) and per HBM pattern; a unit this GPU or build
    cannot run is an item whose setup says why."""
    from roofline_ext.measure.compute import plan_paths

    items: dict[str, Item] = {}
    plan = plan_paths(core.compute_paths(device), COMPUTE_KEYS) if unusable is None else {}
    for prec in COMPUTE_KEYS:
        entry = plan.get(prec, {})
        path = next((p for p in PATH_ORDER if p in entry and entry[p] is None), None)
        if path is None:
            why = unusable or "; ".join(f"{p}: {r}" for p, r in entry.items()) or "no path runs it"
            items[prec] = Item(prec, f"roofline_ext {prec}", "own", _refuse(why))
            continue
        items[prec] = Item(prec, f"roofline_ext {path} {prec}", "own",
                           lambda p=prec, pa=path: own_compute_setup(core, device, p, pa, clock=clock, duty=duty))
    for key, pattern in HBM_PATTERNS.items():
        name = f"roofline_ext HBM {pattern} {buffer_bytes / 2**30:g} GiB"
        items[key] = (Item(key, name, "own", _refuse(unusable)) if unusable is not None else
                      Item(key, name, "own", lambda pt=pattern: own_hbm_setup(core, device, pt, buffer_bytes,
                                                                              clock=clock, duty=duty)))
    return items


# --------------------------------------------------------------------------------------------------
# Library peers, through torch
# --------------------------------------------------------------------------------------------------

# The peers' workloads are the package's (measure/energy_peers.py; calibration's energy phase runs
# the same ones). Under the names this script and its tests have always used.
def gemm_setup(torch: Any, device: int, key: str, n: int, clock: Callable[[], float] = time.perf_counter) -> Prepared:
    """``measure.energy_peers.gemm_workload``: torch.matmul of two n x n matrices, 2·n³ FLOPs a call."""
    return gemm_workload(torch, device, key, n, clock)


def memory_setup(torch: Any, device: int, op_name: str, nbytes: int, clock: Callable[[], float] = time.perf_counter
                 ) -> Prepared:
    """``measure.energy_peers.memory_workload``: torch copy_, sum or fill_ on float32 buffers."""
    return memory_workload(torch, device, op_name, nbytes, clock)


def peer_items(torch: Any, device: int, *, unusable: str | None, gemm_n: int, nbytes: int) -> dict[str, list[Item]]:
    """The library peers, by the energy key each one measures."""
    def item(key: str, name: str, setup: Callable[[], Prepared]) -> Item:
        return Item(key, name, "library", _refuse(unusable) if unusable is not None else setup)

    out: dict[str, list[Item]] = {}
    for key in GEMM_KEYS:
        name, = peer_names(key, gemm_n=gemm_n, nbytes=nbytes)
        out[key] = [item(key, name, lambda k=key: gemm_setup(torch, device, k, gemm_n))]
    for key, op_name in MEMORY_OPS.items():
        name, = peer_names(key, gemm_n=gemm_n, nbytes=nbytes)
        out[key] = [item(key, name, lambda o=op_name: memory_setup(torch, device, o, nbytes))]
    return out


# --------------------------------------------------------------------------------------------------
# The GPU, and the command line
# --------------------------------------------------------------------------------------------------

class NoGpu(Exception):
    """Nothing can be measured here: no GPU, or no energy counter (one line says which)."""


@dataclass
class Gpu:
    facts: dict[str, Any]
    reader: Any
    core: Any
    core_reason: str | None
    torch: Any
    torch_reason: str | None


_FACT_KEYS = ("name", "uuid", "pci_bus_id", "compute_capability", "architecture", "sm_count", "l2_bytes",
              "memory_total_bytes", "max_sm_clock_mhz", "max_mem_clock_mhz", "power_limit_w", "ecc_mode",
              "driver_version", "cuda_driver_version", "theoretical_bandwidth_tbps")


def _torch_cuda(index: int) -> tuple[Any, str | None]:
    try:
        import torch
    except ImportError as exc:
        return None, f"torch is not installed ({exc})"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no CUDA GPU"
    if not 0 <= index < torch.cuda.device_count():
        return None, f"torch sees {torch.cuda.device_count()} GPU(s), none with index {index}"
    return torch, None


def _native_core(index: int) -> tuple[Any, str | None]:
    from roofline_ext.device.status import core, require_measurement
    from roofline_ext.errors import RooflineError

    try:
        require_measurement(index)
    except RooflineError as exc:
        return None, str(exc)
    return core(), None


def _facts(index: int, torch: Any) -> dict[str, Any]:
    """The GPU's identity: the package's device record where it has one (NVML, by PCI bus id), else
    what torch knows (no driver version then)."""
    try:
        from roofline_ext.device.listing import device as get_device

        d = get_device(index).to_dict()
        return {k: d.get(k) for k in _FACT_KEYS}
    except Exception:  # a host-only core lists no CUDA index: torch's view stands in
        pass
    if torch is None:
        raise NoGpu(f"no record of CUDA device {index}")
    p = torch.cuda.get_device_properties(index)
    bus = None
    if all(hasattr(p, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        bus = f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
    return {"name": p.name, "pci_bus_id": bus, "compute_capability": f"{p.major}.{p.minor}",
            "sm_count": p.multi_processor_count, "l2_bytes": getattr(p, "L2_cache_size", None),
            "memory_total_bytes": p.total_memory, "driver_version": None}


def open_gpu(index: int) -> Gpu:
    """Torch's and the native core's view of CUDA device ``index`` and its energy counter; raises
    :class:`NoGpu` when neither can run anything or the counter cannot be read."""
    torch, torch_reason = _torch_cuda(index)
    core, core_reason = _native_core(index)
    if torch is None and core is None:
        raise NoGpu(f"no GPU to measure: {torch_reason}; roofline_ext: {core_reason}")
    facts = _facts(index, torch)
    if not facts.get("pci_bus_id"):
        raise NoGpu(f"no PCI bus id for CUDA device {index}: the energy counter cannot be found")
    from roofline_ext.measure.energy import NvmlEnergyReader

    try:
        reader = NvmlEnergyReader(str(facts["pci_bus_id"]))
    except EnergyCounterError as exc:
        raise NoGpu(str(exc)) from None
    return Gpu(facts=facts, reader=reader, core=core, core_reason=core_reason, torch=torch, torch_reason=torch_reason)


def ordered_items(gpu: Gpu, args: argparse.Namespace) -> list[Item]:
    """Own kernel first, then its library peers, unit by unit; ``--only`` keeps some keys."""
    own_bytes = (args.own_buffer_mib << 20) if args.own_buffer_mib else own_buffer_bytes(gpu.facts.get("l2_bytes"))
    own = own_items(gpu.core, args.device, unusable=gpu.core_reason, buffer_bytes=own_bytes, duty=args.duty)
    peers = peer_items(gpu.torch, args.device, unusable=gpu.torch_reason, gemm_n=args.gemm_n,
                       nbytes=int(args.peer_gib * 2**30) >> 20 << 20)
    wanted = set(args.only.split(",")) if args.only else None
    out = []
    for key in (*COMPUTE_KEYS, *HBM_PATTERNS):
        for it in [own[key], *peers.get(key, [])]:
            if wanted is None or it.key in wanted or it.origin in wanted:
                out.append(it)
    if not out:
        raise UserError(f"--only {args.only!r} keeps nothing; keys: {', '.join((*COMPUTE_KEYS, *HBM_PATTERNS))}, "
                        "or own / library")
    return out


def describe(run: Run, repeats: int) -> str:
    """One line per measurement, as it lands."""
    head = f"[{run.repeat + 1}/{repeats}] {run.item.key:9} {run.item.name}"
    k, c = run.kernel, run.cost
    if k is None or c is None:
        return f"{head}: {run.status}: {run.reason}"
    m, word = k.measurement, per_word(k.key)
    duty = f", kernels {run.duty:.0%} of the window" if run.duty is not None else ""
    tel = run.telemetry or {}
    clocks = f", SM {tel['sm_clock_mhz']:.0f} MHz" if tel.get("sm_clock_mhz") else ""
    slow = f", slowdown: {'/'.join(tel['slowdown'])}" if tel.get("slowdown") else ""
    total = c.j_total_per_unit * 1e12 if c.j_total_per_unit else math.nan
    rel = f"{m.relative_uncertainty:.1%}" if m.relative_uncertainty is not None else "?"
    return (f"{head}: {c.pj_per_unit:.4g} pJ/{word} above idle ({total:.4g} total) ± {rel}; "
            f"{m.power_w:.0f} W, idle {m.idle_w:.0f} W, {m.window_s:.2f} s{duty}{clocks}{slow}")


def _table(doc: Mapping[str, Any]) -> str:
    lines = [f"{'key':9} {'kernel':8} {'median':>10} {'spread':>7}  figure"]
    for f in doc["figures"]:
        s = f["pj_per_unit"]
        if s["median"] is None:
            lines.append(f"{f['key']:9} {f['kernel']:8} {'-':>10} {'-':>7}  {f['name']}: {f['status']}")
            continue
        spread = f"{s['spread']:.1%}" if s["spread"] is not None else "-"
        flag = "" if s["repeatable"] is not False else f"  (over {TARGET_SPREAD:.0%})"
        lines.append(f"{f['key']:9} {f['kernel']:8} {s['median']:10.4g} {spread:>7}  {f['name']} "
                     f"[pJ/{f['per']} above idle]{flag}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("json", type=Path, help="where the JSON goes")
    ap.add_argument("--plot", type=Path, help="also draw the energy roofline chart (.png or .svg)")
    ap.add_argument("--repeats", type=int, default=3, help="times the whole set is measured (default 3)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--only", help="comma-separated energy keys (fp64, ..., hbm_copy) or own / library")
    ap.add_argument("--window", type=float, default=MIN_WINDOW_S, help="shortest window, s (default 1)")
    ap.add_argument("--lag-target", type=float, default=LAG_TARGET,
                    help=f"edge-lag share each window is lengthened to (default {LAG_TARGET:g})")
    ap.add_argument("--duty", type=float, default=DUTY, help=f"own calls' kernel share (default {DUTY:g})")
    ap.add_argument("--gemm-n", type=int, default=8192, help="GEMM peers' M = N = K (default 8192)")
    ap.add_argument("--peer-gib", type=float, default=4.0, help="torch copy_/sum/fill_ buffer, GiB (default 4)")
    ap.add_argument("--own-buffer-mib", type=int, default=0,
                    help="own HBM kernels' buffer, MiB (default max(16 x L2, 1 GiB))")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        gpu = open_gpu(args.device)
    except NoGpu as exc:
        print(f"energy_roofline: {exc}")
        return 2
    from roofline_ext.device.telemetry import sampling

    started = time.monotonic()
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    settings.update(own_units=gpu.core_reason or "native core", library_units=gpu.torch_reason or "torch")
    try:
        items = ordered_items(gpu, args)
        runs = run_all(items, args.repeats, reader=gpu.reader, window_s=args.window, lag_target=args.lag_target,
                       telemetry=lambda: sampling(args.device),
                       report=lambda run, n: print(describe(run, n), flush=True))
    finally:
        gpu.reader.close()
    doc = document(runs, gpu.facts, settings)
    doc["duration_s"] = round(time.monotonic() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(_table(doc))
    print(f"wrote {args.json} ({doc['duration_s']:.0f} s)")
    if args.plot:
        try:
            out = chart(runs, args.plot, title=f"{gpu.facts.get('name')}: energy roofline",
                        subtitle=f"{doc['date']}; lowest of own and library kernels, median of {args.repeats}")
            print(f"wrote {out}")
        except Exception as exc:  # no matplotlib, nothing measured: the JSON stands without the chart
            print(f"energy_roofline: no chart: {exc}")
    bad = {r.status for r in runs} & {"failed", "error", "unresolved"}
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
