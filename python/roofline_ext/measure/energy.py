"""Energy around a callable, from NVML's total-energy counter (docs/energy.md).

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` is a board counter in millijoules since the driver
loaded, and it does not move continuously: on an H200 it steps about every 100 ms (issue 27). A
figure read off it is therefore only as good as the window it spans, so :func:`measure_energy`

1. polls the counter with the card idle, for at least ``idle_s``: the times at which it changes give
   its **update interval** (the median gap), the greatest common divisor of its steps its
   **resolution** (the quantum of the value; 1 mJ is the unit NVML reports in, a coarser quantum
   shows up in the gcd), and the energy between the first and last change over their time the
   **idle power**;
2. runs the callable (after ``warmup`` calls) until the counter steps, and opens the window at that
   step, so that the window's edges are counter updates rather than arbitrary moments;
3. keeps calling it until at least ``min_window_s`` (1 s) *and* ``min_intervals`` (10) update
   intervals have passed, and closes the window at the next step it sees;
4. returns an :class:`EnergyMeasurement`: J per call in total and above idle, idle power, the
   window, the counter's resolution and interval, and the uncertainty the window allows
   (:func:`window_uncertainty`, the formula is there).

The counter is read through a reader object (:class:`EnergyReader`: ``read_mj()``), so tests drive
the loop with a fake counter and a fake clock; the real one is :class:`NvmlEnergyReader`, over the
``pynvml`` module (``pip install nvidia-ml-py``). The native core does not read this counter (its
NVML table has power, not energy), and the Python bindings need no build, which is why this path
uses them rather than growing ``csrc/nvml.cpp``.

The callable must have *finished its work* when ``sync`` returns: a CUDA callable queues kernels and
returns at once, so pass ``sync=torch.cuda.synchronize`` (and ``batch`` > 1 to amortise it), or
the calls counted are calls queued, not calls whose energy the window holds.

Measurement results live here, beside the code that measures (docs/architecture.md); the energy
model (``model/energy.py``, a higher rank) reads this record, never the other way round.
"""
from __future__ import annotations

import dataclasses
import importlib
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from ..device import listing
from ..errors import RooflineError, UserError

__all__ = [
    "EnergyCounterError",
    "EnergyMeasurement",
    "EnergyReader",
    "NvmlEnergyReader",
    "CounterProbe",
    "probe_counter",
    "measure_energy",
    "window_uncertainty",
    "MIN_WINDOW_S",
    "MIN_INTERVALS",
]

#: The shortest window a figure is taken over: shorter ones are a handful of counter steps.
MIN_WINDOW_S = 1.0
#: The fewest counter update intervals a window spans (longer than MIN_WINDOW_S on a slow counter).
MIN_INTERVALS = 10
#: How often the idle phase polls: well below any counter interval seen (100 ms on an H200).
POLL_S = 0.001
#: Counter changes the idle phase needs before an interval is a median of something.
MIN_UPDATES = 3


class EnergyCounterError(RooflineError):
    """No energy counter to read: no NVML bindings, no NVML, a GPU without the counter, or a counter
    that never advanced. The message says which."""


class EnergyReader(Protocol):
    """A total-energy counter: ``read_mj()`` returns it in millijoules (monotonic, any origin)."""

    def read_mj(self) -> int: ...


class NvmlEnergyReader:
    """NVML's total-energy counter of one GPU, found by PCI bus id (as the telemetry sampler finds
    its GPU, so ``CUDA_VISIBLE_DEVICES`` cannot point it at another card), through ``pynvml``.

    Every failure is one :class:`EnergyCounterError` line: the module missing, NVML not loading,
    the bus id unknown, or the counter unsupported (NVML has it from Volta on)."""

    def __init__(self, pci_bus_id: str):
        try:
            # import_module, not `import pynvml`: the bindings are optional and carry no stubs, so
            # their surface stays Any here instead of failing the type check where they are absent.
            self._nvml: Any = importlib.import_module("pynvml")
        except ImportError as exc:
            raise EnergyCounterError(f"measuring energy needs NVML's Python bindings, which are not installed "
                                     f"({exc}); pip install nvidia-ml-py") from None
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no NVML here
            raise EnergyCounterError(f"measuring energy needs NVML, which did not start: {exc}") from None
        self._open = True
        try:
            self._handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
        except Exception as exc:
            self.close()
            raise EnergyCounterError(f"NVML has no GPU at PCI bus id {pci_bus_id!r}: {exc}") from None
        self.read_mj()  # an unsupported counter fails here, before any measuring starts

    def read_mj(self) -> int:
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception as exc:
            if getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                self.close()
                raise EnergyCounterError("this GPU has no NVML total-energy counter "
                                         f"(nvmlDeviceGetTotalEnergyConsumption: {exc}); NVML has it from "
                                         "Volta on") from None
            raise EnergyCounterError(f"reading NVML's total-energy counter failed: {exc}") from None

    def close(self) -> None:
        if getattr(self, "_open", False):
            self._open = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # shutting down a library that is going away: nothing left to report
                pass

    def __enter__(self) -> NvmlEnergyReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bus_id(device: int) -> str:
    return listing.device(device).pci_bus_id


