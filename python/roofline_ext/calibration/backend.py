"""What a calibration measures with: an object, so tests hand in a small fake instead of patching.

:class:`NativeBackend` is the real one: the device layer for identity and state, the measurement
layer's verified kernels for every figure. Burst figures are exactly what ``measure_bandwidth`` /
``measure_compute`` report (same functions, same policy), so a calibration and a standalone
measurement agree; only how often and how long they run differs.
"""
from __future__ import annotations

import time
from typing import Any, Callable, ContextManager, Mapping, Protocol, cast

from ..device.listing import device as get_device
from ..device.native import core_or_none
from ..device import status
from ..device.status import Availability, require_measurement
from ..device.telemetry import sampling
from ..measure.bandwidth import measure_bandwidth, measure_l2, measure_pattern
from ..measure.compute import measure_compute, measure_path
from ..measure.energy import EnergyCounterError, NvmlEnergyReader
from ..measure.energy_kernels import compute_workload, hbm_workload
from ..measure.energy_peers import peer_workload
from ..measure.energy_workload import Unsupported
from ..measure.hostlink import DEFAULT_REPS, measure_hostlink
from ..measure.smem import measure_smem

#: Quick mode: the two patterns that give the HBM peak on every GPU measured so far, fewer reps.
_QUICK_PATTERNS = ("read", "copy")




class Backend(Protocol):
    """The calls a calibration makes; see :class:`NativeBackend` for what each returns."""

    def require(self, device: int) -> Availability: ...
    def device(self, index: int) -> Any: ...
    def nvml_state(self, dev: Any) -> dict[str, Any]: ...
    def build_info(self) -> dict[str, Any]: ...
    def sampling(self, device: int) -> ContextManager[Any]: ...
    def measure_bandwidth(self, device: int, *, quick: bool,
                          progress: Callable[[float, float, str], None] | None = None) -> Any: ...
    def measure_compute(self, device: int, precision: str, *, quick: bool,
                        progress: Callable[[str], None] | None = None) -> Any: ...
    # Optional (calibration/pipeline.py skips the entry for a backend without it): shared memory.
    def measure_smem(self, device: int, *, quick: bool) -> Any: ...
    def sustained_runner(self, device: int, family: str, burst: Mapping[str, Any], dev: Any) -> Callable[[int], Any]: ...
    # Optional: a telemetry sample's clock-event bitmask as names, for flagging throttled sustained
    # calls (without it, only low clocks flag).
    def reason_names(self, mask: int) -> list[str]: ...
    # Optional (calibration/energy_phase.py skips energy, saying so, for a backend without them): the
    # board's energy counter (raises EnergyCounterError with the reason), and one unit's own kernel
    # as an energy workload from the phase's plan.
    def energy_counter(self, device: int, dev: Any) -> Any: ...
    def energy_workload(self, device: int, dev: Any, key: str, spec: Mapping[str, Any], *,
                        clock: Callable[[], float] = ...) -> Any: ...
    # Optional (without it no library peer is measured): one library product as an energy workload.
    def energy_peer_workload(self, device: int, dev: Any, key: str, spec: Mapping[str, Any], *,
                             clock: Callable[[], float] = ...) -> Any: ...


