"""One workload's energy per unit of work: set it up, check it, probe the idle counter, measure its
calls over one counter window, check it again (docs/energy.md).

What ``benchmarks/energy_roofline.py`` measured on the H200 (2026-12-02) and what calibration's
energy phase measures are the same operation, so it lives here once: a workload
(:class:`EnergyWorkload`: a call that does some work and says how much, the synchronise after each
batch, an output check, a clean-up) goes through :func:`measure_workload`, which returns a
:class:`WorkloadRun` with a status and the reason for any status but "ok". J per unit is the energy
above idle per call over the work per call; turning that into an energy *cost* (the floor's
lowest-of-measured rule) is ``model/energy.py``'s, a layer above.

The window: :func:`~roofline_ext.measure.energy.measure_energy`, with a fresh idle probe just before
it (a card that just ran something is warmer, and draws more at idle, than a cold one), one warm-up
call, and a length from :func:`window_for`: at least ``window_s`` (1 s), and long enough that the
counter's lag at the two edges stays :data:`LAG_TARGET` of it.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Mapping

from ..device.native import core_error_kind
from .energy import MIN_WINDOW_S, CounterProbe, EnergyMeasurement, EnergyReader, measure_energy, probe_counter

__all__ = [
    "LAG_TARGET",
    "Unsupported",
    "CheckFailed",
    "EnergyWorkload",
    "WorkloadRun",
    "measure_workload",
    "window_for",
    "telemetry_fields",
    "STATUSES",
]

#: The counter's lag at the window's two edges is up to one batch (or one update interval, whichever
#: is shorter) at each edge, uniformly, the two partly cancelling: a standard deviation of
#: min(g, tau)/sqrt(6) over the window. The window is lengthened until that is this fraction.
LAG_TARGET = 0.015

#: What a measured workload can come to: "ok"; "unsupported" (this GPU or build cannot run it, the
#: reason says why; reported, not failed); "failed" (a wrong output: its energy must not count);
#: "unresolved" (no energy above idle the counter could see); "error" (anything else went wrong).
STATUSES = ("ok", "unsupported", "failed", "unresolved", "error")


class Unsupported(Exception):
    """This unit cannot run on this GPU or build (the message says why): reported, not failed."""


class CheckFailed(Exception):
    """A workload's output was wrong: its energy must not be counted."""


Call = Callable[[], "tuple[float, float | None]"]


@dataclass
class EnergyWorkload:
    """One workload set up to be measured.

    ``call()`` runs the work once and returns (work it did, seconds its kernels ran or None);
    ``sync`` is called after every ``batch`` calls; ``call_s`` is one batch's expected wall time
    (the window rule needs it); ``check()`` returns why the output is wrong, or None; ``close()``
    frees what setting up allocated; ``info`` is what the set-up wants recorded (sizing, config)."""

    call: Call
    sync: Callable[[], object] | None = None
    batch: int = 1
    call_s: float = 0.0
    check: Callable[[], str | None] | None = None
    close: Callable[[], None] | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorkloadRun:
    """One workload measured once: ``status`` (one of :data:`STATUSES`) and ``reason``; where a
    window was measured, its :class:`EnergyMeasurement`, the mean work per call of the window's own
    calls, the share of the window the kernels ran (``duty``, None when a call did not say), the
    window the rule asked for, and what the telemetry sampler saw (:func:`telemetry_fields`)."""

    status: str
    reason: str | None = None
    measurement: EnergyMeasurement | None = None
    work_per_call: float | None = None
    duty: float | None = None
    window_rule_s: float | None = None
    telemetry: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def j_per_unit(self) -> float | None:
        """Energy above idle per unit of work (J/FLOP, J/OP or J/byte), where measured."""
        m, w = self.measurement, self.work_per_call
        return m.j_per_call_above_idle / w if m is not None and w else None

    @property
    def j_total_per_unit(self) -> float | None:
        """The whole board's energy (idle included) per unit of work, where measured."""
        m, w = self.measurement, self.work_per_call
        return m.j_per_call_total / w if m is not None and w else None

    @property
    def uncertainty_per_unit(self) -> float | None:
        """The counter-reading uncertainty of :attr:`j_per_unit` (``window_uncertainty``), where measured."""
        m, w = self.measurement, self.work_per_call
        return m.uncertainty_above_idle_j / w if m is not None and w else None


def window_for(call_s: float, interval_s: float, floor_s: float = MIN_WINDOW_S, target: float = LAG_TARGET) -> float:
    """The window for batches of ``call_s`` on a counter stepping every ``interval_s``: at least
    ``floor_s``, and long enough that the edge lag (sigma = min(g, tau)/sqrt(6)) is ``target`` of it."""
    lag = min(max(call_s, 0.0), interval_s)
    return max(floor_s, lag / (math.sqrt(6.0) * target))