# --------------------------------------------------------------------------------------------------
# The uncertainty of a window
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WindowUncertainty:
    """What a counter window allows, in joules (window, per call) and watts (idle)."""

    window_j: float           # of the counter difference over the window
    idle_w: float             # of the idle power
    total_per_call_j: float   # of J per call, in total
    above_idle_per_call_j: float  # of J per call above idle


def window_uncertainty(*, resolution_j: float, update_interval_s: float, power_w: float, window_s: float,
                       poll_gap_s: float, calls: int, idle_w: float, idle_window_s: float,
                       idle_poll_gap_s: float) -> WindowUncertainty:
    """The counter-reading uncertainty of one measurement (a bound, not a standard deviation).

    A window is the difference of two counter readings, each taken at a counter step we saw:

        σ_window = r + P × min(g, τ)

    r: the counter's resolution (a difference of two quantised values is off by less than one
    quantum); P: the window's mean power; g: the longest gap between two of our reads in the window
    (one batch of calls: a step is seen up to g after it happened, at either edge, and the calls
    counted and the energy read are off by the energy of that lag, the lags at the two edges
    partly cancelling, so one g in all); τ: the update interval (a reading is never staler than
    one interval, so g beyond τ adds nothing). The idle power comes from its own window the same way:

        σ_idle = (r + P_idle × min(g_idle, τ)) / W_idle

    and per call, over n calls in a window of W seconds:

        σ_total      = σ_window / n
        σ_above_idle = (σ_window + σ_idle × W) / n

    So the error per call falls as 1/n and the relative error as r/(P·W) + min(g, τ)/W: a 1 s
    window on a 100 ms counter with long calls is good to 10% only; the poll gap of short calls is
    what makes the tick-aligned window precise. The sensor's own accuracy (NVIDIA gives none for
    this counter) is not in it: docs/energy.md.
    """
    for name, v in (("resolution_j", resolution_j), ("update_interval_s", update_interval_s),
                    ("window_s", window_s), ("idle_window_s", idle_window_s)):
        if not (math.isfinite(v) and v > 0):
            raise UserError(f"{name} must be a positive number, got {v!r}")
    for name, v in (("power_w", power_w), ("poll_gap_s", poll_gap_s), ("idle_w", idle_w),
                    ("idle_poll_gap_s", idle_poll_gap_s)):
        if not (math.isfinite(v) and v >= 0):
            raise UserError(f"{name} must be a non-negative number, got {v!r}")
    if calls < 1:
        raise UserError(f"calls must be at least 1, got {calls!r}")
    sigma_window = resolution_j + power_w * min(poll_gap_s, update_interval_s)
    sigma_idle = (resolution_j + idle_w * min(idle_poll_gap_s, update_interval_s)) / idle_window_s
    return WindowUncertainty(
        window_j=sigma_window, idle_w=sigma_idle, total_per_call_j=sigma_window / calls,
        above_idle_per_call_j=(sigma_window + sigma_idle * window_s) / calls)


