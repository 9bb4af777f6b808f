"""Why there is, or is not, a GPU this build can measure: a reason, never a bare bool.

Following dask/distributed's NVML diagnostics, "no GPU" comes in kinds, each with its own message,
because the fix differs: install a driver, upgrade it, rebuild with nvcc, or run elsewhere.
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from typing import Any

from ..errors import GpuUnavailableError, UserError
from .native import core_or_none, import_error


class Reason(enum.Enum):
    """Outcome of probing the machine for a measurable NVIDIA GPU."""

    OK = "ok"
    NOT_BUILT = "not_built"  # the native extension is missing or failed to import
    NO_DRIVER = "no_driver"  # no NVIDIA driver (libcuda/libnvidia-ml absent)
    DRIVER_TOO_OLD = "driver_too_old"  # a driver, older than the CUDA runtime this build needs
    NO_DEVICE = "no_device"  # a driver but no visible device (CUDA_VISIBLE_DEVICES, containers)
    NO_CUDA_BUILD = "no_cuda_build"  # GPUs exist (NVML sees them) but this build has no CUDA part
    CUDA_ERROR = "cuda_error"  # any other CUDA initialisation failure


_MESSAGES = {
    Reason.OK: "an NVIDIA GPU is available and this build can measure it",
    Reason.NOT_BUILT: "the roofline_ext native core is not importable ({detail}); reinstall with "
    "'pip install .' from a source checkout",
    Reason.NO_DRIVER: "no NVIDIA driver found on this machine ({detail}); analysis against the "
    "datasheet still works (e.g. 'roofline-ext analyze TASK.py --gpu H100')",
    Reason.DRIVER_TOO_OLD: "the NVIDIA driver supports CUDA {driver} but this build needs {runtime}; "
    "upgrade the driver",
    Reason.NO_DEVICE: "the NVIDIA driver is installed but no GPU is visible ({detail}); check "
    "CUDA_VISIBLE_DEVICES and the container's device access",
    Reason.NO_CUDA_BUILD: "{count} NVIDIA GPU(s) found, but this build of roofline_ext has no CUDA "
    "part, so it can identify but not measure them; reinstall with nvcc on PATH and "
    "ROOFLINE_ENABLE_CUDA=ON",
    Reason.CUDA_ERROR: "CUDA could not be initialised: {detail}",
}


@dataclass(frozen=True)
class Availability:
    """The result of :func:`availability`: a :class:`Reason`, its one-line message and details."""

    reason: Reason
    message: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        """True when measurements can run."""
        return self.reason is Reason.OK

    def to_dict(self) -> dict[str, Any]:
        return {"available": self.ok, "reason": self.reason.value, "message": self.message}


def _fmt_cuda_version(v: int | None) -> str:
    if not v:
        return "none"
    return f"{v // 1000}.{(v % 1000) // 10}"


def _make(reason: Reason, details: dict[str, Any], **fmt: Any) -> Availability:
    return Availability(reason, _MESSAGES[reason].format(**fmt), details)


def _probe(core) -> Availability:
    if core is None:
        return _make(Reason.NOT_BUILT, {}, detail=import_error())
    details: dict[str, Any] = {"cuda_compiled": bool(core.CUDA_COMPILED)}
    nvml_count = None
    try:
        system = core.nvml_system()
        nvml_count = int(system["device_count"])
        details["nvml"] = system
    except core.NvmlError as exc:
        details["nvml_error"] = str(exc)

    if not core.CUDA_COMPILED:
        if nvml_count:
            return _make(Reason.NO_CUDA_BUILD, details, count=nvml_count)
        if nvml_count == 0:
            return _make(Reason.NO_DEVICE, details, detail="NVML reports 0 devices")
        return _make(Reason.NO_DRIVER, details, detail=details.get("nvml_error", "NVML unavailable"))

    probe = core.cuda_probe()
    details["cuda"] = probe
    code = probe["code"]
    if code == 0 and probe["count"] > 0:
        return _make(Reason.OK, details)
    # cudaErrorInsufficientDriver (35): with no driver at all the driver version reads 0.
    if code == 35 or (code == 0 and probe["count"] == 0 and probe["driver_version"] == 0):
        if probe["driver_version"] == 0:
            return _make(Reason.NO_DRIVER, details, detail=f"{probe['name']}: {probe['message']}")
        return _make(
            Reason.DRIVER_TOO_OLD,
            details,
            driver=_fmt_cuda_version(probe["driver_version"]),
            runtime=_fmt_cuda_version(probe["runtime_version"]),
        )
    if code in (100, 0):  # cudaErrorNoDevice, or success with zero devices
        return _make(Reason.NO_DEVICE, details, detail=f"{probe['name']}: {probe['message']}")
    return _make(Reason.CUDA_ERROR, details, detail=f"{probe['name']} ({code}): {probe['message']}")


@functools.lru_cache(maxsize=None)
def _cached() -> Availability:
    return _probe(core_or_none())


def availability(refresh: bool = False) -> Availability:
    """Probe (once per process) whether an NVIDIA GPU can be measured here, and if not, why.

    Returns an :class:`Availability` whose ``reason`` is a :class:`Reason` and whose ``message`` is
    one line a user can act on. Never raises.
    """
    if refresh:
        _cached.cache_clear()
    return _cached()


def require_measurement(device: int = 0) -> Availability:
    """Return the availability if ``device`` can be measured; else raise ``GpuUnavailableError``."""
    a = availability()
    if not a.ok:
        raise GpuUnavailableError(a)
    count = a.details.get("cuda", {}).get("count", 0)
    if not isinstance(device, int) or not 0 <= device < count:
        raise UserError(f"no CUDA device {device!r}: {count} visible (indices 0..{count - 1})")
    return a


def core() -> Any:
    """The native module, or ``GpuUnavailableError`` carrying the availability reason."""
    mod = core_or_none()
    if mod is None:
        raise GpuUnavailableError(availability())
    return mod