def _failure(exc: Exception) -> str:
    # The native core's VerificationError (a wrong own kernel) and CheckFailed (a wrong output) are
    # a figure that must not count; anything else is an error of the run, not of the kernel.
    return "failed" if isinstance(exc, CheckFailed) or core_error_kind(exc) == "VerificationError" else "error"


def _set_up(setup: Callable[[], EnergyWorkload]) -> tuple[EnergyWorkload | None, WorkloadRun | None]:
    """The workload set up and its output checked, or the run that says why it cannot be measured."""
    try:
        workload = setup()
    except Unsupported as exc:
        return None, WorkloadRun("unsupported", str(exc))
    except Exception as exc:
        return None, WorkloadRun(_failure(exc), f"{type(exc).__name__}: {exc}")
    try:
        bad = workload.check() if workload.check is not None else None
    except Exception as exc:
        bad = f"{type(exc).__name__}: {exc}"
    if bad:
        _close(workload)
        return None, WorkloadRun("failed", f"output check before the window: {bad}", info=workload.info)
    return workload, None


def _close(workload: EnergyWorkload) -> None:
    if workload.close is not None:
        workload.close()


class _NoTelemetry:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def measure_workload(setup: Callable[[], EnergyWorkload], *, reader: EnergyReader, name: str = "workload",
                     clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep,
                     window_s: float = MIN_WINDOW_S, lag_target: float = LAG_TARGET, idle_s: float = MIN_WINDOW_S,
                     telemetry: Callable[[], ContextManager[Any]] | None = None,
                     probe: CounterProbe | None = None) -> WorkloadRun:
    """Set a workload up, probe the idle counter (unless ``probe`` is given), and measure its calls
    over one window; ``name`` is for the reasons. Never raises for the workload's own failures: they
    are the run's status and reason (module docstring). The work per call is the mean of what the
    window's own calls reported. An output check that fails after the window keeps the measurement
    (for the record) with status "failed"; energy above idle at or below zero is "unresolved"."""
    workload, early = _set_up(setup)
    if early is not None:
        return early
    assert workload is not None
    done: list[tuple[float, float | None]] = []
    prepared = workload

    def fn() -> None:
        done.append(prepared.call())

    tel: Any = None
    try:
        if probe is None:
            probe = probe_counter(reader, idle_s=idle_s, clock=clock, sleep=sleep)
        window = window_for(workload.call_s, probe.update_interval_s, window_s, lag_target)
        with (telemetry() if telemetry is not None else _NoTelemetry()) as tel:
            m = measure_energy(fn, reader=reader, sync=workload.sync, batch=workload.batch, min_window_s=window,
                               max_window_s=max(120.0, 4 * window), probe=probe, clock=clock, sleep=sleep)
        bad = workload.check() if workload.check is not None else None
    except Exception as exc:
        return WorkloadRun(_failure(exc), f"{type(exc).__name__}: {exc}", info=workload.info)
    finally:
        _close(workload)
    in_window = done[-m.calls:]
    kernel_s = [k for _, k in in_window if k is not None]
    run = WorkloadRun("ok", measurement=m, work_per_call=statistics.fmean(w for w, _ in in_window),
                      duty=sum(kernel_s) / m.window_s if len(kernel_s) == len(in_window) else None,
                      window_rule_s=window, info=workload.info,
                      telemetry=telemetry_fields(_summary(tel)))
    if bad:
        run.status, run.reason = "failed", f"output check after the window: {bad}"
    elif not (run.work_per_call and run.work_per_call > 0):
        run.status, run.reason = "error", f"{name}: its calls reported no work ({run.work_per_call!r})"
    elif m.j_per_call_above_idle <= 0:
        # A free unit would make every floor zero: this is the counter's granularity, not a figure.
        run.status, run.reason = "unresolved", (
            f"{name}: {m.j_per_call_above_idle:.3g} J per call above idle (± {m.uncertainty_above_idle_j:.2g} J): "
            "too little for the counter; measure more work per call")
    return run


def _summary(tel: Any) -> Mapping[str, Any] | None:
    summary = getattr(tel, "summary", None)
    return summary() if callable(summary) else None


def telemetry_fields(summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the telemetry sampler saw during a window (median power, clocks, temperature, the
    clock-event reasons by name and the slowdown ones among them); None where it could not sample."""
    if not summary:
        return None

    def median(key: str) -> float | None:
        v = summary.get(key)
        return v.get("median") if isinstance(v, Mapping) else None

    return {"power_w": median("power_w"), "sm_clock_mhz": median("sm_clock_mhz"),
            "mem_clock_mhz": median("mem_clock_mhz"), "temperature_c": median("temperature_c"),
            "throttle_reasons": list(summary.get("throttle_reasons") or []),
            "slowdown": list(summary.get("slowdown") or []), "samples": summary.get("samples"),
            "power_w_range": summary.get("power_w"), "sm_clock_mhz_range": summary.get("sm_clock_mhz")}