# --------------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EnergyMeasurement:
    """Energy of a callable over one counter window, with what the window allows.

    ``j_per_call_total``: the counter's energy over the window per call (the whole board, idle
    included); ``j_per_call_above_idle``: the same less ``idle_w`` × window, per call (what the work
    itself drew; may come out ≤ 0 for work too small for the counter, see ``uncertainty_above_idle_j``).
    Uncertainties are per call, from :func:`window_uncertainty`."""

    calls: int
    window_s: float
    window_j: float
    power_w: float
    idle_w: float
    idle_window_s: float
    j_per_call_total: float
    j_per_call_above_idle: float
    resolution_j: float
    update_interval_s: float
    poll_gap_s: float
    idle_poll_gap_s: float
    updates: int
    uncertainty_total_j: float
    uncertainty_above_idle_j: float
    uncertainty_idle_w: float

    @property
    def intervals(self) -> float:
        """How many counter update intervals the window spans."""
        return self.window_s / self.update_interval_s

    @property
    def relative_uncertainty(self) -> float | None:
        """``uncertainty_above_idle_j`` over the above-idle energy (None when that is ≤ 0)."""
        e = self.j_per_call_above_idle
        return self.uncertainty_above_idle_j / e if e > 0 else None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["intervals"] = self.intervals
        d["relative_uncertainty"] = self.relative_uncertainty
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EnergyMeasurement:
        """The record again from :meth:`to_dict` (which a worker's reply carries), the derived keys
        and anything a caller added beside them left out."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing = names - set(d)
        if missing:
            raise UserError(f"an energy measurement without {', '.join(sorted(missing))}")
        return cls(**{k: d[k] for k in names})

    @classmethod
    def from_window(cls, *, calls: int, window_s: float, window_j: float, idle_w: float, idle_window_s: float,
                    resolution_j: float, update_interval_s: float, poll_gap_s: float, idle_poll_gap_s: float,
                    updates: int) -> EnergyMeasurement:
        """The record of one window, its per-call figures and uncertainties computed here."""
        if window_j < 0:
            raise EnergyCounterError(f"the energy counter went backwards by {-window_j:.3f} J during the window "
                                     "(a driver reload or a counter reset): measure again")
        power = window_j / window_s
        u = window_uncertainty(resolution_j=resolution_j, update_interval_s=update_interval_s, power_w=power,
                               window_s=window_s, poll_gap_s=poll_gap_s, calls=calls, idle_w=idle_w,
                               idle_window_s=idle_window_s, idle_poll_gap_s=idle_poll_gap_s)
        return cls(calls=calls, window_s=window_s, window_j=window_j, power_w=power, idle_w=idle_w,
                   idle_window_s=idle_window_s, j_per_call_total=window_j / calls,
                   j_per_call_above_idle=(window_j - idle_w * window_s) / calls, resolution_j=resolution_j,
                   update_interval_s=update_interval_s, poll_gap_s=poll_gap_s, idle_poll_gap_s=idle_poll_gap_s,
                   updates=updates, uncertainty_total_j=u.total_per_call_j,
                   uncertainty_above_idle_j=u.above_idle_per_call_j, uncertainty_idle_w=u.idle_w)


# --------------------------------------------------------------------------------------------------
# The idle probe: interval, resolution, idle power
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CounterProbe:
    """What polling the idle card found: the counter's update interval and resolution, idle power."""

    update_interval_s: float
    resolution_j: float
    idle_w: float
    idle_window_s: float
    poll_gap_s: float
    updates: int

    @property
    def idle_uncertainty_w(self) -> float:
        """The idle power's counter-reading uncertainty, σ_idle of :func:`window_uncertainty`:
        (r + P_idle × min(g_idle, τ)) / W_idle."""
        return (self.resolution_j + self.idle_w * min(self.poll_gap_s, self.update_interval_s)) / self.idle_window_s

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "idle_uncertainty_w": self.idle_uncertainty_w}


def probe_counter(reader: EnergyReader, *, idle_s: float = MIN_WINDOW_S, clock: Callable[[], float] = time.perf_counter,
                  sleep: Callable[[float], None] = time.sleep, poll_s: float = POLL_S,
                  max_s: float | None = None) -> CounterProbe:
    """Poll the counter with nothing running for at least ``idle_s`` between its first and last seen
    step (and at least :data:`MIN_UPDATES` steps); give up after ``max_s`` (default ``idle_s`` + 5 s)
    with an :class:`EnergyCounterError`: a counter that never moves cannot measure anything."""
    if not (idle_s > 0 and poll_s > 0):
        raise UserError(f"idle_s and poll_s must be positive, got {idle_s!r} and {poll_s!r}")
    limit = max_s if max_s is not None else idle_s + 5.0
    start = clock()
    last = reader.read_mj()
    changes: list[tuple[float, int]] = []  # (time seen, value) at each step
    steps: list[int] = []
    gap, prev_t = 0.0, start
    while True:
        sleep(poll_s)
        value = reader.read_mj()
        t = clock()
        gap, prev_t = max(gap, t - prev_t), t
        if value != last:
            if value < last:
                raise EnergyCounterError(f"the energy counter went backwards ({last} -> {value} mJ) while idle: "
                                         "a driver reload or a counter reset; measure again")
            steps.append(value - last)  # every step is a whole update's energy: a gcd candidate
            changes.append((t, value))
            last = value
            if len(changes) >= MIN_UPDATES and changes[-1][0] - changes[0][0] >= idle_s:
                break
        if t - start > limit:
            raise EnergyCounterError(f"the energy counter advanced {len(changes)} time(s) in {t - start:.1f} s "
                                     f"(needs {MIN_UPDATES} over {idle_s:g} s): the counter is not updating on "
                                     "this GPU")
    times = [c[0] for c in changes]
    interval = statistics.median(b - a for a, b in zip(times, times[1:]))
    quantum = math.gcd(*steps) if steps else 1
    span = times[-1] - times[0]
    idle_w = (changes[-1][1] - changes[0][1]) * 1e-3 / span
    return CounterProbe(update_interval_s=interval, resolution_j=max(quantum, 1) * 1e-3, idle_w=idle_w,
                        idle_window_s=span, poll_gap_s=gap, updates=len(changes))


