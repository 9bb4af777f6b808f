"""Run a check: a quick measurement of each GPU against its calibration and its SKU's reference.

Per GPU, in this order (BF16 first, on a card still cool from idle):

  bf16, fp32      the calibration's path and kernel configuration (else the fastest path this GPU
                  supports), 10 timed launches of about 2 ms after 3 warm-up ones, verified first;
  hbm_read/copy   one configuration each (the calibration's winner, else the default list's first),
                  buffers of max(8 x L2, 2 GiB), 10 timed launches, every one verified;
  h2d, d2h        pinned copies of 256 MiB, 10 timed, every word verified;

then every figure is compared with the same figure of the card's cached calibration (same UUID) and
with the SKU's reference (peaks/reference.py), each within its tolerance (check/tolerances.py), and
the device state is read: before the measurements (clock-event reasons, processes, utilisation,
temperature, before this process has a CUDA context there) and after them (error counters, the
PCIe link, processes again). Another process on the GPU at either reading (or a busy GPU before
the check) makes the GPU *busy*: its figures are shared and a shortfall is not held against the
card unless ``strict`` (check/outcome.py, ``settle``); a figure whose spread exceeds its bound is
*noisy* and never a PASS.

What measures is a backend object, so tests run the whole flow with a fake one and no GPU.
"""
from __future__ import annotations

import time
from typing import Any, Mapping

from .._version import __version__
from ..device.native import core_error_kind
from ..errors import GpuUnavailableError, RooflineError, UserError
from ..measure.bandwidth import MeasurementError
from ..measure.compute import ComputeBoundError
from ..measure.hostlink import link_of
from ..peaks.link_rate import pcie_gbps
from ..peaks.reference import CHECK_METRICS, HOSTLINK_FRACTION, METRIC_LABELS, reference_for
from ..timestamps import utc_now
from . import native_backend
from .outcome import IDLE, MetricCheck, Situation, Verdict, failed_metric, judge_metric, summary_reason, worst
from .plan import (COMPUTE_REPS, COMPUTE_TARGET_MS, COMPUTE_WARMUP, HBM_MIN_BYTES, HBM_REPS,  # noqa: F401 (re-exported)
                   HBM_WARMUP, HOSTLINK_BYTES, HOSTLINK_REPS, HOSTLINK_WARMUP, ORDER, CheckBackend, CheckProgress,
                   HBM_PATTERN, Measured, calibration_record, compute_setup, hbm_buffer_bytes, hbm_config, plan)
from .result import CheckReport, DeviceCheck
from .state import situation_of, state_items
from .tolerances import DEFAULT_TOLERANCES, spread_bound


# --- what to compare with (pure) ---------------------------------------------------------------

def calibrated_value(cal: Mapping[str, Any] | None, metric: str) -> float | None:
    """The card's own calibrated figure of a check metric (burst), or None."""
    if not cal:
        return None
    record = calibration_record(cal)
    if metric in ("h2d", "d2h"):
        return _positive(record.hostlink_figure(metric))
    if metric in HBM_PATTERN:
        hbm = record.burst_entry("hbm")
        return _positive(hbm.pattern_figure(HBM_PATTERN[metric])) if hbm is not None else None
    entry = record.burst_entry(metric)
    return _positive(entry.value) if entry is not None else None