class NativeBackend:
    """The native core, through the device and measurement layers. ``core``: the native module to
    run the energy workloads on (default: the device layer's; tests pass a fake core)."""

    def __init__(self, core: Any = None) -> None:
        self._core = core

    def require(self, device: int) -> Availability:
        return require_measurement(device)

    def device(self, index: int) -> Any:
        return get_device(index)

    def nvml_state(self, dev: Any) -> dict[str, Any]:
        """A fresh NVML reading of the device (clocks, power, reasons, processes); {} without NVML."""
        core = core_or_none()
        if core is None or not getattr(dev, "pci_bus_id", None):
            return {}
        try:
            return dict(core.nvml_device_by_pci_bus_id(dev.pci_bus_id))
        except Exception:  # NVML unavailable: the warnings that need it are simply not given
            return {}

    def build_info(self) -> dict[str, Any]:
        core = core_or_none()
        try:
            return dict(core.build_info()) if core is not None else {}
        except Exception:  # identity only; the measurements already proved the core works
            return {}

    def sampling(self, device: int) -> ContextManager[Any]:
        return sampling(device)

    def reason_names(self, mask: int) -> list[str]:
        """NVML's clock-event bitmask as the core names it (``sw_power_cap``, ``hw_slowdown``, ...)."""
        core = core_or_none()
        names = getattr(core, "reason_names", None)
        return list(names(int(mask))) if names is not None else []

    def measure_bandwidth(self, device: int, *, quick: bool,
                          progress: Callable[[float, float, str], None] | None = None) -> Any:
        if quick:
            return measure_bandwidth(device, patterns=_QUICK_PATTERNS, reps=15, warmup=3, l2=False,
                                     progress=progress)
        # Full: the L2 curve and the read:write envelope too (the mix reuses the patterns measured).
        return measure_bandwidth(device, l2=True, mix=True, progress=progress)

    def measure_smem(self, device: int, *, quick: bool) -> Any:
        """Shared-memory bandwidth against SMs x 128 B/clock x the clock its kernel counted."""
        return measure_smem(device, reps=12 if quick else 20)

    def measure_compute(self, device: int, precision: str, *, quick: bool,
                        progress: Callable[[str], None] | None = None) -> Any:
        """One precision, every path that can run it (the best path's median is the roof)."""
        if quick:
            # Fewer repetitions and a shorter idle before each path keep the quick run within ~15 s;
            # the kernels, their sizing and their verification are the standalone ones.
            return measure_compute(device, precisions=(precision,), reps=12, warmup=3, cooldown_s=0.2,
                                   progress=progress)
        return measure_compute(device, precisions=(precision,), progress=progress)

    def measure_hostlink(self, device: int, *, quick: bool) -> Any:
        """Pinned h2d and d2h copy bandwidth (measure/hostlink.py), fewer repetitions when quick."""
        return measure_hostlink(device, reps=10 if quick else DEFAULT_REPS)

    def energy_counter(self, device: int, dev: Any) -> Any:
        """NVML's total-energy counter of the card, found by its PCI bus id (``measure/energy.py``);
        raises ``EnergyCounterError`` with the one-line reason when it cannot be read."""
        bus = getattr(dev, "pci_bus_id", None)
        if not bus:
            raise EnergyCounterError(f"no PCI bus id for CUDA device {device}: the energy counter cannot be found")
        return NvmlEnergyReader(str(bus))

    def energy_workload(self, device: int, dev: Any, key: str, spec: Mapping[str, Any], *,
                        clock: Callable[[], float] = time.perf_counter) -> Any:
        """One unit's own verified kernel as an energy workload (``measure/energy_kernels.py``), as
        ``calibration.energy_phase.plan`` chose it; ``clock`` times its sizing calls."""
        native = self._core if self._core is not None else status.core()
        if spec["kind"] == "hbm":
            return hbm_workload(native, device, spec["pattern"], int(spec["buffer_bytes"]), config=spec.get("config"),
                                clock=clock)
        return compute_workload(native, device, spec["precision"], spec["path"], config=spec.get("config"),
                                clock=clock)

    def energy_peer_workload(self, device: int, dev: Any, key: str, spec: Mapping[str, Any], *,
                             clock: Callable[[], float] = time.perf_counter) -> Any:
        """One library peer (``measure/energy_peers.py``) as ``calibration.energy_phase.peer_plan``
        chose it. Needs torch with CUDA; without it the peer is unsupported, saying why (the floor
        then rests on the own kernels alone, and the calibration says so per peer)."""
        try:
            import torch
        except ImportError as exc:
            raise Unsupported(f"{spec['name']}: torch is not installed ({exc})") from None
        if not torch.cuda.is_available():
            raise Unsupported(f"{spec['name']}: torch sees no CUDA GPU (a CPU-only torch build?)")
        return peer_workload(torch, device, key, gemm_n=int(spec["gemm_n"]), nbytes=int(spec["nbytes"]), clock=clock)

    def sustained_runner(self, device: int, family: str, burst: Mapping[str, Any], dev: Any) -> Callable[[int], Any]:
        """``run_once(reps) -> figure`` for one unit family: the burst winner's kernel and configuration,
        called with the measurement modules' own functions (so every call is verified again)."""
        if family == "hbm":
            pattern, config, size = burst["path"], dict(burst["config"]), int(burst["buffer_bytes"])
            theoretical = dev.theoretical_bandwidth_tbps

            def run_hbm(reps: int) -> float:
                return measure_pattern(device, pattern, size, configs=[config], reps=reps, warmup=1,
                                       theoretical_tbps=theoretical).tbps_median
            return run_hbm
        if family == "l2":
            config, ws = dict(burst["config"]), int(burst["working_set_bytes"])

            def run_l2(reps: int) -> float:
                return measure_l2(device, dev.l2_bytes, sizes=[ws], configs=[config], reps=reps,
                                  warmup=1).plateau.tbps_median
            return run_l2

        _core = status.core()
        facts = _core.compute_device(device)
        path, config = burst["path"], dict(burst["config"])
        # Fixed loop trips (the burst run's), so every call runs the same kernel without re-sizing it.
        iterations = int((burst.get("launch") or {}).get("iterations") or 0)

        def run_compute(reps: int) -> tuple[float, float | None]:
            r = measure_path(device, family, path, config, reps=reps, warmup=1, iterations=iterations,
                             cooldown_s=0.0, _core=_core, _device=facts)
            # A measured path always has its median (an unsupported pair raises in measure_path).
            return cast(float, r.tflops_median), r.kernel_clock_mhz
        return run_compute