# --------------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------------

def measure_energy(fn: Callable[[], object], *, reader: EnergyReader | None = None, device: int = 0,
                   sync: Callable[[], object] | None = None, batch: int = 1, warmup: int = 1,
                   min_window_s: float = MIN_WINDOW_S, min_intervals: int = MIN_INTERVALS,
                   idle_s: float = MIN_WINDOW_S, max_window_s: float = 120.0,
                   probe: CounterProbe | None = None, clock: Callable[[], float] = time.perf_counter,
                   sleep: Callable[[float], None] = time.sleep) -> EnergyMeasurement:
    """Energy per call of ``fn`` over a counter-aligned window of ≥ ``min_window_s`` and ≥
    ``min_intervals`` update intervals, with idle power measured before (module docstring).

    ``reader``: the counter (default: NVML's, of CUDA device ``device``, through ``pynvml``);
    ``sync``: called after every ``batch`` calls, before the counter is read (a CUDA callable's
    ``torch.cuda.synchronize``); ``probe``: a :class:`CounterProbe` already taken (several
    measurements in a row on an idle card need one); ``clock``/``sleep``: injectable for tests.
    Raises :class:`EnergyCounterError` without a counter, or when the window cannot be closed within
    ``max_window_s``."""
    if batch < 1 or warmup < 0 or min_intervals < 1:
        raise UserError(f"batch must be ≥ 1, warmup ≥ 0 and min_intervals ≥ 1; got {batch}, {warmup}, "
                        f"{min_intervals}")
    if not (min_window_s > 0 and max_window_s > min_window_s):
        raise UserError(f"need 0 < min_window_s < max_window_s, got {min_window_s!r} and {max_window_s!r}")
    real = None
    if reader is None:
        real = reader = NvmlEnergyReader(_bus_id(device))
    counter: EnergyReader = reader
    try:
        if probe is None:
            probe = probe_counter(counter, idle_s=idle_s, clock=clock, sleep=sleep)
        return _window(fn, counter, probe, sync=sync, batch=batch, warmup=warmup, min_window_s=min_window_s,
                       min_intervals=min_intervals, max_window_s=max_window_s, clock=clock)
    finally:
        if real is not None:  # ours to close; an injected reader is the caller's
            real.close()


def _window(fn: Callable[[], object], counter: EnergyReader, probe: CounterProbe, *, sync: Callable[[], object] | None,
            batch: int, warmup: int, min_window_s: float, min_intervals: int, max_window_s: float,
            clock: Callable[[], float]) -> EnergyMeasurement:
    def run_batch() -> None:
        for _ in range(batch):
            fn()
        if sync is not None:
            sync()

    for _ in range(warmup):
        fn()
    if sync is not None:
        sync()
    # Open the window at a counter step seen while the work runs, so the card is already at the
    # work's power when the window opens and its edge is an update, not an arbitrary moment.
    need = max(min_window_s, min_intervals * probe.update_interval_s)
    began = clock()
    last = counter.read_mj()
    while True:
        run_batch()
        value, t = counter.read_mj(), clock()
        if value != last:
            break
        if t - began > max(10 * probe.update_interval_s, min_window_s):
            raise EnergyCounterError(f"the energy counter did not advance in {t - began:.2f} s of calls "
                                     f"(its idle interval was {probe.update_interval_s * 1e3:.0f} ms)")
    e0, t0 = value, t
    last, prev_t, gap, calls, updates = value, t, 0.0, 0, 0
    while True:
        run_batch()
        value, t = counter.read_mj(), clock()
        calls += batch
        gap, prev_t = max(gap, t - prev_t), t
        if value != last:
            updates += 1
            last = value
            if t - t0 >= need:
                break
        if t - t0 > max_window_s:
            raise EnergyCounterError(f"no counter step closed the window within {max_window_s:g} s "
                                     f"({updates} step(s) seen): the counter stopped, or one batch of calls "
                                     "outlasts the limit")
    return EnergyMeasurement.from_window(
        calls=calls, window_s=t - t0, window_j=(value - e0) * 1e-3, idle_w=probe.idle_w,
        idle_window_s=probe.idle_window_s, resolution_j=probe.resolution_j,
        update_interval_s=probe.update_interval_s, poll_gap_s=gap, idle_poll_gap_s=probe.poll_gap_s,
        updates=updates)


