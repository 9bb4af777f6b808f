"""The energy part of a full calibration's sustained phase: J per FLOP (per OP for INT8) of every
precision and J per byte of HBM read, write and copy, from the tool's own verified kernels, and the
card's idle power; each figure with the power, clocks, temperature and clock-event reasons seen,
the counter's measured resolution and update interval, and its uncertainty (docs/energy.md,
docs/measuring.md §8).

It runs after the sustained units, on a card at its sustained temperature, and measures what
``benchmarks/energy_roofline.py`` measured on the H200 (2026-12-02) with the same code
(``measure/energy_workload.py``, ``measure/energy_kernels.py``): per unit, the burst winner's path
(its first default configuration, the one the burst phase timed) or each HBM pattern's winning
kernel configuration, a fresh idle probe, then a counter-aligned window of at least 1 s.

Skipped, with the reason recorded (``{"status": "skipped", "reason": ...}``), when the calibration
is quick or its sustained phase does not run, when the caller asks (``calibrate(energy=False)``,
``--no-energy``), when the backend cannot measure energy, or when NVML's energy counter cannot be
read (no ``nvidia-ml-py``, no NVML, a GPU without the counter). Nothing is ever filled in: a unit
that cannot run says why.

After the own kernels, the library peers are measured the same way (``energy.peers``, per key a
list: cuBLAS TF32/FP16/BF16 GEMMs through ``torch.matmul``, torch ``sum`` / ``fill_`` / ``copy_``
for HBM read / write / copy; ``measure/energy_peers.py``), where the backend can run them (its
``energy_peer_workload``; the native backend needs torch with CUDA, and says so per peer when it
has none). An energy floor is built on the lowest figure of each unit, own or library
(``model/energy.py``): on the H200 the own kernels alone left eight L1 references below their floor.

Python decides here what to run (:func:`plan`, :func:`peer_plan`, pure); the backend runs it
(``energy_counter`` / ``energy_workload`` / ``energy_peer_workload``, see
``calibration/backend.py``), so tests hand in fakes.
The section is plain JSON; ``model/energy.py`` (``EnergyCosts.from_calibration``) turns it into the
costs an energy floor is built on, and ``peaks/record.py`` reads it typed.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from ..measure.compute import PRECISIONS
from ..measure.energy import MIN_WINDOW_S, EnergyCounterError, probe_counter
from ..measure.energy_kernels import HBM_PATTERNS, own_buffer_bytes
from ..measure.energy_peers import peer_names
from ..measure.energy_workload import LAG_TARGET, WorkloadRun, measure_workload, telemetry_fields
from ..peaks.units import UNITS, short_label

__all__ = ["ENERGY_KEYS", "COMPUTE_ENERGY_KEYS", "HBM_ENERGY_KEYS", "ESTIMATED_ITEM_S", "PEER_GEMM_N", "estimated_s",
           "plan", "peer_plan", "skipped", "energy_phase", "UNCERTAINTY_RULE"]

#: The precisions with an energy per FLOP, in the units registry's order (as ``model/energy.py``
#: keys its costs), and the HBM patterns with an energy per byte moved.
COMPUTE_ENERGY_KEYS: tuple[str, ...] = tuple(u for u in UNITS if u in PRECISIONS)
HBM_ENERGY_KEYS: tuple[str, ...] = tuple(HBM_PATTERNS)
ENERGY_KEYS = COMPUTE_ENERGY_KEYS + HBM_ENERGY_KEYS
#: Rough wall seconds per unit (sizing calls, the 1 s idle probe, the warm-up call, a window of 1 to
#: 3 s; the benchmark's own units took 4 to 6 s each on the H200), for the budget and progress bar.
ESTIMATED_ITEM_S = 6.0
_IDLE_S = MIN_WINDOW_S
#: The library GEMM peers' size: n x n x n (issue 27's cuBLAS figures were 8192^3).
PEER_GEMM_N = 8192
#: What every figure's ``uncertainty`` is (measure/energy.py, ``window_uncertainty``): a bound on
#: reading the counter, not the sensor's accuracy nor run-to-run variation.
UNCERTAINTY_RULE = ("counter-reading bound: (resolution + power x min(poll gap, update interval)) per window edge "
                    "pair, plus the idle power's own bound x the window, over the calls; not the sensor's accuracy")


def estimated_s(keys: Sequence[str] = ENERGY_KEYS, window_s: float = MIN_WINDOW_S, *, peers: bool = True) -> float:
    """What the phase should cost, in wall seconds (the budget takes it off the sustained window):
    a window longer than the shortest adds its extra seconds per unit; ``peers``: with the library
    peers of those units."""
    items = len(keys) + (sum(len(peer_plan(k, None)) for k in keys) if peers else 0)
    return _IDLE_S + 0.5 + (ESTIMATED_ITEM_S + max(0.0, window_s - MIN_WINDOW_S)) * items


def skipped(reason: str) -> dict[str, Any]:
    """The section of a calibration whose energy was not measured, and why."""
    return {"status": "skipped", "reason": reason, "entries": {}}


def _label(key: str) -> str:
    return f"HBM {HBM_PATTERNS[key]}" if key in HBM_PATTERNS else short_label(key)


def _per(key: str) -> str:
    return "byte" if key in HBM_PATTERNS else ("OP" if key == "int8" else "FLOP")


def plan(entries: Mapping[str, Mapping[str, Any]], unsupported: Mapping[str, str], l2_bytes: int | None,
         keys: Sequence[str] = ENERGY_KEYS) -> dict[str, dict[str, Any] | str]:
    """Per energy key, what to run (a spec for the backend's ``energy_workload``) or why not (a str).

    A precision runs on its burst winner's path (the roof path) with that path's first default
    configuration, which is the one the burst phase timed; a unit the burst phase could not run
    says why. An HBM pattern runs its burst winner's kernel configuration on buffers of
    max(16 x L2, 1 GiB) (``own_buffer_bytes``: 1 GiB keeps read's host checksum short against the
    window), or the pattern's first default configuration where the winner was the driver's copy
    (``cudaMemcpyAsync`` is not one of the tool's kernels) or none was recorded."""
    out: dict[str, dict[str, Any] | str] = {}
    hbm = entries.get("hbm") or {}
    patterns = hbm.get("patterns") or {}
    for key in keys:
        if key in HBM_PATTERNS:
            pattern = HBM_PATTERNS[key]
            if not hbm:
                out[key] = "no HBM burst figure: the bandwidth phase did not measure"
                continue
            cfg = (patterns.get(pattern) or {}).get("config") or (hbm.get("config") if hbm.get("path") == pattern else None)
            source = "burst winner"
            if not cfg or cfg.get("load") == "memcpy":
                cfg, source = None, ("first default (the burst winner was the driver's copy)" if cfg
                                     else "first default (no burst configuration recorded)")
            size = own_buffer_bytes(l2_bytes)
            out[key] = {"kind": "hbm", "pattern": pattern, "config": dict(cfg) if cfg else None,
                        "config_source": source, "buffer_bytes": size,
                        "name": f"roofline_ext HBM {pattern} {size / 2**30:g} GiB"}
            continue
        entry = entries.get(key)
        if entry is None:
            out[key] = unsupported.get(key) or "no burst figure to run it from"
            continue
        path = str(entry.get("path"))
        out[key] = {"kind": "compute", "precision": key, "path": path, "config": None,
                    "config_source": "first default (the burst phase's)", "name": f"roofline_ext {path} {key}"}
    return out


def peer_plan(key: str, l2_bytes: int | None) -> list[dict[str, Any]]:
    """The library peers to measure beside an energy key's own kernel (specs for the backend's
    ``energy_peer_workload``): the HBM ones on buffers of the own kernels' size, so both move the
    same bytes; [] for a unit without one (fp64, fp32, fp8, int8)."""
    nbytes = own_buffer_bytes(l2_bytes)
    return [{"kind": "peer", "key": key, "name": name, "gemm_n": PEER_GEMM_N, "nbytes": nbytes}
            for name in peer_names(key, gemm_n=PEER_GEMM_N, nbytes=nbytes)]


def _figure(key: str, spec: Mapping[str, Any] | str, run: WorkloadRun | None, origin: str = "own") -> dict[str, Any]:
    """One unit's energy entry: what ran, its status, J per unit above idle and in total with the
    uncertainty, and what the counter and the telemetry saw during its window."""
    per = _per(key)
    out: dict[str, Any] = {"key": key, "label": _label(key), "per": per, "unit": f"J/{per}", "origin": origin}
    if isinstance(spec, str) or run is None:
        out.update(status="unsupported", reason=str(spec))
        return out
    out.update(status=run.status, reason=run.reason, source=spec["name"], kernel=spec["name"],
               path=spec.get("path") or spec.get("pattern"), config_source=spec.get("config_source"))
    m = run.measurement
    if m is None:
        out["info"] = run.info
        return out
    tel = run.telemetry or {}
    counted = run.status == "ok"
    out.update({
        # The cost fields (model/energy.py's EnergyCost names); only a figure that counted has them.
        "j_per_unit": run.j_per_unit if counted else None,
        "j_total_per_unit": run.j_total_per_unit if counted else None,
        "uncertainty": run.uncertainty_per_unit if counted else None,
        "pj_per_unit": run.j_per_unit * 1e12 if counted and run.j_per_unit is not None else None,
        "relative_uncertainty": m.relative_uncertainty,
        "uncertainty_rule": UNCERTAINTY_RULE,
        "work_per_call": run.work_per_call, "calls": m.calls, "window_s": m.window_s,
        "window_rule_s": run.window_rule_s, "kernel_duty": run.duty,
        "power_w": m.power_w, "idle_w": m.idle_w,
        "resolution_j": m.resolution_j, "update_interval_s": m.update_interval_s,
        # What NVML's sampler saw meanwhile (None without telemetry).
        "sm_clock_mhz": tel.get("sm_clock_mhz"), "mem_clock_mhz": tel.get("mem_clock_mhz"),
        "temperature_c": tel.get("temperature_c"), "sampled_power_w": tel.get("power_w"),
        "throttle_reasons": tel.get("throttle_reasons", []), "slowdown": tel.get("slowdown", []),
        "telemetry": run.telemetry, "measurement": m.to_dict(), "info": run.info,
    })
    return out


def energy_phase(backend: Any, device: int, dev: Any, entries: Mapping[str, Mapping[str, Any]],
                 unsupported: Mapping[str, str], *, keys: Sequence[str] = ENERGY_KEYS,
                 progress: Callable[[float, str], None] | None = None,
                 window_s: float = MIN_WINDOW_S, lag_target: float = LAG_TARGET,
                 idle_s: float = _IDLE_S) -> tuple[dict[str, Any], list[str]]:
    """Measure every unit's energy per unit of work on ``device``: (the calibration's ``energy``
    section, warnings). ``entries``/``unsupported``: the burst phase's; ``progress(fraction, what)``
    as the phase goes. Never raises for a missing counter: the section then says ``skipped`` and why.

    The time the counter is read against is the counter's own where it brings one (a reader with
    ``clock()`` and ``sleep(s)``: a test's fake board, whose time moves only with its fake work);
    NVML's counter is read against the host's ``time.perf_counter``."""
    counter_of = getattr(backend, "energy_counter", None)
    workload_of = getattr(backend, "energy_workload", None)
    if counter_of is None or workload_of is None:
        return skipped(f"the calibration backend ({type(backend).__name__}) has no energy counter "
                       "(energy_counter / energy_workload)"), []
    try:
        reader = counter_of(device, dev)
    except EnergyCounterError as exc:
        return skipped(str(exc)), []
    clock = getattr(reader, "clock", None) or time.perf_counter
    sleep = getattr(reader, "sleep", None) or time.sleep
    try:
        return _measure(backend, device, dev, reader, entries, unsupported, keys, progress, clock, sleep,
                        window_s, lag_target, idle_s)
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()


def _measure(backend: Any, device: int, dev: Any, reader: Any, entries: Mapping[str, Mapping[str, Any]],
             unsupported: Mapping[str, str], keys: Sequence[str], progress: Callable[[float, str], None] | None,
             clock: Callable[[], float], sleep: Callable[[float], None], window_s: float, lag_target: float,
             idle_s: float) -> tuple[dict[str, Any], list[str]]:
    peer_of = getattr(backend, "energy_peer_workload", None)
    peers = {k: peer_plan(k, getattr(dev, "l2_bytes", None)) for k in keys} if peer_of is not None else {}
    items = len(keys) + sum(len(v) for v in peers.values())

    def say(done: float, what: str) -> None:
        if progress is not None:
            progress(done / (items + 1), what)

    say(0, "idle power and the energy counter")
    try:
        # The card's idle power (and the counter's interval and resolution) at the start of the
        # phase, with what the telemetry sampler saw meanwhile; each unit probes again before its
        # window, since idle drifts with temperature.
        with backend.sampling(device) as tel:
            probe = probe_counter(reader, idle_s=idle_s, clock=clock, sleep=sleep)
    except EnergyCounterError as exc:
        return skipped(str(exc)), []
    summary = getattr(tel, "summary", None)
    idle_tel = telemetry_fields(summary() if callable(summary) else None) or {}
    section: dict[str, Any] = {
        "status": "measured", "reason": None,
        "counter": {"update_interval_s": probe.update_interval_s, "resolution_j": probe.resolution_j,
                    "updates": probe.updates, "poll_gap_s": probe.poll_gap_s,
                    "source": "NVML nvmlDeviceGetTotalEnergyConsumption (whole board)"},
        "idle": {"power_w": probe.idle_w, "uncertainty_w": probe.idle_uncertainty_w, "window_s": probe.idle_window_s,
                 "sm_clock_mhz": idle_tel.get("sm_clock_mhz"), "mem_clock_mhz": idle_tel.get("mem_clock_mhz"),
                 "temperature_c": idle_tel.get("temperature_c"), "sampled_power_w": idle_tel.get("power_w"),
                 "throttle_reasons": idle_tel.get("throttle_reasons", [])},
        "uncertainty_rule": UNCERTAINTY_RULE,
        "entries": {},
    }
    warnings: list[str] = []

    def measured(key: str, spec: Mapping[str, Any] | str, workload_of: Callable[..., Any], origin: str) -> dict[str, Any]:
        run = None
        if not isinstance(spec, str):
            def setup(s: Mapping[str, Any] = spec, k: str = key) -> Any:
                return workload_of(device, dev, k, s, clock=clock)

            run = measure_workload(setup, reader=reader, name=spec["name"],
                                   clock=clock, sleep=sleep, window_s=window_s, lag_target=lag_target, idle_s=idle_s,
                                   telemetry=lambda: backend.sampling(device))
        figure = _figure(key, spec, run, origin)
        if figure["status"] not in ("ok", "unsupported"):
            what = figure["label"] if origin == "own" else figure.get("source") or figure["label"]
            warnings.append(f"energy {what}: {figure['status']}: {figure['reason']}")
        return figure

    todo = plan(entries, unsupported, getattr(dev, "l2_bytes", None), keys)
    for i, key in enumerate(keys):
        say(i + 1, f"energy per {_per(key)} of {_label(key)}")
        section["entries"][key] = measured(key, todo[key], backend.energy_workload, "own")
    done = len(keys)
    if peer_of is not None:
        section["peers"] = {}
        for key, specs in peers.items():
            for spec in specs:
                done += 1
                say(done, f"energy of {spec['name']}")
                section["peers"].setdefault(key, []).append(measured(key, spec, peer_of, "library"))
    ok = [k for k, f in section["entries"].items() if f["status"] == "ok"]
    if not ok:
        section["status"] = "failed"
        section["reason"] = "no unit's energy could be measured (each entry says why)"
    return section, warnings