def _positive(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def healthy_link_gbps(link: Any) -> float | None:
    """The rate the host link should have: a PCIe link at the most both ends support (so a link that
    trained down shows in the h2d/d2h verdicts too, not only in the state), else the link as it is."""
    if link.kind == "pcie":
        return pcie_gbps(link.max_gen or link.gen, link.max_width or link.width) or link.theoretical_gbps
    return link.theoretical_gbps


def reference_value(ref: Any, metric: str, link_gbps: float | None) -> float | None:
    if metric in ("h2d", "d2h"):
        return link_gbps * HOSTLINK_FRACTION if link_gbps else None
    return _positive((ref.values if ref is not None else {}).get(metric))


def _missing(cal: Mapping[str, Any] | None, ref: Any, metric: str) -> str:
    bits = []
    bits.append("no calibration of this card cached (run 'roofline-ext calibrate')" if not cal
                else f"its calibration has no {metric} figure")
    bits.append("no host-link rate known" if metric in ("h2d", "d2h")
                else ("no reference for this SKU" if ref is None else f"no {metric} reference for {ref.sku}"))
    return "; ".join(bits)


# --- running --------------------------------------------------------------------------------------

def _failure(exc: BaseException, label: str) -> tuple[Verdict, str]:
    """What a measurement that raised says about the card. Anything else is a bug and propagates."""
    kind = core_error_kind(exc)
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if kind == "VerificationError":
        return Verdict.FAIL, f"{label}: the card returned wrong data: {text}"
    if kind == "CudaError":
        return Verdict.FAIL, f"{label}: CUDA failed on this card: {text}"
    if isinstance(exc, (MeasurementError, ComputeBoundError)):
        return Verdict.UNKNOWN, f"{label}: the figure was rejected as impossible (a measurement bug): {text}"
    return Verdict.UNKNOWN, f"{label}: could not be measured: {text}"


def _is_expected_failure(exc: BaseException) -> bool:
    # By type: the core's exceptions (every build registers them), a bound rejected as impossible,
    # and this package's own errors.
    return core_error_kind(exc) is not None or isinstance(exc, (ComputeBoundError, RooflineError))


def _measure_one(backend: CheckBackend, index: int, metric: str, setup: Mapping[str, Any]
                 ) -> Measured | tuple[Verdict, str]:
    try:
        return backend.measure(index, metric, setup)
    except Exception as exc:  # only the failures a card can cause; a bug keeps its traceback
        if not _is_expected_failure(exc):
            raise
        return _failure(exc, METRIC_LABELS[metric])


def _judge(metric: str, got: Measured | tuple[Verdict, str], cal: Mapping[str, Any] | None, ref: Any,
           link_gbps: float | None, tolerances: Mapping[str, float], situation: Situation = IDLE) -> MetricCheck:
    label, unit = METRIC_LABELS[metric], CHECK_METRICS[metric]
    if isinstance(got, tuple):  # wrong data, a CUDA error: judged whatever the load
        return failed_metric(metric, label, unit, got[0], got[1])
    expectations = {"calibration": calibrated_value(cal, metric), "reference": reference_value(ref, metric, link_gbps)}
    # The clocks, power and reasons the figure was reached at go with it: they explain a low one.
    detail = {**dict(got.detail), "telemetry": dict(got.telemetry) if got.telemetry else None}
    tolerance = float(tolerances.get(metric, DEFAULT_TOLERANCES[metric]))
    return judge_metric(metric, label, unit, got.value, got.cv, expectations, tolerance, detail,
                        _missing(cal, ref, metric), spread_bound=spread_bound(tolerance), situation=situation)


def _cal_summary(cal: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not cal:
        return None
    return {"date": cal.get("date"), "mode": cal.get("mode"), "path": cal.get("_path"),
            "has_hostlink": bool(cal.get("hostlink"))}


def check_device(backend: CheckBackend, dev: Any, tolerances: Mapping[str, float],
                 progress: CheckProgress | None = None, *, strict: bool = False) -> DeviceCheck:
    """Measure, compare and read the state of one GPU (``dev`` is a ``device.listing.Device``);
    ``strict`` judges the figures as measured even when another process shares the GPU."""
    t0 = time.monotonic()
    start = backend.health(dev)  # before this process has a context on the card
    cal = backend.calibration(dev)
    ref = reference_for(dev.name)
    setups, skipped = plan(dev, cal, backend.compute_paths(dev.index), backend.free_bytes(dev.index))
    got: dict[str, Measured | tuple[Verdict, str]] = {}
    for metric in ORDER:
        name = f"GPU {dev.index}: {METRIC_LABELS[metric]}"
        if metric in setups:
            if progress:
                progress.start(name)
            got[metric] = _measure_one(backend, dev.index, metric, setups[metric])
        if progress:
            progress.advance(name)
    end = backend.health(dev)  # the link as the copies left it trained, the counters after the work
    situation = situation_of(start, end, strict=strict)
    link = link_of(end if not end.error else start, dev.name)
    metrics = tuple(_judge(m, g, cal, ref, healthy_link_gbps(link), tolerances, situation) for m, g in got.items())
    telemetry = {m: g.telemetry for m, g in got.items() if isinstance(g, Measured)}
    state = tuple(state_items(start, end, link, telemetry, cal, situation))
    verdict = worst([m.verdict for m in metrics] + [s.verdict for s in state])
    return DeviceCheck(
        index=dev.index, name=dev.name, uuid=dev.uuid, pci_bus_id=dev.pci_bus_id,
        sku=ref.sku if ref is not None else None, verdict=verdict,
        reason=summary_reason(list(metrics) + list(state), verdict, situation), metrics=metrics, state=state,
        skipped=skipped, calibration=_cal_summary(cal), reference=None if ref is None else ref.to_dict(),
        tolerances=dict(tolerances), wall_s=round(time.monotonic() - t0, 3), situation=situation)


def _select(backend: CheckBackend, spec: str | int) -> list[Any]:
    devs = [d for d in backend.devices() if d.index is not None and d.can_measure]
    text = str(spec).strip().lower()
    if text == "all":
        return sorted(devs, key=lambda d: d.index)
    try:
        index = int(text)
    except ValueError:
        raise UserError(f"--device must be a CUDA index (0, 1, ...) or 'all', not {spec!r}") from None
    chosen = [d for d in devs if d.index == index]
    if not chosen:
        raise UserError(f"no CUDA device {index}: {len(devs)} visible (indices 0..{len(devs) - 1})")
    return chosen


def run_check(device: str | int = "0", *, tolerances: Mapping[str, float] | None = None,
              backend: CheckBackend | None = None, progress: CheckProgress | None = None,
              strict: bool = False) -> CheckReport:
    """Check GPU ``device`` (a CUDA index or "all"); returns the report, never raises for a missing
    GPU (the report is then UNKNOWN with the reason). Raises UserError for a bad index. ``strict``:
    a GPU another process shares is judged on its figures as measured (normally they are "busy")."""
    if backend is None:
        backend = native_backend.NativeCheckBackend()
    t0 = time.monotonic()
    tolerances = dict(tolerances or DEFAULT_TOLERANCES)
    avail = backend.availability()
    if not avail.ok:
        return CheckReport(Verdict.UNKNOWN, f"no GPU can be checked here: {avail.message}", (), avail.to_dict(),
                           utc_now(), backend.package_version(), wall_s=round(time.monotonic() - t0, 3), no_gpu=True)
    chosen = _select(backend, device)
    if progress:
        progress.plan(len(chosen) * len(ORDER))
    devices = tuple(check_device(backend, d, tolerances, progress, strict=strict) for d in chosen)
    if not devices:
        return CheckReport(Verdict.UNKNOWN, "no CUDA device here can be measured", (), avail.to_dict(), utc_now(),
                           backend.package_version(), wall_s=round(time.monotonic() - t0, 3), no_gpu=True,
                           strict=strict)
    verdict = worst(d.verdict for d in devices)
    reason = ("every GPU passed" if verdict is Verdict.PASS else
              "; ".join(f"GPU {d.index}: {d.reason}" for d in devices if d.verdict is verdict))
    return CheckReport(verdict, reason, devices, avail.to_dict(), utc_now(), backend.package_version(),
                       wall_s=round(time.monotonic() - t0, 3), strict=strict)


def run_check_safely(device: str | int = "0", **kwargs: Any) -> CheckReport:
    """As :func:`run_check`, but a GPU that disappears between probing and measuring is UNKNOWN too."""
    try:
        return run_check(device, **kwargs)
    except GpuUnavailableError as exc:
        avail = exc.availability
        return CheckReport(Verdict.UNKNOWN, f"no GPU can be checked here: {avail.message}", (), avail.to_dict(),
                           utc_now(), __version__, no_gpu=True)


__all__ = ["run_check", "run_check_safely", "check_device", "plan", "Measured", "CheckBackend", "CheckProgress",
           "ORDER"]