# --------------------------------------------------------------------------------------------------
# A CUDA call's energy, as ``analyze --time --energy`` measures it
# --------------------------------------------------------------------------------------------------

#: The idle probe of each device, taken once per process: a timing worker measures one task after
#: another on an idle card, and a probe costs a second of idle polling (docs/energy.md).
_PROBES: dict[int, CounterProbe] = {}
#: Calls between synchronises: enough that a batch runs about this long, so the host's reads and
#: synchronises stay a small part of the window.
BATCH_S = 0.02


def counter_for(device: int) -> NvmlEnergyReader:
    """NVML's total-energy counter of CUDA device ``device`` (found by its PCI bus id)."""
    return NvmlEnergyReader(_bus_id(device))


def warm_up(device: int) -> dict[str, Any]:
    """The timing worker's ``prepare`` step under ``--energy`` (``runner/worker.py``): open the
    counter once and take the idle probe of ``device`` (``_PROBES``), before the worker's snapshot
    of its process state. Why: the first use of NVML fills ``pynvml``'s function-pointer cache,
    which the snapshot then saw as a change made by the task, so every task replaced its worker
    and paid the counter's start and idle probe again, seconds a task (H200, 2026-12-02: L3 at
    8-11 s a task). The card is also idler here, before any task ran, than between tasks. A card
    without a counter is said, once, here; each task's energy then says it again."""
    t0 = time.perf_counter()
    try:
        counter = counter_for(device)
    except EnergyCounterError as exc:
        return {"energy": {"error": str(exc)}}
    try:
        _PROBES[device] = probe_counter(counter)
    except EnergyCounterError as exc:
        return {"energy": {"error": str(exc)}}
    finally:
        counter.close()
    return {"energy": {"idle_w": _PROBES[device].idle_w, "warm_up_s": round(time.perf_counter() - t0, 3)}}


def measure_call_energy(fn: Callable[[], object], *, device: int, call_ms: float,
                        flush: Callable[[], object] | None = None, reader: EnergyReader | None = None,
                        sync: Callable[[], object] | None = None, clock: Callable[[], float] = time.perf_counter,
                        sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """The energy per call of a CUDA callable whose event-timed median is ``call_ms``, over one
    counter window (:func:`measure_energy`), as a dict; or ``{"error": one line}`` when there is no
    counter to read (no ``pynvml``, no NVML, no counter): the time is still the result.

    ``flush`` (the timing's L2 flush) runs before every call, as in the timed loop, so a task small
    enough to stay in L2 is not measured warm, and its energy is counted with the call's: the
    figure is an upper bound of the call's own (``includes_flush``). The idle probe is taken once
    per process and device (``_PROBES``). ``sync`` (default ``torch.cuda.synchronize(device)``),
    ``clock`` and ``sleep``: injectable for tests."""
    if sync is None:
        import torch

        def sync() -> None:
            torch.cuda.synchronize(device)

    own = reader is None
    try:
        counter = reader if reader is not None else counter_for(device)
    except EnergyCounterError as exc:
        return {"error": str(exc)}
    try:
        probe = _PROBES.get(device) or probe_counter(counter, clock=clock, sleep=sleep)
        _PROBES[device] = probe

        def call() -> object:
            if flush is not None:
                flush()
            return fn()

        batch = max(1, math.ceil(BATCH_S * 1e3 / max(call_ms, 1e-3)))
        m = measure_energy(call, reader=counter, probe=probe, batch=batch, sync=sync, clock=clock, sleep=sleep)
    except EnergyCounterError as exc:
        return {"error": str(exc)}
    finally:
        if own:
            close = getattr(counter, "close", None)
            if close is not None:
                close()
    return {**m.to_dict(), "batch": batch, "includes_flush": flush is not None}
